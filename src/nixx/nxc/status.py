"""Operations: the tree of threads a first message started, and the state of each.

A root is a thread with no parent (or whose parent the caller cannot see). Each thread
is `open` (somebody still owes a reply), `answered` (the expectation was discharged, or
none was declared) or `stale` (the deadline passed with something outstanding).
`awaiting_human` is true only at the root of a finished operation (no thread open)
whose opener is not a declared persona: nobody but a person will move it on.
`needs_decision` marks an operation with an escalation not yet answered by a new
declaration of its thread.
"""

from __future__ import annotations

from collections.abc import Container
from typing import TYPE_CHECKING, Any

from nixx.nxc.threads import list_threads

if TYPE_CHECKING:
    from apsw import Connection


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
    threads = {t["thread_id"]: t for t in list_threads(conn, me, now_ms, limit=None)}
    children: dict[str, list[str]] = {}
    roots = []
    for tid, t in threads.items():
        parent = t["parent"]
        if parent is not None and parent in threads:
            children.setdefault(parent, []).append(tid)
        else:
            roots.append(tid)
    if thread is not None:
        top = thread
        seen = set()
        while top in threads and threads[top]["parent"] in threads and top not in seen:
            seen.add(top)
            top = threads[top]["parent"]
        roots = [top] if top in threads else []
    roots.sort(key=lambda tid: threads[tid]["created"] or "", reverse=True)
    out = []
    for root in roots:
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
            })
            for child in sorted(children.get(tid, []), reverse=True):
                stack.append((child, depth + 1))
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
