"""The embedder interface."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence

import numpy as np


class Embedder(ABC):
    """Turns texts into L2-normalised float32 vectors of a fixed dimension."""

    model: str
    dim: int

    @abstractmethod
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Return an array of shape (len(texts), dim), float32, each row unit length.
        Raises `BackendUnavailable`/`BackendError` (openai) or `ModelMissing` (local)."""

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries, in the same space as `embed()`'s (compared with
        them). An embedder may compute these more cheaply (the local one: int8 weights);
        by default they are `embed()`'s."""
        return self.embed(texts)

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (HTTP connections)."""
