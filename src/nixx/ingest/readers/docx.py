"""Word documents via python-docx: paragraphs and tables in document order, heading
styles turned into Markdown headings so chunks carry their heading path."""

from __future__ import annotations

import io
import re
import zipfile

from nixx.errors import ValidationError
from nixx.ingest.document import Document, Section
from nixx.ingest.readers import Reader

_HEADING = re.compile(r"^(?:Heading (\d)|Title)$")


def read(data: bytes, name: str) -> Document:
    if not data.startswith(b"PK\x03\x04"):
        raise ValidationError(f"{name} is not a DOCX file (not a ZIP container)")
    import docx
    from docx.opc.exceptions import PackageNotFoundError
    from docx.table import Table

    try:
        document = docx.Document(io.BytesIO(data))
        lines: list[str] = []
        for block in document.iter_inner_content():
            if isinstance(block, Table):
                for row in block.rows:
                    cells = [c.text.strip().replace("\n", " ") for c in row.cells]
                    lines.append("| " + " | ".join(cells) + " |")
                lines.append("")
                continue
            text = block.text.strip()
            if not text:
                continue
            style = block.style.name if block.style is not None else ""
            match = _HEADING.match(style or "")
            if match:
                level = int(match.group(1) or 1)
                lines.append(f"{'#' * min(level, 6)} {text}\n")
            elif style.startswith("List"):
                lines.append(f"- {text}")
            else:
                lines.append(text + "\n")
        title = document.core_properties.title
    except (PackageNotFoundError, zipfile.BadZipFile, KeyError, ValueError) as exc:
        raise ValidationError(f"{name} is not a readable DOCX file: {exc}") from None
    text = "\n".join(lines)
    if not text.strip():
        raise ValidationError(f"{name} contains no text to ingest")
    return Document("docx", (Section(text, "markdown"),), title=title or None)


READER = Reader(
    name="docx",
    read=read,
    extensions=(".docx",),
)
