"""A sync pass killed at random points (kill -9 of a real `nxs sync run`), again and
again, on both sides, then run to the end: nothing lost, nothing doubled (in the logs, in
the views, on the remote), and the watermarks never claim more than is true."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time

import pytest

from nixx.sync import state

from .conftest import cli_env, open_store

PER_ROUND = 600  # ops A writes before each of its rounds


def fill(ws, round_: int) -> int:
    """One thread and its posts, plus a device-local op, in one transaction."""
    with open_store(ws) as store, store.transaction() as txn:
        thread = f"t-{round_}"
        txn.append("message", "thread_open", thread, "aaaa/ann",
                   {"channel": "decl:team", "parent": None, "expects": [], "deadline": None})
        for m in range(PER_ROUND - 1):
            txn.append("message", "post", f"m-{round_}-{m}", "aaaa/ann",
                       {"thread": thread, "channel": "decl:team", "body": f"msg {round_} {m}"})
        txn.append("session", "local", "s-1", "aaaa/ann", {"round": round_}, local=True)
    return PER_ROUND


def progress(ws) -> tuple[int, int]:
    """(pushed watermark, ops stored), read without writing anything."""
    import apsw

    conn = apsw.Connection(ws.db_path, flags=apsw.SQLITE_OPEN_READONLY)
    try:
        conn.set_busy_timeout(5000)
        count = conn.execute("SELECT count(*) FROM ops").fetchone()[0]
        try:
            row = conn.execute("SELECT value FROM sync_state WHERE key = 'pushed_seq'").fetchone()
        except apsw.SQLError:
            row = None
        return (int(row[0]) if row else 0), count
    finally:
        conn.close()


def remote_entries(remote, upto: dict | int | None = None, *, skip: str | None = None) -> list[str]:
    """Every op id stored on the remote (duplicates kept), or only those at or before a
    pull cursor (`upto`), leaving out what replica `skip` pushed."""
    if remote.kind == "postgres":
        import psycopg

        with psycopg.connect(remote.url) as conn:
            try:
                rows = conn.execute("SELECT seq, id, pusher FROM nxs_sync_ops WHERE stream = %s",
                                    (remote.stream,)).fetchall()
            except psycopg.errors.UndefinedTable:
                return []
        limit = int(str(upto).removesuffix("+self")) if upto is not None else None
        return [i for seq, i, pusher in rows
                if (limit is None or seq <= limit) and pusher != skip]
    git = ["git", "--git-dir", remote.url]
    refs = subprocess.run([*git, "for-each-ref", "--format=%(refname)", f"refs/nxs/{remote.stream}/"],
                          capture_output=True, text=True, check=True).stdout.split()
    tips = {ref.rsplit("/", 1)[1]: ref for ref in refs}
    if upto is not None:
        tips = {origin: sha for origin, sha in upto.items() if not origin.startswith("__")}
    ids = []
    for origin, tip in tips.items():
        if origin == skip:
            continue
        commits = subprocess.run([*git, "rev-list", tip], capture_output=True, text=True,
                                 check=True).stdout.split()
        for commit in commits:
            seg = subprocess.run([*git, "show", f"{commit}:segment.jsonl"], capture_output=True,
                                 text=True, check=True).stdout
            ids.extend(json.loads(line)["id"] for line in seg.splitlines() if line.strip())
    return ids


def check_consistent(remote, a, b) -> None:
    on_remote = remote_entries(remote)
    assert len(on_remote) == len(set(on_remote)), "an op is stored twice on the remote"
    with open_store(a) as sa:
        pushed = state.pushed_seq(sa)
        assert pushed <= sa.max_seq()
        claimed = {op.id for op in sa.ops() if op.seq <= pushed and not op.local}
        assert claimed <= set(on_remote), "the pushed watermark claims ops the remote lacks"
    with open_store(b) as sb:
        ids = {op.id for op in sb.ops()}
        assert len(ids) == sb.count()
        cursor = state.pulled_cursor(sb)
        if cursor is not None:
            upto = json.loads(cursor) if remote.kind == "git" else cursor
            covered = set(remote_entries(remote, upto, skip="bbbb"))
            assert covered <= ids, "the pulled cursor is past ops that are not here"
        posts = sb.conn.execute("SELECT count(*), count(DISTINCT message_id) FROM nxc_messages"
                                ).fetchone()
        assert posts[0] == posts[1] == sb.count("message") - sb.conn.execute(
            "SELECT count(*) FROM nxc_threads").fetchone()[0]


def start_run(ws):
    return subprocess.Popen(
        [sys.executable, "-m", "nixx.cli.nxs", "sync", "run", "--batch-size", "10", "--json"],
        cwd=ws.root, env=cli_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def kill_mid_pass(ws, rnd: random.Random) -> bool:
    """Start a pass and kill -9 it: after a random delay, or once it has visibly made
    progress (a watermark moved, ops arrived) plus a random delay. True if it was killed
    before it ended."""
    before = progress(ws)
    proc = start_run(ws)
    if rnd.random() < 0.4:
        time.sleep(rnd.uniform(0.05, 1.5))
    else:
        deadline = time.monotonic() + 120
        while proc.poll() is None and progress(ws) == before and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(rnd.uniform(0.0, 0.1))
    killed = proc.poll() is None
    if killed:
        proc.send_signal(signal.SIGKILL)
    proc.communicate(timeout=60)
    return killed


@pytest.mark.slow
def test_a_pass_killed_at_random_points_loses_and_doubles_nothing(remote):
    seed = int(os.environ.get("NIXX_KILL_SEED", "0")) or random.randrange(1 << 30)
    rnd = random.Random(seed)
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    total = 0
    kills = 0
    # Whether a kill lands mid-pass depends on the machine's speed at that moment: go on
    # (bounded) until enough passes were cut, rather than count on 30 rounds to do it.
    for round_ in range(90):
        if kills >= 6 and round_ >= 8:
            break
        if round_ % 2 == 0:
            total += fill(a, round_)
        kills += kill_mid_pass(a if round_ % 2 == 0 else b, rnd)
        check_consistent(remote, a, b)
    for ws in (a, b, a, b):  # run to the end
        done = subprocess.run([sys.executable, "-m", "nixx.cli.nxs", "sync", "run", "--json"],
                              cwd=ws.root, env=cli_env(), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stderr
    check_consistent(remote, a, b)
    with open_store(a) as sa, open_store(b) as sb:
        assert state.unpushed_count(sa) == 0
        synced = {op.id for op in sa.ops() if not op.local}
        assert len(synced) == total
        assert {op.id for op in sb.ops()} == synced  # every op, once
        assert sb.count() == total and sb.count("session") == 0  # device-local stayed on A
    assert sorted(remote_entries(remote)) == sorted(synced)  # once each on the remote
    assert kills >= 3, f"only {kills} passes were killed mid-way (seed {seed})"
