"""Several processes writing one SQLite store at once: every row lands, ids are unique,
and nobody sees "database is locked"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from nixx.store import open_store

WRITER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    from nixx.store import open_store
    from nixx.store.records import NewChunk

    url, name, rows, go = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    while not __import__("os").path.exists(go):  # start together
        time.sleep(0.005)
    store = open_store(url)  # the first ones race to create the schema
    store.bind_embedder("m", 8)
    rng = np.random.default_rng(abs(hash(name)) % 2**32)
    for i in range(rows):
        store.append_buffer("user", f"{name} row {i}", "api", meta={"w": name, "i": i})
        if i % 100 == 0:
            vecs = rng.standard_normal((3, 8)).astype(np.float32)
            store.add_source(f"{name}-{i}", "document",
                             [NewChunk(f"{name} {i} {j}", v, {"chunk": j}) for j, v in enumerate(vecs)])
            store.search_memories(vecs[0], limit=2)
            store.search_buffer(f"{name} row")
    store.close()
    print("done", name)
    """
)


@pytest.mark.slow
def test_four_processes_write_500_rows_each(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    go = tmp_path / "go"
    writers = 4
    rows = 500
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, url, f"w{n}", str(rows), str(go)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(writers)
    ]
    go.touch()
    results = [p.communicate(timeout=240) for p in procs]
    for p, (out, err) in zip(procs, results, strict=True):
        assert p.returncode == 0, err
        assert "locked" not in err.lower()
        assert out.startswith("done")

    store = open_store(url)
    try:
        all_rows = store.get_buffer(1)
        assert len(all_rows) == writers * rows
        assert len({r.id for r in all_rows}) == writers * rows
        got = {(r.meta["w"], r.meta["i"]) for r in all_rows}
        assert got == {(f"w{n}", i) for n in range(writers) for i in range(rows)}
        assert store.buffer_stats() == {"rows": writers * rows, "max_id": writers * rows}
        assert len(store.list_sources()) == writers * (rows // 100)
        assert store.count_memories() == writers * (rows // 100) * 3
        assert store.search_buffer("w3 row 499")[0].row.meta["w"] == "w3"
    finally:
        store.close()
