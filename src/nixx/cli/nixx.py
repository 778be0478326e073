"""`nixx`: the memory server, the terminal chat and store maintenance. A thin shell:
every verb parses its arguments, calls the library and renders the result."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nixx.cli.ingest import add_parser as add_ingest_parser
from nixx.cli.output import emit_json, run_command


def _serve(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.server.run import serve

    overrides = {}
    if args.host:
        overrides["host"] = args.host
    if args.port is not None:
        overrides["port"] = args.port
    serve(load_settings(**overrides))
    return 0


def _chat(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.tui.launch import run_chat

    report = run_chat(load_settings(), url=args.url)
    if args.json:
        emit_json(report)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="nixx", description="A local-first AI workspace with memory."
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("chat", help="the terminal chat (starts a server if none answers)")
    p.add_argument(
        "--url", help="nixx server URL (default http://NIXX_HOST:NIXX_PORT, 127.0.0.1:8420)"
    )
    p.set_defaults(func=_chat)

    p = sub.add_parser("serve", help="run the OpenAI-compatible memory server")
    p.add_argument("--host", help="bind address (default NIXX_HOST, 127.0.0.1)")
    p.add_argument("--port", type=int, help="port (default NIXX_PORT, 8420)")
    p.set_defaults(func=_serve)

    add_ingest_parser(sub)

    p = sub.add_parser("version", help="print the version")
    p.set_defaults(func=_version)
    return parser


def _version(args: argparse.Namespace) -> int:
    from nixx import __version__

    if args.json:
        emit_json({"version": __version__})
    else:
        print(f"nixx {__version__}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    return run_command(lambda: args.func(args), as_json=args.json)


if __name__ == "__main__":
    sys.exit(main())
