"""Memory of `nixx serve` per dialect under the request limits (issue 39, item 7): a real
server process (SQLite store in a temporary home, FakeLLM as the chat and embedding
backend), its resident size idle, then for each shape four concurrent requests: the peak
above idle (VmRSS sampled every 20 ms, and VmHWM reset before the shape), the size kept
after, and the store's growth.

Shapes, as found from outside before the fixes:

- (a) ``/v1/responses``, ``store: true``, input = a ``function_call``, its
  ``function_call_output`` of 15 MiB, a small user message. `--rounds` rounds of four
  concurrent requests (20 requests at the default); client i continues its own previous
  response (``previous_response_id``), so four chains of such responses are left behind.
  Before: four at once peaked at 2.26 GB, ~1 GB kept, the store grew 315 MB in 20.
- (b) continuations of those chains, bodies under 200 bytes, four at once (three rounds,
  each continuing the last). Before: 1.5 GB.
- (c) ``/v1/messages``, one user message of 15 MiB of empty text blocks (600,000
  objects), four at once. Before: 2.6 GB; now 400 ``too_many_items`` before parsing.

The ceiling (docs/limits-and-safety.md, "Memory under large requests"): 4 ×
``NIXX_MAX_INFLIGHT_BYTES`` above idle, 256 MiB at the default.

    PYTHONPATH=src .venv/bin/python bench/bench_dialect_memory.py [--mib 15] [--rounds 5]
        [--clients 4] [--context 8192] [--settle 5]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

from nixx.testing.fake_llm import FakeLLM, Reply

CEILING_MIB = 256  # 4 × NIXX_MAX_INFLIGHT_BYTES (64 MiB) above idle
MIB = 1024 * 1024


def _mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def _store_bytes(home: Path) -> int:
    """The SQLite store's files: nixx.db, its -wal and -shm."""
    return sum(p.stat().st_size for p in home.glob("nixx.db*") if p.is_file())


class Peak:
    """The server's VmRSS sampled every `every` seconds while in the block, and its VmHWM
    (reset on entry through /proc/<pid>/clear_refs where the kernel allows): the larger."""

    def __init__(self, pid: int, every: float = 0.02) -> None:
        self.pid, self.every = pid, every
        self.high = 0.0
        self.samples = 0
        self._stop = threading.Event()
        self._hwm_reset = False

    def __enter__(self) -> Peak:
        try:
            Path(f"/proc/{self.pid}/clear_refs").write_text("5")  # reset VmHWM to VmRSS
            self._hwm_reset = True
        except OSError:
            pass
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            self.high = max(self.high, _mib(self.pid, "VmRSS"))
            self.samples += 1
            self._stop.wait(self.every)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()
        if self._hwm_reset:
            self.high = max(self.high, _mib(self.pid, "VmHWM"))


def _post(base: str, path: str, body: bytes) -> tuple[int, dict[str, Any]]:
    r = httpx.post(base + path, content=body, timeout=600,
                   headers={"Content-Type": "application/json", "anthropic-version": "2023-06-01"})
    try:
        data = r.json()
    except ValueError:
        data = {}
    return r.status_code, data if isinstance(data, dict) else {}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=15, help="size of the large part, MiB")
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--rounds", type=int, default=5, help="rounds of shape (a)")
    ap.add_argument("--continuations", type=int, default=3, help="rounds of shape (b)")
    ap.add_argument("--context", type=int, default=8192, help="NIXX_CHAT_CONTEXT_LENGTH")
    ap.add_argument("--settle", type=float, default=5.0,
                    help="seconds after a shape before its retained size is read")
    args = ap.parse_args()
    t_start = time.monotonic()
    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        llm.responder = lambda body: Reply(content="ok")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        home = Path(tmp)
        env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
        env.update(NIXX_HOME=tmp, NIXX_CHAT_BASE_URL=llm.base_url, NIXX_EMBED_PROVIDER="openai",
                   NIXX_EMBED_BASE_URL=llm.base_url, NIXX_EMBED_MODEL="fake-embed",
                   NIXX_WORKSPACE=tmp, NIXX_PORT=str(port), NIXX_LOG_LEVEL="warning",
                   NIXX_CHAT_CONTEXT_LENGTH=str(args.context))
        proc = subprocess.Popen([str(Path(sys.executable).with_name("nixx")), "serve"], env=env)
        base = f"http://127.0.0.1:{port}"
        pid = proc.pid
        rows: list[dict[str, Any]] = []
        try:
            for _ in range(300):
                try:
                    if httpx.get(base + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            # warm every route the shapes use, so idle includes their code
            httpx.post(base + "/v1/chat/completions", timeout=60,
                       json={"messages": [{"role": "user", "content": "warm up"}]})
            code, warm = _post(base, "/v1/responses", json.dumps(
                {"input": "warm up responses", "store": True}).encode())
            _post(base, "/v1/responses", json.dumps(
                {"input": "and on", "previous_response_id": warm.get("id")}).encode())
            _post(base, "/v1/messages", json.dumps(
                {"model": "m", "max_tokens": 16,
                 "messages": [{"role": "user", "content": "warm up messages"}]}).encode())
            time.sleep(3)
            idle = _mib(pid, "VmRSS")
            print(f"idle: {idle:.0f} MiB (anon {_mib(pid, 'RssAnon'):.0f}); "
                  f"store {_store_bytes(home) / MIB:.1f} MiB")

            big = ("word " * int(args.mib * MIB / 5)).encode()

            def shape(name: str, rounds: int, one: Any) -> Counter[int]:
                codes: Counter[int] = Counter()
                store0 = _store_bytes(home)
                t0 = time.monotonic()
                with Peak(pid) as peak:
                    for r in range(rounds):
                        with ThreadPoolExecutor(args.clients) as pool:
                            codes.update(pool.map(lambda i, r=r: one(r, i),
                                                  range(args.clients)))
                took = time.monotonic() - t0
                time.sleep(args.settle)
                retained = _mib(pid, "VmRSS")
                growth = (_store_bytes(home) - store0) / MIB
                above = peak.high - idle
                rows.append({"shape": name, "requests": sum(codes.values()),
                             "peak": above, "retained": retained - idle, "store": growth,
                             "codes": dict(sorted(codes.items())), "took": took,
                             "within": above <= CEILING_MIB, "samples": peak.samples})
                print(f"{name}: {dict(codes)} in {took:.1f} s; peak +{above:.0f} MiB, "
                      f"after {args.settle:g} s +{retained - idle:.0f} MiB, store "
                      f"+{growth:.1f} MiB ({peak.samples} samples)", flush=True)
                return codes

            # (a) 15 MiB function_call_output before a small user message, store: true
            tips: list[str | None] = [None] * args.clients

            def responses_big(r: int, i: int) -> int:
                head = {"store": True, "input": [
                    {"type": "function_call", "call_id": f"call_{r}_{i}", "name": "read_file",
                     "arguments": json.dumps({"path": f"big-{r}-{i}.log"})},
                    {"type": "function_call_output", "call_id": f"call_{r}_{i}",
                     "output": "@@BIG@@"},
                    {"type": "message", "role": "user",
                     "content": f"round {r} client {i}: what does the log say?"}]}
                if tips[i]:
                    head["previous_response_id"] = tips[i]
                before, after = json.dumps(head).encode().split(b"@@BIG@@")
                code, data = _post(base, "/v1/responses", before + big + after)
                if code == 200 and data.get("id"):
                    tips[i] = data["id"]
                return code

            shape(f"(a) /v1/responses, {args.mib:g} MiB tool output, store",
                  args.rounds, responses_big)

            # (b) continuations of those chains, small bodies
            def continuation(r: int, i: int) -> int:
                body = json.dumps({"previous_response_id": tips[i], "store": True,
                                   "input": f"and then {r}?"}).encode()
                assert len(body) < 200, len(body)
                code, data = _post(base, "/v1/responses", body)
                if code == 200 and data.get("id"):
                    tips[i] = data["id"]
                return code

            if all(tips):
                shape("(b) /v1/responses continuations, <200 B bodies",
                      args.continuations, continuation)
            else:
                print("(b) skipped: shape (a) left no chain to continue")

            # (c) 15 MiB of empty content blocks on /v1/messages
            block = b'{"type":"text","text":""},'
            blocks = block * int(args.mib * MIB / len(block))

            def messages_blocks(r: int, i: int) -> int:
                before = (b'{"model":"m","max_tokens":16,"messages":[{"role":"user",'
                          b'"content":[')
                after = f'{{"type":"text","text":"client {i}"}}]}}]}}'.encode()
                return _post(base, "/v1/messages", before + blocks + after)[0]

            shape(f"(c) /v1/messages, {args.mib:g} MiB of empty blocks", 1, messages_blocks)
            final = _mib(pid, "VmRSS")
        finally:
            proc.terminate()
            proc.wait(30)

    print()
    print(f"idle {idle:.0f} MiB, end {final:.0f} MiB (+{final - idle:.0f}); ceiling "
          f"+{CEILING_MIB} MiB; whole run {time.monotonic() - t_start:.0f} s")
    print("| shape | requests | peak above idle | retained above idle "
          f"(after {args.settle:g} s) | store growth | status codes | within {CEILING_MIB} MiB |")
    print("|---|---|---|---|---|---|---|")
    for row in rows:
        codes = ", ".join(f"{c} × {n}" for c, n in row["codes"].items())
        print(f"| {row['shape']} | {row['requests']} | {row['peak']:.0f} MiB | "
              f"{row['retained']:.0f} MiB | {row['store']:.1f} MiB | {codes} | "
              f"{'yes' if row['within'] else 'NO'} |")


if __name__ == "__main__":
    main()
