"""`nixx ingest PATH|URL...`: pour files, folders, repositories and web pages into
semantic memory. A thin shell over `NixxService.ingest` and `summarise_sources` (the
same calls as `POST /v1/ingest`); progress goes to stderr."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from nixx.cli.output import emit_json
from nixx.errors import ValidationError

_URL = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*://")


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "ingest",
        help="read files, folders, repositories or web pages into semantic memory",
        description="Each PATH or URL becomes one source: a file is a document, a folder a "
        "document (a repo when it is a git work tree, honouring .gitignore), a URL a web page. "
        "Re-ingesting unchanged content does nothing; changed content replaces the old chunks.",
    )
    p.add_argument("targets", nargs="+", metavar="PATH|URL", help="files, folders or http(s) URLs")
    p.add_argument(
        "--name", help="name of the source (one target only; default: file or page name)"
    )
    p.add_argument("--tags", help="comma-separated tags stored with the source(s)")
    p.add_argument(
        "--no-summary", action="store_true", help="do not ask the LLM for a display summary"
    )
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    p.set_defaults(func=run)


class _ProgressLine:
    """Renders `Progress` events on stderr: one rewritten line on a terminal, otherwise a
    line per embedding batch and every 100 files read."""

    def __init__(self, index: int, count: int) -> None:
        self.prefix = f"[{index}/{count}] " if count > 1 else ""
        self.tty = sys.stderr.isatty()

    def __call__(self, event: Any) -> None:
        if event.stage == "read":
            if not self.tty and event.files_done % 100 and event.files_done != event.files_total:
                return
            text = f"reading files {event.files_done}/{event.files_total}"
        elif event.stage == "embed":
            text = (
                f"files {event.files_done} · chunks {event.chunks} · "
                f"embedded {event.embedded}/{event.chunks}"
            )
        elif event.stage == "store":
            text = f"storing {event.chunks} chunks"
        else:
            return
        line = f"{self.prefix}{event.target}: {text}"
        if self.tty:
            sys.stderr.write("\r\x1b[2K" + line[:200])
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def finish(self) -> None:
        if self.tty:
            sys.stderr.write("\r\x1b[2K")
            sys.stderr.flush()


def run(args: argparse.Namespace) -> int:
    import asyncio

    if args.name and len(args.targets) > 1:
        raise ValidationError("--name names one source: give one PATH or URL with it")
    return asyncio.run(_run(args))


async def _run(args: argparse.Namespace) -> int:
    from nixx.config import load_settings
    from nixx.ingest.pipeline import IngestResult
    from nixx.memory.service import open_service
    from nixx.memory.sources import IngestSpec

    started = time.monotonic()
    results: list[IngestResult] = []
    async with open_service(load_settings()) as service:
        for i, target in enumerate(args.targets, start=1):
            line = _ProgressLine(i, len(args.targets))
            where = {"url": target} if _URL.match(target) else {"path": target}
            try:
                # the CLI reads any path its user names (the server: the workspace only)
                result, _ = await service.ingest(IngestSpec(
                    **where, name=args.name, tags=args.tags, confined=False, summarise=False,
                ), progress=line)
            finally:
                line.finish()
            results.append(result)
            if not args.json:
                print(_describe(result), flush=True)
        summary_problem = None
        if not args.no_summary:
            summary_problem = await service.summarise_sources(results)
        if summary_problem:
            sys.stderr.write(f"note: sources stored without a summary: {summary_problem}\n")
    seconds = time.monotonic() - started
    chunks = sum(r.chunks for r in results)
    embedded = sum(r.embedded for r in results)
    if args.json:
        emit_json(
            {
                "sources": [r.to_dict() for r in results],
                "chunks": chunks,
                "embedded": embedded,
                "seconds": round(seconds, 3),
                "summary_error": summary_problem,
            }
        )
    else:
        changed = sum(r.status != "unchanged" for r in results)
        print(
            f"ingested {len(results)} source(s) ({changed} changed): {chunks} chunks, "
            f"{embedded} embedded, in {seconds:.1f}s"
        )
    return 0


def _describe(result: Any) -> str:
    s = result.source
    parts = [f"{result.status} source {s.id} {s.name!r} ({s.type}): {result.chunks} chunks"]
    if result.files > 1:
        parts.append(f"{result.files} files")
    if result.status != "unchanged":
        parts.append(f"{result.embedded} embedded, {result.reused} re-used")
    if result.skipped:
        parts.append(f"{len(result.skipped)} skipped")
    return ", ".join(parts)
