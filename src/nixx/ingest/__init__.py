"""Ingest: files, folders, git repositories, web pages and text into semantic memory.

    from nixx.ingest import Ingestor
    result = Ingestor(store, embedder, settings).ingest_path("~/notes")

Modules: `readers` (one per format, a registry), `walk` (folders, .gitignore), `fetch`
(safe URL fetching), `pipeline` (read → chunk → embed → store in one transaction),
`summary` (the LLM display summary). See docs/ingest.md.
"""

from __future__ import annotations

from typing import Any

__all__ = ["IngestResult", "Ingestor", "Progress"]


def __getattr__(name: str) -> Any:  # lazy: importing a reader must not load the pipeline
    if name in __all__:
        from nixx.ingest import pipeline

        return getattr(pipeline, name)
    raise AttributeError(name)
