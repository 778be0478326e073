"""Markdown: chunked along its headings, paragraphs and fenced code blocks. The first
level-1 heading (or front-matter ``title:``) names the document."""

from __future__ import annotations

import re

from nixx.ingest.document import Document, Section, decode_text, require_text
from nixx.ingest.readers import Reader

_H1 = re.compile(r"^ {0,3}#[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_FRONT_TITLE = re.compile(r"^title:[ \t]*[\"']?(.+?)[\"']?[ \t]*$", re.MULTILINE)


def title_of(text: str) -> str | None:
    if text.startswith("---\n"):
        end = text.find("\n---", 3)
        match = _FRONT_TITLE.search(text, 4, end) if end > 0 else None
        if match:
            return match.group(1).strip()
    match = _H1.search(text)
    return match.group(1).strip() if match else None


def read(data: bytes, name: str) -> Document:
    text = decode_text(data, name)
    title = title_of(text)
    return require_text(Document("markdown", (Section(text, "markdown"),), title=title), name)


READER = Reader(
    name="markdown",
    read=read,
    extensions=(".md", ".markdown", ".mdown", ".mkd", ".mdx"),
    media_types=("text/markdown", "text/x-markdown"),
)
