"""The display-summary hook: written after the source is stored, never required."""

from __future__ import annotations

from pathlib import Path

from nixx.errors import BackendUnavailable
from nixx.ingest.pipeline import Ingestor
from nixx.ingest.summary import DOCUMENT_SUMMARY_PROMPT, summarise_sync
from nixx.store.base import MemoryStore
from nixx.testing.fake_llm import FakeLLM, Reply


def test_summary_hook_writes_the_llm_summary(
    store: MemoryStore, embedder, settings, llm: FakeLLM, tmp_path: Path
) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "main.py").write_text("def main():\n    print('hello')\n")
    (folder / "README.md").write_text("# Proj\n\nA greeting tool.\n")
    llm.queue(Reply(content="  A tiny greeting tool with one entry point.  "))
    ingestor = Ingestor(
        store, embedder, settings, summarize=lambda n, t: summarise_sync(settings, [(n, t)])[0]
    )
    result = ingestor.ingest_path(folder)
    assert result.summary_error is None
    assert result.source.summary == "A tiny greeting tool with one entry point."
    assert store.get_source(result.source.id).summary == result.source.summary
    messages = llm.chat_requests[-1]["messages"]
    assert messages[0]["content"] == DOCUMENT_SUMMARY_PROMPT
    user = messages[1]["content"]
    assert user.startswith("Source: proj")
    assert "Files: README.md, main.py" in user
    assert user.index("## README.md") < user.index("## main.py")  # the README first
    # unchanged: the LLM is not asked again
    asked = len(llm.chat_requests)
    assert ingestor.ingest_path(folder).status == "unchanged"
    assert len(llm.chat_requests) == asked


def test_failing_summary_keeps_the_source(
    store: MemoryStore, embedder, settings, tmp_path: Path
) -> None:
    def down(name: str, text: str) -> str:
        raise BackendUnavailable("no LLM backend answers at http://127.0.0.1:9/v1")

    path = tmp_path / "a.md"
    path.write_text("# A\n\nKeep me even without a summary.\n")
    result = Ingestor(store, embedder, settings, summarize=down).ingest_path(path)
    assert "no LLM backend answers" in result.summary_error
    assert store.get_source(result.source.id).summary is None
    assert store.count_memories() == 1
    # the summary is still owed: an unchanged re-ingest with the backend back makes it
    result = Ingestor(store, embedder, settings, summarize=lambda n, t: "A note.").ingest_path(path)
    assert result.status == "unchanged" and result.source.summary == "A note."
    assert store.get_source(result.source.id).summary == "A note."
