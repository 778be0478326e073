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

from nixx.nxc.access import THREAD_READABLE
from nixx.nxc.threads import list_threads

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Container

    from apsw import Connection

    from nixx.nxc.shapes import Operation, OperationThread, ThreadSummary


def operations(
    conn: Connection,
    me: str,
    now_ms: int,
    *,
    personas: Container[str],
    thread: str | None = None,
    channel: str | None = None,
    include_finished: bool = False,
) -> list[Operation]:
    """Every operation with a thread `me` may read, shown whole (states only, no bodies).

    Three statements whatever the size of the log: every thread's parent and whether
    `me` may read it; the summaries of the operations shown; who posted in them."""
    parents, order, readable = _thread_index(conn, me)
    roots = _roots(parents)
    members: dict[str, list[str]] = {}
    for tid in parents:
        members.setdefault(roots[tid], []).append(tid)
    wanted: set[str]
    if thread is not None:
        wanted = {roots[thread]} if thread in parents else set()
    else:
        wanted = {root for root, tids in members.items() if readable.intersection(tids)}
    ids = [tid for root in wanted for tid in members[root]]
    threads = _summaries(conn, now_ms, ids)
    children = _children(ids, parents, roots)
    out = []
    for root in sorted(wanted, key=lambda r: threads[r]["created"] or "", reverse=True):
        tree = _tree(root, threads, children, order, readable)
        op = _operation(threads[root], tree, personas)
        if channel is not None and op["channel_id"] != channel:
            continue
        if not op["live"] and not include_finished and thread is None:
            continue
        out.append(op)
    return out


def _thread_index(conn: Connection, me: str) -> tuple[dict[str, str | None], dict[str, str], set[str]]:
    """Of every thread in the log (one statement): its parent, its position in the log,
    and whether `me` may read it (the set of those it may)."""
    parents: dict[str, str | None] = {}
    order: dict[str, str] = {}
    readable: set[str] = set()
    for tid, parent, pos, can_read in conn.execute(
        "SELECT t.thread_id, t.parent, t.pos, " + THREAD_READABLE + " FROM nxc_threads t"
        " LEFT JOIN nxc_thread_state s USING (thread_id)", {"me": me}):
        parents[tid] = parent
        order[tid] = pos
        if can_read:
            readable.add(tid)
    return parents, order, readable


def _roots(parents: dict[str, str | None]) -> dict[str, str]:
    """Each thread's root: up its parents to a thread with no parent, or whose parent is
    not in the log; a cycle of parents stops where it would close."""
    roots: dict[str, str] = {}
    for start in parents:
        if start in roots:
            continue
        tid = start
        path = [tid]
        while (up := parents.get(tid)) is not None and up in parents and up not in path:
            if up in roots:
                tid = roots[up]
                break
            tid = up
            path.append(tid)
        for t in path:
            roots[t] = tid
    return roots


def _summaries(conn: Connection, now_ms: int, ids: list[str]) -> dict[str, ThreadSummary]:
    """The summaries of the threads `ids`, by id (one statement, and one for who posted)."""
    return {
        t["thread_id"]: t
        for t in list_threads(conn, None, now_ms, limit=None,
                              where="t.thread_id IN (SELECT value FROM json_each(:ids))",
                              params={"ids": json.dumps(ids)})
    }


def _children(ids: list[str], parents: dict[str, str | None],
              roots: dict[str, str]) -> dict[str, list[str]]:
    """parent → its child threads among `ids`, in the order of `ids` (a root is nobody's
    child, also when its parent is in the log: a cycle)."""
    children: dict[str, list[str]] = {}
    for tid in ids:
        parent = parents[tid]
        if parent is not None and parent in parents and tid != roots[tid]:
            children.setdefault(parent, []).append(tid)
    return children


def _operation(root: ThreadSummary, tree: list[OperationThread],
               personas: Container[str]) -> Operation:
    """The operation of `tree` (`_tree`: its root first), with its counts; marks the root
    `awaiting_human` when nothing is open and its opener is not a declared persona."""
    open_count = sum(1 for t in tree if t["state"] == "open")
    finished = open_count == 0
    tree[0]["awaiting_human"] = finished and root["opener"] not in personas
    return {
        "root": root["thread_id"],
        "channel_id": root["channel_id"],
        "opener": root["opener"],
        "live": not finished,
        "open": open_count,
        "stale": sum(1 for t in tree if t["state"] == "stale"),
        "needs_decision": any(t["escalated"] for t in tree),
        "awaiting_human": tree[0]["awaiting_human"],
        "threads": tree,
    }


def _tree(root: str, threads: dict[str, ThreadSummary], children: dict[str, list[str]],
          order: dict[str, str], readable: set[str]) -> list[OperationThread]:
    """The threads of the operation under `root`, depth first, states only."""
    tree: list[OperationThread] = []
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
