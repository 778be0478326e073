"""The display summary of an ingested source: written after the source is stored, by
`NixxService.summarise_sources` (the one writer the server, the web page and the CLI
share), never required."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from nixx.ingest.summary import DOCUMENT_SUMMARY_PROMPT
from nixx.llm.client import ChatClient
from nixx.memory.service import NixxService
from nixx.memory.sources import IngestSpec
from nixx.store.base import MemoryStore
from nixx.testing.fake_llm import FakeLLM, Reply


def _ingest(settings: Any, store: MemoryStore, embedder: Any, path: Path) -> tuple[Any, Any]:
    """One `NixxService.ingest` of `path` (as the CLI does: any path), with its summary."""

    async def run() -> tuple[Any, Any]:
        llm = ChatClient(settings.chat_base_url, timeout=5)
        service = NixxService(settings, store, embedder, llm)
        try:
            return await service.ingest(IngestSpec(path=str(path), confined=False))
        finally:
            await service.close()
            await llm.aclose()

    # in a thread of its own: Playwright's sync API (tests/web) leaves an event loop
    # running in the main thread for the rest of the session
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(asyncio.run, run()).result()


def test_the_service_writes_the_llm_summary(
    store: MemoryStore, embedder, settings, llm: FakeLLM, tmp_path: Path
) -> None:
    folder = tmp_path / "proj"
    folder.mkdir()
    (folder / "main.py").write_text("def main():\n    print('hello')\n")
    (folder / "README.md").write_text("# Proj\n\nA greeting tool.\n")
    llm.queue(Reply(content="  A tiny greeting tool with one entry point.  "))
    result, problem = _ingest(settings, store, embedder, folder)
    assert problem is None and result.summary_error is None
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
    again, problem = _ingest(settings, store, embedder, folder)
    assert again.status == "unchanged" and problem is None
    assert len(llm.chat_requests) == asked


def test_failing_summary_keeps_the_source(
    store: MemoryStore, embedder, settings, make_settings, tmp_path: Path
) -> None:
    path = tmp_path / "a.md"
    path.write_text("# A\n\nKeep me even without a summary.\n")
    down = make_settings(chat_base_url="http://127.0.0.1:9/v1", chat_model="m")
    result, problem = _ingest(down, store, embedder, path)
    assert "no LLM backend answers" in problem and result.summary_error == problem
    assert store.get_source(result.source.id).summary is None
    assert store.count_memories() == 1
    # the summary is still owed: an unchanged re-ingest with the backend back makes it
    result, problem = _ingest(settings, store, embedder, path)
    assert problem is None
    assert result.status == "unchanged" and result.source.summary is not None
    assert store.get_source(result.source.id).summary == result.source.summary


def test_a_document_longer_than_the_context_is_summarised_in_parts(
    store: MemoryStore, embedder, settings, llm: FakeLLM, tmp_path: Path
) -> None:
    """A 1,024-token model: the document's summary input (its first 6,000 characters) is
    split into parts that fit, each summarised, then combined — not cut."""
    from nixx.ingest.summary import COMBINE_NOTE, PART_PROMPT

    llm.props = {"default_generation_settings": {"n_ctx": 1024}, "total_slots": 1}
    llm.responder = lambda body: Reply(content=f"summary {len(llm.chat_requests)}")
    doc = tmp_path / "notes.md"
    doc.write_text("\n\n".join(f"Paragraph p{n}: " + "the garden needs water. " * 10
                               for n in range(24)))
    result, problem = _ingest(settings, store, embedder, doc)
    assert problem is None
    asked = llm.chat_requests
    part_head = PART_PROMPT.partition("{part}")[0]
    # (one slot: each part's prompt goes in slices first, one token asked of each —
    # `nixx.llm.slot`; the parts are the requests for an answer)
    parts = [b for b in asked if b["messages"][0]["content"].startswith(part_head)
             and b.get("max_tokens") != 1]
    assert len(parts) >= 2
    sent = "".join(b["messages"][1]["content"].removeprefix("Source: notes.md\n\n")
                   for b in parts)
    assert sent == result.summary_input  # all of it, in order, nothing cut
    # each request within the context: nixx's cautious 3 characters a token, at least 1,000
    assert all(len(b["messages"][1]["content"]) <= 1000 for b in asked)
    final = asked[-1]["messages"]
    assert final[0]["content"] == f"{DOCUMENT_SUMMARY_PROMPT}\n\n{COMBINE_NOTE}"
    assert result.source.summary == f"summary {len(asked)}"


def test_split_text_keeps_every_character() -> None:
    from nixx.ingest.summary import split_text

    text = "\n\n".join(f"para {n} " + "word " * (n * 7 % 40) for n in range(60))
    parts = split_text(text, 300)
    assert "".join(parts) == text
    assert all(len(p) <= 300 for p in parts)
    assert all(p.endswith((" ", "\n")) for p in parts[:-1])  # cut at breaks
    assert split_text("x" * 1000, 300) == ["x" * 300] * 3 + ["x" * 100]
