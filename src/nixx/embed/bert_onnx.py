"""The same BERT encoder as `nixx.embed.bert`, run by ONNX Runtime: the local embedder's
default engine when `onnxruntime` is installed.

Why a second engine: one short text (a query, a chat message) is a forward pass of a few
tokens, where every matrix product is (tokens x 384) @ (384 x 1536): OpenBLAS's GEMM
is slow at that shape (measured: 18 such products with 7 rows take ~6x as long as with
1 row), while ONNX Runtime's MLAS stays near the cost of streaming the weights. One query
embeds ~2x faster; large batches run at the same speed as the numpy encoder
(bench/bench_embed.py --engines, docs/performance.md "Embedders").

The graph is built in memory from the weights `BertEncoder` has already prepared (query,
key and value fused, the attention scale folded into the query weights), with ONNX
Runtime's fused BERT operators (`com.microsoft` Attention and BiasGelu: exact erf GELU;
the residual sums as plain Adds before LayerNormalization), so both engines compute the
same function: vectors agree to
cosine 0.9999999 and match the sentence-transformers reference (tests/embed). Sequences
are padded to the longest of their pass and masked; the caller sorts texts by length so
padding stays small. The session runs single-threaded (`intra_op_num_threads=1`): the
local embedder runs whole passes in parallel threads instead, and a one-thread session
never spins waiting for a core a busy machine does not give it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from nixx.embed.bert import BertEncoder

_INPUTS = ("words", "mask")


def available() -> bool:
    """Whether onnxruntime and onnx can be imported (the engine's two dependencies), and
    can be safely: importing onnxruntime after usearch's extension crashes the process
    (`nixx.store.vector_index.usearch_index` imports them in the safe order), so a process
    that loaded usearch first keeps the numpy engine."""
    import importlib.util
    import sys

    if "onnxruntime" not in sys.modules and "usearch.compiled" in sys.modules:
        return False
    return all(importlib.util.find_spec(m) is not None for m in ("onnxruntime", "onnx"))


def quantize_columns(weight: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 weights, float32 scale per column): symmetric, per output column, so
    ``q[:, j] * scale[j]`` is the column to within half a step."""
    scale = np.abs(weight).max(axis=0) / 127.0
    scale[scale == 0] = 1.0
    q = np.clip(np.rint(weight / scale), -127, 127).astype(np.int8)
    return q, scale.astype(np.float32)


def build_graph(encoder: BertEncoder, *, int8: bool = False) -> bytes:
    """The serialized ONNX model of `encoder`: inputs words (batch, length, hidden) float32,
    the word embeddings of the tokens (looked up outside, so the table's 47 MB are held
    once for both graphs: `OnnxBertEncoder`), and mask (batch, length) float32 (1 for a
    token, 0 for padding); output the mean-pooled last hidden states (batch, hidden), not
    normalised.

    With `int8`, the weights of every matrix product (the attention's fused query/key/value
    projection included) are int8 per output column and the activations are quantized
    per pass (ONNX Runtime's dynamic quantization: `QAttention`, `DynamicQuantizeMatMul`);
    embeddings, biases and layer norms stay float32. ~1.7x faster for one short text, at
    cosine ~0.993 to the float32 vectors (docs/embedders.md)."""
    from onnx import TensorProto, helper, numpy_helper

    cfg = encoder.config
    initializers: list[Any] = []
    nodes: list[Any] = []

    def const(value: Any, dtype: Any = np.float32) -> str:
        name = f"c{len(initializers)}"
        array = np.array(value, dtype=dtype, order="C")
        initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(kind: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        out = f"t{len(nodes)}"
        nodes.append(helper.make_node(kind, inputs, [out], domain=domain, **attrs))
        return out

    ms = "com.microsoft"
    eps = cfg.layer_norm_eps
    # embeddings: word + position (token type 0 is folded into the position table)
    length = op(
        "Squeeze",
        [op("Slice", [op("Shape", ["words"]), const([1], np.int64), const([2], np.int64)]),
         const([0], np.int64)],
    )
    positions = op("Range", [const(0, np.int64), length, const(1, np.int64)])
    x = op("Add", ["words", op("Gather", [const(encoder.pos), positions])])
    x = op("LayerNormalization", [x, const(encoder.emb_ln_g), const(encoder.emb_ln_b)],
           axis=-1, epsilon=eps)
    mask_index = op("Cast", ["mask"], to=TensorProto.INT32)

    def matmul(a: str, weight: np.ndarray) -> str:
        if not int8:
            return op("MatMul", [a, const(weight)])
        q, scale = quantize_columns(weight)
        zero = const(np.zeros(q.shape[1]), np.int8)
        return op("DynamicQuantizeMatMul", [a, const(q, np.int8), const(scale), zero], ms)

    def attention(a: str, w_qkv: np.ndarray, b_qkv: np.ndarray) -> str:
        # the query weights already carry 1/sqrt(head_dim): scale=1 keeps it from applying twice
        if not int8:
            return op("Attention", [a, const(w_qkv), const(b_qkv), mask_index], ms,
                      num_heads=cfg.num_heads, scale=1.0)
        q, scale = quantize_columns(w_qkv)
        a_q = f"{a}_q"
        nodes.append(helper.make_node(
            "DynamicQuantizeLinear", [a], [a_q, f"{a_q}_scale", f"{a_q}_zero"]))
        return op("QAttention", [a_q, const(q, np.int8), const(b_qkv), f"{a_q}_scale",
                                 const(scale), mask_index, f"{a_q}_zero",
                                 const(np.zeros(q.shape[1]), np.int8)], ms,
                  num_heads=cfg.num_heads, scale=1.0)

    def residual_norm(a: str, bias: np.ndarray, skip: str, g: np.ndarray, b: np.ndarray) -> str:
        # LayerNorm(a + bias + skip): as plain Adds and LayerNormalization, measured ~10%
        # faster per pass than the fused SkipLayerNormalization (onnxruntime 1.32, AVX2)
        summed = op("Add", [op("Add", [a, const(bias)]), skip])
        return op("LayerNormalization", [summed, const(g), const(b)], axis=-1, epsilon=eps)

    for layer in encoder.layers:
        attn = attention(x, layer.w_qkv, layer.b_qkv)
        attn = residual_norm(matmul(attn, layer.w_o), layer.b_o, x, layer.ln1_g, layer.ln1_b)
        inter = op("BiasGelu", [matmul(attn, layer.w_i), const(layer.b_i)], ms)
        x = residual_norm(matmul(inter, layer.w_out), layer.b_out, attn, layer.ln2_g, layer.ln2_b)
    # mean over the real tokens
    masked = op("Mul", [x, op("Unsqueeze", ["mask", const([2], np.int64)])])
    total = op("ReduceSum", [masked, const([1], np.int64)], keepdims=0)
    count = op("ReduceSum", ["mask", const([1], np.int64)], keepdims=1)
    nodes.append(helper.make_node("Div", [total, count], ["pooled"]))
    graph = helper.make_graph(
        nodes,
        "bert-mean-pooled",
        [
            helper.make_tensor_value_info(
                "words", TensorProto.FLOAT, ["batch", "length", cfg.hidden_size]
            ),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
        ],
        [helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", cfg.hidden_size])],
        initializers,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(ms, 1)]
    )
    model.ir_version = 8  # the oldest that opset 17 allows: any onnxruntime >= 1.14 loads it
    return bytes(model.SerializeToString())


class OnnxBertEncoder:
    """`BertEncoder.encode` run by an ONNX Runtime session (thread-safe: sessions allow
    concurrent `run` calls). Of the numpy weights it keeps the word-embedding table only
    (the same array for every encoder built from one `BertEncoder`)."""

    def __init__(self, encoder: BertEncoder, *, int8: bool = False) -> None:
        import onnxruntime as ort

        self.config = encoder.config
        self._word = encoder.word
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initializers are not news
        self._session = ort.InferenceSession(
            build_graph(encoder, int8=int8), options, providers=["CPUExecutionProvider"]
        )

    def encode(self, sequences: Sequence[np.ndarray]) -> np.ndarray:
        """Mean-pooled last hidden states of token-id sequences (one forward pass)."""
        n = len(sequences)
        if n == 0:
            return np.zeros((0, self.config.hidden_size), dtype=np.float32)
        lengths = [len(s) for s in sequences]
        if min(lengths) < 1:
            raise ValueError("every sequence needs at least one token")
        longest = max(lengths)
        if longest > self.config.max_position_embeddings:
            raise ValueError("sequence longer than the model's position table")
        ids = np.zeros((n, longest), dtype=np.int64)
        mask = np.zeros((n, longest), dtype=np.float32)
        for i, seq in enumerate(sequences):
            ids[i, : len(seq)] = seq
            mask[i, : len(seq)] = 1.0
        words = self._word[ids]
        (pooled,) = self._session.run(["pooled"], dict(zip(_INPUTS, (words, mask), strict=True)))
        return np.asarray(pooled, dtype=np.float32)
