"""The reader registry: one module per format in this package, each defining ``READER``.

Adding a format is adding a file here with a module-level ``READER = Reader(...)``; the
registry finds it (modules are discovered on first use, not at import time). A reader
turns the bytes of a file or a fetched page into a `Document`, or raises
`ValidationError` when the bytes are not what the format says (a ``.pdf`` that is not a
PDF, a text file full of NUL bytes).

Lookup for a file: exact file name (``Makefile``), then extension (``.md``), then the
`text` reader when the bytes decode as text. Lookup for a web page: its media type.
"""

from __future__ import annotations

import importlib
import pkgutil
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import PurePath

from nixx.ingest.document import Document

ReadFn = Callable[[bytes, str], Document]


@dataclass(frozen=True)
class Reader:
    name: str
    read: ReadFn  # (data, display name) -> Document
    extensions: tuple[str, ...] = ()  # lower case, with the dot: ".md"
    filenames: tuple[str, ...] = ()  # exact names: "Makefile"
    media_types: tuple[str, ...] = ()  # for fetched pages: "text/html"
    fallback: bool = False  # used for files no other reader claims (when they are text)


_lock = threading.Lock()
_readers: list[Reader] | None = None


def readers() -> list[Reader]:
    """Every reader in this package, sorted by name."""
    global _readers
    with _lock:
        if _readers is None:
            found = []
            for info in pkgutil.iter_modules(__path__):
                module = importlib.import_module(f"{__name__}.{info.name}")
                reader = getattr(module, "READER", None)
                if isinstance(reader, Reader):
                    found.append(reader)
            _readers = sorted(found, key=lambda r: r.name)
        return _readers


def reader_for_path(path: str | PurePath) -> Reader | None:
    """The reader for a file name: by exact name, then extension; None when unclaimed."""
    p = PurePath(path)
    for reader in readers():
        if p.name in reader.filenames:
            return reader
    suffix = p.suffix.lower()
    if suffix:
        for reader in readers():
            if suffix in reader.extensions:
                return reader
    return None


def fallback_reader() -> Reader:
    return next(r for r in readers() if r.fallback)


def reader_for_media_type(media_type: str) -> Reader | None:
    media_type = media_type.split(";", 1)[0].strip().lower()
    for reader in readers():
        if media_type in reader.media_types:
            return reader
    return None


def supported_media_types() -> list[str]:
    return sorted({m for r in readers() for m in r.media_types})


__all__ = [
    "Reader",
    "fallback_reader",
    "reader_for_media_type",
    "reader_for_path",
    "readers",
    "supported_media_types",
]
