"""`nxs`: the workspace log. A thin shell over `nixx.log`.

    nxs init [--replica P] [--no-hooks]    create .nxs/db.sqlite (idempotent) and register
                                           the session-start hooks (`nxs prime`)
    nxs prime [--hook gemini]              the block a session needs before it acts
    nxs log [--domain D] [--after SEQ] [--limit N]
    nxs refold [--domain D]                rebuild views from the whole log
    nxs sync bind|run|status|daemon        exchange the log with other workspaces

Every verb takes `--json` and `--db PATH` (or `NXC_DB`). Exit codes: 0 ok, 1 a nixx
error, 2 usage, 130 interrupted.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from nixx.cli.output import emit_json
from nixx.cli.shell import Formatter, common_parser, run_parsed


def _init(args: argparse.Namespace) -> int:
    from nixx.log.store import LogStore
    from nixx.log.workspace import init_workspace

    ws, created = init_workspace(db=args.db, replica=args.replica)
    with LogStore.open(ws.db_path) as store:
        replica = store.replica
    hooks = []
    lease_hook = "not installed (--no-hooks)"
    if not args.no_hooks:
        from nixx.mcp.install import executable, install_hooks, warnings
        from nixx.nxc.work import install_lease_hook

        hooks = install_hooks(str(ws.root))
        for warning in warnings(hooks):
            print(f"warning: {warning}", file=sys.stderr)
        lease_hook = install_lease_hook(str(ws.root), executable("nxc")[0])
        if lease_hook.startswith("skipped: ") and "repository" not in lease_hook:
            print(f"warning: lease hook {lease_hook}", file=sys.stderr)
    if args.json:
        emit_json({"root": str(ws.root), "db": str(ws.db_path), "replica": replica,
                   "created": created, "hooks": hooks, "lease_hook": lease_hook})
        return 0
    if created:
        print(f"created the workspace log {ws.db_path} (replica {replica})")
    else:
        print(f"the workspace log {ws.db_path} already exists (replica {replica})")
    for h in hooks:
        done = "already runs" if h["action"] == "unchanged" else "now runs"
        print(f"{h['client']}: {h['hook']} {done} `{h['command']}` ({h['file']})")
    return 0


def _prime(args: argparse.Namespace) -> int:
    from nixx.cli.shell import open_engine
    from nixx.nxc.prime import render

    with open_engine(args) as engine:
        out = engine.prime()
    if args.hook == "gemini":  # Gemini CLI's SessionStart hooks print one JSON object
        import json

        print(json.dumps({"hookSpecificOutput": {"hookEventName": "SessionStart",
                                                 "additionalContext": render(out)}}))
    elif args.json:
        emit_json(out)
    else:
        print(render(out))
    return 0


def _log(args: argparse.Namespace) -> int:
    from nixx.log.store import LogStore
    from nixx.log.workspace import find_workspace

    ws = find_workspace(db=args.db)
    with LogStore.open(ws.db_path) as store:
        ops = store.ops(domain=args.domain, after=args.after, limit=args.limit,
                        newest_first=args.limit is not None and args.after == 0)
    ops.sort(key=lambda op: op.seq or 0)
    if args.json:
        emit_json([op.to_dict() for op in ops])
        return 0
    import json

    for op in ops:
        payload = json.dumps(op.payload, ensure_ascii=False, separators=(",", ":"))
        if len(payload) > 120:
            payload = payload[:117] + "..."
        local = " local" if op.local else ""
        print(f"{op.seq:>6} {op.clock} {op.origin} {op.actor} {op.domain}/{op.kind}{local} "
              f"{op.target} {payload}")
    return 0


def _refold(args: argparse.Namespace) -> int:
    from nixx.errors import ValidationError
    from nixx.log.store import LogStore
    from nixx.log.workspace import find_workspace
    from nixx.nxc.installed import reducers as installed

    ws = find_workspace(db=args.db)
    reducers = installed()
    known = sorted(r.domain for r in reducers)
    if args.domain and args.domain not in known:
        raise ValidationError(f"no reducer folds domain {args.domain!r} here; known: {known}")
    with LogStore.open(ws.db_path, reducers) as store:
        counts = store.refold([args.domain] if args.domain else None)
    if args.json:
        emit_json({"folded": counts})
    else:
        for domain, count in counts.items():
            print(f"{domain}: refolded {count} operations")
    return 0


def build_parser() -> argparse.ArgumentParser:
    common = common_parser()
    parser = argparse.ArgumentParser(prog="nxs", parents=[common], formatter_class=Formatter,
                                     description="The workspace operation log.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("init", parents=[common], formatter_class=Formatter,
                       help="create .nxs/db.sqlite at the git top level (else here)")
    p.add_argument("--replica", help="replica prefix to mint (default: 4 random characters)")
    p.add_argument("--no-hooks", action="store_true", help="do not register the session-start "
                   "hooks (SessionStart runs `nxs prime` in .claude/settings.json and "
                   ".gemini/settings.json) nor git's pre-commit hook (`nxc lease-check`)")
    p.set_defaults(func=_init)

    p = sub.add_parser("prime", parents=[common], formatter_class=Formatter,
                       help="the block a session needs before it acts: who you are, unread "
                       "count, threads you owe")
    p.add_argument("--hook", choices=["gemini"], help="print it as the client's session-start "
                   "hook output (gemini: hookSpecificOutput.additionalContext JSON)")
    p.set_defaults(func=_prime)

    p = sub.add_parser("log", parents=[common], formatter_class=Formatter, help="show the operations in the log")
    p.add_argument("--domain", help="only this domain (e.g. message)")
    p.add_argument("--after", type=int, default=0, metavar="SEQ", help="only ops past this seq")
    p.add_argument("--limit", type=int, metavar="N", help="at most N ops (the newest, or the "
                   "first N past --after)")
    p.set_defaults(func=_log)

    p = sub.add_parser("refold", parents=[common], formatter_class=Formatter, help="rebuild the views from the whole log")
    p.add_argument("--domain", help="only this domain")
    p.set_defaults(func=_refold)

    from nixx.cli.nxs_sync import add_sync

    add_sync(sub, common, Formatter)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    from nixx.cli.output import guard_pipe

    def run() -> int:
        parser = build_parser()
        return run_parsed(parser, parser.parse_args(argv))

    return guard_pipe(run)


if __name__ == "__main__":
    sys.exit(main())
