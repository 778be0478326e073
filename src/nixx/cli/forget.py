"""`nixx forget QUERY` / `nixx forget --id buffer:12` / `nixx forget --log`: delete what
memory holds about something, and see what was deleted. A thin shell over
`NixxService` (the same methods as `POST /v1/forget`); it works on the store directly
(NIXX_DB_URL), waits for the repairs a deletion leaves (re-summaries, source chunks,
the intent) and, when the LLM backend is down, leaves them queued for the server."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any

from nixx.cli.output import emit_json
from nixx.errors import ValidationError

if TYPE_CHECKING:
    from nixx.store.forgetting import ForgetLogJson

REPAIR_WAIT_S = 300.0


def add_parser(sub: Any) -> None:
    p = sub.add_parser(
        "forget",
        help="delete buffer rows, summaries and memories matching a query, or items by id",
        description="With QUERY: list every buffer message, summary and memory whose text "
        "contains all its words (case-insensitive), ask, then delete exactly those. With --id: "
        "delete the named items (buffer:ID, summary:ID, source:ID, memory:ID). Summaries that "
        "covered a deleted message are summarised again from what remains; see docs/memory.md.",
    )
    p.add_argument("query", nargs="?", help="words that must all occur in what is forgotten")
    p.add_argument(
        "--id",
        dest="ids",
        action="append",
        metavar="KIND:ID",
        help="an item to delete: buffer:12, summary:3, source:2, memory:40 (repeatable)",
    )
    p.add_argument("--yes", "-y", action="store_true", help="delete without asking")
    p.add_argument("--log", action="store_true", help="show what was forgotten (ids, no text)")
    p.add_argument(
        "--json", action="store_true", default=argparse.SUPPRESS, help="machine-readable output"
    )
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    import asyncio

    as_json = bool(getattr(args, "json", False))
    chosen = sum([bool(args.query), bool(args.ids), bool(args.log)])
    if chosen != 1:
        raise ValidationError("give one of: a QUERY, --id KIND:ID (one or more), or --log")
    return asyncio.run(_run(args, as_json))


async def _run(args: argparse.Namespace, as_json: bool) -> int:
    from nixx.config import load_settings
    from nixx.memory.service import open_service

    async with open_service(load_settings()) as service:
        if args.log:
            entries = [e.to_dict() for e in await service.forget_log(100)]
            _show_log(entries, as_json)
            return 0
        if args.ids:
            done = await _forget_ids(service, args.ids, args.yes, as_json)
        else:
            done = await _forget_query(service, args.query, args.yes, as_json)
        if done is None:
            return 0
        problems = await _repairs(service)
        if as_json:
            emit_json({**done, "repairs": problems or None})
        else:
            _show_done(done, problems)
        return 0


async def _forget_query(
    service: Any, query: str, yes: bool, as_json: bool
) -> dict[str, Any] | None:
    found = await service.forget_matches(query)
    if not found["ids"]:
        if as_json:
            emit_json({"dry_run": True, **found})
        else:
            print(f"nothing in memory matches {query!r}")
        return None
    if as_json and not yes:  # a listing to review; delete with --yes
        emit_json({"dry_run": True, **found})
        return None
    if not as_json:
        _show_matches(found)
    if not yes and not _confirm(f"forget these {len(found['ids'])} items?"):
        print("nothing deleted")
        return None
    return {"dry_run": False, "query": query, **await service.forget_query(query, found["ids"])}


async def _forget_ids(
    service: Any, ids: list[str], yes: bool, as_json: bool
) -> dict[str, Any] | None:
    from nixx.memory.forget import group_refs

    group_refs(ids)  # a bad reference is refused before asking
    if not yes:
        if as_json:
            raise ValidationError("--json with --id deletes only with --yes")
        if not _confirm(f"forget {', '.join(ids)}?"):
            print("nothing deleted")
            return None
    return await service.forget_refs(ids)


async def _repairs(service: Any) -> dict[str, str]:
    """Wait for the background repairs; what failed (they stay queued for later)."""
    return await service.wait_for_repairs(REPAIR_WAIT_S)


def _confirm(question: str) -> bool:
    sys.stdout.write(f"{question} [y/N] ")
    sys.stdout.flush()
    answer = sys.stdin.readline()
    return answer.strip().lower() in ("y", "yes")


def _show_matches(found: dict[str, Any]) -> None:
    for item in found["buffer"]:
        print(f"  {item['id']:<16} {item['role']:<9} {item['snippet']}")
    for item in found["summaries"]:
        span = f"(buffer {item['start_buffer_id']}..{item['end_buffer_id']})"
        print(f"  {item['id']:<16} summary   {item['snippet']} {span}")
    for item in found["memories"]:
        print(f"  {item['id']:<16} memory    {item['snippet']} (source {item['source_name']!r})")
    for item in found.get("sources", []):
        print(f"  {item['id']:<16} source    {item['snippet']}")
    if found.get("intent"):
        print(f"  {found['intent']['id']:<16} intent    {found['intent']['snippet']}")
    if found["truncated"]:
        print("  … more match: forget these, then run the query again")


def _show_done(done: dict[str, Any], problems: dict[str, str]) -> None:
    f = done["forgotten"]
    parts = [
        f"{len(f['buffer_ids'])} buffer rows",
        f"{len(f['summary_ids'])} summaries",
        f"{len(f['source_ids'])} sources",
        f"{f['memories_removed']} memories",
    ]
    print(f"forgot {', '.join(parts)} (log entry {f['log_id']})")
    if f["resummarise"]:
        print(f"summarised again: {len(f['resummarise'])} window(s) that lost a message")
    if f["rebuild_source_ids"]:
        print(f"rebuilt sources: {', '.join(str(i) for i in f['rebuild_source_ids'])}")
    if done["intent_cleared"]:
        print("the intent was cleared (it matched, or came from a deleted message)")
    if done.get("disk", {}).get("note"):
        print(f"note: {done['disk']['note']}")
    for kind, message in problems.items():
        sys.stderr.write(f"note: {kind} repair did not finish ({message}); the server retries it\n")


def _show_log(entries: list[ForgetLogJson], as_json: bool) -> None:
    if as_json:
        emit_json({"log": entries})
        return
    if not entries:
        print("nothing has been forgotten")
    for e in entries:
        counts = ", ".join(f"{n} {k}" for k, n in e["counts"].items() if n)
        print(f"{e['id']:>5}  {e['at']}  {e['kind']:<13} {counts}")
