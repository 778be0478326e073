"""The delivery verbs of `nxc` (sessions, transcripts, `search --transcripts`), kept
out of `nixx.cli.nxc` so the other verbs start as fast as before. Each is a thin
shell over `nixx.nxc.delivery.sessions` / `nixx.nxc.delivery.transcripts`.
"""

from __future__ import annotations

import argparse
import json
import sys

from nixx.cli.output import emit_json

TYPE_CHECKING = False  # `typing` costs start-up; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.delivery.shapes import StoredEntry


def _local(args: argparse.Namespace):
    from nixx.log.workspace import find_workspace
    from nixx.nxc.delivery.localstore import LocalStore

    return LocalStore.for_workspace(find_workspace(db=args.db))


def search_transcripts(args: argparse.Namespace) -> int:
    from nixx.nxc.delivery.transcripts import TranscriptStore

    with _local(args) as local:
        hits = TranscriptStore(local).search(args.query, limit=args.limit)
    if args.json:
        emit_json(hits)
        return 0
    for h in hits:
        print(f"{h['session']}#{h['seq']}  {h['kind']:<11} {h['persona'] or '-'}: {h['snippet']}")
    return 0


# -- session ------------------------------------------------------------------------------


def _session_bind(args: argparse.Namespace) -> int:
    from nixx.nxc.delivery import sessions

    with _local(args) as local:
        out = sessions.bind(local, args.internal, args.runtime_id)
    if args.json:
        emit_json(out)
    else:
        print(f"{out['session']} -> {out['runtime_session']}")
    return 0


def _session_state(args: argparse.Namespace) -> int:
    from nixx.nxc.delivery import sessions

    with _local(args) as local:
        if args.session:
            one = sessions.require(local, args.session)
            one["queued"] = sessions.queued(local, args.session)
            rows = [one]
        else:
            rows = sessions.all_sessions(local, limit=args.limit)
    if args.json:
        emit_json(rows[0] if args.session else {"sessions": rows})
        return 0
    for r in rows:
        code = "" if r["exit_code"] is None else f" (exit {r['exit_code']})"
        print(f"{r['session']}  {r['state']:<8}{code}  {r['persona']}  thread {r['thread_id']}"
              f"  hop {r['hop']}/{r['max_hops']}"
              + (f"  runtime {r['runtime_session']}" if r["runtime_session"] else "")
              + (f"  {r['detail']}" if r["detail"] else ""))
    return 0


def add_session(sub, common, formatter) -> None:
    p = sub.add_parser("session", parents=[common], formatter_class=formatter,
                       help="agent sessions on this machine (bind, state)")
    ssub = p.add_subparsers(dest="session_command", metavar="bind|state")
    q = ssub.add_parser("bind", parents=[common], formatter_class=formatter,
                        help="map an internal session id to the runtime's own session id")
    q.add_argument("internal", help="the internal session id (NXC_SESSION, s-...)")
    q.add_argument("runtime_id", help="the runtime's session id")
    q.set_defaults(func=_session_bind)
    q = ssub.add_parser("state", parents=[common], formatter_class=formatter,
                        help="one session's state, or every session's")
    q.add_argument("session", nargs="?", help="a session id (default: all, newest first)")
    q.add_argument("--limit", type=int, default=100)
    q.set_defaults(func=_session_state)


# -- transcript ---------------------------------------------------------------------------


def _print_entry(e: StoredEntry, indent: str = "") -> None:
    data = e.get("data") or {}
    kind = e["kind"]
    if kind == "tool_use":
        text = f"{data.get('name')} {json.dumps(data.get('input'), ensure_ascii=False)}"
    elif kind == "tool_result":
        text = str(data.get("content", ""))
    elif isinstance(data, dict):
        text = str(data.get("text") or data.get("msg") or json.dumps(data, ensure_ascii=False))
    else:
        text = json.dumps(data, ensure_ascii=False)
    text = " ".join(text.split())
    sub = f" [{e['subagentType']}]" if e.get("subagentType") else ""
    print(f"{indent}{e['seq']:>4} {kind:<12}{sub} {text[:200]}")
    for child in e.get("children", []):
        _print_entry(child, indent + "       ")


def _transcript_show(args: argparse.Namespace) -> int:
    from nixx.nxc.delivery.transcripts import TranscriptStore

    with _local(args) as local:
        out = TranscriptStore(local).show(args.session)
    if args.json:
        emit_json(out)
        return 0
    for e in out["entries"]:
        _print_entry(e)
    return 0


def _transcript_append(args: argparse.Namespace) -> int:
    from nixx.errors import ValidationError
    from nixx.nxc.delivery import sessions
    from nixx.nxc.delivery.stream_claude import StreamJsonParser
    from nixx.nxc.delivery.transcripts import TranscriptStore

    entries = []
    parser = StreamJsonParser()
    for n, line in enumerate(sys.stdin, 1):
        if not line.strip():
            continue
        if args.format == "stream-json":
            entries.extend(parser.parse_line(line))
            continue
        try:
            entries.append(json.loads(line))
        except ValueError as exc:
            raise ValidationError(f"stdin line {n} is not JSON ({exc}); nothing was stored",
                                  param="stdin") from None
    with _local(args) as local:
        sessions.require(local, args.session)
        out = TranscriptStore(local).append(args.session, entries)
    if args.json:
        emit_json(out)
    else:
        print(f"{out['stored']} entries stored for {args.session}")
    return 0


def _transcript_prune(args: argparse.Namespace) -> int:
    from nixx.nxc.delivery.transcripts import TranscriptStore

    with _local(args) as local:
        out = TranscriptStore(local).prune(keep_days=args.keep_days, dry_run=args.dry_run)
    if args.json:
        emit_json(out)
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print(f"{verb} {len(out['sessions'])} sessions ({out['entries']} entries) whose last entry "
          f"is before {out['cutoff']}")
    return 0


def add_transcript(sub, common, formatter) -> None:
    p = sub.add_parser("transcript", parents=[common], formatter_class=formatter,
                       help="what an agent session actually did (device-local)")
    tsub = p.add_subparsers(dest="transcript_command", metavar="show|append|prune")
    q = tsub.add_parser("show", parents=[common], formatter_class=formatter,
                        help="a session's entries, sub-agents nested under their call")
    q.add_argument("session")
    q.set_defaults(func=_transcript_show)
    q = tsub.add_parser("append", parents=[common], formatter_class=formatter,
                        help="append JSON lines from stdin (one batch, atomic)")
    q.add_argument("session")
    q.add_argument("--format", choices=("nixx", "stream-json"), default="nixx",
                   help="nixx: normalised entries (default); stream-json: Claude Code's output")
    q.set_defaults(func=_transcript_append)
    q = tsub.add_parser("prune", parents=[common], formatter_class=formatter,
                        help="remove sessions whose last entry is older than --keep-days")
    q.add_argument("--keep-days", type=int, default=None, metavar="N",
                   help="retention window in days (default 30)")
    q.add_argument("--dry-run", action="store_true", help="list what would go, remove nothing")
    q.set_defaults(func=_transcript_prune)
