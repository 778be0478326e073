"""HTML: the main text extracted by trafilatura (boilerplate such as menus and footers
dropped), kept as Markdown so headings and code blocks guide the chunking."""

from __future__ import annotations

from nixx.errors import ValidationError
from nixx.ingest.document import Document, Section, decode_text
from nixx.ingest.readers import Reader


def read(data: bytes, name: str) -> Document:
    html = decode_text(data, name)  # refuses binary content
    import trafilatura

    text = trafilatura.extract(
        html,
        output_format="markdown",
        include_tables=True,
        include_comments=False,
        include_links=False,
        favor_recall=True,
    )
    if not text or not text.strip():
        # Pages too short for the main-text heuristics: fall back to all visible text.
        text = trafilatura.html2txt(html) or ""
    if not text.strip():
        raise ValidationError(f"{name} has no readable text (is it HTML?)")
    metadata = trafilatura.extract_metadata(html)
    title = metadata.title if metadata is not None else None
    return Document("html", (Section(text, "markdown"),), title=title or None)


READER = Reader(
    name="html",
    read=read,
    extensions=(".html", ".htm", ".xhtml"),
    media_types=("text/html", "application/xhtml+xml"),
)
