"""`nixx ingest PATH|URL...`: pour files, folders, repositories and web pages into
semantic memory. A thin shell over `nixx.ingest.Ingestor`; progress goes to stderr."""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Any

from nixx.cli.output import emit_json
from nixx.errors import BackendError, ValidationError

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
    from nixx.config import load_settings
    from nixx.embed import make_embedder
    from nixx.ingest.pipeline import Ingestor, IngestResult
    from nixx.store import open_store

    if args.name and len(args.targets) > 1:
        raise ValidationError("--name names one source: give one PATH or URL with it")
    settings = load_settings()
    started = time.monotonic()
    store = open_store(settings.database_url)
    embedder = make_embedder(settings)
    results: list[IngestResult] = []
    try:
        for i, target in enumerate(args.targets, start=1):
            line = _ProgressLine(i, len(args.targets))
            ingestor = Ingestor(store, embedder, settings, progress=line)
            try:
                if _URL.match(target):
                    result = ingestor.ingest_url(target, name=args.name, tags=args.tags)
                else:
                    result = ingestor.ingest_path(target, name=args.name, tags=args.tags)
            finally:
                line.finish()
            results.append(result)
            if not args.json:
                print(_describe(result), flush=True)
        summary_problem = None
        if not args.no_summary:
            summary_problem = _summarise(settings, store, results)
        if summary_problem:
            sys.stderr.write(f"note: sources stored without a summary: {summary_problem}\n")
    finally:
        embedder.close()
        store.close()
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


def _summarise(settings: Any, store: Any, results: list[Any]) -> str | None:
    """Ask the LLM for display summaries of the sources that changed; return what went
    wrong (the sources stay stored and searchable without summaries)."""
    from nixx.ingest.summary import summarise_sync

    todo = [r for r in results if r.summary_input]  # changed, or still without a summary
    if not todo:
        return None
    try:
        summaries = summarise_sync(settings, [(r.source.name, r.summary_input) for r in todo])
    except BackendError as exc:
        return exc.message
    for result, summary in zip(todo, summaries, strict=True):
        if summary:
            store.set_source_summary(result.source.id, summary)
            result.source = store.get_source(result.source.id)
    return None
