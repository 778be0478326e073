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


@pytest.mark.parametrize(
    ("setting", "name", "dim"),
    [("", "all-MiniLM-L6-v2", 384), ("minilm", "all-MiniLM-L6-v2", 384),
     ("mpnet", "all-mpnet-base-v2", 768), ("sentence-transformers/all-mpnet-base-v2",
                                            "all-mpnet-base-v2", 768)],
)
def test_the_local_model_is_the_one_named(setting: str, name: str, dim: int) -> None:
    from nixx.config import load_settings
    from nixx.embed import make_embedder

    emb = make_embedder(load_settings(embed_provider="local", embed_model=setting))
    assert (emb.model, emb.dim) == (name, dim)  # named without loading anything


def test_an_unknown_local_model_is_refused_naming_the_choices() -> None:
    from nixx.config import load_settings
    from nixx.embed import make_embedder
    from nixx.errors import ConfigError

    with pytest.raises(ConfigError, match=r"minilm.*mpnet"):
        make_embedder(load_settings(embed_provider="local", embed_model="bge-small"))


def test_each_local_model_has_its_calibration() -> None:
    from nixx.embed import cosine_scale, default_row_floor, fusion_weights
    from nixx.memory.search import params_for

    assert cosine_scale("all-mpnet-base-v2") == (0.05, 0.55)
    assert default_row_floor("all-mpnet-base-v2") == 0.40
    assert default_recall_threshold("all-mpnet-base-v2") == 0.3
    assert fusion_weights("all-mpnet-base-v2") == (0.4, 0.6)
    assert fusion_weights("all-MiniLM-L6-v2") == (0.5, 0.5)
    mp, mini = params_for("all-mpnet-base-v2"), params_for("all-MiniLM-L6-v2")
    assert (mp.w_words, mp.w_vec, mp.cos_lo, mp.piece_floor) == (0.4, 0.6, 0.05, 0.40)
    assert (mini.w_words, mini.w_vec, mini.cos_lo, mini.cos_hi) == (0.5, 0.5, 0.15, 0.65)
