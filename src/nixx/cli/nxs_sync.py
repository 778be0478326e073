"""`nxs sync bind|run|status|daemon`: the shell over `nixx.sync` (see docs/sync.md)."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from nixx.cli.output import emit_json

if TYPE_CHECKING:
    from nixx.nxc.shapes import Conflicts
    from nixx.sync.daemon import DaemonEvent
    from nixx.sync.engine import SyncStatus


def _reducers() -> list:
    from nixx.nxc.installed import reducers

    return reducers()


def _bind(args: argparse.Namespace) -> int:
    import shutil

    from nixx.log.store import LogStore
    from nixx.log.workspace import find_workspace
    from nixx.sync import state
    from nixx.sync.daemon import install_service, manual_hint

    ws = find_workspace(db=args.db)
    with LogStore.open(ws.db_path) as store:
        bound, changed = state.bind(store, ws.root, create=args.create, join=args.join,
                                    rebind=args.rebind, remote=args.remote)
    out: dict[str, Any] = {**bound.to_dict(), "remote": state.redact(bound.remote),
                           "changed": changed, "watermarks_reset": changed}
    if args.no_daemon:
        out["daemon"] = {"installed": False, "declined": True, "how": manual_hint(ws)}
    else:
        out["daemon"] = install_service(ws, systemctl=shutil.which("systemctl"))
    if args.json:
        emit_json(out)
        return 0
    verb = "bound" if changed else "already bound"
    print(f"{verb}: {bound.stream} via {bound.transport} {state.redact(bound.remote)} "
          f"(stream from {bound.derived_from})")
    if changed:
        print("watermarks reset: the next `nxs sync run` pushes and pulls everything")
    daemon = out["daemon"]
    if daemon.get("enabled"):
        print(f"daemon: enabled as a user service ({daemon['unit']})")
    elif daemon.get("declined"):
        print(f"daemon: declined; {daemon['how']}")
    else:
        print(f"daemon: not running; {daemon['how']}")
    return 0


def _bounds() -> dict[str, Any]:
    """What a pass takes in (`sync_max_op_bytes`, `sync_max_pull_ops`: docs/configuration.md)."""
    from nixx.config import load_settings

    settings = load_settings()
    return {"max_op_bytes": settings.sync_max_op_bytes,
            "max_pull": settings.sync_max_pull_ops}


def _run_options(args: argparse.Namespace) -> dict[str, Any]:
    opts: dict[str, Any] = {"batch_size": args.batch_size, **_bounds()}
    if args.push_only:
        opts["pull"] = False
    if args.pull_only:
        opts["push"] = False
    return opts


def _run(args: argparse.Namespace) -> int:
    from nixx.errors import ValidationError
    from nixx.log.workspace import find_workspace
    from nixx.sync.engine import sync_workspace

    if args.push_only and args.pull_only:
        raise ValidationError("--push-only and --pull-only exclude each other")
    if args.batch_size < 1:
        raise ValidationError("--batch-size must be at least 1", param="batch_size")
    ws = find_workspace(db=args.db)
    result = sync_workspace(ws, _reducers(), lock_wait=args.wait, **_run_options(args))
    if result.stored:
        _catch_up(ws)
    if args.json:
        emit_json(result.to_dict())
        return 0
    print(f"{result.stream} via {result.transport}: pushed {result.pushed}, pulled "
          f"{result.pulled} ({result.stored} new, {result.pulled - result.stored} already "
          f"here{f', {result.rejected} rejected' if result.rejected else ''}) in "
          f"{result.elapsed_ms:.0f} ms; unpushed {result.unpushed}")
    return 0


def _catch_up(ws) -> None:
    """Answers that arrived by sync move on the channel rounds this machine runs (the
    machine that sent a round settles it: docs/channels.md), and a person's decisions
    take the steps held here for them (docs/nxc.md, approvals)."""
    import os

    from nixx.nxc.delivery.dispatch import catch_up

    try:
        catch_up(ws, os.environ)
    except Exception as exc:  # noqa: BLE001 - the pass itself succeeded; say it, go on
        sys.stderr.write(f"warning: the pass stored new answers, but moving the channel "
                         f"rounds or the approved steps on failed: {exc}; the next pass tries again\n")


def _status(args: argparse.Namespace) -> int:
    from nixx.log.workspace import find_workspace
    from nixx.sync.engine import status

    ws = find_workspace(db=args.db)
    out = status(ws)
    out["conflicts"] = _conflicts(ws)
    if args.json:
        emit_json(out)
        return 0
    if not out["bound"]:
        print(f"not bound (replica {out['replica']}); run `nxs sync bind`; "
              f"{out['unpushed']} ops would be pushed")
        _print_trust(out)
        return 0
    print(f"stream     {out['stream']} (from {out['derived_from']}, bound "
          f"{_when(out.get('bound_at'))})")
    print(f"remote     {out['transport']} {out['remote']}")
    print(f"pushed     up to seq {out['pushed_seq']} of {out['log_seq']}; "
          f"unpushed {out['unpushed']}")
    print(f"pulled     cursor {out['pulled_cursor'] or '(none)'}")
    last = out["last_pass"]
    if last:
        what = (f"pushed {last.get('pushed')}, pulled {last.get('pulled')}" if last.get("ok")
                else f"failed: {last.get('error')}")
        print(f"last pass  {_when(last.get('at'))}: {what}")
    else:
        print("last pass  never (`nxs sync run` makes one)")
    _print_trust(out)
    return 0


def _conflicts(ws) -> Conflicts:
    """The chat's claims on a message or thread id that are not shown (refused or
    disputed: `nixx.nxc.reducer.conflicts`)."""
    from nixx.log.store import LogStore
    from nixx.nxc.reducer import conflicts

    with LogStore.open(ws.db_path, _reducers()) as store:
        return conflicts(store.conn)


def _print_trust(out: SyncStatus) -> None:
    """The ops refused on arrival and the claims not shown (docs/sync.md, "Trust")."""
    refused, clash = out["refused"], out["conflicts"]
    if refused["count"]:
        print(f"refused    {refused['count']} ops on arrival (not stored):")
        for item in refused["items"][-10:]:
            print(f"  {item['op']} from {item['pusher']}: {item['reason']}")
    if clash["count"]:
        print(f"conflicts  {clash['count']} claims on a message or thread id not shown:")
        for claim in clash["items"][:10]:
            print(f"  {claim['kind']} {claim['id']}: op {claim['op']} from {claim['origin']}: "
                  f"{claim['reason']}")


def _when(ms: int | None) -> str:
    """`2026-12-01 12:03:04 UTC (5 min ago)`: a time a person can read."""
    if not ms:
        return "(unknown)"
    import time

    stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(ms / 1000))
    ago = max(0, int(time.time() - ms / 1000))
    if ago < 60:
        rel = f"{ago} s ago"
    elif ago < 3600:
        rel = f"{ago // 60} min ago"
    elif ago < 86_400:
        rel = f"{ago // 3600} h {ago % 3600 // 60} min ago"
    else:
        rel = f"{ago // 86_400} days ago"
    return f"{stamp} ({rel})"


def _daemon(args: argparse.Namespace) -> int:
    from nixx.errors import ValidationError
    from nixx.log.workspace import find_workspace
    from nixx.sync.daemon import SyncDaemon

    if args.interval <= 0 or args.debounce < 0 or args.max_backoff <= 0:
        raise ValidationError("--interval and --max-backoff must be > 0, --debounce >= 0")
    ws = find_workspace(db=args.db)

    def emit(event: DaemonEvent) -> None:
        if event["event"] == "pass" and event["stored"]:
            _catch_up(ws)
        if args.json:
            sys.stdout.write(json.dumps(event, default=str) + "\n")
        elif event["event"] == "pass":
            sys.stdout.write(f"[{event['reason']}] pushed {event['pushed']}, pulled "
                             f"{event['pulled']} ({event['stored']} new) in "
                             f"{event['elapsed_ms']:.0f} ms\n")
        else:
            sys.stderr.write(f"[{event['reason']}] error: {event['error']} (retry in "
                             f"{event['retry_in_s']:.0f}s)\n")
        sys.stdout.flush()

    daemon = SyncDaemon(ws, _reducers(), interval=args.interval, debounce=args.debounce,
                        max_backoff=args.max_backoff, passes=args.passes, emit=emit,
                        options=_bounds())
    return daemon.run()


def add_sync(sub: Any, common: argparse.ArgumentParser, formatter: Any) -> None:
    """Add `nxs sync ...` to the `nxs` parser's subcommands."""
    p = sub.add_parser("sync", parents=[common], formatter_class=formatter,
                       help="exchange the log with other workspaces (docs/sync.md)")
    verbs = p.add_subparsers(dest="sync_command", metavar="VERB")

    b = verbs.add_parser("bind", parents=[common], formatter_class=formatter,
                         help="bind this workspace to a stream (from the git origin remote)")
    b.add_argument("--create", action="store_true",
                   help="mint a new stream (no origin to derive one from)")
    b.add_argument("--join", metavar="ID", help="join an existing stream (stream-<24 hex>)")
    b.add_argument("--rebind", action="store_true",
                   help="replace the current binding and reset the watermarks")
    b.add_argument("--remote", metavar="URL",
                   help="sync through this remote: a git URL or postgresql://... "
                        "(default: the origin remote)")
    b.add_argument("--no-daemon", action="store_true",
                   help="do not install the per-user background sync service")
    b.set_defaults(func=_bind)

    r = verbs.add_parser("run", parents=[common], formatter_class=formatter,
                         help="one push/pull pass")
    r.add_argument("--push-only", action="store_true", help="push, do not pull")
    r.add_argument("--pull-only", action="store_true", help="pull, do not push")
    r.add_argument("--batch-size", type=int, default=1000, metavar="N",
                   help="ops per pushed batch / segment (default 1000)")
    r.add_argument("--wait", type=float, default=0.0, metavar="S",
                   help="wait up to S seconds for a pass already running (default: fail)")
    r.set_defaults(func=_run)

    s = verbs.add_parser("status", parents=[common], formatter_class=formatter,
                         help="stream, remote, watermarks, unpushed count (offline)")
    s.set_defaults(func=_status)

    d = verbs.add_parser("daemon", parents=[common], formatter_class=formatter,
                         help="foreground loop: push after local writes, poll the remote")
    d.add_argument("--interval", type=float, default=30.0, metavar="S",
                   help="poll the remote every S seconds (default 30)")
    d.add_argument("--debounce", type=float, default=2.0, metavar="S",
                   help="push S seconds after the first local write (default 2)")
    d.add_argument("--max-backoff", type=float, default=300.0, metavar="S",
                   help="longest wait after repeated errors (default 300)")
    d.add_argument("--passes", type=int, metavar="N", help="stop after N passes")
    d.set_defaults(func=_daemon)

    def _usage(args: argparse.Namespace) -> int:
        p.print_help(sys.stderr)
        return 2

    p.set_defaults(func=_usage)


__all__ = ["add_sync"]
