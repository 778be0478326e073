"""What one buffer write costs in the SQLite store with `synchronous = FULL` against
`NORMAL` (both in WAL mode), interleaved in the same run on the same disk.

    .venv/bin/python bench/bench_commit.py [--writes 400] [--dir /tmp]

Each write is `append_buffer` (one BEGIN IMMEDIATE ... COMMIT with the FTS trigger), as a
turn does for its user row (before the first token) and its assistant row.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from nixx.store.sqlite import SQLiteStore


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--writes", type=int, default=400)
    ap.add_argument("--dir", default=None, help="folder for the two database files")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="nixx-commit-", dir=args.dir))
    stores = {}
    for mode in ("FULL", "NORMAL"):
        store = SQLiteStore(root / f"{mode.lower()}.db", synchronous=mode)
        store.migrate()
        stores[mode] = store
    times: dict[str, list[float]] = {mode: [] for mode in stores}
    text = "the spare key to the boathouse is hidden under the blue flowerpot " * 3
    for _ in range(20):  # warm up
        for store in stores.values():
            store.append_buffer("user", text)
    for _ in range(args.writes):
        for mode, store in stores.items():
            start = time.perf_counter()
            store.append_buffer("user", text)
            times[mode].append(time.perf_counter() - start)
    print(f"{args.writes} writes each, interleaved, files in {root}; load {os.getloadavg()}")
    print(f"{'synchronous':14}{'p50 ms':>10}{'p95 ms':>10}{'p99 ms':>10}")
    for mode, values in times.items():
        ms = np.array(values) * 1000
        print(
            f"{mode:14}{np.percentile(ms, 50):10.2f}{np.percentile(ms, 95):10.2f}"
            f"{np.percentile(ms, 99):10.2f}"
        )
    for store in stores.values():
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
