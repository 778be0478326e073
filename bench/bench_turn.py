"""Time nixx adds to a chat turn.

Seeds a SQLite store with 100k buffer rows and 10k summaries (with vectors), starts the
scripted backend (FakeLLM) in this process and `nixx serve` as a real subprocess pointed
at it, then times the same requests sent to the backend directly and through nixx,
interleaved, in the same run:

- a non-streaming turn (request → whole answer): p50/p95 of direct, through nixx, added;
- a streaming turn: time to the first content token, direct vs through nixx.

Through nixx a turn also embeds the query (over HTTP to the backend's /v1/embeddings with
`--embed openai`, the default; in-process with `--embed local`), recalls summaries, writes
the user and assistant rows, and builds the prompt.

    .venv/bin/python bench/bench_turn.py [--turns 200] [--rows 100000] [--summaries 10000]
        [--embed openai|local] [--row-vectors seeded|backfill] [--blas-threads N]

`--row-vectors seeded` (default) stores every seeded row with its vector, so only the
rows the turns write are embedded in the background; `backfill` seeds rows without
vectors, so the background queue embeds the whole store while the turns run (its
throughput is printed). `--blas-threads N` starts the server with
OPENBLAS_NUM_THREADS=N (nixx serve's default is 1: docs/performance.md). The server's
resident memory (RSS) is printed at the end.

The machine is shared: absolute figures are noisy, the added time (same run, interleaved)
is the figure to read.
"""

from __future__ import annotations

import argparse
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from nixx.store import open_store
from nixx.store.portable import header_record, utc_now
from nixx.testing.fake_llm import FakeLLM

WORDS = [
    "postgres",
    "sqlite",
    "vector",
    "index",
    "recall",
    "summary",
    "intent",
    "buffer",
    "stream",
    "token",
    "chunk",
    "embed",
    "server",
    "client",
    "model",
    "prompt",
    "memory",
    "search",
    "query",
    "schema",
    "migration",
    "test",
    "deploy",
    "docker",
    "python",
    "rust",
    "typescript",
    "fastapi",
    "textual",
    "uvicorn",
    "latency",
    "cache",
    "budget",
    "context",
    "session",
]


def sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def seed(
    db: Path, rows: int, summaries: int, dim: int, model: str, *, row_vectors: bool = True
) -> None:
    rng = random.Random(7)
    now = utc_now()
    # row vectors: random unit vectors (the search cost does not depend on their values)
    vec_rng = np.random.default_rng(5)

    def records() -> Any:
        yield header_record()
        yield {"type": "embedder", "model": model, "dim": dim}
        yield {"type": "state", "key": "episodic.interval", "value": 10**9}
        for i in range(1, rows + 1):
            record = {
                "type": "buffer",
                "id": i,
                "role": "user" if i % 2 else "assistant",
                "content": sentence(rng, 25),
                "origin": "api",
                "created_at": now,
                "meta": {},
            }
            if row_vectors:
                v = vec_rng.standard_normal(dim).astype(np.float32)
                record["embedding"] = (v / np.linalg.norm(v)).tolist()
                record["pieces"] = []  # split, none: the server has no sentences to embed
            yield record
        span = max(1, rows // max(1, summaries))
        for j in range(summaries):
            text = sentence(rng, 30)
            yield {
                "type": "summary",
                "id": j + 1,
                "content": text,
                "embedding": [float(x) for x in FakeLLM.embedding_of(text, dim)],
                "tags": ["bench"],
                "entities": {},
                "start_buffer_id": j * span + 1,
                "end_buffer_id": min(rows, (j + 1) * span),
                "created_at": now,
            }

    store = open_store(f"sqlite:///{db}")
    try:
        store.import_records(records())
        # the HNSW sidecars, so the server loads them at start instead of building
        # them while the turns run
        store.build_vector_indexes()  # type: ignore[attr-defined]
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(
    home: Path,
    db: Path,
    llm: FakeLLM,
    *,
    embed: str = "local",
    model: str = "",
    engine: str = "auto",
    blas_threads: str | None = None,
    clear_blas: bool = False,
    **settings: str,
) -> tuple[subprocess.Popen[bytes], str]:
    """`nixx serve` as a subprocess on a free port, on store `db`, pointed at `llm` for chat
    (and embeddings with `embed="openai"`); no NIXX_/NXC_ variable of this process leaks
    in; `settings` are more NIXX_* variables. `blas_threads` sets OPENBLAS_NUM_THREADS,
    `clear_blas` drops one this process has (nixx serve's own default then applies).
    Returns (process, base URL)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NIXX_", "NXC_"))}
    if clear_blas:
        env.pop("OPENBLAS_NUM_THREADS", None)
    env.update(
        NIXX_HOME=str(home),
        NIXX_DB_URL=f"sqlite:///{db}",
        NIXX_CHAT_BASE_URL=llm.base_url,
        NIXX_EMBED_PROVIDER=embed,
        NIXX_EMBED_BASE_URL=llm.base_url,
        NIXX_EMBED_MODEL=model,  # local: all-MiniLM-L6-v2 or all-mpnet-base-v2
        NIXX_EMBED_ENGINE=engine,
        NIXX_WORKSPACE=str(home),
        NIXX_LOG_LEVEL="warning",
        **{f"NIXX_{k.upper()}": v for k, v in settings.items()},
    )
    if blas_threads is not None:
        env["OPENBLAS_NUM_THREADS"] = blas_threads
    port = free_port()
    nixx_bin = str(Path(sys.executable).with_name("nixx"))
    proc = subprocess.Popen([nixx_bin, "serve", "--port", str(port)], env=env)
    return proc, f"http://127.0.0.1:{port}"


def wait_healthy(
    client: httpx.Client, base: str, proc: subprocess.Popen[Any], timeout: float = 120
) -> None:
    """Wait until the server at `base` answers /health (SystemExit if it never does)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            if client.get(base + "/health").status_code == 200:
                return
        except httpx.HTTPError:
            pass
        if time.monotonic() > deadline or proc.poll() is not None:
            raise SystemExit("nixx serve did not start")
        time.sleep(0.1)


def rss_mb(pid: int) -> str:
    """Memory of process `pid` (Linux /proc), in MB: resident (RSS), proportional (PSS:
    a page mapped several times, as the SQLite file is by each connection's memory map,
    counts once) and anonymous (the process's own; the rest is the file cache's)."""
    kb: dict[str, int] = {}
    for name in ("status", "smaps_rollup"):
        for line in Path(f"/proc/{pid}/{name}").read_text().splitlines():
            key, _, value = line.partition(":")
            if value.strip().endswith("kB"):
                kb.setdefault(key.strip(), int(value.split()[0]))
    mb = {k: kb.get(k, 0) / 1024 for k in ("VmRSS", "Pss", "RssAnon")}
    return f"RSS {mb['VmRSS']:.0f} MB (PSS {mb['Pss']:.0f} MB, anonymous {mb['RssAnon']:.0f} MB)"


def cpu_seconds(pid: int) -> float:
    """User + system CPU time process `pid` (all its threads) has used, in seconds (Linux
    /proc). Less sensitive to a busy machine than wall time: figures per request stay
    comparable across runs at different loads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def pct(values: list[float], p: float) -> float:
    return float(np.percentile(np.array(values), p))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--turns", type=int, default=200)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--summaries", type=int, default=10_000)
    ap.add_argument("--embed", choices=("openai", "local"), default="openai")
    ap.add_argument("--row-vectors", choices=("seeded", "backfill"), default="seeded")
    ap.add_argument("--blas-threads", type=int, default=None)
    ap.add_argument("--engine", choices=("auto", "onnx", "numpy"), default="auto",
                    help="NIXX_EMBED_ENGINE of the server (with --embed local)")
    ap.add_argument("--db", type=Path, default=None, help="a copy of this seeded store")
    ap.add_argument(
        "--questions",
        choices=("vocab", "fts"),
        default="vocab",
        help="user messages: 15 words of the 35-word vocabulary (every row of the seeded "
        "store matches them), or bench_search.fts_corpus's typical questions (with --db "
        "a store seeded by bench_http_search.py)",
    )
    ap.add_argument(
        "--setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting for an A/B (NAME as in Settings, e.g. prompt_layout=system; "
        "repeatable)",
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="nixx-bench-"))
    db = tmp / "nixx.db"
    model = "fake-embed" if args.embed == "openai" else "all-MiniLM-L6-v2"
    t0 = time.perf_counter()
    if args.db is not None:  # A/B runs on one seeded store: each run gets a fresh copy
        import shutil

        for path in args.db.parent.glob(args.db.name + "*"):
            shutil.copy(path, tmp / path.name.replace(args.db.name, "nixx.db", 1))
    else:
        seed(db, args.rows, args.summaries, 384, model, row_vectors=args.row_vectors == "seeded")
    print(
        f"seeded {args.rows} buffer rows + {args.summaries} summaries in "
        f"{time.perf_counter() - t0:.1f}s ({db.stat().st_size / 1e6:.0f} MB): {db}"
    )

    # the answer is FakeLLM's default, the user's own words (not the memory nixx added
    # after them: echoing that would make every answer the recalled block, ~2 KB)
    llm = FakeLLM()
    server, base = start_server(
        tmp,
        db,
        llm,
        embed=args.embed,
        model=model,
        engine=args.engine,
        blas_threads=None if args.blas_threads is None else str(args.blas_threads),
        **{
            "recall_threshold": "0.2",
            "intent_interval": "1000000",
            **dict(item.split("=", 1) for item in args.setting),
        },
    )
    try:
        client = httpx.Client(timeout=60)
        wait_healthy(client, base, server)
        print(f"server pid {server.pid}", flush=True)

        rng = random.Random(11)
        fts_questions: list[str] = []
        if args.questions == "fts":
            sys.path.insert(0, str(Path(__file__).parent))
            from bench_search import fts_corpus

            fts_questions = fts_corpus(args.rows)[1]

        def question() -> str:
            return rng.choice(fts_questions) if fts_questions else sentence(rng, 15)

        history = [
            {"role": "user", "content": sentence(rng, 20)},
            {"role": "assistant", "content": sentence(rng, 40)},
        ]

        def body(stream: bool) -> dict[str, Any]:
            return {
                "model": "fake-model",
                "stream": stream,
                "messages": [*history, {"role": "user", "content": question()}],
            }

        # One async client for both paths (anyio sockets set TCP_NODELAY; a sync client
        # would add Nagle/delayed-ACK stalls of ~40 ms to the direct path only).
        async def turn(aclient: httpx.AsyncClient, url: str, stream: bool) -> float:
            start = time.perf_counter()
            if not stream:
                r = await aclient.post(url + "/chat/completions", json=body(False))
                r.raise_for_status()
                return time.perf_counter() - start
            elapsed = None
            async with aclient.stream("POST", url + "/chat/completions", json=body(True)) as r:
                r.raise_for_status()
                async for line in r.aiter_lines():
                    if (
                        elapsed is None
                        and line.startswith("data: ")
                        and ('"content": "' in line and '"content": ""' not in line)
                    ):
                        elapsed = time.perf_counter() - start
            if elapsed is None:
                raise SystemExit("no content token in the stream")
            return elapsed

        async def run_all() -> dict[str, list[float]]:
            async with httpx.AsyncClient(timeout=60) as aclient:
                for _ in range(10):  # warm up both paths (connections, caches, the index)
                    await turn(aclient, llm.base_url, False)
                    await turn(aclient, base + "/v1", False)
                    await turn(aclient, base + "/v1", True)
                out: dict[str, list[float]] = {
                    k: [] for k in ("direct", "nixx", "direct_ttft", "nixx_ttft")
                }
                for _ in range(args.turns):
                    out["direct"].append(await turn(aclient, llm.base_url, False))
                    out["nixx"].append(await turn(aclient, base + "/v1", False))
                    out["direct_ttft"].append(await turn(aclient, llm.base_url, True))
                    out["nixx_ttft"].append(await turn(aclient, base + "/v1", True))
                return out

        import asyncio

        results = asyncio.run(run_all())

        added = [n - d for n, d in zip(results["nixx"], results["direct"], strict=True)]
        added_ttft = [
            n - d for n, d in zip(results["nixx_ttft"], results["direct_ttft"], strict=True)
        ]
        ms = 1000.0
        print(
            f"\n{args.turns} turns each, interleaved; store: {args.rows} rows, "
            f"{args.summaries} summaries; embedder: {args.embed} ({args.engine}); "
            f"questions: {args.questions}"
        )
        print(f"{'':28}{'p50 ms':>10}{'p95 ms':>10}")
        for name, values in (
            ("turn, direct to backend", results["direct"]),
            ("turn, through nixx", results["nixx"]),
            ("added by nixx", added),
            ("first token, direct", results["direct_ttft"]),
            ("first token, through nixx", results["nixx_ttft"]),
            ("first token added by nixx", added_ttft),
        ):
            print(f"{name:28}{pct(values, 50) * ms:10.2f}{pct(values, 95) * ms:10.2f}")
        print(
            f"\nadded at p50: {statistics.median(added) * ms:.2f} ms (goal <= 25 ms); "
            f"first token added at p50: {statistics.median(added_ttft) * ms:.2f} ms (goal <= 10 ms)"
        )
        status = client.get(base + "/v1/episodic/status").json()
        vectors = status["buffer_vectors"]
        print(
            f"buffer rows after the run: {status['buffer_rows']}; row vectors: "
            f"{vectors['embedded']} embedded, {vectors['pending']} pending, "
            f"queue throughput {vectors['rows_per_second']} rows/s (time in embed())"
        )
        if vectors["pending"]:
            # turns back to back leave the queue no quiet moment (nixx.priority): it embeds a
            # batch every half second meanwhile, and catches up once the turns stop
            started = time.perf_counter()
            while (left := client.get(base + "/v1/episodic/status").json())["buffer_vectors"][
                "pending"
            ] and time.perf_counter() - started < 120:
                time.sleep(0.05)
            print(
                f"the queue caught up {time.perf_counter() - started:.2f} s after the last turn "
                f"({left['buffer_vectors']['pending']} rows still pending)"
            )
        print(f"server memory: {rss_mb(server.pid)}; load average: {os.getloadavg()}")
    finally:
        server.terminate()
        server.wait(30)
        llm.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
