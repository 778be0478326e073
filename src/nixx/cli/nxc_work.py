"""The work verbs of `nxc`: claimable tasks and leased files (`nixx.nxc.work`), kept out of
`nixx.cli.nxc` so the other verbs start as fast as before.

    nxc task add TITLE [--after ID,ID] [--thread T]    nxc task list
    nxc task claim|release|done ID
    nxc lease PATH|GLOB... [--for 30m] [--thread T] [--shared]
    nxc leases                                         nxc release LEASE_ID
    nxc lease-check [--staged | PATH...]               (the git pre-commit hook)
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

from nixx.cli.output import emit_json
from nixx.cli.shell import open_engine

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from nixx.nxc.shapes import TaskRecord

OVERRIDE = "NXC_LEASE_OVERRIDE"




def _show_task(t: TaskRecord) -> str:
    holder = f" · {t['holder']}" if t["holder"] else ""
    waits = f" · waits on {', '.join(t['blocked_by'])}" if t["blocked_by"] and t["state"] == "open" else ""
    lost = f" · {len(t['conflicts'])} refused" if t["conflicts"] else ""
    return f"{t['id']}  {t['state']:<7}{holder}{waits}{lost}  {t['title']}"


def _task(args: argparse.Namespace) -> int:
    from nixx.nxc import work

    with open_engine(args) as engine:
        if args.task_command == "add":
            after = [x.strip() for x in (args.after or "").split(",") if x.strip()]
            out: Any = work.add_task(engine, args.title, after, args.thread)
        elif args.task_command == "claim":
            out = work.claim(engine, args.id)
        elif args.task_command == "release":
            out = work.release_task(engine, args.id)
        elif args.task_command == "done":
            out = work.finish_task(engine, args.id)
        else:
            rows = work.task_list(engine)
            if args.json:
                emit_json({"tasks": rows})
                return 0
            for t in rows:
                print(_show_task(t))
                for c in t["conflicts"]:
                    print(f"    refused {c['kind']} by {c['by']} (clone {c['origin']}): {c['reason']}")
            return 0
    if args.json:
        emit_json(out)
    else:
        print(_show_task(out))
    return 0


def _lease(args: argparse.Namespace) -> int:
    from nixx.errors import ValidationError
    from nixx.nxc import work
    from nixx.nxc.durations import iso, parse_duration_ms

    for_ms = parse_duration_ms(args.for_)
    if for_ms is None:
        raise ValidationError(f"--for {args.for_!r} is not a duration: 30m, 2h, 1d")
    with open_engine(args) as engine:
        out = work.lease(engine, args.paths, for_ms=for_ms, thread=args.thread,
                         shared=args.shared)
    if args.json:
        emit_json(out)
    else:
        print(f"{out['id']}  {', '.join(out['paths'])} until {iso(out['until'])}"
              + (" (shared)" if out["shared"] else ""))
    return 0


def _leases(args: argparse.Namespace) -> int:
    from nixx.nxc import work
    from nixx.nxc.durations import iso

    with open_engine(args) as engine:
        rows, lost = work.lease_state(engine.conn, engine.now_ms())
    if args.json:
        emit_json({"leases": rows, "lost": lost})
        return 0
    for x in rows:
        print(f"{x['id']}  {x['holder']}  {', '.join(x['paths'])}  until {iso(x['until'])}"
              + (f"  thread {x['thread']}" if x["thread"] else "")
              + ("  shared" if x["shared"] else ""))
    for x in lost:
        print(f"lost {x['id']}  {x['holder']}  {', '.join(x['paths'])}: {x['reason']}")
    return 0


def _release(args: argparse.Namespace) -> int:
    from nixx.nxc import work

    with open_engine(args) as engine:
        out = work.release_lease(engine, args.id)
    if args.json:
        emit_json(out)
    else:
        print(f"released {out['released']}")
    return 0


def staged_paths() -> list[str]:
    """The paths `git commit` is about to record (added, changed, renamed, deleted)."""
    done = subprocess.run(["git", "diff", "--cached", "--name-only", "-z"],
                          capture_output=True, check=True)
    return [p for p in done.stdout.decode("utf-8", "surrogateescape").split("\0") if p]


def _lease_check(args: argparse.Namespace) -> int:
    from nixx.nxc import work
    from nixx.nxc.durations import iso

    if os.environ.get(OVERRIDE):
        return 0
    paths = staged_paths() if args.staged or not args.paths else args.paths
    with open_engine(args) as engine:
        blocking = work.blocking_leases(engine.conn, paths, engine.handle, engine.now_ms())
    if args.json:
        emit_json({"blocking": blocking})
    for x in blocking:
        print(f"nxc: {', '.join(x['touched'])} is leased to {x['holder']} (lease {x['id']}"
              + (f", thread {x['thread']}" if x["thread"] else "")
              + f", until {iso(x['until'])}): commit refused", file=sys.stderr)
    if blocking:
        print(f"nxc: wait for the lease to end, ask its holder to release it (`nxc release "
              f"<lease>` on its clone), or commit anyway with {OVERRIDE}=1 (or git commit "
              "--no-verify)", file=sys.stderr)
        return 1
    return 0


def add_task(sub, common, formatter) -> None:
    p = sub.add_parser("task", parents=[common], formatter_class=formatter,
                       help="claimable tasks: add, list, claim, release, done")
    tsub = p.add_subparsers(dest="task_command", metavar="add|list|claim|release|done")
    q = tsub.add_parser("add", parents=[common], formatter_class=formatter, help="a new open task")
    q.add_argument("title", help="what is to be done")
    q.add_argument("--after", metavar="ID,ID", help="tasks that must be done before it is claimable")
    q.add_argument("--thread", help="the thread it belongs to")
    tsub.add_parser("list", parents=[common], formatter_class=formatter,
                    help="every task: state, holder, what it waits on, refused claims")
    for verb, text in (("claim", "take an open task whose dependencies are done"),
                       ("release", "give a task you hold back (open again)"),
                       ("done", "mark a task you hold done")):
        q = tsub.add_parser(verb, parents=[common], formatter_class=formatter, help=text)
        q.add_argument("id", help="the task id (`nxc task list`)")
    p.set_defaults(func=_task, task_command="list")


def add_lease(sub, common, formatter) -> None:
    p = sub.add_parser("lease", parents=[common], formatter_class=formatter,
                       help="lease paths or globs: other handles' commits touching them are refused")
    p.add_argument("paths", nargs="+", metavar="PATH|GLOB", help="repository-relative")
    p.add_argument("--for", dest="for_", default="30m", metavar="DURATION",
                   help="how long (default 30m; it expires by itself)")
    p.add_argument("--thread", help="the thread it is for")
    p.add_argument("--shared", action="store_true",
                   help="a shared lease: others may lease the paths too; commits are not refused")
    p.set_defaults(func=_lease)


def add_leases(sub, common, formatter) -> None:
    p = sub.add_parser("leases", parents=[common], formatter_class=formatter,
                       help="the active leases (holder, paths, expiry) and those that lost")
    p.set_defaults(func=_leases)


def add_release(sub, common, formatter) -> None:
    p = sub.add_parser("release", parents=[common], formatter_class=formatter,
                       help="end a lease taken on this clone")
    p.add_argument("id", help="the lease id (`nxc leases`)")
    p.set_defaults(func=_release)


def add_lease_check(sub, common, formatter) -> None:
    p = sub.add_parser("lease-check", parents=[common], formatter_class=formatter,
                       help="exit 1 naming the leases another handle holds over the staged "
                       "paths (the pre-commit hook nxs init installs)")
    p.add_argument("paths", nargs="*", help="paths to check (default: git's staged paths)")
    p.add_argument("--staged", action="store_true", help="check git's staged paths")
    p.set_defaults(func=_lease_check)
