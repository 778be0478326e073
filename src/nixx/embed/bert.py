"""A BERT encoder in plain numpy (float32), enough for sentence-transformers' MiniLM and
MPNet models.

MPNet (all-mpnet-base-v2) is BERT's encoder with three differences, all read from its
config and weights: no token-type embeddings; positions counted from `pad_token_id` + 1
(RoBERTa's convention: the first token is position 2); and a relative position bias added
to every layer's attention scores — T5's buckets (32: half for each direction, exact up to
8 tokens apart, logarithmic up to 128), one (buckets, heads) table shared by all layers
(`relative_buckets`, `BertEncoder.position_bias`).

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
  rounding, done in place in cache-sized blocks; softmax in place (its division applied to
  the small context matrix), attention in groups of sequences whose score tensors stay in
  cache; five work buffers per pass, reused by every layer.
- One pass is single-threaded apart from BLAS; `nixx.embed.local` runs several passes at
  once, one per core, each with single-threaded BLAS.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_F32 = np.float32

# GELU runs over blocks of this many elements (5 float32 work arrays of it stay in L2).
_GELU_BLOCK_ELEMENTS = 48 * 1536
# Attention runs over groups of sequences whose scores (n, heads, L, L) hold about this
# many floats (2 MB), so the softmax passes stay in cache.
_SCORES_BUDGET = 512 * 1024


@dataclass(frozen=True)
class BertConfig:
    hidden_size: int
    num_heads: int
    num_layers: int
    intermediate_size: int
    layer_norm_eps: float
    max_position_embeddings: int
    model_type: str = "bert"
    # the position of the first token (MPNet: pad_token_id + 1; BERT: 0)
    position_offset: int = 0
    # MPNet's relative attention bias: buckets (0: none) and the distance the last reaches
    relative_buckets: int = 0
    relative_max_distance: int = 128

    @classmethod
    def from_file(cls, path: Path) -> BertConfig:
        raw = json.loads(path.read_text(encoding="utf-8"))
        mpnet = raw.get("model_type") == "mpnet"
        return cls(
            hidden_size=int(raw["hidden_size"]),
            num_heads=int(raw["num_attention_heads"]),
            num_layers=int(raw["num_hidden_layers"]),
            intermediate_size=int(raw["intermediate_size"]),
            layer_norm_eps=float(raw.get("layer_norm_eps", 1e-12)),
            max_position_embeddings=int(raw.get("max_position_embeddings", 512)),
            model_type=str(raw.get("model_type", "bert")),
            position_offset=int(raw.get("pad_token_id", 1)) + 1 if mpnet else 0,
            relative_buckets=int(raw.get("relative_attention_num_buckets", 32)) if mpnet else 0,
        )

    @property
    def max_tokens(self) -> int:
        """The longest sequence the position table holds."""
        return self.max_position_embeddings - self.position_offset


def relative_buckets(length: int, num_buckets: int = 32, max_distance: int = 128) -> np.ndarray:
    """(length, length) int64: the bucket of key j's offset from query i (MPNet's
    `relative_position_bucket`, T5's): half the buckets for keys before the query, half
    after; offsets under a quarter of the buckets exact, then logarithmic up to
    `max_distance`. Computed in float32 as transformers computes it, so every bucket
    boundary falls where it falls there."""
    offsets = np.arange(length)[None, :] - np.arange(length)[:, None]
    n = -offsets
    half = num_buckets // 2
    buckets = (n < 0).astype(np.int64) * half
    n = np.abs(n)
    exact = half // 2
    # (offsets under `exact` are kept as they are: the log is not read there)
    far = np.log(np.maximum(n, 1).astype(_F32) / _F32(exact)) / _F32(math.log(max_distance / exact))
    far = exact + (far * _F32(half - exact)).astype(np.int64)  # truncated, as .to(long)
    far = np.minimum(far, half - 1)
    buckets += np.where(n < exact, n, far)
    return buckets


@dataclass
class _Group:
    """Consecutive packed sequences whose attention runs as one padded block."""

    start: int  # first packed token row
    stop: int
    count: int  # sequences
    length: int  # padded length (the longest in the group)
    index: np.ndarray | None  # real-token rows inside the padded (count*length) grid
    bias: np.ndarray | None  # (count, 1, 1, length): 0 for real tokens, -1e30 for padding


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


# erf(z) = z * P(z^2) / Q(z^2) on [-4, 4], clamped outside (where erf is +-1 in float32):
# the float erf of Eigen / XLA, accurate to a few float32 ulp.
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
# GELU(x) = x * (0.5 + 0.5 * erf(x / sqrt(2))). With u = x^2 (x clamped to +-4*sqrt(2)) the
# 1/sqrt(2) and the 0.5 are folded into the coefficients: GELU(x) = x * (0.5 + x * P'(u) / Q'(u)).
_GELU_CLAMP = 4.0 * math.sqrt(2.0)
_GELU_P = tuple(
    a * (0.5 / math.sqrt(2.0)) / 2.0 ** (len(_ERF_ALPHA) - 1 - i) for i, a in enumerate(_ERF_ALPHA)
)
_GELU_Q = tuple(b / 2.0 ** (len(_ERF_BETA) - 1 - i) for i, b in enumerate(_ERF_BETA))


def _horner(u: np.ndarray, coeffs: tuple[float, ...], out: np.ndarray) -> np.ndarray:
    np.multiply(u, coeffs[0], out=out)
    for c in coeffs[1:-1]:
        out += c
        out *= u
    out += coeffs[-1]
    return out


def gelu_(x: np.ndarray, xc: np.ndarray, u: np.ndarray, p: np.ndarray, q: np.ndarray) -> None:
    """Exact (erf) GELU of float32 `x`, in place; xc, u, p, q are scratch of x's shape."""
    np.clip(x, -_GELU_CLAMP, _GELU_CLAMP, out=xc)
    np.multiply(xc, xc, out=u)
    _horner(u, _GELU_P, p)
    p *= xc
    _horner(u, _GELU_Q, q)
    p /= q
    p += 0.5
    x *= p


def erf(x: np.ndarray) -> np.ndarray:
    """float32 erf, the approximation GELU uses (exposed for tests)."""
    z = np.clip(np.asarray(x, dtype=_F32), -4.0, 4.0)
    s = z * z
    p = _horner(s, _ERF_ALPHA, np.empty_like(s))
    p *= z
    return p / _horner(s, _ERF_BETA, np.empty_like(s))


class PositionBias:
    """MPNet's relative position bias: `bias(length)` is (1, heads, length, length)
    float32, added to the (already scaled) attention scores of sequences padded to
    `length` (padding sits after the real tokens, so their offsets are the padded grid's).
    One (buckets, heads) table serves every layer. A bucket depends only on the offset
    j - i, so every length's bias is the top-left corner of the longest one's, computed
    once (12.6 MB for MPNet's 512 positions) and sliced: a view, nothing cached per length."""

    def __init__(self, table: np.ndarray, config: BertConfig) -> None:
        self.table = table
        self.config = config
        self._full: np.ndarray | None = None

    def __call__(self, length: int) -> np.ndarray:
        full = self._full
        if full is None:
            cfg = self.config
            buckets = relative_buckets(cfg.max_tokens, cfg.relative_buckets,
                                       cfg.relative_max_distance)
            full = np.ascontiguousarray(self.table[buckets].transpose(2, 0, 1))[None]
            self._full = full  # a race computes the same array twice
        return full[:, :, :length, :length]


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
        if p + "token_type_embeddings.weight" in w:
            # token type is always 0 for single sentences: fold it into the position table
            self.pos = _c32(self.pos + w[p + "token_type_embeddings.weight"][0][None, :])
        self.emb_ln_g = _c32(w[p + "LayerNorm.weight"])
        self.emb_ln_b = _c32(w[p + "LayerNorm.bias"])
        # MPNet's relative position bias, shared by every layer; None for BERT
        self.position_bias: PositionBias | None = None
        if config.relative_buckets:
            self.position_bias = PositionBias(
                _c32(w["encoder.relative_attention_bias.weight"]), config
            )
        scale = 1.0 / math.sqrt(self.head_dim)
        # BERT's names, and MPNet's for the same weights
        mpnet = config.model_type == "mpnet"
        q, k, v, o, ln = (
            ("attn.q", "attn.k", "attn.v", "attn.o", "LayerNorm")
            if mpnet
            else ("self.query", "self.key", "self.value", "output.dense", "output.LayerNorm")
        )
        self.layers: list[_Layer] = []
        for i in range(config.num_layers):
            p = f"encoder.layer.{i}."
            a = p + "attention."
            wq = w[f"{a}{q}.weight"].astype(np.float64) * scale
            bq = w[f"{a}{q}.bias"].astype(np.float64) * scale
            w_qkv = np.concatenate([wq, w[f"{a}{k}.weight"], w[f"{a}{v}.weight"]], axis=0)
            b_qkv = np.concatenate([bq, w[f"{a}{k}.bias"], w[f"{a}{v}.bias"]])
            self.layers.append(
                _Layer(
                    w_qkv=_c32(w_qkv.T),
                    b_qkv=_c32(b_qkv),
                    w_o=_c32(w[f"{a}{o}.weight"].T),
                    b_o=_c32(w[f"{a}{o}.bias"]),
                    ln1_g=_c32(w[f"{a}{ln}.weight"]),
                    ln1_b=_c32(w[f"{a}{ln}.bias"]),
                    w_i=_c32(w[p + "intermediate.dense.weight"].T),
                    b_i=_c32(w[p + "intermediate.dense.bias"]),
                    w_out=_c32(w[p + "output.dense.weight"].T),
                    b_out=_c32(w[p + "output.dense.bias"]),
                    ln2_g=_c32(w[p + "output.LayerNorm.weight"]),
                    ln2_b=_c32(w[p + "output.LayerNorm.bias"]),
                )
            )

    @classmethod
    def from_dir(cls, model_dir: Path) -> BertEncoder:
        from safetensors.numpy import load_file

        config = BertConfig.from_file(model_dir / "config.json")
        return cls(load_file(str(model_dir / "model.safetensors")), config)

    # ---- element-wise helpers ------------------------------------------------------------
    @staticmethod
    def _gelu(x: np.ndarray) -> None:
        """In place, in blocks of rows that keep the five work arrays in cache. (Threads
        inside one pass were measured slower: OpenBLAS's worker threads spin between GEMMs
        and fight them. `nixx.embed.local` runs whole passes in parallel instead.)"""
        rows = x.shape[0]
        step = max(1, _GELU_BLOCK_ELEMENTS // x.shape[1])
        scratch = np.empty((4, min(rows, step), x.shape[1]), dtype=_F32)
        for i in range(0, rows, step):
            xb = x[i : i + step]
            m = xb.shape[0]
            gelu_(xb, scratch[0, :m], scratch[1, :m], scratch[2, :m], scratch[3, :m])

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
    def _attention_groups(self, lengths: np.ndarray) -> list[_Group]:
        """Split the sequences into consecutive groups whose score tensors
        (n, heads, L, L) stay around `_SCORES_BUDGET` floats, padded to the group's longest."""
        groups: list[_Group] = []
        heads = self.config.num_heads
        n = len(lengths)
        starts = np.zeros(n + 1, dtype=np.int64)
        np.cumsum(lengths, out=starts[1:])
        first = 0
        longest = 0
        for i in range(n + 1):
            if i < n:
                cand = max(longest, int(lengths[i]))
                if i == first or (i - first + 1) * heads * cand * cand <= _SCORES_BUDGET:
                    longest = cand
                    continue
            lens = lengths[first:i]
            g = _Group(int(starts[first]), int(starts[i]), i - first, longest, None, None)
            if (lens != longest).any():
                mask = np.arange(longest)[None, :] < lens[:, None]
                g.index = np.flatnonzero(mask.reshape(-1))
                g.bias = np.where(mask, _F32(0.0), _F32(-1e30)).astype(_F32)[:, None, None, :]
            groups.append(g)
            if i < n:
                first, longest = i, int(lengths[i])
        return groups

    def _attention(self, qkv: np.ndarray, groups: list[_Group], out: np.ndarray) -> None:
        """Self-attention of packed (tokens, 3*hidden) rows into packed `out` (tokens, hidden)."""
        heads, dh, hid = self.config.num_heads, self.head_dim, self.config.hidden_size
        for g in groups:
            rows = qkv[g.start : g.stop]
            if g.index is not None:
                grid = np.zeros((g.count * g.length, 3 * hid), dtype=_F32)
                grid[g.index] = rows
                rows = grid
            # (3, n, H, L, dh), contiguous: numpy's matmul only reaches BLAS for stacks of
            # matrices with unit inner strides (a strided view falls back to a slow loop)
            q, k, v = np.ascontiguousarray(
                rows.reshape(g.count, g.length, 3, heads, dh).transpose(2, 0, 3, 1, 4)
            )
            bias = g.bias
            if self.position_bias is not None:
                position = self.position_bias(g.length)
                bias = position if bias is None else bias + position  # (n, H, L, L)
            ctx = self._softmax_context(q, k, v, bias, safe=False)
            if ctx is None:  # a row's weights underflowed: redo it the textbook way
                ctx = self._softmax_context(q, k, v, bias, safe=True)
                assert ctx is not None
            ctx = ctx.transpose(0, 2, 1, 3)  # (n, L, H, dh)
            if g.index is None:
                out[g.start : g.stop].reshape(g.count, g.length, heads, dh)[...] = ctx
            else:
                out[g.start : g.stop] = ctx.reshape(g.count * g.length, hid)[g.index]

    @staticmethod
    def _softmax_context(
        q: np.ndarray, k: np.ndarray, v: np.ndarray, bias: np.ndarray | None, *, safe: bool
    ) -> np.ndarray | None:
        """softmax(q k^T + bias) v for (n, H, L, dh) blocks, as (n, H, L, dh).

        Softmax does not change when a row is shifted, and the shift only guards exp()
        against overflow: so each row is shifted by its max only when the block's global max
        (one cheap reduction) comes near float32's exp limit, or when `safe`. The row sums
        come from a matmul with ones and divide the small (L, dh) context rather than the
        (L, L) weights. Returns None when a row's weights underflowed (sum ~ 0) unshifted.
        """
        scores = np.matmul(q, k.transpose(0, 1, 3, 2))  # (n, H, L, L)
        if bias is not None:
            scores += bias
        if safe or float(scores.max()) > 60.0:
            scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        sums = np.matmul(scores, np.ones((scores.shape[-1], 1), dtype=_F32))  # (n, H, L, 1)
        if not safe and not float(sums.min()) > 1e-30:
            return None
        ctx = np.matmul(scores, v)
        ctx /= sums
        return ctx

    def ffn_ranges(self, sequences: Sequence[np.ndarray]) -> list[np.ndarray]:
        """For each layer, the largest |value| each channel of the feed-forward block's
        GELU output reaches on `sequences` (one at a time): what `nixx.embed.bert_onnx`
        smooths MPNet's int8 output projection with."""
        ranges = [np.zeros(self.config.intermediate_size, dtype=_F32) for _ in self.layers]

        def observe(layer: int, inter: np.ndarray) -> None:
            np.maximum(ranges[layer], np.abs(inter).max(axis=0), out=ranges[layer])

        for seq in sequences:
            self.encode([seq], observe=observe)
        return ranges

    def encode(
        self,
        sequences: Sequence[np.ndarray],
        observe: Callable[[int, np.ndarray], None] | None = None,
    ) -> np.ndarray:
        """Mean-pooled last hidden states of token-id sequences (one forward pass);
        `observe(layer, gelu_output)` sees each layer's feed-forward activations."""
        n = len(sequences)
        hid = self.config.hidden_size
        if n == 0:
            return np.zeros((0, hid), dtype=_F32)
        lengths = np.fromiter((len(s) for s in sequences), dtype=np.int64, count=n)
        if lengths.min() < 1:
            raise ValueError("every sequence needs at least one token")
        if lengths.max() > self.config.max_tokens:
            raise ValueError("sequence longer than the model's position table")
        ids = np.concatenate([np.asarray(s, dtype=np.int64) for s in sequences])
        offset = self.config.position_offset
        positions = np.concatenate([np.arange(offset, offset + k) for k in lengths])
        groups = self._attention_groups(lengths)

        # five work buffers per pass, reused by every layer (fresh 20 MB arrays per layer
        # would cost page faults on every call)
        tokens = len(ids)
        x = self.word[ids]
        x += self.pos[positions]
        self._layer_norm(x, self.emb_ln_g, self.emb_ln_b)
        qkv = np.empty((tokens, 3 * hid), dtype=_F32)
        ctx = np.empty((tokens, hid), dtype=_F32)
        attn = np.empty((tokens, hid), dtype=_F32)
        inter = np.empty((tokens, self.config.intermediate_size), dtype=_F32)
        for index, layer in enumerate(self.layers):
            np.matmul(x, layer.w_qkv, out=qkv)
            qkv += layer.b_qkv
            self._attention(qkv, groups, ctx)
            np.matmul(ctx, layer.w_o, out=attn)
            attn += layer.b_o
            attn += x
            self._layer_norm(attn, layer.ln1_g, layer.ln1_b)
            np.matmul(attn, layer.w_i, out=inter)
            inter += layer.b_i
            self._gelu(inter)
            if observe is not None:
                observe(index, inter)
            np.matmul(inter, layer.w_out, out=x)  # the layer's input is dead: reuse it
            x += layer.b_out
            x += attn
            self._layer_norm(x, layer.ln2_g, layer.ln2_b)

        starts = np.zeros(n, dtype=np.int64)
        np.cumsum(lengths[:-1], out=starts[1:])
        pooled = np.add.reduceat(x, starts, axis=0)
        pooled /= lengths[:, None].astype(_F32)
        return pooled
