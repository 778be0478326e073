"""How fast the memory browser's pages answer at 100,000 buffer rows.

Seeds a SQLite store (bench_turn.seed: 100k rows, 10k summaries), serves nixx under a
real uvicorn in this process with the scripted backend, and times each page over HTTP:
the newest conversation page, one in the middle, the oldest (keyset paging: each is
one primary-key range read), the summaries list, a search, the settings page.

    .venv/bin/python bench/bench_web.py [--rows 100000] [--summaries 10000] [--runs 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

import httpx
from bench_turn import seed

from nixx.config import load_settings
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LiveServer


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--summaries", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=30)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as llm:
        db = Path(tmp) / "nixx.db"
        t0 = time.perf_counter()
        seed(db, args.rows, args.summaries, 384, "fake-embed")
        print(f"seeded {args.rows:,} rows, {args.summaries:,} summaries in "
              f"{time.perf_counter() - t0:.1f} s")
        os.environ["NIXX_HOME"] = tmp
        settings = load_settings(
            db_url=f"sqlite:///{db}", chat_base_url=llm.base_url, embed_provider="openai",
            embed_base_url=llm.base_url, embed_model="fake-embed", workspace=Path(tmp),
        )
        pages = {
            "conversations (newest)": "/ui/conversations",
            "conversations (middle)": f"/ui/conversations?before={args.rows // 2}",
            "conversations (oldest)": "/ui/conversations?before=51",
            "transcript around a hit": f"/ui/conversations?around={args.rows // 3}",
            "summaries (page 1)": "/ui/summaries",
            "summaries (page 100)": "/ui/summaries?page=100",
            "search": "/ui?q=sqlite+vector+recall",
            "settings": "/ui/settings",
        }
        with LiveServer(create_app(settings)) as server, httpx.Client(
            base_url=server.base_url, timeout=60
        ) as client:
            for path in pages.values():  # warm: templates compiled, indexes loaded
                assert client.get(path).status_code == 200, path
            times: dict[str, list[float]] = {name: [] for name in pages}
            for _ in range(args.runs):  # interleaved
                for name, path in pages.items():
                    t = time.perf_counter()
                    r = client.get(path)
                    times[name].append((time.perf_counter() - t) * 1000)
                    assert r.status_code == 200
        print(f"{'page':28} {'p50 ms':>8} {'p95 ms':>8}   ({args.runs} runs each, load "
              f"{os.getloadavg()[0]:.1f})")
        for name, values in times.items():
            values.sort()
            p95 = values[min(len(values) - 1, int(len(values) * 0.95))]
            print(f"{name:28} {statistics.median(values):8.1f} {p95:8.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
