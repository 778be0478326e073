"""nxc / nxs benchmark: CLI start-up against bare Python, append throughput, full re-fold.

    .venv/bin/python bench/bench_nxc.py                 # 100k and 1M operations
    .venv/bin/python bench/bench_nxc.py --sizes 100000  # quicker
    .venv/bin/python bench/bench_nxc.py --startup-only --runs 40  # CLI start-up only
    .venv/bin/python bench/bench_nxc.py --status-only --runs 15   # nxc status at ~1k ops
    git archive REV src | tar -x -C /tmp/old && \
        .venv/bin/python bench/bench_nxc.py --startup-only --baseline-src /tmp/old/src

Prints figures and the ratios measured in the same run. The machine may be shared:
absolute times are noisy, the interleaved ratios less so.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
VENV_BIN = os.path.dirname(sys.executable)


def _time(cmd: list[str], cwd: str, env: dict[str, str]) -> float:
    return _time_cpu(cmd, cwd, env)[0]


def _time_cpu(cmd: list[str], cwd: str, env: dict[str, str]) -> tuple[float, float]:
    """(wall, CPU) seconds of one run; CPU is the child's user + system time, which a
    loaded machine inflates much less than wall time."""
    import resource

    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE)
    elapsed = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode != 0:
        raise SystemExit(f"{cmd} failed: {proc.stderr.decode()}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return elapsed, cpu


def startup(root: str, runs: int, baseline_src: str | None = None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}
    env["NXC_ACTOR"] = "bench"
    # an installed nixx has its .pyc files; with PYTHONDONTWRITEBYTECODE set (as in some
    # shells here) every edited module would be compiled from source on every run
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    nxc = os.path.join(VENV_BIN, "nxc")
    verbs = {
        "nxc list --json": ["list", "--json"],
        "nxc send --json": ["send", "--to", "coder", "benchmark message", "--json"],
        "nxc threads list --json": ["threads", "list", "--json", "--limit", "5"],
    }
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env)}
    for name, argv in verbs.items():
        cases[name] = ([nxc, *argv], env)
        if baseline_src:  # the same entry point importing another checkout's nixx first
            cases[f"{name} (baseline)"] = ([nxc, *argv], {**env, "PYTHONPATH": baseline_src})
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for cmd, case_env in cases.values():  # warm caches (pyc, declarations cache, WAL)
        _time(cmd, root, case_env)
    for _ in range(runs):  # interleaved, so load changes hit every case alike
        for name, (cmd, case_env) in cases.items():
            wall, cpu = _time_cpu(cmd, root, case_env)
            times[name].append(wall)
            cpus[name].append(cpu)
    base_med = statistics.median(times["python -c pass"])
    base_min = min(times["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"\nCLI wall time, {runs} interleaved runs each (median / min; ratio to python -c pass)"
          "; then the median CPU time (user + system) and its ratio")
    for name, xs in times.items():
        med, low, cpu = statistics.median(xs), min(xs), statistics.median(cpus[name])
        print(f"  {name:37s} {med * 1000:7.1f} ms / {low * 1000:6.1f} ms   "
              f"x{med / base_med:4.2f} (median)  x{low / base_min:4.2f} (min)   "
              f"cpu {cpu * 1000:5.1f} ms x{cpu / base_cpu:4.2f}")


def status_workspace(parent: str, operations: int = 150) -> str:
    """A workspace where work piled up: `operations` trees of three threads (a person asks
    coder, coder asks reviewer, reviewer asks tester: 450 threads), two thirds answered,
    with a delivery outcome per thread — about 1,050 ops, like the workspace in issue 13.
    → its root."""
    from nixx.log.workspace import init_workspace
    from nixx.nxc.delivery import outcomes
    from nixx.nxc.delivery.dispatch import LiveDelivery
    from nixx.nxc.engine import Engine

    ws, _ = init_workspace(os.path.join(parent, "status"), replica="be01")
    folder = os.path.join(ws.root, ".nxs-personas")
    os.makedirs(folder)
    for name in ("coder", "reviewer", "tester"):
        with open(os.path.join(folder, f"{name}.yaml"), "w") as fh:
            fh.write(f"handle: {name}\nsystem_prompt: You are {name}.\n")
    engines = {who: Engine.open(db=ws.db_path, env={"NXC_ACTOR": who}, delivery=LiveDelivery())
               for who in ("alice", "coder", "reviewer", "tester")}
    for i in range(operations):
        root = engines["alice"].send("coder", f"task {i}: the parser drops trailing commas")
        child = engines["coder"].send("reviewer", f"review {i}", parent=root["thread_id"])
        leaf = engines["reviewer"].send("tester", f"test {i}", parent=child["thread_id"])
        for t in (root, child, leaf):
            outcomes.record(engines["alice"].store, "spawned", t["thread_id"], "be01/alice", {
                "thread": t["thread_id"], "session": f"s-{i}", "persona": t["to"],
                "mode": "start", "hop": 1, "argv0": "agent"})
        if i % 3:  # two thirds of the operations are finished
            engines["tester"].reply(f"tested {i}", thread=leaf["thread_id"])
            engines["reviewer"].reply(f"reviewed {i}", thread=child["thread_id"])
            engines["coder"].reply(f"done {i}", thread=root["thread_id"])
    ops = engines["alice"].conn.execute("SELECT count(*) FROM ops").fetchone()[0]
    for e in engines.values():
        e.close()
    print(f"\nnxc status workspace: {ops:,} ops, {3 * operations} threads, "
          f"{operations - operations * 2 // 3} live operations")
    return ws.root


def status_statements(root: str) -> None:
    """SQL statements one `nxc status` runs (in process, counted by apsw's exec tracer)
    and the size of what it prints."""
    import json

    from nixx.nxc.delivery.dispatch import LiveDelivery
    from nixx.nxc.engine import Engine

    for label, kwargs in (("status", {}), ("status --all", {"include_finished": True})):
        engine = Engine.open(db=os.path.join(root, ".nxs", "db.sqlite"),
                             env={"NXC_ACTOR": "alice"}, delivery=LiveDelivery())
        count = [0]

        def trace(cursor, sql, bindings, count=count):
            count[0] += 1
            return True

        engine.conn.exec_trace = trace
        d = engine.delivery.deliverer(engine)
        d.local.conn.exec_trace = trace
        out = engine.status(**kwargs)
        engine.close()
        size = len(json.dumps(out, indent=2, ensure_ascii=False))
        compact = len(json.dumps(out, ensure_ascii=False, separators=(",", ":")))
        print(f"  nxc {label:13s} {count[0]:6,} SQL statements, {len(out['operations'])} "
              f"operations, JSON {size / 1024:6.1f} KB indented / {compact / 1024:6.1f} KB "
              "compact")


def status_timing(root: str, runs: int, baseline_src: str | None = None) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}
    env["NXC_ACTOR"] = "alice"
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    nxc = os.path.join(VENV_BIN, "nxc")
    cases: dict[str, tuple[list[str], dict[str, str]]] = {
        "python -c pass": ([sys.executable, "-c", "pass"], env)}
    for name, argv in {"nxc status": ["status"], "nxc status --json": ["status", "--json"],
                       "nxc status --all --json": ["status", "--all", "--json"]}.items():
        cases[name] = ([nxc, *argv], env)
        if baseline_src:
            cases[f"{name} (baseline)"] = ([nxc, *argv], {**env, "PYTHONPATH": baseline_src})
    times: dict[str, list[float]] = {name: [] for name in cases}
    cpus: dict[str, list[float]] = {name: [] for name in cases}
    for cmd, case_env in cases.values():
        _time(cmd, root, case_env)
    for _ in range(runs):
        for name, (cmd, case_env) in cases.items():
            wall, cpu = _time_cpu(cmd, root, case_env)
            times[name].append(wall)
            cpus[name].append(cpu)
    base_med = statistics.median(times["python -c pass"])
    base_cpu = statistics.median(cpus["python -c pass"])
    print(f"  {runs} interleaved runs: wall median (min-max), ratio to python -c pass; CPU "
          "(user + system) median and its ratio")
    for name, xs in times.items():
        med, cpu = statistics.median(xs), statistics.median(cpus[name])
        print(f"  {name:37s} {med * 1000:7.1f} ms ({min(xs) * 1000:.0f}-{max(xs) * 1000:.0f})"
              f"   x{med / base_med:4.2f}   cpu {cpu * 1000:6.1f} ms x{cpu / base_cpu:4.2f}")


def _workspace(parent: str, name: str) -> str:
    from nixx.log.workspace import init_workspace

    ws, _ = init_workspace(os.path.join(parent, name), replica="be01")
    return ws.db_path


def append_and_refold(parent: str, n: int, batch: int = 1000) -> None:
    from nixx.log.store import LogStore
    from nixx.nxc.reducer import DOMAIN, ChatReducer

    db = _workspace(parent, f"ops{n}")
    store = LogStore.open(db, [ChatReducer()])
    me, them = "be01/alice", "be01/coder"
    channel = "dm:bench"
    with store.transaction() as txn:
        txn.append(DOMAIN, "channel", channel, me, {"fields": {"kind": "direct",
                                                               "members": [me, them]}})
    start = time.perf_counter()
    done = 0
    i = 0
    while done < n:
        with store.transaction() as txn:
            for _ in range(min(batch, n - done) // 5 or 1):
                tid, mid, rid = f"t-{i}", f"m-{i}a", f"m-{i}b"
                txn.append(DOMAIN, "thread_open", tid, me,
                           {"channel": channel, "parent": None, "expects": [them],
                            "deadline": None})
                txn.append(DOMAIN, "post", mid, me, {
                    "thread": tid, "channel": channel, "kind": "task",
                    "body": f"please look at issue {i}: the parser drops trailing commas"})
                txn.append(DOMAIN, "post", rid, them, {
                    "thread": tid, "channel": channel, "kind": "report",
                    "body": f"fixed issue {i}, added a regression test"})
                txn.append(DOMAIN, "read_cursor", channel, them, {"pos": f"{i:012d}"})
                txn.append(DOMAIN, "thread_expects", tid, me, {"expects": [them]})
                i += 1
                done += 5
    elapsed = time.perf_counter() - start
    print(f"\n{n:,} operations (5-op conversations, {batch}-op transactions)")
    print(f"  append + fold:     {elapsed:7.1f} s   {n / elapsed:9,.0f} ops/s")
    size = os.path.getsize(db) + (os.path.getsize(db + "-wal") if os.path.exists(db + "-wal")
                                  else 0)
    print(f"  log + views size:  {size / 1e6:7.1f} MB   ({size / n:.0f} B/op)")
    start = time.perf_counter()
    counts = store.refold()
    elapsed = time.perf_counter() - start
    print(f"  full re-fold:      {elapsed:7.1f} s   {counts['message'] / elapsed:9,.0f} ops/s")
    start = time.perf_counter()
    page, seq, total = [], 0, 0
    while True:
        page = store.ops_since(seq, limit=5000)
        if not page:
            break
        seq, total = page[-1].seq, total + len(page)
    elapsed = time.perf_counter() - start
    print(f"  read all past seq 0 in pages of 5000 (the sync read): {elapsed:5.1f} s "
          f"({total / elapsed:,.0f} ops/s)")
    store.close()


def single_op_transactions(parent: str, n: int) -> None:
    from nixx.log.store import LogStore
    from nixx.nxc.reducer import DOMAIN, ChatReducer

    db = _workspace(parent, "single")
    start = time.perf_counter()
    for i in range(n):  # what one CLI write does: open, one transaction, close
        store = LogStore.open(db, [ChatReducer()])
        store.append(DOMAIN, "post", f"m-{i}", "be01/alice",
                     {"thread": "t-1", "channel": "dm:x", "body": f"message {i}"})
        store.close()
    elapsed = time.perf_counter() - start
    print(f"\nopen + one-op transaction + close, {n} times: {elapsed / n * 1000:.2f} ms each "
          f"({n / elapsed:,.0f} ops/s)")


def local_store_writes(parent: str, n: int) -> None:
    from nixx.nxc.delivery import sessions
    from nixx.nxc.delivery.localstore import LocalStore

    path = os.path.join(parent, "local.sqlite")
    with LocalStore(path) as local:
        sid = sessions.create(local, persona="be01/coder", thread_id="t-1", runtime={},
                              hop=1, max_hops=8, parent_session=None)
    start = time.perf_counter()
    for i in range(n):  # what a one-shot process does with the device-local store
        local = LocalStore(path)
        sessions.set_pid(local, sid, i)
        local.close()
    elapsed = time.perf_counter() - start
    print(f"device-local store: open + one write + close, {n} times: "
          f"{elapsed / n * 1000:.2f} ms each")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="100000,1000000")
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--startup-only", action="store_true",
                        help="measure the CLI start-up only (no write or size runs)")
    parser.add_argument("--status-only", action="store_true",
                        help="measure `nxc status` on a workspace of ~1,050 ops only")
    parser.add_argument("--baseline-src", metavar="DIR",
                        help="also time the same verbs importing nixx from DIR (another "
                        "checkout's src/, e.g. from `git archive REV src`), interleaved")
    args = parser.parse_args()
    sys.path.insert(0, os.path.join(os.path.dirname(HERE), "src"))
    parent = tempfile.mkdtemp(prefix="bench-nxc-")
    try:
        from nixx.log.workspace import init_workspace

        if args.status_only:
            root = status_workspace(parent)
            status_statements(root)
            status_timing(root, args.runs, args.baseline_src)
            return
        ws, _ = init_workspace(os.path.join(parent, "cli"), replica="be01")
        folder = os.path.join(ws.root, ".nxs-personas")
        os.makedirs(folder)
        with open(os.path.join(folder, "coder.yaml"), "w") as fh:
            fh.write("handle: coder\nsystem_prompt: You write code.\njob_title: Coder\n")
        with open(os.path.join(folder, "channels.yaml"), "w") as fh:
            fh.write("- name: team\n  members: [coder, bench]\n")
        startup(ws.root, args.runs, args.baseline_src)
        if args.startup_only:
            return
        root = status_workspace(parent)
        status_statements(root)
        status_timing(root, args.runs, args.baseline_src)
        single_op_transactions(parent, 500)
        local_store_writes(parent, 100)
        for n in (int(s) for s in args.sizes.split(",") if s):
            append_and_refold(parent, n)
    finally:
        shutil.rmtree(parent, ignore_errors=True)


if __name__ == "__main__":
    main()
