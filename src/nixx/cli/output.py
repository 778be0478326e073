"""How every CLI renders results and errors: once, in one place.

Human output goes to stdout; errors go to stderr as ``error: <message>``. With
``--json`` results are one JSON document on stdout (indented at a terminal, compact in
a pipe) and errors are
``{"error": {"kind", "msg", ...}}`` on stdout. Either way a `NixxError` exits 1,
a usage error exits 2.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable

from nixx.errors import NixxError

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any


def emit_json(data: Any) -> None:
    """Indented for a person at a terminal; compact for a program reading a pipe (the
    standard library indents in pure Python, ~10x slower than its compact C encoder: a
    large `nxc status --json` spent more time indenting than querying)."""
    if sys.stdout.isatty():
        text = json.dumps(data, indent=2, ensure_ascii=False, default=str)
    else:
        text = json.dumps(data, ensure_ascii=False, default=str, separators=(",", ":"))
    sys.stdout.write(text + "\n")


def run_command(fn: Callable[[], int | None], *, as_json: bool) -> int:
    """Call `fn`, turning a `NixxError` into the error shape and exit code 1, and a
    closed pipe (`nxc search x | head`) into a quiet exit 141 (128 + SIGPIPE)."""
    try:
        code = fn() or 0
        sys.stdout.flush()  # a closed pipe shows here, not at interpreter exit
        return code
    except BrokenPipeError:
        return _closed_pipe()
    except NixxError as err:
        if as_json:
            emit_json(err.to_dict())
        else:
            sys.stderr.write(f"error: {err.message}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("interrupted\n")
        return 130


def guard_pipe(fn: Callable[[], int]) -> int:
    """Run a CLI's whole `main` (parsing and `--help` included) with a closed pipe
    ending it quietly."""
    try:
        return fn()
    except BrokenPipeError:
        return _closed_pipe()


def _closed_pipe() -> int:
    """The reader went away: send whatever is still buffered to /dev/null so the
    interpreter's final flush stays quiet, and exit like a process killed by SIGPIPE."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141
