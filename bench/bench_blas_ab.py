"""A/B of the local embedder's BLAS threads in `nixx serve`: the time nixx adds to a turn
with OpenBLAS's default thread pool (OPENBLAS_NUM_THREADS=2 here: one per core, what
nixx serve had before) against nixx serve's default (1 thread, set before numpy loads).

Two servers run at once on copies of one seeded store (bench_turn.py's, `--db`), in
front of one FakeLLM; every round sends the same kind of non-streaming turn to the
backend directly, to A and to B, in turn, so both see the same machine load.

    .venv/bin/python bench/bench_turn.py --embed local --turns 1 --db ...  # seeds once
    .venv/bin/python bench/bench_blas_ab.py --db /path/to/seeded/nixx.db [--turns 100]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from bench_turn import sentence, start_server, wait_healthy  # noqa: E402

from nixx.testing.fake_llm import FakeLLM  # noqa: E402


def start(db: Path, llm: FakeLLM, blas: str | None) -> tuple[subprocess.Popen[bytes], str]:
    tmp = Path(tempfile.mkdtemp(prefix="nixx-ab-"))
    for path in db.parent.glob(db.name + "*"):
        shutil.copy(path, tmp / path.name.replace(db.name, "nixx.db", 1))
    return start_server(
        tmp, tmp / "nixx.db", llm, blas_threads=blas, clear_blas=True,
        recall_threshold="0.2", intent_interval="1000000",
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--db", type=Path, required=True)
    ap.add_argument("--turns", type=int, default=100)
    args = ap.parse_args()
    llm = FakeLLM()
    servers = {
        "A: OPENBLAS_NUM_THREADS=2": start(args.db, llm, "2"),
        "B: nixx default (1)": start(args.db, llm, None),
    }
    try:
        client = httpx.Client(timeout=120)
        for proc, base in servers.values():
            wait_healthy(client, base, proc, timeout=180)
        rng = random.Random(11)
        history = [
            {"role": "user", "content": sentence(rng, 20)},
            {"role": "assistant", "content": sentence(rng, 40)},
        ]

        async def turn(aclient: httpx.AsyncClient, url: str) -> float:
            body: dict[str, Any] = {
                "model": "fake-model",
                "messages": [*history, {"role": "user", "content": sentence(rng, 15)}],
            }
            start_t = time.perf_counter()
            (await aclient.post(url + "/chat/completions", json=body)).raise_for_status()
            return time.perf_counter() - start_t

        async def run() -> dict[str, list[float]]:
            out: dict[str, list[float]] = {"direct": [], **{k: [] for k in servers}}
            async with httpx.AsyncClient(timeout=120) as aclient:
                for _ in range(10):
                    for _, base in servers.values():
                        await turn(aclient, base + "/v1")
                for _ in range(args.turns):
                    out["direct"].append(await turn(aclient, llm.base_url))
                    for name, (_, base) in servers.items():
                        out[name].append(await turn(aclient, base + "/v1"))
            return out

        loads = [os.getloadavg()[0]]
        res = asyncio.run(run())
        loads.append(os.getloadavg()[0])
        print(f"\n{args.turns} rounds (direct, A, B), local embedder; load {loads}")
        print(f"{'time nixx adds to a turn':32}{'p50 ms':>9}{'p95 ms':>9}{'p99 ms':>9}")
        for name in servers:
            added = (np.array(res[name]) - np.array(res["direct"])) * 1000
            print(
                f"{name:32}{np.percentile(added, 50):9.2f}{np.percentile(added, 95):9.2f}"
                f"{np.percentile(added, 99):9.2f}"
            )
        d = np.array(res["direct"]) * 1000
        print(f"{'(direct turn)':32}{np.percentile(d, 50):9.2f}{np.percentile(d, 95):9.2f}")
    finally:
        for proc, _ in servers.values():
            proc.terminate()
            proc.wait(30)
        llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
