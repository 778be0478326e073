"""Operations: the tree of threads a first message started, and the state of each.

A root is a thread with no parent (or whose parent is not in the log). An operation is
shown when the caller may read any thread of it, and then whole: states, handles and
deadlines of every thread (never bodies; `readable` says which the caller may open). Each thread
is `open` (somebody still owes a reply), `answered` (the expectation was discharged, or
none was declared) or `stale` (the deadline passed with something outstanding).
`awaiting_human` is true only at the root of a finished operation (no thread open)
whose opener is not a declared persona: nobody but a person will move it on.
`needs_decision` marks an operation with an escalation not yet answered by a new
declaration of its thread.
"""

from __future__ import annotations

import json
from collections.abc import Container
from typing import TYPE_CHECKING, Any

from nixx.nxc.access import THREAD_READABLE
from nixx.nxc.threads import list_threads

if TYPE_CHECKING:
    from apsw import Connection

    from nixx.nxc.shapes import ThreadSummary


def operations(
    conn: Connection,
    me: str,
    now_ms: int,
    *,
    personas: Container[str],
    thread: str | None = None,
    channel: str | None = None,
    include_finished: bool = False,
) -> list[dict[str, Any]]:
    """Every operation with a thread `me` may read, shown whole (states only, no bodies).

    Three statements whatever the size of the log: every thread's parent and whether
    `me` may read it; the summaries of the operations shown; who posted in them."""
    parents: dict[str, str | None] = {}
    readable: set[str] = set()
    order: dict[str, str] = {}
    for tid, parent, pos, can_read in conn.execute(
        "SELECT t.thread_id, t.parent, t.pos, " + THREAD_READABLE + " FROM nxc_threads t"
        " LEFT JOIN nxc_thread_state s USING (thread_id)", {"me": me}):
        parents[tid] = parent
        order[tid] = pos
        if can_read:
            readable.add(tid)

    roots: dict[str, str] = {}

    def root_of(tid: str) -> str:
        found = roots.get(tid)
        if found is not None:
            return found
        path = [tid]
        while (up := parents.get(tid)) is not None and up in parents and up not in path:
            if up in roots:
                tid = roots[up]
                break
            tid = up
            path.append(tid)
        for t in path:
            roots[t] = tid
        return tid

    members: dict[str, list[str]] = {}
    for tid in parents:
        members.setdefault(root_of(tid), []).append(tid)
    if thread is not None:
        wanted = {root_of(thread)} if thread in parents else set()
    else:
        wanted = {root for root, tids in members.items() if readable.intersection(tids)}
    ids = [tid for root in wanted for tid in members[root]]
    threads = {
        t["thread_id"]: t
        for t in list_threads(conn, None, now_ms, limit=None,
                              where="t.thread_id IN (SELECT value FROM json_each(:ids))",
                              params={"ids": json.dumps(ids)})
    }
    children: dict[str, list[str]] = {}
    for tid in ids:
        parent = parents[tid]
        if parent is not None and parent in parents and tid != root_of(tid):
            children.setdefault(parent, []).append(tid)
    out = []
    for root in sorted(wanted, key=lambda r: threads[r]["created"] or "", reverse=True):
        tree = _tree(root, threads, children, order, readable)
        open_count = sum(1 for t in tree if t["state"] == "open")
        finished = open_count == 0
        root_t = threads[root]
        tree[0]["awaiting_human"] = finished and root_t["opener"] not in personas
        op = {
            "root": root,
            "channel_id": root_t["channel_id"],
            "opener": root_t["opener"],
            "live": not finished,
            "open": open_count,
            "stale": sum(1 for t in tree if t["state"] == "stale"),
            "needs_decision": any(t["escalated"] for t in tree),
            "awaiting_human": tree[0]["awaiting_human"],
            "threads": tree,
        }
        if channel is not None and op["channel_id"] != channel:
            continue
        if finished and not include_finished and thread is None:
            continue
        out.append(op)
    return out


def _tree(root: str, threads: dict[str, ThreadSummary], children: dict[str, list[str]],
          order: dict[str, str], readable: set[str]) -> list[dict[str, Any]]:
    """The threads of the operation under `root`, depth first, states only."""
    tree: list[dict[str, Any]] = []
    stack = [(root, 0)]
    seen: set[str] = set()
    while stack:
        tid, depth = stack.pop()
        if tid in seen:
            continue
        seen.add(tid)
        t = threads[tid]
        tree.append({
            "thread_id": tid,
            "channel_id": t["channel_id"],
            "parent": t["parent"],
            "depth": depth,
            "state": t["state"],
            "awaiting_human": False,
            "escalated": t["escalated"] and t["state"] != "answered",
            "opener": t["opener"],
            "expects": t["expects"],
            "outstanding": t["outstanding"],
            "stale": t["stale"],
            "deadline": t["deadline"],
            "readable": tid in readable,
        })
        # children in log order (a round's slots: member order), depth first
        for child in sorted(children.get(tid, []), key=lambda c: order[c], reverse=True):
            stack.append((child, depth + 1))
    return tree
