"""Embedders: `local` (bundled all-MiniLM-L6-v2, numpy) and `openai` (any /v1/embeddings)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nixx.embed.base import Embedder

if TYPE_CHECKING:
    from nixx.config import Settings


def make_embedder(settings: Settings) -> Embedder:
    if settings.embed_provider == "local":
        from nixx.embed.local import LocalEmbedder

        return LocalEmbedder(batch_size=settings.embed_batch_size)
    from nixx.embed.openai import OpenAIEmbedder

    return OpenAIEmbedder(
        base_url=settings.embed_base_url,
        model=settings.embedding_model,
        api_key=settings.embed_api_key,
        batch_size=settings.embed_batch_size,
    )


__all__ = ["Embedder", "make_embedder"]
