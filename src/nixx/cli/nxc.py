"""`nxc`: agent chat over the workspace log. A thin shell over `nixx.nxc.engine.Engine`.

Every verb takes `--json` and `--db PATH` (or `NXC_DB`). Exit codes: 0 ok, 1 a nixx
error (`{"error": {"kind", "msg"}}` with --json), 2 usage, 3 `wait`: the thread went
stale, 4 `wait`: timed out, 5 `wait`: delivery failed (nobody is left to answer), 130
interrupted. Imports stay inside the verbs so that the
one-shot CLI starts fast.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nixx.cli.output import emit_json
from nixx.cli.shell import Formatter, common_parser, open_engine, run_parsed

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.engine import Engine
    from nixx.nxc.shapes import DeliveryOutcome, OperationThread, SendReceipt, ThreadSummary

EXIT_STALE = 3
EXIT_TIMEOUT = 4
EXIT_FAILED = 5
WAIT_EXIT = {"complete": 0, "stale": EXIT_STALE, "timeout": EXIT_TIMEOUT, "failed": EXIT_FAILED}


def failure_lines(failures: list[DeliveryOutcome], indent: str = "  ") -> list[str]:
    """One line per failed or refused delivery, saying why (human output); one another
    clone wrote says so (``from clone <origin>``: it is about a session there, and its
    words are that clone's, not checked here)."""
    out = []
    for f in failures:
        where = f" in {f['thread']}" if f.get("thread") else ""
        remote = f"from clone {f.get('origin')}: " if f.get("remote") else ""
        if f["outcome"] == "refused":
            out.append(f"{indent}{remote}refused: {f.get('persona')}{where} ({f.get('reason')}): "
                       f"{f.get('msg') or ''}".rstrip(": "))
        else:
            out.append(f"{indent}{remote}failed: {f.get('persona')}{where}: "
                       f"{f.get('reason') or '?'}")
    return out




def _body(args: argparse.Namespace) -> str:
    from nixx.errors import ValidationError

    if args.body_file is not None:
        if args.body is not None:
            raise ValidationError("give the body either as an argument or with --body-file, not both")
        try:
            with open(args.body_file, encoding="utf-8") as fh:
                return fh.read()
        except OSError as exc:
            raise ValidationError(f"cannot read --body-file {args.body_file}: {exc}") from exc
    if args.body == "-":
        return sys.stdin.read()
    if args.body is None:
        raise ValidationError("no message body: give it as an argument, `-` for stdin, or "
                              "--body-file FILE", param="body")
    return args.body


def _whoami(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        out = {"handle": engine.handle, "origin": engine.origin, "replica": engine.store.replica,
               "db": str(engine.workspace.db_path)}
    if args.json:
        emit_json(out)
    else:
        print(out["handle"])
    return 0


def _list(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        out = engine.list()
    if args.json:
        emit_json(out)
        return 0
    print(f"personas ({len(out['personas'])}):")
    for p in out["personas"]:
        title = f"  {p['job_title']}" if p["job_title"] else ""
        print(f"  {p['handle']}{title}")
    print(f"channels ({len(out['channels'])}):")
    for c in out["channels"]:
        desc = f"  {c['description']}" if c["description"] else ""
        print(f"  {c['name']} [{c['kind']}, {c['flow']}] {', '.join(c['members'])}{desc}")
    print(f"declarations: {out['declarations']['folder']} ({out['declarations']['files']} files)")
    return 0


def _send(args: argparse.Namespace) -> int:
    body = _body(args)
    with open_engine(args) as engine:
        out = engine.send(args.to, body, expect=args.expect, deadline=args.deadline,
                          kind=args.kind, priority=args.priority)
        if getattr(args, "wait", False):
            return _wait_after_send(engine, out, args)
    if args.json:
        emit_json(out)
        return 0
    print(out["thread_id"])
    print(f"  to {out['to']} ({out['target']}, {out['channel']}); expects "
          f"{', '.join(out['expects']) or 'nobody'}"
          + (f"; deadline {out['deadline']}" if out["deadline"] else ""), file=sys.stderr)
    for warning in out["warnings"]:
        print(f"  warning: {warning}", file=sys.stderr)
    if out["await"]:
        print(f"  wait with: {out['await']['command']}", file=sys.stderr)
    return 0


def _reply(args: argparse.Namespace) -> int:
    body = _body(args)
    with open_engine(args) as engine:
        out = engine.reply(body, thread=args.thread, kind=args.kind, priority=args.priority,
                           escalate=args.escalate)
    if args.json:
        emit_json(out)
    else:
        print(out["message_id"])
        for warning in out["warnings"]:
            print(f"  warning: {warning}", file=sys.stderr)
    return 0


def _expect(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        out = engine.expect(args.thread, args.handles, deadline=args.deadline)
    if args.json:
        emit_json(out)
    else:
        _print_thread(out)
    return 0


def _print_thread(t: ThreadSummary) -> None:
    flags = "complete" if t["complete"] else "stale" if t["stale"] else t["state"]
    print(f"{t['thread_id']}  {t['channel_id']}  opened by {t['opener']}  [{flags}]")
    print(f"  expects: {', '.join(t['expects']) or '-'}; outstanding: "
          f"{', '.join(t['outstanding']) or '-'}" + (f"; deadline {t['deadline']}" if t["deadline"] else ""))
    for line in failure_lines(t.get("failures", [])):
        print(line)
    for m in t.get("messages", []):
        esc = " (escalation)" if m["escalate"] else ""
        where = f" · from clone {m['origin']}" if m.get("remote") else ""
        print(f"\n--- {m['sender']} · {m['kind']}{esc} · {m['created']}{where}")
        print(m["body"])


def _threads_show(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        out = engine.thread(args.thread_id)
    if args.json:
        emit_json(out)
    else:
        _print_thread(out)
    return 0


def _threads_list(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        out = engine.threads(channel=args.channel, open_only=args.open, limit=args.limit)
    if args.json:
        emit_json(out)
        return 0
    for t in out:
        print(f"{t['thread_id']}  {t['state']:<8} {t['channel_id']}  {t['opener']}  "
              f"outstanding: {', '.join(t['outstanding']) or '-'}")
    return 0


def _prime(args: argparse.Namespace) -> int:
    from nixx.nxc.prime import render

    with open_engine(args) as engine:
        out = engine.prime()
    if args.json:
        emit_json(out)
    else:
        print(render(out))
    return 0


def _status(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        out = engine.status(thread=args.thread, channel=args.channel, include_finished=args.all)
    if args.json:
        emit_json(out)
        return 0
    if not out["operations"]:
        print("no live operations" + ("" if args.all else " (--all shows finished ones)"))
    for op in out["operations"]:
        flags = [f"{op['open']} open"] + (["needs decision"] if op["needs_decision"] else []) + (
            ["awaiting human"] if op["awaiting_human"] else [])
        print(f"{op['root']}  {op['channel_id']}  {', '.join(flags)}")
        shown = op["threads"] if args.all else _live_paths(op["threads"])
        for t in shown:
            print(f"  {'  ' * t['depth']}{t['thread_id']} {t['state']}"
                  + (f" outstanding: {', '.join(t['outstanding'])}" if t["outstanding"] else "")
                  + (f" session {t['session']} ({t['session_state']})" if t.get("session") else ""))
        if len(shown) < len(op["threads"]):
            print(f"  … {len(op['threads']) - len(shown)} answered threads not shown "
                  "(--all shows them)")
        for line in failure_lines(op.get("refusals", [])):
            print(line)
    for task in out["held"]:
        print(f"task {task['id']} held by {task['holder']}: {task['title']}")
    for lease in out["leases"]:
        print(f"lease {lease['id']} {lease['holder']}: {', '.join(lease['paths'])}"
              + (" (shared)" if lease["shared"] else ""))
    for c in out["lost_claims"]:
        print(f"lost claim on task {c['task']} by {c['by']} (clone {c['origin']}): {c['reason']}")
    for lease in out["lost_leases"]:
        print(f"lost lease {lease['id']} {lease['holder']}: {', '.join(lease['paths'])}: "
              f"{lease['reason']}")
    for a in out["approvals"]:
        print(f"awaiting approval {a['id']}: {a['what']} (nxc approve|deny {a['id']})")
    return 0


def _live_paths(threads: list[OperationThread]) -> list[OperationThread]:
    """The threads of an operation a person acts on — open, stale or escalated — with the
    threads above them (the tree stays readable); answered branches are left out."""
    by_id: dict[str | None, OperationThread] = {t["thread_id"]: t for t in threads}
    keep = {threads[0]["thread_id"]} if threads else set()
    for t in threads:
        if t["state"] != "answered" or t["escalated"]:
            node: OperationThread | None = t
            while node is not None and node["thread_id"] not in keep:
                keep.add(node["thread_id"])
                node = by_id.get(node["parent"])
    return [t for t in threads if t["thread_id"] in keep]


def _search(args: argparse.Namespace) -> int:
    if getattr(args, "transcripts", False):
        from nixx.cli.nxc_delivery import search_transcripts

        return search_transcripts(args)
    with open_engine(args) as engine:
        out = engine.search(args.query, limit=args.limit)
    if args.json:
        emit_json(out)
        return 0
    for hit in out:
        body = " ".join(hit["body"].split())
        print(f"{hit['message_id']}  {hit['channel_id']}  {hit['sender']}: "
              f"{body[:100] + '...' if len(body) > 100 else body}")
    return 0


def _wait(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        outcome, summary = engine.wait(args.thread, timeout=args.timeout)
    if args.json:
        emit_json({"outcome": outcome, **summary})
    else:
        print(f"{args.thread}: {outcome}"
              + (f" (outstanding: {', '.join(summary['outstanding'])})" if summary["outstanding"] else ""))
        for line in failure_lines(summary.get("failures", [])):
            print(line)
    return WAIT_EXIT[outcome]


def _wait_after_send(engine: Engine, receipt: SendReceipt, args: argparse.Namespace) -> int:
    """`send --wait`: wait as `nxc wait` does, then show the whole thread."""
    from nixx.errors import ValidationError

    if not receipt["expects"]:
        raise ValidationError("--wait: the thread expects no reply, so there is nothing to wait for")
    outcome, summary = engine.wait(receipt["thread_id"], timeout=args.timeout)
    summary = engine.thread(receipt["thread_id"])
    if args.json:
        emit_json({**receipt, "outcome": outcome, "thread": summary})
    else:
        print(receipt["thread_id"])
        print(f"  {outcome}" + (f" (outstanding: {', '.join(summary['outstanding'])})"
                                if summary["outstanding"] else ""), file=sys.stderr)
        for line in failure_lines(summary.get("failures", [])):
            print(line, file=sys.stderr)
        for m in summary["messages"][1:]:
            where = f" · from clone {m['origin']}" if m.get("remote") else ""
            print(f"\n--- {m['sender']} · {m['kind']}{where}")
            print(m["body"])
    return WAIT_EXIT[outcome]


def _body_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("body", nargs="?", metavar="BODY", help="the message (Markdown); `-` reads stdin")
    p.add_argument("--body-file", metavar="FILE", help="read the message from FILE")
    p.add_argument("--priority", default="normal", help="urgent | normal | background")


def _add_list(sub, common) -> None:
    p = sub.add_parser("list", parents=[common], formatter_class=Formatter,
                       help="declared personas and channels")
    p.set_defaults(func=_list)


def _add_whoami(sub, common) -> None:
    p = sub.add_parser("whoami", parents=[common], formatter_class=Formatter,
                       help="the handle this process acts as")
    p.set_defaults(func=_whoami)


def _add_send(sub, common) -> None:
    p = sub.add_parser("send", parents=[common], formatter_class=Formatter,
                       help="open a thread to a persona or channel")
    p.add_argument("--to", required=True, help="a declared persona handle or channel name")
    p.add_argument("--expect", metavar="H1,H2", help="who must reply (default: the persona, or "
                   "the channel's `expects` minus you)")
    p.add_argument("--deadline", help="a duration (30s, 10m, 2h, 1d, 1w) or an RFC3339 instant")
    p.add_argument("--kind", default="task", help="task | question | report | decision | info")
    p.add_argument("--wait", action="store_true",
                   help="after sending, block until the thread is complete (0), stale (3) or "
                   "--timeout passes (4)")
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="with --wait: give up after")
    _body_args(p)
    p.set_defaults(func=_send)


def _add_reply(sub, common) -> None:
    p = sub.add_parser("reply", parents=[common], formatter_class=Formatter,
                       help="post into a thread")
    p.add_argument("--thread", help="the thread (default: your one open conversation)")
    p.add_argument("--kind", default="report", help="task | question | report | decision | info")
    p.add_argument("--escalate", action="store_true", help="ask the opener for a decision or help")
    _body_args(p)
    p.set_defaults(func=_reply)


def _add_expect(sub, common) -> None:
    p = sub.add_parser("expect", parents=[common], formatter_class=Formatter,
                       help="re-declare who must reply (opener only)")
    p.add_argument("--thread", required=True)
    p.add_argument("handles", metavar="H1,H2", help="comma-separated handles")
    p.add_argument("--deadline", help="a new deadline (duration or RFC3339)")
    p.set_defaults(func=_expect)


def _add_threads(sub, common) -> None:
    p = sub.add_parser("threads", parents=[common], formatter_class=Formatter,
                       help="list or show threads")
    tsub = p.add_subparsers(dest="threads_command", metavar="list|show")
    q = tsub.add_parser("list", parents=[common], formatter_class=Formatter,
                        help="threads you may read, newest first")
    q.add_argument("--channel", help="only this channel id")
    q.add_argument("--open", action="store_true", help="only threads somebody still owes")
    q.add_argument("--limit", type=int, default=50)
    q.set_defaults(func=_threads_list)
    q = tsub.add_parser("show", parents=[common], formatter_class=Formatter,
                        help="one thread, its quorum and messages")
    q.add_argument("thread_id")
    q.set_defaults(func=_threads_show)


def _add_prime(sub, common) -> None:
    p = sub.add_parser("prime", parents=[common], formatter_class=Formatter,
                       help="the session-start block: who you are, unread count, threads you owe (no bodies)")
    p.set_defaults(func=_prime)


def _add_status(sub, common) -> None:
    p = sub.add_parser("status", parents=[common], formatter_class=Formatter,
                       help="operations: trees of threads")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--thread", help="the operation containing this thread")
    g.add_argument("--channel", help="operations rooted in this channel id")
    p.add_argument("--all", action="store_true", help="include finished operations")
    p.set_defaults(func=_status)


def _add_search(sub, common) -> None:
    p = sub.add_parser("search", parents=[common], formatter_class=Formatter,
                       help="full-text search over messages")
    p.add_argument("query")
    p.add_argument("--limit", type=int, default=20)
    p.add_argument("--transcripts", action="store_true",
                   help="search this machine's session transcripts instead of messages")
    p.set_defaults(func=_search)


def _add_wait(sub, common) -> None:
    p = sub.add_parser("wait", parents=[common], formatter_class=Formatter,
                       help="block until a thread is complete (0), stale (3) or timed out (4)")
    p.add_argument("--thread", required=True)
    p.add_argument("--timeout", type=float, metavar="SECONDS", help="give up after SECONDS")
    p.set_defaults(func=_wait)


VERBS = {
    "list": _add_list, "whoami": _add_whoami, "send": _add_send, "reply": _add_reply,
    "expect": _add_expect, "threads": _add_threads, "prime": _add_prime,
    "status": _add_status, "search": _add_search, "wait": _add_wait,
    "session": lambda sub, common: _delivery_verb("add_session", sub, common),
    "transcript": lambda sub, common: _delivery_verb("add_transcript", sub, common),
    "task": lambda sub, common: _work_verb("add_task", sub, common),
    "lease": lambda sub, common: _work_verb("add_lease", sub, common),
    "leases": lambda sub, common: _work_verb("add_leases", sub, common),
    "release": lambda sub, common: _work_verb("add_release", sub, common),
    "lease-check": lambda sub, common: _work_verb("add_lease_check", sub, common),
    "approvals": lambda sub, common: _approval_verb("add_approvals", sub, common),
    "approve": lambda sub, common: _approval_verb("add_approve", sub, common),
    "deny": lambda sub, common: _approval_verb("add_deny", sub, common),
}


def _approval_verb(name: str, sub, common) -> None:
    from nixx.cli import nxc_approvals

    getattr(nxc_approvals, name)(sub, common, Formatter)


def _work_verb(name: str, sub, common) -> None:
    from nixx.cli import nxc_work

    getattr(nxc_work, name)(sub, common, Formatter)


def _delivery_verb(name: str, sub, common) -> None:
    from nixx.cli import nxc_delivery

    getattr(nxc_delivery, name)(sub, common, Formatter)


def _verb_of(argv: Sequence[str]) -> str | None:
    """The verb in `argv` (skipping global options), so only its sub-parser is built."""
    skip = False
    for arg in argv:
        if skip:
            skip = False
        elif arg == "--db":
            skip = True
        elif not arg.startswith("-"):
            return arg if arg in VERBS else None
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The argument parser; with `only`, just that verb's sub-parser (a faster start)."""
    common = common_parser()
    parser = argparse.ArgumentParser(prog="nxc", parents=[common], formatter_class=Formatter,
                                     description="Agent chat over the workspace log.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, add in VERBS.items():
        if only is None or name == only:
            add(sub, common)
    return parser


def _same(message: str) -> str:
    return message


def _plural(singular: str, plural: str, n: int) -> str:
    return singular if n == 1 else plural


def _parse(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """Build the verb's parser and parse `argv`, with argparse's own strings untranslated.

    argparse passes each of its strings through `gettext`, which imports `locale` and
    probes the disk for a message catalogue on every call (~2 ms of each run, most of the
    parsing time). Python ships no catalogue for argparse, so the strings are the same
    either way; the lookup is skipped while nxc builds and runs its parser (and restored
    after, also when parsing exits on a usage error)."""
    saved = argparse._, argparse.ngettext  # type: ignore[attr-defined]
    argparse._, argparse.ngettext = _same, _plural  # type: ignore[attr-defined]
    try:
        parser = build_parser(_verb_of(argv))
        return parser, parser.parse_args(argv)
    finally:
        argparse._, argparse.ngettext = saved  # type: ignore[attr-defined]


def main(argv: Sequence[str] | None = None) -> int:
    from nixx.cli.output import guard_pipe

    argv = sys.argv[1:] if argv is None else list(argv)

    def run() -> int:
        parser, args = _parse(argv)
        return run_parsed(parser, args)

    return guard_pipe(run)


if __name__ == "__main__":
    sys.exit(main())
