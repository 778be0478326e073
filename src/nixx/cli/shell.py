"""The argparse shell shared by the workspace-log CLIs (`nxc`, `nxs`): the help
formatter, the `--json`/`--db` options every verb takes, the engine a verb opens, and
running the chosen verb.

Kept light on purpose: `nxc` is a one-shot command whose start-up is measured
(`tests/nxc/test_startup_imports.py`), so this module imports only argparse, os and
sys at import time (no typing, pathlib or dataclasses).
"""

from __future__ import annotations

import argparse
import os
import sys

from nixx.cli.output import run_command

TYPE_CHECKING = False  # `typing` costs start-up; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.engine import Engine


class Formatter(argparse.HelpFormatter):
    """argparse's formatter imports shutil (and with it bz2, lzma...) for the terminal
    width on every add_argument; ask os directly instead."""

    def __init__(self, prog: str) -> None:
        try:
            width = os.get_terminal_size(sys.stdout.fileno()).columns
        except (OSError, ValueError):
            width = 100
        super().__init__(prog, width=max(width - 2, 40))


def common_parser() -> argparse.ArgumentParser:
    """The parent parser of every verb: `--json` and `--db PATH`."""
    common = argparse.ArgumentParser(add_help=False, formatter_class=Formatter)
    common.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="one JSON document on stdout (errors too)")
    common.add_argument("--db", default=argparse.SUPPRESS, metavar="PATH",
                        help="the workspace log (default: NXC_DB, else the nearest .nxs/db.sqlite)")
    return common


def run_parsed(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """Run the verb `args` chose (help and exit 2 when none), rendering its result or
    error through `run_command`."""
    args.json = getattr(args, "json", False)
    args.db = getattr(args, "db", None)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    return run_command(lambda: args.func(args), as_json=args.json)


def open_engine(args: argparse.Namespace) -> Engine:
    """The workspace's engine for a verb (`--db`), with live delivery: what a verb writes
    starts, wakes or releases what it would from any other shell."""
    from nixx.nxc.delivery.dispatch import LiveDelivery
    from nixx.nxc.engine import Engine

    return Engine.open(db=args.db, delivery=LiveDelivery())
