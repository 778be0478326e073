"""What a reader produces: a `Document` made of `Section`s, ready to be chunked."""

from __future__ import annotations

import codecs
from dataclasses import dataclass, field
from typing import Any

from nixx.errors import ValidationError

# Bytes looked at to decide whether content is text (as git does: a NUL byte means binary).
SNIFF_BYTES = 8192


@dataclass(frozen=True)
class Section:
    """A run of text chunked as one piece: a whole file, or one page of a PDF.

    `kind` is the chunker's kind ("text", "markdown" or "code"); `location` goes into
    every chunk's metadata (e.g. ``{"page": 3}``).
    """

    text: str
    kind: str = "text"
    location: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Document:
    """The readable content of one file or page."""

    format: str  # the reader's name: "text", "markdown", "code", "pdf", "html", "docx"
    sections: tuple[Section, ...]
    title: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)  # e.g. {"language": "python"}

    @property
    def text(self) -> str:
        return "\n\n".join(s.text for s in self.sections)

    @property
    def chars(self) -> int:
        return sum(len(s.text) for s in self.sections)


def decode_text(data: bytes, name: str) -> str:
    """Decode `data` as text (UTF-8, or UTF-16/32 with a byte-order mark).

    Raises `ValidationError` when it is binary (NUL bytes) or not valid text.
    """
    for bom, encoding in (
        (codecs.BOM_UTF32_LE, "utf-32"),
        (codecs.BOM_UTF32_BE, "utf-32"),
        (codecs.BOM_UTF8, "utf-8-sig"),
        (codecs.BOM_UTF16_LE, "utf-16"),
        (codecs.BOM_UTF16_BE, "utf-16"),
    ):
        if data.startswith(bom):
            try:
                return data.decode(encoding)
            except UnicodeDecodeError:
                break
    if b"\x00" in data[:SNIFF_BYTES]:
        raise ValidationError(f"{name} is binary (it contains NUL bytes), not text")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValidationError(
            f"{name} is not UTF-8 text (undecodable byte at offset {exc.start}); "
            "convert it to UTF-8 first"
        ) from None


def require_text(document: Document, name: str) -> Document:
    """`document`, unless it holds no text at all (then `ValidationError`)."""
    if not any(s.text.strip() for s in document.sections):
        raise ValidationError(f"{name} contains no text to ingest")
    return document
