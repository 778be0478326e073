"""Folders and git repositories: .gitignore honoured, binaries and big files skipped,
symlinks kept inside, one source per folder with per-file provenance."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nixx.errors import ValidationError
from nixx.ingest.pipeline import Ingestor
from nixx.ingest.walk import walk
from nixx.store.base import MemoryStore

from .makers import git, make_git_repo, make_pdf

GITIGNORE = """\
# build output and secrets
build/
*.log
.env
!keep.log
"""


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = make_git_repo(
        tmp_path / "project",
        {
            "README.md": "# Tidewatch\n\nTidewatch predicts ocean tides for harbour pilots.\n",
            "src/tides.py": (
                "def high_tide(moon_phase):\n"
                '    """Hours until the next high tide, from the moon\'s phase."""\n'
                "    return 12.42 * moon_phase\n"
            ),
            "docs/manual.pdf": make_pdf([["The harbour manual explains mooring procedures."]]),
            "docs/logo.png": b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + b"\x00" * 64,
            "keep.log": "this log is kept on purpose\n",
            "sub/.gitignore": "secret.txt\n",
            "sub/secret.txt": "ignored by the nested gitignore\n",
            "sub/public.txt": "a public note about buoys\n",
        },
        GITIGNORE,
    )
    # untracked and ignored files (not committed; a walker must skip them by the rules)
    (root / "build").mkdir()
    (root / "build" / "out.txt").write_text("generated output\n")
    (root / "debug.log").write_text("noise\n")
    (root / ".env").write_text("TOKEN=secret\n")
    return root


def test_walk_honours_gitignore_and_skips_git(repo: Path) -> None:
    result = walk(repo, max_file_bytes=1_000_000)
    rels = [p.relative_to(repo).as_posix() for p in result.files]
    assert rels == sorted(rels)
    assert "README.md" in rels and "src/tides.py" in rels and "keep.log" in rels
    assert "sub/public.txt" in rels and "docs/manual.pdf" in rels
    for gone in ("build/out.txt", "debug.log", ".env", "sub/secret.txt"):
        assert gone not in rels
    assert not any(r.startswith(".git/") for r in rels)
    assert result.is_git_repo


def test_repo_ingest_one_source_with_file_provenance(
    ingestor: Ingestor, store: MemoryStore, repo: Path
) -> None:
    result = ingestor.ingest_path(repo)
    source = result.source
    assert source.type == "repo" and source.name == "project"
    chunks = store.source_chunks(source.id)
    paths = {m.metadata["path"] for m in chunks}
    assert paths == {"README.md", "src/tides.py", "docs/manual.pdf", "keep.log", "sub/public.txt"}
    assert [s.path for s in result.skipped] == ["docs/logo.png"]
    assert "binary" in result.skipped[0].reason
    assert source.meta["skipped_count"] == 1
    pdf_chunk = next(m for m in chunks if m.metadata["path"] == "docs/manual.pdf")
    assert pdf_chunk.metadata["page"] == 1
    # found by meaning, and the hit says which file it came from
    vector = ingestor.embedder.embed(["forecasting tides from the phase of the moon"])[0]
    best = store.search_memories(vector, limit=1)[0]
    assert best.memory.metadata["path"] in ("src/tides.py", "README.md")


def test_reingest_unchanged_repo_is_a_noop(
    ingestor: Ingestor, store: MemoryStore, repo: Path, embedder
) -> None:
    first = ingestor.ingest_path(repo)
    embedded = len(embedder.texts)
    again = ingestor.ingest_path(repo)
    assert again.status == "unchanged"
    assert again.source.id == first.source.id
    assert len(embedder.texts) == embedded  # nothing embedded again
    assert len(store.list_sources()) == 1
    assert store.count_memories() == first.chunks


def test_changed_file_replaces_chunks_and_reuses_unchanged_vectors(
    ingestor: Ingestor, store: MemoryStore, repo: Path, embedder
) -> None:
    first = ingestor.ingest_path(repo)
    (repo / "sub" / "public.txt").write_text("a public note about lighthouses instead\n")
    git(repo, "commit", "-qam", "change")
    embedder.texts.clear()
    second = ingestor.ingest_path(repo)
    assert second.status == "replaced"
    assert second.source.id == first.source.id
    assert second.embedded == 1 and second.reused == second.chunks - 1
    assert len(embedder.texts) == 1 and "lighthouses" in embedder.texts[0]
    contents = [m.content for m in store.source_chunks(first.source.id)]
    assert any("lighthouses" in c for c in contents)
    assert not any("buoys" in c for c in contents)
    assert store.count_memories() == second.chunks


def test_size_limit_and_symlinks(
    make_settings, store: MemoryStore, embedder, tmp_path: Path
) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "small.md").write_text("# Small\n\nfits\n")
    (folder / "large.md").write_text("x " * 5000)
    outside = tmp_path / "outside-secret.txt"
    outside.write_text("must not be read through a symlink")
    os.symlink(outside, folder / "link.txt")
    os.symlink(folder / "small.md", folder / "inside-link.md")
    ingestor = Ingestor(store, embedder, make_settings(ingest_max_file_bytes=2000))
    result = ingestor.ingest_path(folder)
    reasons = {s.path: s.reason for s in result.skipped}
    assert "over the 2000-byte limit" in reasons["large.md"]
    assert "outside" in reasons["link.txt"]
    text = " ".join(m.content for m in store.source_chunks(result.source.id))
    assert "must not be read" not in text
    assert result.source.type == "document"


def test_folder_with_nothing_readable_stores_nothing(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    folder = tmp_path / "binaries"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"\x00\x01\x02")
    (folder / "b.pdf").write_bytes(b"not a pdf")
    with pytest.raises(ValidationError, match="nothing readable") as info:
        ingestor.ingest_path(folder)
    assert "b.pdf" in info.value.message
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValidationError, match="nothing readable"):
        ingestor.ingest_path(empty)
    assert store.list_sources() == [] and store.count_memories() == 0


def test_concurrent_ingests_of_one_folder_make_one_source(
    ingestor: Ingestor, store: MemoryStore, repo: Path
) -> None:
    import threading

    results, errors = [], []

    def run() -> None:
        try:
            results.append(ingestor.ingest_path(repo))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert len(store.list_sources()) == 1
    assert store.count_memories() == results[0].chunks
    assert {r.source.id for r in results} == {store.list_sources()[0].id}
