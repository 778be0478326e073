"""Ingest never reads secrets (`nixx.paths.SECRET_PATHS`: `.env`, `.nxs*` with a
session's `backend.json`, key files) and cannot be raced outside the folder: each file
is opened beneath it without following a symlink. Real SQLite stores, the real local
embedder; the swaps happen from the ingest's own progress events (no timing)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from nixx.errors import Forbidden
from nixx.ingest.pipeline import Ingestor, Progress
from nixx.store.base import MemoryStore

SECRETS = {
    ".env": "OPENAI_API_KEY=sk-secret-one\n",
    ".env.local": "TOKEN=sk-secret-two\n",
    ".nxs/sessions/s-1/backend.json": '{"api_key": "sk-secret-three"}\n',
    "deploy/server.pem": "-----BEGIN PRIVATE KEY-----sk-secret-four\n",
    "keys/id_ed25519": "sk-secret-five\n",
}


def _texts(store: MemoryStore, source_id: str) -> str:
    return "\n".join(m.content for m in store.source_chunks(source_id))


def test_a_folder_ingest_skips_secrets_and_lists_them(workspace: Path, ingestor: Ingestor,
                                                      store: MemoryStore) -> None:
    (workspace / "README.md").write_text("# Tides\nThe tide tables project.\n")
    for rel, text in SECRETS.items():
        (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
        (workspace / rel).write_text(text)
    result = ingestor.ingest_path(".", root=workspace)
    stored = _texts(store, result.source.id)
    assert "tide tables" in stored
    assert "sk-secret" not in stored and "sk-secret" not in result.summary_input
    skipped = {s.path: s.reason for s in result.skipped}
    for rel in (".env", ".env.local", ".nxs/", "deploy/server.pem", "keys/id_ed25519"):
        assert "a secret" in skipped[rel], skipped


@pytest.mark.parametrize("rel", [".env", ".nxs/sessions/s-1/backend.json", "keys/id_ed25519"])
def test_a_secret_named_alone_is_refused(workspace: Path, ingestor: Ingestor, rel: str) -> None:
    (workspace / rel).parent.mkdir(parents=True, exist_ok=True)
    (workspace / rel).write_text(SECRETS[rel])
    with pytest.raises(Forbidden, match="a secret"):
        ingestor.ingest_path(rel, root=workspace)


def test_a_hard_link_to_a_secret_is_neither_ingested_nor_summarised(
        workspace: Path, ingestor: Ingestor, store: MemoryStore) -> None:
    """A hard link to `.env` has a name no secret pattern matches: a folder ingest skips
    any multiply linked file (listed), naming one alone is refused, and nothing of it is
    stored or in the display-summary request; an ordinary file still is."""
    import os

    (workspace / "README.md").write_text("# Tides\nThe tide tables project.\n")
    (workspace / ".env").write_text(SECRETS[".env"])
    os.link(workspace / ".env", workspace / "notes.txt")
    (workspace / "docs").mkdir()
    os.link(workspace / ".env", workspace / "docs" / "settings.md")
    result = ingestor.ingest_path(".", root=workspace)
    stored = _texts(store, result.source.id)
    assert "tide tables" in stored
    assert "sk-secret" not in stored and "sk-secret" not in result.summary_input
    skipped = {s.path: s.reason for s in result.skipped}
    for rel in ("notes.txt", "docs/settings.md"):
        assert "is a hard link" in skipped[rel], skipped
    with pytest.raises(Forbidden, match="is a hard link"):
        ingestor.ingest_path("notes.txt", root=workspace)
    assert all("sk-secret" not in _texts(store, s.id) for s in store.list_sources())


def test_hard_links_are_read_when_the_user_allows_them(
        workspace: Path, store: MemoryStore, embedder, make_settings) -> None:
    import os

    (workspace / "a.txt").write_text("shared text under two names\n")
    os.link(workspace / "a.txt", workspace / "b.txt")
    ingestor = Ingestor(store, embedder, make_settings(allow_hard_links=True))
    result = ingestor.ingest_path("b.txt", root=workspace)
    assert "shared text" in _texts(store, result.source.id)


def _swap_on(event_path: str, folder: Path, outside: Path):
    """A progress callback that, when `event_path` has just been read, replaces `folder`
    with a symlink to `outside` (what a racing process does between listing and reading)."""
    def progress(event: Progress) -> None:
        if event.stage == "read" and event.path == event_path and folder.is_dir() \
                and not folder.is_symlink():
            shutil.move(str(folder), str(folder) + ".old")
            folder.symlink_to(outside, target_is_directory=True)

    return progress


def test_a_folder_swapped_for_a_symlink_during_a_folder_ingest_is_not_read_through(
        workspace: Path, tmp_path: Path, store: MemoryStore, embedder, settings) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("OUTSIDE the workspace: private\n")
    (workspace / "a.txt").write_text("first file in the workspace\n")
    (workspace / "b").mkdir()
    (workspace / "b" / "notes.txt").write_text("inside notes\n")
    ingestor = Ingestor(store, embedder, settings,
                        progress=_swap_on("a.txt", workspace / "b", outside))
    result = ingestor.ingest_path(".", root=workspace)
    assert "OUTSIDE" not in _texts(store, result.source.id)
    assert any(s.path == "b/notes.txt" and "symlink" in s.reason for s in result.skipped)


def test_a_folder_swapped_for_a_symlink_before_a_file_is_read_is_refused(
        workspace: Path, tmp_path: Path, store: MemoryStore, embedder, settings) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "notes.txt").write_text("OUTSIDE the workspace: private\n")
    (workspace / "b").mkdir()
    (workspace / "b" / "notes.txt").write_text("inside notes\n")
    target = str((workspace / "b" / "notes.txt").resolve())
    ingestor = Ingestor(store, embedder, settings,
                        progress=_swap_on(target, workspace / "b", outside))
    with pytest.raises(Forbidden, match="symlink"):
        ingestor.ingest_path("b/notes.txt", root=workspace)
    assert all("OUTSIDE" not in _texts(store, s.id) for s in store.list_sources())
