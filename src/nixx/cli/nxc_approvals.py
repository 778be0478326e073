"""The approval verbs of `nxc` (`nixx.nxc.approvals`), kept out of `nixx.cli.nxc` so the
other verbs start as fast as before.

    nxc approvals [--all]              the steps held for a person (--all: decided ones too)
    nxc approve ID [--note TEXT]       take the held step (on whichever clone holds it)
    nxc deny ID [--note TEXT]          refuse it: the thread is told why
"""

from __future__ import annotations

import argparse

from nixx.cli.output import emit_json
from nixx.cli.shell import open_engine

TYPE_CHECKING = False
if TYPE_CHECKING:

    from nixx.nxc.shapes import ApprovalRecord




def show(a: ApprovalRecord) -> str:
    """One approval in a line: id, state, step, what is asked; who decided, and the note."""
    from nixx.nxc.durations import iso

    line = f"{a['id']}  {a['state']:<8} {a['step']:<9} {a['what']}  (asked {iso(a['asked'])})"
    if a["state"] != "pending":
        line += f"\n    {a['state']} by {a['decided_by']} (clone {a['decided_origin']})" + (
            f": {a['note']}" if a["note"] else "")
    return line


def _approvals(args: argparse.Namespace) -> int:
    with open_engine(args) as engine:
        rows = engine.approvals(include_decided=args.all)
    if args.json:
        emit_json({"approvals": rows})
        return 0
    if not rows:
        print("no approvals waiting" + ("" if args.all else " (--all shows decided ones)"))
    for a in rows:
        print(show(a))
    return 0


def _decide(args: argparse.Namespace) -> int:
    decision = "approved" if args.decision == "approve" else "denied"
    with open_engine(args) as engine:
        out = engine.decide(args.id, decision, args.note or "")
    if args.json:
        emit_json(out)
        return 0
    print(show(out))
    if not out["taken"]:
        print(f"    the step waits on clone {out['origin']}: it is taken there when this "
              "decision reaches it (nxs sync)")
    for t in out["taken"]:
        print(f"    {t['action']} {t['state']} in thread {t['thread']}")
        for w in t["warnings"]:
            print(f"    warning: {w}")
    return 0


def add_approvals(sub, common, formatter) -> None:
    p = sub.add_parser("approvals", parents=[common], formatter_class=formatter,
                       help="the steps held for a person's approval (--all: decided ones too)")
    p.add_argument("--all", action="store_true", help="decided approvals too")
    p.set_defaults(func=_approvals)


def _add_decision(verb: str, text: str, sub, common, formatter) -> None:
    p = sub.add_parser(verb, parents=[common], formatter_class=formatter, help=text)
    p.add_argument("id", help="the approval id (`nxc approvals`)")
    p.add_argument("--note", help="why, for the record (shown with the decision)")
    p.set_defaults(func=_decide, decision=verb)


def add_approve(sub, common, formatter) -> None:
    _add_decision("approve", "approve a held step: it is taken on the clone that holds it",
                  sub, common, formatter)


def add_deny(sub, common, formatter) -> None:
    _add_decision("deny", "deny a held step: the thread is told why", sub, common, formatter)
