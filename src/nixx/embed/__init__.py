"""Embedders: `local` (all-MiniLM-L6-v2 bundled, or all-mpnet-base-v2 installed once;
ONNX Runtime or numpy) and `openai` (any /v1/embeddings)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nixx.embed.base import Embedder

if TYPE_CHECKING:
    from nixx.config import Settings


def make_embedder(settings: Settings) -> Embedder:
    if settings.embed_provider == "local":
        from nixx.embed.local import LocalEmbedder

        engine = None if settings.embed_engine == "auto" else settings.embed_engine
        # sizes its forward passes by tokens
        return LocalEmbedder(
            engine=engine,
            query_weights=settings.embed_query_weights,
            model=settings.embed_model,  # empty: the default (all-MiniLM-L6-v2)
        )
    from nixx.embed.openai import OpenAIEmbedder

    return OpenAIEmbedder(
        base_url=settings.embed_base_url,
        model=settings.embedding_model,
        api_key=settings.embed_api_key,
        batch_size=settings.embed_batch_size,
    )


# Cosine at or above which a stored summary counts as "about" the user's message, per
# embedding model. Models spread cosines differently, so one number cannot serve all;
# measured with `bench/bench_embed.py --calibrate` (docs/embedders.md).
RECALL_THRESHOLDS = {"all-minilm-l6-v2": 0.3, "all-mpnet-base-v2": 0.3, "mxbai-embed-large": 0.4}
FALLBACK_RECALL_THRESHOLD = 0.3


def default_recall_threshold(model: str) -> float:
    """The calibrated recall threshold for an embedding model name (as in NIXX_EMBED_MODEL:
    a path or `org/` prefix and a `:tag` are ignored); 0.3 for models not calibrated."""
    name = model.rsplit("/", 1)[-1].split(":", 1)[0].lower()
    for key, value in RECALL_THRESHOLDS.items():
        if name.startswith(key):
            return value
    return FALLBACK_RECALL_THRESHOLD


# Cosine at or above which a buffer row (its vector is made from the row alone,
# nixx.memory.row_text) is recalled into a turn: measured on bench/bench_recall.py --floor
# (related vs unrelated questions; docs/performance.md). Models without a calibration use
# their summary threshold.
ROW_FLOORS = {"all-minilm-l6-v2": 0.40, "all-mpnet-base-v2": 0.40}


def default_row_floor(model: str) -> float:
    """The calibrated cosine floor for recalling a buffer row with an embedding model."""
    name = model.rsplit("/", 1)[-1].split(":", 1)[0].lower()
    for key, value in ROW_FLOORS.items():
        if name.startswith(key):
            return value
    return default_recall_threshold(model)


# The cosine scale of evidence per model (`nixx.memory.search`: fused search weighs a row's
# cosine on it): below the first number a cosine is no evidence (unrelated questions reach
# it), at the second it is decisive. Measured on bench/bench_recall.py --floor (both sets:
# the best row of an unrelated question, the evidence rows of related ones). Models without
# a calibration centre it on their row floor.
COSINE_SCALES = {"all-minilm-l6-v2": (0.15, 0.65), "all-mpnet-base-v2": (0.05, 0.55)}


def cosine_scale(model: str) -> tuple[float, float]:
    """(no evidence, decisive) cosines for an embedding model."""
    name = model.rsplit("/", 1)[-1].split(":", 1)[0].lower()
    for key, value in COSINE_SCALES.items():
        if name.startswith(key):
            return value
    floor = default_row_floor(model)
    return floor - 0.25, floor + 0.25


# The fusion's weights of (words, vector) evidence per model (`nixx.memory.search`): a
# stronger encoder earns more weight. Measured on bench/bench_recall.py (every set, two
# seeds each: all-mpnet-base-v2 at 0.4 / 0.6 was at or above 0.5 / 0.5 at R@10 on all six
# runs; docs/performance.md). Models without a calibration weigh both alike.
FUSION_WEIGHTS = {"all-mpnet-base-v2": (0.4, 0.6)}
DEFAULT_FUSION_WEIGHTS = (0.5, 0.5)


def fusion_weights(model: str) -> tuple[float, float]:
    """(words, vector) weights of the fused search for an embedding model."""
    name = model.rsplit("/", 1)[-1].split(":", 1)[0].lower()
    for key, value in FUSION_WEIGHTS.items():
        if name.startswith(key):
            return value
    return DEFAULT_FUSION_WEIGHTS


__all__ = [
    "Embedder",
    "cosine_scale",
    "default_recall_threshold",
    "default_row_floor",
    "fusion_weights",
    "make_embedder",
]
