"""Plain text: paragraphs split on blank lines. Also the reader for unclaimed files that
turn out to be text (README, LICENSE, ...)."""

from __future__ import annotations

from nixx.ingest.document import Document, Section, decode_text, require_text
from nixx.ingest.readers import Reader


def read(data: bytes, name: str) -> Document:
    text = decode_text(data, name)
    return require_text(Document("text", (Section(text, "text"),)), name)


READER = Reader(
    name="text",
    read=read,
    extensions=(".txt", ".text", ".log", ".rst", ".adoc", ".org", ".tex", ".csv", ".tsv"),
    filenames=("README", "LICENSE", "COPYING", "AUTHORS", "NOTICE", "CHANGELOG"),
    media_types=("text/plain", "text/csv"),
    fallback=True,
)
