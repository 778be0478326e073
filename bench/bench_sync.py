"""Sync benchmark: N operations from one workspace to another, per transport.

    .venv/bin/python bench/bench_sync.py                       # 100k ops, git and postgres
    .venv/bin/python bench/bench_sync.py --ops 20000 --transports git

For each transport: workspace A (replica aaaa) holds N chat operations (one thread, N-1
posts); A pushes them (`nxs sync run` logic, in process), B pulls and folds them. Prints
push and pull throughput (ops/s), the wall time A→B (and its ratio to appending the same
ops locally, measured in the same run: the log's own insert + fold cost), the no-op pass (nothing to move)
in process and as a real `nxs sync run` process, and `python -c pass` for scale.

The git remote is a bare repository on local disk; PostgreSQL is the embedded server
(`nixx.testing.postgres`, fsync off: a throwaway server). The machine may be shared with
other work: absolute figures are noisy, the ratios within one run less so.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

from nixx.log.store import LogStore
from nixx.log.workspace import init_workspace
from nixx.nxc.installed import reducers
from nixx.sync import state
from nixx.sync.engine import sync_workspace


def fill(db: str, n: int) -> float:
    start = time.perf_counter()
    with LogStore.open(db, reducers()) as store:
        done = 0
        while done < n:
            with store.transaction() as txn:
                if done == 0:
                    txn.append("message", "thread_open", "t-bench", "aaaa/ann",
                               {"channel": "decl:team", "parent": None, "expects": [],
                                "deadline": None})
                    done = 1
                for i in range(done, min(n, done + 10_000)):
                    txn.append("message", "post", f"m-{i}", "aaaa/ann",
                               {"thread": "t-bench", "channel": "decl:team",
                                "body": f"benchmark message number {i} with a few words"})
                done = min(n, done + 10_000)
    return time.perf_counter() - start


def cli_pass(root: str) -> float:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}
    start = time.perf_counter()
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "nxs"), "sync", "run"],
                          cwd=root, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"nxs sync run failed: {proc.stderr}")
    return elapsed


def python_pass() -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-c", "pass"], check=True)
    return time.perf_counter() - start


def bench(kind: str, url: str, n: int, tmp: str, runs: int) -> dict:
    a, _ = init_workspace(os.path.join(tmp, kind, "a"), replica="aaaa")
    b, _ = init_workspace(os.path.join(tmp, kind, "b"), replica="bbbb")
    with LogStore.open(a.db_path) as store:
        stream = state.bind(store, a.root, remote=url, create=True)[0].stream
    with LogStore.open(b.db_path) as store:
        state.bind(store, b.root, remote=url, join=stream)
    append_s = fill(a.db_path, n)
    start = time.perf_counter()
    pushed = sync_workspace(a, reducers())
    push_s = time.perf_counter() - start
    start = time.perf_counter()
    pulled = sync_workspace(b, reducers())
    pull_s = time.perf_counter() - start
    assert pushed.pushed == n and pulled.stored == n, (pushed, pulled)
    with LogStore.open(b.db_path) as store:
        folded = store.conn.execute("SELECT count(*) FROM nxc_messages").fetchone()[0]
    assert folded == n - 1, folded
    noop_lib, noop_cli, py = [], [], []
    for _ in range(runs):
        for ws in (a, b):
            start = time.perf_counter()
            result = sync_workspace(ws, reducers())
            noop_lib.append(time.perf_counter() - start)
            assert result.pushed == result.pulled == 0
            noop_cli.append(cli_pass(ws.root))
            py.append(python_pass())
    return {
        "transport": kind, "ops": n, "append_s": append_s,
        "push_s": push_s, "push_ops_s": n / push_s,
        "pull_s": pull_s, "pull_ops_s": n / pull_s,
        "wall_s": push_s + pull_s, "end_to_end_ops_s": n / (push_s + pull_s),
        "noop_lib_ms": statistics.median(noop_lib) * 1000,
        "noop_cli_ms": statistics.median(noop_cli) * 1000,
        "python_ms": statistics.median(py) * 1000,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--transports", nargs="+", default=["git", "postgres"],
                        choices=["git", "postgres"])
    parser.add_argument("--runs", type=int, default=5, help="no-op passes per workspace")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in args.transports:
            if kind == "git":
                remote = os.path.join(tmp, "remote.git")
                subprocess.run(["git", "init", "-q", "--bare", remote], check=True)
                rows.append(bench("git", remote, args.ops, tmp, args.runs))
            else:
                from nixx.testing.postgres import EmbeddedPostgres

                with EmbeddedPostgres() as pg:
                    rows.append(bench("postgres", pg.create_database(extension=False),
                                      args.ops, tmp, args.runs))
            r = rows[-1]
            print(f"{r['transport']:>9}: {r['ops']:,} ops  append {r['append_s']:.1f}s | "
                  f"push {r['push_s']:.2f}s ({r['push_ops_s']:,.0f} ops/s) | "
                  f"pull+fold {r['pull_s']:.2f}s ({r['pull_ops_s']:,.0f} ops/s) | "
                  f"A→B {r['wall_s']:.2f}s ({r['end_to_end_ops_s']:,.0f} ops/s; "
                  f"{r['wall_s'] / r['append_s']:.2f}x the local append) | "
                  f"no-op pass {r['noop_lib_ms']:.1f} ms in process, "
                  f"{r['noop_cli_ms']:.0f} ms as `nxs sync run` "
                  f"({r['noop_cli_ms'] / r['python_ms']:.1f}x `python -c pass` "
                  f"= {r['python_ms']:.0f} ms)", flush=True)
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (2 cores)")


if __name__ == "__main__":
    main()
