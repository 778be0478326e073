"""PDF via pypdf: one section per page, so every chunk knows its page number."""

from __future__ import annotations

import io
import logging

from nixx.errors import ValidationError
from nixx.ingest.document import Document, Section
from nixx.ingest.readers import Reader


def read(data: bytes, name: str) -> Document:
    if b"%PDF-" not in data[:1024]:
        raise ValidationError(f"{name} is not a PDF (no %PDF- header)")
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    logging.getLogger("pypdf").setLevel(logging.ERROR)
    try:
        pdf = PdfReader(io.BytesIO(data))
        if pdf.is_encrypted and not pdf.decrypt(""):
            raise ValidationError(f"{name} is an encrypted PDF; decrypt it first")
        sections = []
        for number, page in enumerate(pdf.pages, start=1):
            text = page.extract_text() or ""
            if text.strip():
                sections.append(Section(text, "text", {"page": number}))
        pages = len(pdf.pages)
        title = pdf.metadata.title if pdf.metadata else None
    except ValidationError:
        raise
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, OSError) as exc:
        raise ValidationError(f"{name} is not a readable PDF: {exc}") from None
    if not sections:
        raise ValidationError(
            f"{name} has no extractable text ({pages} page(s); a scanned PDF needs OCR first)"
        )
    return Document("pdf", tuple(sections), title=title or None, meta={"pages": pages})


READER = Reader(
    name="pdf",
    read=read,
    extensions=(".pdf",),
)
