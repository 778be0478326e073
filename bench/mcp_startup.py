"""Start-up of `nixx mcp`: wall time from spawning the process to its answer to the first
`tools/list` (what an agent host waits on at every session start).

    python bench/mcp_startup.py [--runs N] [--src DIR ...] [--bare] [--memory-call]

Each `--src` is a `src/` folder to run (`PYTHONPATH=DIR`); give two (e.g. an older
commit's `git archive` and this tree's `src`) for a before/after. Runs are interleaved
(A, B, A, B, ...) because this machine is shared and noisy; the load (`uptime`) is
printed with the figures. `--bare` adds the SDK's own floor: an `MCPServer` with no
tools (`bare`), the same transport and handshake. `--memory-call` then also times a first
memory tool (`intent_get`) with no nixx server running, so that `nixx mcp` starts one on
the way (SQLite store, local embedder): the wait that lazy start keeps out of `tools/list`. The client writes the JSON-RPC lines itself (initialize,
initialized, tools/list) so that nothing but the server's own start is timed. No nixx
server runs during the bench and none is started: the memory tools are not called.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parents[1]
LINES = [
    {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "bench", "version": "0"}}},
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


BARE = "bare"
BARE_CODE = "from mcp.server.mcpserver import MCPServer; MCPServer('bare').run()"


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def one_run(src: str, cwd: str, home: str, memory_call: bool = False) -> tuple[float, float, int]:
    """(wall seconds to the tools/list answer, CPU seconds of the whole process, tools);
    with `memory_call`, (wall seconds to the first intent_get's answer, 0, tools)."""
    port = str(free_port()) if memory_call else "9"  # 9: nothing answers, nothing starts
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": home, "NIXX_HOME": home,
           "PYTHONPATH": "" if src == BARE else src, "NIXX_PORT": port}
    cmd = ["-c", BARE_CODE] if src == BARE else ["-m", "nixx.cli.nixx", "mcp"]
    start = time.perf_counter()
    proc = subprocess.Popen([sys.executable, *cmd], cwd=cwd, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdin and proc.stdout
    lines = LINES + ([{"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                       "params": {"name": "intent_get", "arguments": {}}}] if memory_call else [])
    proc.stdin.write("".join(json.dumps(m) + "\n" for m in lines).encode())
    proc.stdin.flush()
    tools = -1
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit(f"nixx mcp exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        msg = json.loads(line)
        if msg.get("id") == 2:
            elapsed = time.perf_counter() - start
            tools = len(msg["result"]["tools"])
            if not memory_call:
                break
        if msg.get("id") == 3:
            assert not msg["result"].get("isError"), msg
            elapsed = time.perf_counter() - start
            break
    proc.stdin.close()  # end of input: the server exits (and stops a nixx server it started)
    _, _, usage = os.wait4(proc.pid, 0)
    proc.returncode = 0
    return elapsed, usage.ru_utime + usage.ru_stime, tools


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--src", action="append", help="a src/ folder (default: this tree's)")
    parser.add_argument("--bare", action="store_true", help="also time an MCPServer with no tools")
    parser.add_argument("--memory-call", action="store_true",
                        help="also time a first memory call that starts the nixx server")
    args = parser.parse_args()
    srcs = (args.src or [str(HERE / "src")]) + ([BARE] if args.bare else [])
    with tempfile.TemporaryDirectory() as tmp:
        home = os.path.join(tmp, "home")
        os.mkdir(home)
        for src in srcs:  # warm the bytecode caches and the page cache once, untimed
            one_run(src, tmp, home)
        times: dict[str, list[float]] = {src: [] for src in srcs}
        cpu: dict[str, list[float]] = {src: [] for src in srcs}
        counts: dict[str, int] = {}
        for _ in range(args.runs):
            for src in srcs:
                elapsed, used, counts[src] = one_run(src, tmp, home)
                times[src].append(elapsed)
                cpu[src].append(used)
    print(f"load: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} "
          f"(1/5/15 min), {os.cpu_count()} cores, {args.runs} interleaved runs each")
    for src in srcs:
        t, c = sorted(times[src]), sorted(cpu[src])
        print(f"{src}: {counts[src]} tools; first tools/list after median {statistics.median(t):.3f} s "
              f"(min {t[0]:.3f}, max {t[-1]:.3f}); CPU of the whole run median "
              f"{statistics.median(c):.3f} s (min {c[0]:.3f}, max {c[-1]:.3f})")
    if args.memory_call:
        src = (args.src or [str(HERE / "src")])[-1]
        with tempfile.TemporaryDirectory() as tmp:
            home = os.path.join(tmp, "home")
            os.mkdir(home)
            waits = sorted(one_run(src, tmp, home, memory_call=True)[0]
                           for _ in range(max(1, args.runs // 3)))
        print(f"{src}: first memory call, nixx server started on the way: median "
              f"{statistics.median(waits):.3f} s (min {waits[0]:.3f}, max {waits[-1]:.3f}) "
              f"after spawn, {len(waits)} runs; load now {os.getloadavg()[0]:.2f}")
    compared = [s for s in srcs if s != BARE]
    if len(compared) == 2:
        for label, data in (("wall", times), ("CPU", cpu)):
            a, b = (statistics.median(data[s]) for s in compared)
            print(f"{label} ratio (first / second): {a / b:.2f}")


if __name__ == "__main__":
    main()
