"""Memory of `nixx serve` under concurrent large turns: a real server process (FakeLLM as
the backend), its resident size idle, at peak (VmHWM) and after, for batches of
concurrent turns each carrying one large message.

    .venv/bin/python bench/bench_large_turns.py [--mib 15] [--clients 4] [--batches 2]
        [--context 8192]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx

from nixx.testing.fake_llm import FakeLLM, Reply


def _mib(pid: int, field: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=float, default=15)
    ap.add_argument("--clients", type=int, default=4)
    ap.add_argument("--batches", type=int, default=2)
    ap.add_argument("--context", type=int, default=8192,
                    help="NIXX_CHAT_CONTEXT_LENGTH (large: the messages fit and are processed)")
    args = ap.parse_args()
    with FakeLLM() as llm, tempfile.TemporaryDirectory() as tmp:
        llm.responder = lambda body: Reply(content="ok")
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        env = {k: v for k, v in os.environ.items() if not k.startswith("NIXX_")}
        env.update(NIXX_HOME=tmp, NIXX_CHAT_BASE_URL=llm.base_url, NIXX_EMBED_PROVIDER="openai",
                   NIXX_EMBED_BASE_URL=llm.base_url, NIXX_EMBED_MODEL="fake-embed",
                   NIXX_WORKSPACE=tmp, NIXX_PORT=str(port), NIXX_LOG_LEVEL="warning",
                   NIXX_CHAT_CONTEXT_LENGTH=str(args.context))
        proc = subprocess.Popen([str(Path(sys.executable).with_name("nixx")), "serve"], env=env)
        base = f"http://127.0.0.1:{port}"
        try:
            for _ in range(300):
                try:
                    if httpx.get(base + "/health").status_code == 200:
                        break
                except httpx.HTTPError:
                    time.sleep(0.1)
            httpx.post(base + "/v1/chat/completions", timeout=60,
                       json={"messages": [{"role": "user", "content": "warm up"}]})
            print(f"idle: {_mib(proc.pid, 'VmRSS'):.0f} MiB (anon {_mib(proc.pid, 'RssAnon'):.0f})")
            big = "word " * int(args.mib * 1024 * 1024 / 5)

            def one(i: int) -> int:
                body = json.dumps({"messages": [{"role": "user", "content": f"{i} {big}"}]})
                r = httpx.post(base + "/v1/chat/completions", content=body, timeout=600,
                               headers={"Content-Type": "application/json"})
                return r.status_code

            for batch in range(args.batches):
                t0 = time.monotonic()
                with ThreadPoolExecutor(args.clients) as pool:
                    codes = list(pool.map(one, range(batch * 100, batch * 100 + args.clients)))
                took = time.monotonic() - t0
                after = []
                for wait in (2, 8, 20):  # background work (summaries, row vectors) settles
                    time.sleep(wait)
                    after.append(f"{_mib(proc.pid, 'VmRSS'):.0f} (anon "
                                 f"{_mib(proc.pid, 'RssAnon'):.0f})")
                print(f"batch {batch + 1}: {codes} in {took:.1f} s; peak "
                      f"{_mib(proc.pid, 'VmHWM'):.0f} MiB, after 2/10/30 s "
                      f"{'/'.join(after)} MiB")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
