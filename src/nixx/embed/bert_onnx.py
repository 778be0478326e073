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

MS = "com.microsoft"
#: MPNet's int8 graph: the first layers keep their feed-forward output projection float32,
#: the others are smoothed with this exponent (SmoothQuant's alpha; measured: 0.6 and 0.8
#: do worse)
FLOAT_FFN_OUT_LAYERS = 2
SMOOTHING = 0.7
#: What MPNet's activation ranges are measured on (`BertEncoder.ffn_ranges`): chat-like
#: texts of several kinds; fixed, so the int8 graph is the same in every process.
CALIBRATION_TEXTS = (
    "Hey! How was your week?",
    "The spare key to the boathouse is under the blue flowerpot.",
    "What did Tamara say about her new pup?",
    "We booked the dentist for Tuesday at four, then pizza after.",
    "def f(x): return x * 2",
    "Ünïcödé, 漢字 and emoji 🎉",
    "Can you remind me what we decided about the storage layer?",
    "I'm so tired today, work was crazy. My boss moved the deadline again!",
    "Night! Talk tomorrow.",
    "Which houseplant was I worried about last month?",
    "SELECT id, content FROM buffer WHERE role = 'user' ORDER BY id DESC LIMIT 10;",
    "My sister got a promotion at the hospital, she's head nurse now.",
    "Would Yasmin appreciate a stand mixer as a birthday present?",
    "The train to Lyon leaves at 7:42 from platform 3; I have the tickets (ref 88-X1).",
    "ok",
    "lol yes that's exactly what happened 😂",
)


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


class _Graph:
    """The nodes and initializers of one graph as it is built, and the steps that add
    them: `build_graph` calls them in order (embeddings, each layer, pooling)."""

    def __init__(
        self, encoder: BertEncoder, *, int8: bool, ffn_ranges: list[np.ndarray] | None = None
    ) -> None:
        self.encoder = encoder
        self.cfg = encoder.config
        self.int8 = int8
        self.initializers: list[Any] = []
        self.nodes: list[Any] = []
        # MPNet adds its relative position bias to every layer's scores (a graph input)
        self.position_bias = encoder.position_bias is not None
        # MPNet's feed-forward output projection: its input (the GELU's output) has
        # outlier channels that one per-pass activation scale cannot hold (cosine to the
        # float32 vector 0.94 with it in plain int8). So it is smoothed (`smoothing`): each
        # channel divided by s_j = a_j^0.7 / w_j^0.3 (a_j its largest |activation| on
        # calibration texts, w_j the largest |weight| of its row) and the weight row
        # multiplied by it, which moves the outliers into the weights; and the first two
        # layers, where smoothing is not enough, keep it float32. Cosine 0.990 on average
        # (min 0.98) at ~2.5x less time than float32 everywhere (docs/performance.md).
        self.ffn_ranges = ffn_ranges
        self.layer_index = 0

    # ---- plumbing ----------------------------------------------------------------------
    def const(self, value: Any, dtype: Any = np.float32) -> str:
        from onnx import numpy_helper

        name = f"c{len(self.initializers)}"
        array = np.array(value, dtype=dtype, order="C")
        self.initializers.append(numpy_helper.from_array(array, name))
        return name

    def op(self, kind: str, inputs: list[str], domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        out = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(kind, inputs, [out], domain=domain, **attrs))
        return out

    def quantized(self, a: str) -> tuple[str, str, str]:
        """`a` quantized per pass (uint8, its scale and zero point)."""
        from onnx import helper

        q = f"{a}_q"
        self.nodes.append(helper.make_node("DynamicQuantizeLinear", [a], [q, f"{q}_scale", f"{q}_zero"]))
        return q, f"{q}_scale", f"{q}_zero"

    # ---- the encoder's steps -------------------------------------------------------------
    def embeddings(self) -> str:
        """word (looked up outside) + position, then LayerNorm; also the int32 mask."""
        from onnx import TensorProto

        enc, i64 = self.encoder, np.int64
        shape = self.op("Shape", ["words"])
        length = self.op("Squeeze", [self.op("Slice", [shape, self.const([1], i64),
                                                       self.const([2], i64)]),
                                     self.const([0], i64)])
        first = self.cfg.position_offset  # MPNet counts from pad_token_id + 1
        positions = self.op("Range", [self.const(first, i64),
                                      self.op("Add", [length, self.const(first, i64)]),
                                      self.const(1, i64)])
        x = self.op("Add", ["words", self.op("Gather", [self.const(enc.pos), positions])])
        self.mask_index = self.op("Cast", ["mask"], to=TensorProto.INT32)
        return self.layer_norm(x, enc.emb_ln_g, enc.emb_ln_b)

    def layer_norm(self, x: str, g: np.ndarray, b: np.ndarray) -> str:
        return self.op("LayerNormalization", [x, self.const(g), self.const(b)], axis=-1,
                       epsilon=self.cfg.layer_norm_eps)

    def matmul(self, a: str, weight: np.ndarray, *, int8: bool = True) -> str:
        """a @ weight: float32, or (in the int8 graph, unless `int8` is False) int8 weights
        per output column with `a` quantized per pass (DynamicQuantizeMatMul)."""
        if not (self.int8 and int8):
            return self.op("MatMul", [a, self.const(weight)])
        q, scale = quantize_columns(weight)
        zero = self.const(np.zeros(q.shape[1]), np.int8)
        return self.op("DynamicQuantizeMatMul", [a, self.const(q, np.int8), self.const(scale), zero],
                       MS)

    def attention(self, a: str, w_qkv: np.ndarray, b_qkv: np.ndarray) -> str:
        """Self-attention of `a` (the query weights already carry 1/sqrt(head_dim): scale=1
        keeps it from applying twice). BERT: the fused Attention, or QAttention with int8
        weights. MPNet adds the position bias: the fused Attention takes it as its
        `attention_bias` input; QAttention takes none, so with int8 weights the projection
        is a DynamicQuantizeMatMul and the attention a MultiHeadAttention."""
        heads = self.cfg.num_heads
        bias = "position_bias" if self.position_bias else ""
        if not self.int8:
            inputs = [a, self.const(w_qkv), self.const(b_qkv), self.mask_index]
            if bias:
                inputs += ["", bias]  # no past state
            return self.op("Attention", inputs, MS, num_heads=heads, scale=1.0)
        if bias:
            qkv = self.op("Add", [self.matmul(a, w_qkv), self.const(b_qkv)])
            q, k, v = (f"{qkv}_{part}" for part in "qkv")
            from onnx import helper

            self.nodes.append(helper.make_node("Split", [qkv], [q, k, v], axis=2))
            return self.op("MultiHeadAttention", [q, k, v, "", self.mask_index, bias], MS,
                           num_heads=heads, scale=1.0)
        a_q, a_scale, a_zero = self.quantized(a)
        w_q, w_scale = quantize_columns(w_qkv)
        return self.op("QAttention", [a_q, self.const(w_q, np.int8), self.const(b_qkv), a_scale,
                                      self.const(w_scale), self.mask_index, a_zero,
                                      self.const(np.zeros(w_q.shape[1]), np.int8)], MS,
                       num_heads=heads, scale=1.0)

    def residual_norm(self, a: str, bias: np.ndarray, skip: str, g: np.ndarray,
                      b: np.ndarray) -> str:
        """LayerNorm(a + bias + skip): as plain Adds and LayerNormalization, measured ~10%
        faster per pass than the fused SkipLayerNormalization (onnxruntime 1.32, AVX2)."""
        return self.layer_norm(self.op("Add", [self.op("Add", [a, self.const(bias)]), skip]),
                               g, b)

    def layer(self, x: str, layer: Any) -> str:
        """One encoder layer: attention, then the feed-forward block (exact-erf BiasGelu)."""
        attn = self.attention(x, layer.w_qkv, layer.b_qkv)
        attn = self.residual_norm(self.matmul(attn, layer.w_o), layer.b_o, x,
                                  layer.ln1_g, layer.ln1_b)
        inter = self.op("BiasGelu", [self.matmul(attn, layer.w_i), self.const(layer.b_i)], MS)
        out = self.ffn_out(inter, layer.w_out)
        self.layer_index += 1
        return self.residual_norm(out, layer.b_out, attn, layer.ln2_g, layer.ln2_b)

    def ffn_out(self, inter: str, weight: np.ndarray) -> str:
        """The feed-forward output projection: as every matrix product for BERT; for
        MPNet's int8 graph float32 in the first `FLOAT_FFN_OUT_LAYERS` layers (or without
        calibration ranges), smoothed int8 after them (see `__init__`)."""
        if not self.position_bias or not self.int8:
            return self.matmul(inter, weight)
        if self.ffn_ranges is None or self.layer_index < FLOAT_FFN_OUT_LAYERS:
            return self.matmul(inter, weight, int8=False)
        act = np.maximum(self.ffn_ranges[self.layer_index], 1e-5)
        row = np.maximum(np.abs(weight).max(axis=1), 1e-5)
        scale = (act**SMOOTHING / row ** (1.0 - SMOOTHING)).astype(np.float32)
        smoothed = self.op("Mul", [inter, self.const((1.0 / scale).astype(np.float32))])
        return self.matmul(smoothed, np.ascontiguousarray(weight * scale[:, None], np.float32))

    def mean_pool(self, x: str) -> None:
        """`pooled`: the mean of `x` over the real tokens."""
        from onnx import helper

        i64 = np.int64
        masked = self.op("Mul", [x, self.op("Unsqueeze", ["mask", self.const([2], i64)])])
        total = self.op("ReduceSum", [masked, self.const([1], i64)], keepdims=0)
        count = self.op("ReduceSum", ["mask", self.const([1], i64)], keepdims=1)
        self.nodes.append(helper.make_node("Div", [total, count], ["pooled"]))

    def serialized(self) -> bytes:
        from onnx import TensorProto, helper

        hidden = self.cfg.hidden_size
        inputs = [
            helper.make_tensor_value_info("words", TensorProto.FLOAT, ["batch", "length", hidden]),
            helper.make_tensor_value_info("mask", TensorProto.FLOAT, ["batch", "length"]),
        ]
        if self.position_bias:
            inputs.append(helper.make_tensor_value_info(
                "position_bias", TensorProto.FLOAT, [1, self.cfg.num_heads, "length", "length"]))
        pooled = helper.make_tensor_value_info("pooled", TensorProto.FLOAT, ["batch", hidden])
        graph = helper.make_graph(self.nodes, f"{self.cfg.model_type}-mean-pooled", inputs,
                                  [pooled], self.initializers)
        model = helper.make_model(
            graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(MS, 1)]
        )
        model.ir_version = 8  # the oldest that opset 17 allows: any onnxruntime >= 1.14 loads it
        return bytes(model.SerializeToString())


def build_graph(
    encoder: BertEncoder, *, int8: bool = False, ffn_ranges: list[np.ndarray] | None = None
) -> bytes:
    """The serialized ONNX model of `encoder`: inputs words (batch, length, hidden) float32,
    the word embeddings of the tokens (looked up outside, so the table is held once for
    both graphs: `OnnxBertEncoder`), mask (batch, length) float32 (1 for a token, 0 for
    padding) and, for MPNet, position_bias (1, heads, length, length)
    (`BertEncoder.position_bias`); output the mean-pooled last hidden states (batch,
    hidden), not normalised.

    With `int8`, the weights of every matrix product (the attention's fused query/key/value
    projection included) are int8 per output column and the activations are quantized
    per pass (ONNX Runtime's dynamic quantization: `QAttention`, `DynamicQuantizeMatMul`);
    embeddings, biases and layer norms stay float32. ~1.7x faster for one short text, at
    cosine ~0.993 to the float32 vectors (docs/embedders.md). MPNet's feed-forward output
    projection is smoothed with `ffn_ranges` (`BertEncoder.ffn_ranges` of
    `CALIBRATION_TEXTS`), see `_Graph`."""
    graph = _Graph(encoder, int8=int8, ffn_ranges=ffn_ranges)
    x = graph.embeddings()
    for layer in encoder.layers:
        x = graph.layer(x, layer)
    graph.mean_pool(x)
    return graph.serialized()


class OnnxBertEncoder:
    """`BertEncoder.encode` run by an ONNX Runtime session (thread-safe: sessions allow
    concurrent `run` calls). Of the numpy weights it keeps the word-embedding table only
    (the same array for every encoder built from one `BertEncoder`)."""

    def __init__(
        self,
        encoder: BertEncoder,
        *,
        int8: bool = False,
        ffn_ranges: list[np.ndarray] | None = None,
    ) -> None:
        import onnxruntime as ort

        self.config = encoder.config
        self._word = encoder.word
        self._position_bias = encoder.position_bias  # MPNet's (a small table); BERT: None
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # warnings about unused initializers are not news
        self._session = ort.InferenceSession(
            build_graph(encoder, int8=int8, ffn_ranges=ffn_ranges), options,
            providers=["CPUExecutionProvider"],
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
        if longest > self.config.max_tokens:
            raise ValueError("sequence longer than the model's position table")
        ids = np.zeros((n, longest), dtype=np.int64)
        mask = np.zeros((n, longest), dtype=np.float32)
        for i, seq in enumerate(sequences):
            ids[i, : len(seq)] = seq
            mask[i, : len(seq)] = 1.0
        feeds = {"words": self._word[ids], "mask": mask}
        if self._position_bias is not None:
            feeds["position_bias"] = np.ascontiguousarray(self._position_bias(longest))
        (pooled,) = self._session.run(["pooled"], feeds)
        return np.asarray(pooled, dtype=np.float32)
