"""Per-model defaults of the embed package."""

from __future__ import annotations

import pytest

from nixx.embed import default_recall_threshold


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("all-MiniLM-L6-v2", 0.3),
        ("sentence-transformers/all-MiniLM-L6-v2", 0.3),
        ("mxbai-embed-large", 0.4),
        ("mxbai-embed-large:latest", 0.4),
        ("mixedbread-ai/mxbai-embed-large-v1", 0.4),
        ("some-unknown-model", 0.3),
    ],
)
def test_recall_threshold_per_model(model: str, expected: float) -> None:
    assert default_recall_threshold(model) == expected
