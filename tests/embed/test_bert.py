"""The numpy encoder's attention kernel at the edges of float32 (overflow, underflow)."""

from __future__ import annotations

import numpy as np
import pytest

from nixx.embed.bert import BertEncoder


def _textbook(q: np.ndarray, k: np.ndarray, v: np.ndarray) -> np.ndarray:
    s = (q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2))
    s -= s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return p @ v.astype(np.float64)


@pytest.mark.parametrize("offset", [0.0, 150.0, -150.0])
def test_softmax_context_matches_textbook_at_any_scale(offset: float) -> None:
    rng = np.random.default_rng(7)
    q = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    k = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    v = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    # a constant added to every score of a row: huge positive overflows exp() unshifted,
    # huge negative underflows it; softmax itself does not change
    q_shift = np.concatenate([q, np.ones((2, 3, 5, 1), np.float32)], axis=-1)
    k_shift = np.concatenate([k, np.full((2, 3, 5, 1), offset, np.float32)], axis=-1)
    got = BertEncoder._softmax_context(q_shift, k_shift, v, None, safe=False)
    if got is None:  # underflow detected: the caller then takes the safe path
        assert offset < 0
        got = BertEncoder._softmax_context(q_shift, k_shift, v, None, safe=True)
    assert got is not None and np.isfinite(got).all()
    np.testing.assert_allclose(got, _textbook(q, k, v), atol=1e-5)


def test_padding_bias_masks_keys() -> None:
    rng = np.random.default_rng(3)
    q, k, v = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(3))
    bias = np.array([0, 0, -1e30, -1e30], np.float32)[None, None, None, :]
    got = BertEncoder._softmax_context(q, k, v, bias, safe=False)
    want = _textbook(q[:, :, :, :], k[:, :, :2], v[:, :, :2])
    assert got is not None
    np.testing.assert_allclose(got, want, atol=1e-5)
