"""A BERT encoder in plain numpy (float32), enough for sentence-transformers' MiniLM models.

Layout choices that decide the speed (measured, see docs/performance.md "Embedders"):

- Token-packed: every per-token step (embeddings, the four linear layers, LayerNorm, GELU)
  runs on a 2-D ``(tokens, hidden)`` matrix holding only the real tokens of the batch, never
  padding. Only attention needs a padded ``(batch, heads, length, head_dim)`` view, and the
  caller sorts texts by length so that padding is small there too.
- Big 2-D GEMMs against pre-transposed, C-contiguous weights; Q, K and V in one fused matmul;
  the attention scale is folded into the query weights.
- float32 throughout: every constant is a Python float or a float32 array, never a
  ``np.float64`` scalar (which would promote whole arrays to float64).
- Exact (erf) GELU, with erf evaluated by a rational approximation accurate to float32
  rounding, and element-wise work done in place, in cache-sized blocks spread over a small
  thread pool (numpy releases the GIL inside ufuncs, BLAS already uses every core for GEMMs).
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_F32 = np.float32

# Element-wise work is split in blocks of this many rows (of 1536 floats: ~1.5 MB) and shared
# over this many threads.
_BLOCK_ROWS = 256


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_heads: int
    num_layers: int
    intermediate_size: int
    layer_norm_eps: float
    max_position_embeddings: int

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        raw = json.loads(path.read_text(encoding="utf-8"))
        return cls(
            hidden_size=int(raw["hidden_size"]),
            num_heads=int(raw["num_attention_heads"]),
            num_layers=int(raw["num_hidden_layers"]),
            intermediate_size=int(raw["intermediate_size"]),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
        )


@dataclass
class _Layer:
    w_qkv: np.ndarray  # (hidden, 3*hidden), query part pre-scaled by 1/sqrt(head_dim)
    b_qkv: np.ndarray
    w_o: np.ndarray  # (hidden, hidden)
    b_o: np.ndarray
    ln1_g: np.ndarray
    ln1_b: np.ndarray
    w_i: np.ndarray  # (hidden, intermediate)
    b_i: np.ndarray
    w_out: np.ndarray  # (intermediate, hidden)
    b_out: np.ndarray
    ln2_g: np.ndarray
    ln2_b: np.ndarray


def _c32(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a, dtype=_F32)


# erf(x) = x * P(x^2) / Q(x^2) on [-4, 4] (clamped outside, where erf is +-1 in float32).
# The coefficients are Eigen's / XLA's float erf (max error a few ulp in float32).
_ERF_ALPHA = (
    -2.72614225801306e-10,
    2.77068142495902e-08,
    -2.10102402082508e-06,
    -5.69250639462346e-05,
    -7.34990630326855e-04,
    -2.95459980854025e-03,
    -1.60960333262415e-02,
)
_ERF_BETA = (
    -1.45660718464996e-05,
    -2.13374055278905e-04,
    -1.68282697438203e-03,
    -7.37332916720468e-03,
    -1.42647390514189e-02,
)


def _gelu_block(x: np.ndarray, tmp: np.ndarray, tmp2: np.ndarray) -> None:
    """In place: x <- x * 0.5 * (1 + erf(x / sqrt(2))). `tmp`/`tmp2` are scratch, x's shape."""
    # z = clamp(x / sqrt(2), -4, 4); s = z*z
    np.multiply(x, 0.7071067811865476, out=tmp)
    np.clip(tmp, -4.0, 4.0, out=tmp)
    s = tmp2
    np.multiply(tmp, tmp, out=s)
    # p = z * P(s), q = Q(s)  (Horner, in place)
    p = np.full_like(s, _ERF_ALPHA[0])
    for c in _ERF_ALPHA[1:]:
        p *= s
        p += c
    p *= tmp
    q = np.full_like(s, _ERF_BETA[0])
    for c in _ERF_BETA[1:]:
        q *= s
        q += c
    # erf = p / q ; gelu = 0.5 * x * (1 + erf)
    p /= q
    p += 1.0
    p *= 0.5
    x *= p


def erf(x: np.ndarray) -> np.ndarray:
    """float32 erf (for tests and GELU): x * P(x^2) / Q(x^2), clamped to [-4, 4]."""
    z = np.clip(np.asarray(x, dtype=_F32), -4.0, 4.0)
    s = z * z
    p = np.full_like(s, _ERF_ALPHA[0])
    for c in _ERF_ALPHA[1:]:
        p *= s
        p += c
    p *= z
    q = np.full_like(s, _ERF_BETA[0])
    for c in _ERF_BETA[1:]:
        q *= s
        q += c
    return p / q


class BertEncoder:
    """The BERT encoder of a sentence-transformers model, run with numpy.

    `encode(sequences)` takes token-id arrays (with [CLS]/[SEP] already added) and returns
    their mean-pooled last hidden states, shape (n, hidden), float32, not normalised.
    It is safe to call from several threads at once (no state is mutated after __init__).
    """

    def __init__(self, weights: dict[str, np.ndarray], config: BertConfig) -> None:
        self.config = config
        h = config.hidden_size
        self.head_dim = h // config.num_heads
        w = weights
        p = "embeddings."
        self.word = _c32(w[p + "word_embeddings.weight"])
        self.pos = _c32(w[p + "position_embeddings.weight"])
        # token type is always 0 for single sentences: fold it into the position table
        self.pos = _c32(self.pos + w[p + "token_type_embeddings.weight"][0][None, :])
        self.emb_ln_g = _c32(w[p + "LayerNorm.weight"])
        self.emb_ln_b = _c32(w[p + "LayerNorm.bias"])
        scale = 1.0 / math.sqrt(self.head_dim)
        self.layers: list[_Layer] = []
        for i in range(config.num_layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            wq = w[a + "self.query.weight"].astype(np.float64) * scale
            bq = w[a + "self.query.bias"].astype(np.float64) * scale
            w_qkv = np.concatenate(
                [wq, w[a + "self.key.weight"], w[a + "self.value.weight"]], axis=0
            )
            b_qkv = np.concatenate([bq, w[a + "self.key.bias"], w[a + "self.value.bias"]])
            self.layers.append(
                _Layer(
                    w_qkv=_c32(w_qkv.T),
                    b_qkv=_c32(b_qkv),
                    w_o=_c32(w[a + "output.dense.weight"].T),
                    b_o=_c32(w[a + "output.dense.bias"]),
                    ln1_g=_c32(w[a + "output.LayerNorm.weight"]),
                    ln1_b=_c32(w[a + "output.LayerNorm.bias"]),
                    w_i=_c32(w[p + "intermediate.dense.weight"].T),
                    b_i=_c32(w[p + "intermediate.dense.bias"]),
                    w_out=_c32(w[p + "output.dense.weight"].T),
                    b_out=_c32(w[p + "output.dense.bias"]),
                    ln2_g=_c32(w[p + "output.LayerNorm.weight"]),
                    ln2_b=_c32(w[p + "output.LayerNorm.bias"]),
                )
            )
        workers = int(os.environ.get("NIXX_BERT_WORKERS", "1"))
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="nixx-bert")
        self._workers = workers

    @classmethod
    def from_dir(cls, model_dir: Path) -> BertEncoder:
        from safetensors.numpy import load_file

        config = BertConfig.from_file(model_dir / "config.json")
        return cls(load_file(str(model_dir / "model.safetensors")), config)

    # ---- element-wise helpers ------------------------------------------------------------
    def _blocks(self, n: int) -> list[slice]:
        if n <= _BLOCK_ROWS:
            return [slice(0, n)]
        return [slice(i, min(n, i + _BLOCK_ROWS)) for i in range(0, n, _BLOCK_ROWS)]

    def _parallel(self, fn, n: int) -> None:  # type: ignore[no-untyped-def]
        blocks = self._blocks(n)
        if len(blocks) == 1 or self._workers == 1:
            for b in blocks:
                fn(b)
            return
        list(self._pool.map(fn, blocks))

    def _gelu(self, x: np.ndarray) -> None:
        def run(b: slice) -> None:
            xb = x[b]
            _gelu_block(xb, np.empty_like(xb), np.empty_like(xb))

        self._parallel(run, x.shape[0])

    def _layer_norm(self, x: np.ndarray, g: np.ndarray, b: np.ndarray) -> None:
        """In place, row-wise LayerNorm of the 2-D float32 array x."""
        eps = self.config.layer_norm_eps
        mean = x.mean(axis=1, keepdims=True)
        x -= mean
        var = np.einsum("ij,ij->i", x, x)[:, None]
        var *= 1.0 / x.shape[1]
        var += eps
        np.sqrt(var, out=var)
        np.reciprocal(var, out=var)
        x *= var
        x *= g
        x += b

    # ---- forward ------------------------------------------------------------------------
    def encode(self, sequences: Sequence[np.ndarray]) -> np.ndarray:
        """Mean-pooled last hidden states of token-id sequences (one forward pass)."""
        n = len(sequences)
        hid = self.config.hidden_size
        if n == 0:
            return np.zeros((0, hid), dtype=_F32)
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=n)
        if lengths.min() < 1:
            raise ValueError("every sequence needs at least one token")
        if lengths.max() > self.config.max_position_embeddings:
            raise ValueError("sequence longer than the model's position table")
        max_len = int(lengths.max())
        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences])
        positions = np.concatenate([np.arange(k) for k in lengths])
        # packed row index of every real token inside the padded (n, max_len) grid
        ragged = bool((lengths != max_len).any())
        flat_index = None
        if ragged:
            mask = np.arange(max_len)[None, :] < lengths[:, None]  # (n, max_len)
            flat_index = np.flatnonzero(mask.reshape(-1))
            bias = np.where(mask, _F32(0.0), _F32(-1e30)).astype(_F32)[:, None, None, :]
        else:
            bias = None

        x = self.word[ids]
        x += self.pos[positions]
        self._layer_norm(x, self.emb_ln_g, self.emb_ln_b)

        heads, dh = self.config.num_heads, self.head_dim
        for layer in self.layers:
            qkv = x @ layer.w_qkv
            qkv += layer.b_qkv
            if ragged:
                grid = np.zeros((n * max_len, 3 * hid), dtype=_F32)
                grid[flat_index] = qkv
            else:
                grid = qkv
            # (3, n, H, L, dh), contiguous: numpy's matmul only reaches BLAS for stacks of
            # matrices with unit inner strides (a strided view falls back to a slow loop)
            q, k, v = np.ascontiguousarray(
                grid.reshape(n, max_len, 3, heads, dh).transpose(2, 0, 3, 1, 4)
            )
            scores = np.matmul(q, k.transpose(0, 1, 3, 2))  # (n, H, L, L)
            if bias is not None:
                scores += bias
            scores -= scores.max(axis=-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(axis=-1, keepdims=True)
            ctx = np.matmul(scores, v)  # (n, H, L, dh)
            ctx = ctx.transpose(0, 2, 1, 3).reshape(n * max_len, hid)
            if ragged:
                ctx = ctx[flat_index]
            attn = ctx @ layer.w_o
            attn += layer.b_o
            attn += x
            self._layer_norm(attn, layer.ln1_g, layer.ln1_b)
            x = attn
            inter = x @ layer.w_i
            inter += layer.b_i
            self._gelu(inter)
            out = inter @ layer.w_out
            out += layer.b_out
            out += x
            self._layer_norm(out, layer.ln2_g, layer.ln2_b)
            x = out

        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        pooled = np.add.reduceat(x, starts, axis=0)
        pooled /= lengths[:, None].astype(_F32)
        return pooled
