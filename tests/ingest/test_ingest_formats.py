"""Each reader on real files: what is stored, with which provenance; and files that are
not what their extension says are refused with nothing stored."""

from __future__ import annotations

from pathlib import Path

import pytest

from nixx.errors import NotFound, ValidationError
from nixx.ingest.pipeline import Ingestor
from nixx.ingest.readers import reader_for_media_type, reader_for_path, readers
from nixx.store.base import MemoryStore

from .makers import make_docx, make_pdf

LOREM = (
    "Retention of backups follows a simple rule: daily snapshots are kept for a week, "
    "weekly ones for a month, and monthly archives for a year. "
)


def search(ingestor: Ingestor, query: str, limit: int = 3):
    vector = ingestor.embedder.embed([query])[0]
    return ingestor.store.search_memories(vector, limit=limit)


def test_registry_has_a_reader_per_format() -> None:
    names = {r.name for r in readers()}
    assert {"text", "markdown", "code", "pdf", "html", "docx"} <= names
    assert reader_for_path("a/b/notes.MD").name == "markdown"
    assert reader_for_path("x.py").name == "code"
    assert reader_for_path("Makefile").name == "code"
    assert reader_for_path("paper.pdf").name == "pdf"
    assert reader_for_path("page.htm").name == "html"
    assert reader_for_path("letter.docx").name == "docx"
    assert reader_for_path("notes.txt").name == "text"
    assert reader_for_path("image.png") is None
    assert reader_for_media_type("text/html; charset=latin-1").name == "html"
    assert reader_for_media_type("application/json") is None


def test_markdown_file_keeps_heading_path_and_char_ranges(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    text = (
        "# Operations handbook\n\nHow we run things.\n\n"
        "## Backups\n\n" + LOREM * 6 + "\n\n"
        "## On-call\n\nThe pager rotates every Monday; escalate after fifteen minutes.\n"
    )
    path = tmp_path / "handbook.md"
    path.write_text(text)
    result = ingestor.ingest_path(path, tags="ops, handbook")
    assert result.status == "created"
    source = result.source
    assert source.type == "document" and source.name == "handbook.md"
    assert source.meta["path"] == str(path.resolve())
    assert source.meta["tags"] == ["ops", "handbook"]
    assert len(source.meta["content_hash"]) == 64
    chunks = store.source_chunks(source.id)
    assert len(chunks) == result.chunks >= 2
    for i, memory in enumerate(chunks):
        meta = memory.metadata
        assert meta["chunk"] == i and meta["total_chunks"] == len(chunks)
        assert meta["format"] == "markdown"
        # the char range points at the stored text in the original file
        assert memory.content in text[meta["start"] : meta["end"]]
    headings = {m.metadata.get("heading") for m in chunks}
    assert "Operations handbook > Backups" in headings
    # each chunk carries the heading path in force where its own text (after the overlap
    # carried from the previous chunk) begins
    marks = [
        (0, "Operations handbook"),
        (text.index("## Backups"), "Operations handbook > Backups"),
        (text.index("## On-call"), "Operations handbook > On-call"),
    ]
    core_start = 0
    for memory in chunks:
        expected = [h for pos, h in marks if pos <= core_start][-1]
        assert memory.metadata["heading"] == expected
        core_start = memory.metadata["end"]


def test_code_file_chunks_on_definitions(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    funcs = "\n\n".join(
        f'def handler_{i}(request):\n    """Handle request kind {i}."""\n'
        f"    value = request.get('k{i}')\n\n    return value * {i}\n"
        for i in range(30)
    )
    path = tmp_path / "handlers.py"
    path.write_text("import os\n\n\n" + funcs)
    result = ingestor.ingest_path(path)
    chunks = store.source_chunks(result.source.id)
    assert len(chunks) > 3
    for memory in chunks:
        assert memory.metadata["format"] == "code"
        # no function is cut in two: every def in a chunk has its return with it
        for i in range(30):
            if f"def handler_{i}(" in memory.content:
                assert f"return value * {i}" in memory.content
    assert any(m.metadata.get("heading", "").startswith("def handler_") for m in chunks)


def test_pdf_pages_are_kept_as_provenance(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    pdf = make_pdf(
        [
            ["Quarterly report", "Revenue grew in the northern region."],
            ["Appendix", "The volcano observatory recorded three small eruptions."],
        ],
        title="Q3 report",
    )
    path = tmp_path / "report.pdf"
    path.write_bytes(pdf)
    result = ingestor.ingest_path(path)
    assert result.source.meta["format"] == "pdf"
    assert result.source.meta["title"] == "Q3 report"
    chunks = store.source_chunks(result.source.id)
    pages = {m.metadata["page"]: m.content for m in chunks}
    assert set(pages) == {1, 2}
    assert "volcano" in pages[2]
    best = search(ingestor, "lava and eruptions on a mountain")[0]
    assert best.memory.metadata["page"] == 2


def test_docx_headings_paragraphs_and_tables(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    path = make_docx(
        tmp_path / "policy.docx",
        [
            ("h1", "Data policy"),
            ("p", "This policy describes how customer records are handled."),
            ("h2", "Deletion"),
            ("p", "Accounts closed by the customer are erased after thirty days."),
            ("li", "Backups expire on their own schedule."),
        ],
        title="Policy",
    )
    result = ingestor.ingest_path(path)
    assert result.source.meta["format"] == "docx"
    text = "\n".join(m.content for m in store.source_chunks(result.source.id))
    assert "# Data policy" in text and "## Deletion" in text
    assert "erased after thirty days" in text
    assert "| retention | ninety days |" in text
    assert "- Backups expire" in text


def test_html_file_main_text_without_boilerplate(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    html = (
        "<html><head><title>Sourdough</title></head><body>"
        "<nav><a href='/'>Home</a> | <a href='/shop'>Shop</a> | Cookie settings</nav>"
        "<article><h1>Sourdough starter</h1>"
        "<p>Feed the starter with equal weights of flour and water every twelve hours, "
        "and keep it at room temperature until it doubles in size.</p>"
        "<h2>Baking</h2><p>Bake the loaf in a preheated Dutch oven for forty minutes, "
        "lid on for the first twenty so that the crust stays soft while it rises.</p>"
        "</article><footer>Copyright 2024 Example Bakery. All rights reserved.</footer>"
        "</body></html>"
    )
    path = tmp_path / "bread.html"
    path.write_text(html)
    result = ingestor.ingest_path(path)
    assert result.source.meta["title"] == "Sourdough starter"  # trafilatura prefers the <h1>
    chunks = store.source_chunks(result.source.id)
    text = "\n".join(m.content for m in chunks)
    assert "equal weights of flour and water" in text
    assert "Cookie settings" not in text and "All rights reserved" not in text


def test_plain_text_and_unknown_extension(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path
) -> None:
    path = tmp_path / "NOTES.weird"
    path.write_text("A file with an unusual extension.\n\nStill plain text.\n")
    result = ingestor.ingest_path(path)
    assert result.source.meta["format"] == "text"
    assert store.count_memories() == 1


@pytest.mark.parametrize(
    ("name", "data", "message"),
    [
        ("fake.pdf", b"this is not a pdf at all", "not a PDF"),
        ("broken.pdf", b"%PDF-1.4\n garbage without objects", "PDF"),
        ("fake.docx", b"plain text pretending", "not a DOCX"),
        ("zip.docx", b"PK\x03\x04" + b"\x00" * 40, "DOCX"),
        ("bin.md", b"\x00\x01\x02binary\x00", "binary"),
        ("latin.txt", "caf\xe9 cr\xe8me".encode("latin-1"), "not UTF-8"),
        ("empty.txt", b"   \n\n  ", "no text"),
        ("scan.pdf", make_pdf([[]]), "no extractable text"),
    ],
)
def test_file_not_what_its_extension_says_stores_nothing(
    ingestor: Ingestor, store: MemoryStore, tmp_path: Path, name: str, data: bytes, message: str
) -> None:
    path = tmp_path / name
    path.write_bytes(data)
    with pytest.raises(ValidationError, match=message):
        ingestor.ingest_path(path)
    assert store.list_sources() == [] and store.count_memories() == 0


def test_missing_path(ingestor: Ingestor, store: MemoryStore, tmp_path: Path) -> None:
    with pytest.raises(NotFound, match="no such file or folder"):
        ingestor.ingest_path(tmp_path / "nope.md")
    assert store.list_sources() == []


def test_file_over_the_size_limit(
    make_settings, store: MemoryStore, embedder, tmp_path: Path
) -> None:
    ingestor = Ingestor(store, embedder, make_settings(ingest_max_file_bytes=100))
    path = tmp_path / "big.txt"
    path.write_text("word " * 100)
    with pytest.raises(ValidationError, match="over the 100-byte limit"):
        ingestor.ingest_path(path)
    assert store.list_sources() == []
