"""`nixx db init|migrate|status` and `nixx reindex`, run as real subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nixx.errors import EmbedderMismatch
from nixx.store import open_store, sqlite_migrations
from nixx.store.records import NewChunk

from .contract import random_units


def nixx(*args: str, env_extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {**os.environ, **(env_extra or {})}
    return subprocess.run(
        [sys.executable, "-m", "nixx.cli.nixx", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
    )


def test_db_init_status_migrate(nixx_home: Path):
    db = nixx_home / "nixx.db"
    missing = nixx("db", "status")
    assert missing.returncode == 1
    assert "nixx db init" in missing.stderr
    assert not db.exists()

    init = nixx("--json", "db", "init")
    assert init.returncode == 0, init.stderr
    body = json.loads(init.stdout)
    head = sqlite_migrations.head_version()
    assert body["created"] is True and body["schema_version"] == head
    assert body["applied"] == list(range(1, head + 1))
    assert db.exists()

    again = nixx("--json", "db", "migrate")
    assert json.loads(again.stdout)["applied"] == []

    store = open_store(f"sqlite:///{db}")
    store.bind_embedder("m", 4)
    store.append_buffer("user", "hello", "api")
    store.add_source("s", "document", [NewChunk("c", np.ones(4, np.float32), {})])
    store.close()
    status = nixx("--json", "db", "status")
    assert status.returncode == 0, status.stderr
    info = json.loads(status.stdout)
    assert info["backend"] == "sqlite" and info["pending"] == []
    assert info["embedder"] == {"model": "m", "dim": 4}
    assert info["counts"] == {"buffer": 1, "summaries": 0, "sources": 1, "memories": 1}
    human = nixx("db", "status")
    assert f"version {head} of" in human.stdout and "m (4 dimensions)" in human.stdout


def test_reindex_switches_the_store_to_the_configured_embedder(nixx_home: Path, tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'r.db'}"
    store = open_store(url)
    store.bind_embedder("old-model", 16)
    ids = [store.append_buffer("user", f"m{i}", "api").id for i in range(2)]
    texts = ["the cat sat on the mat", "quarterly revenue grew by ten percent"]
    store.add_summary(
        "a talk about pets",
        random_units(1, 1)[0],
        tags=[],
        entities={},
        start_buffer_id=ids[0],
        end_buffer_id=ids[1],
    )
    store.add_source(
        "doc",
        "document",
        [
            NewChunk(t, v, {"chunk": i})
            for i, (t, v) in enumerate(zip(texts, random_units(2, 2), strict=True))
        ],
    )
    with pytest.raises(EmbedderMismatch, match="nixx reindex"):
        store.bind_embedder("all-MiniLM-L6-v2", 384)
    store.close()

    run = nixx("reindex", "--db-url", url)
    assert run.returncode == 0, run.stderr
    # 1 summary + 2 memories + the 2 buffer rows' vectors
    assert "re-embedding 0/5" in run.stderr and "re-embedding 5/5" in run.stderr
    assert "re-embedded 5 vectors" in run.stdout

    from nixx.embed.local import LocalEmbedder

    embedder = LocalEmbedder()
    store = open_store(url)
    try:
        info = store.embedding_info()
        assert info is not None and (info.model, info.dim) == ("all-MiniLM-L6-v2", 384)
        store.bind_embedder("all-MiniLM-L6-v2", 384)  # now accepted
        hit = store.search_memories(embedder.embed_one("a kitten on a rug"), limit=1)[0]
        assert hit.memory.content == "the cat sat on the mat"
        [same] = store.search_memories(embedder.embed_one(texts[1]), limit=1)
        assert same.score == pytest.approx(1.0, abs=1e-4)
        [row] = store.search_buffer_vectors(embedder.embed_one("m0"), limit=1)
        assert row.row.id == ids[0] and row.score == pytest.approx(1.0, abs=1e-4)
    finally:
        store.close()
