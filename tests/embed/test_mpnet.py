"""all-mpnet-base-v2, the stronger local encoder: both engines against an independent
textbook forward pass (float64, padded, MPNet as transformers writes it), against each
other, paraphrases nearer than unrelated sentences, int8 queries, and the pinned sha256
refusing a changed file. Needs the model assembled (`nixx embedder install mpnet`, which
`make setup` runs); skipped only when it is not there."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from nixx.embed import models
from nixx.embed.bert import relative_buckets
from nixx.embed.install import verify_files
from nixx.embed.local import ENGINES, LocalEmbedder
from nixx.errors import ModelCorrupt, ModelMissing

try:
    MODEL_DIR = models.model_dir(models.MPNET)
except ModelMissing:  # pragma: no cover - CI installs it (make setup)
    pytest.skip("all-mpnet-base-v2 is not installed: nixx embedder install mpnet",
                allow_module_level=True)

TEXTS = [
    "A man is eating food.",
    "A man is eating a piece of bread.",
    "The girl is carrying a baby.",
    "A man is riding a horse.",
    "A woman is playing violin.",
    "Two men pushed carts through the woods.",
    "A man is riding a white horse on an enclosed ground.",
    "A monkey is playing drums.",
    "Someone in a gorilla costume is playing a set of drums.",
    "",
    "Ünïcödé, 漢字 and emoji 🎉 — zero\u200bwidth",
    "def f(x):\n    return x * 2  # code",
    " ".join(f"word{i}" for i in range(500)),  # past 384 tokens: truncated
]


@pytest.fixture(scope="module", params=ENGINES)
def embedder(request: pytest.FixtureRequest) -> LocalEmbedder:
    return LocalEmbedder(engine=request.param, model="mpnet")


# ---- an independent forward pass --------------------------------------------------------
def _reference_buckets(length: int) -> np.ndarray:
    """transformers' MPNet `relative_position_bucket`, written out element by element."""
    out = np.zeros((length, length), dtype=np.int64)
    for i in range(length):
        for j in range(length):
            n = -(j - i)
            ret = 16 if n < 0 else 0
            n = abs(n)
            if n < 8:
                ret += n
            else:
                large = np.float32(np.log(np.float32(n) / np.float32(8)))
                large = np.float32(large / np.float32(math.log(128 / 8))) * np.float32(8)
                ret += min(8 + int(large), 15)
            out[i, j] = ret
    return out


def _textbook(weights: dict[str, np.ndarray], ids: list[list[int]]) -> np.ndarray:
    """MPNetModel + mean pooling + normalise, in float64 on a padded batch, as the
    transformers source reads (positions from the ids, pad = 1; q/sqrt(d) . k + bias)."""
    w = {k: v.astype(np.float64) for k, v in weights.items()}
    n, length = len(ids), max(len(x) for x in ids)
    tok = np.ones((n, length), dtype=np.int64)
    for r, x in enumerate(ids):
        tok[r, : len(x)] = x
    real = tok != 1
    pos = np.cumsum(real, axis=1) * real + 1

    def ln(x: np.ndarray, p: str) -> np.ndarray:
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(v + 1e-5) * w[p + ".weight"] + w[p + ".bias"]

    def lin(x: np.ndarray, p: str) -> np.ndarray:
        return x @ w[p + ".weight"].T + w[p + ".bias"]

    from math import erf, sqrt

    gelu = np.vectorize(lambda v: 0.5 * v * (1 + erf(v / sqrt(2))))
    x = w["embeddings.word_embeddings.weight"][tok] + w["embeddings.position_embeddings.weight"][pos]
    x = ln(x, "embeddings.LayerNorm")
    bias = w["encoder.relative_attention_bias.weight"][_reference_buckets(length)]
    bias = bias.transpose(2, 0, 1)[None]  # (1, H, L, L)
    mask = np.where(real, 0.0, -1e9)[:, None, None, :]
    heads, dh = 12, 64
    for i in range(12):
        p = f"encoder.layer.{i}."

        def split(t: np.ndarray) -> np.ndarray:
            return t.reshape(n, length, heads, dh).transpose(0, 2, 1, 3)

        a = p + "attention.attn."
        q, k, v = (split(lin(x, a + name)) for name in "qkv")
        scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(dh) + bias + mask
        scores = np.exp(scores - scores.max(-1, keepdims=True))
        probs = scores / scores.sum(-1, keepdims=True)
        ctx = (probs @ v).transpose(0, 2, 1, 3).reshape(n, length, heads * dh)
        x = ln(lin(ctx, a + "o") + x, p + "attention.LayerNorm")
        inter = gelu(lin(x, p + "intermediate.dense"))
        x = ln(lin(inter, p + "output.dense") + x, p + "output.LayerNorm")
    pooled = (x * real[..., None]).sum(1) / real.sum(1, keepdims=True)
    return pooled / np.linalg.norm(pooled, axis=1, keepdims=True)


def test_buckets_are_transformers_buckets() -> None:
    assert np.array_equal(relative_buckets(160), _reference_buckets(160))


def test_both_engines_match_an_independent_forward_pass(embedder: LocalEmbedder) -> None:
    from safetensors.numpy import load_file

    texts = TEXTS[:4] + ["Ünïcödé, 漢字 and emoji 🎉", ""]
    ids = [list(map(int, x)) for x in embedder.tokenize(texts)]
    assert ids[0][0] == 0 and ids[0][-1] == 2  # <s> ... </s>
    ref = _textbook(load_file(str(MODEL_DIR / "model.safetensors")), ids)
    got = embedder.embed(texts)
    cos = (got * ref).sum(axis=1)
    assert cos.min() > 0.99999, cos


def test_engines_agree_on_every_text() -> None:
    onnx = LocalEmbedder(engine="onnx", model="mpnet").embed(TEXTS)
    numpy = LocalEmbedder(engine="numpy", model="mpnet").embed(TEXTS)
    assert onnx.shape == numpy.shape == (len(TEXTS), 768)
    cos = (onnx * numpy).sum(axis=1)
    assert cos.min() > 0.9999, cos


def test_alone_or_batched_the_same(embedder: LocalEmbedder) -> None:
    batch = embedder.embed(TEXTS)
    alone = np.vstack([embedder.embed([t]) for t in TEXTS])
    assert ((batch * alone).sum(axis=1)).min() > 0.99999
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-5)


def test_truncates_at_384_tokens(embedder: LocalEmbedder) -> None:
    long = TEXTS[-1]
    assert len(embedder.tokenize([long])[0]) == 384
    longer = embedder.embed([long + " more words at the end that are cut"])
    assert float((embedder.embed([long]) * longer).sum()) > 0.99999


def test_paraphrases_are_nearer_than_unrelated_sentences(embedder: LocalEmbedder) -> None:
    # sentence-transformers' documented similarity examples: each sentence's paraphrase
    # is nearer to it than every other sentence of the list
    pairs = [(0, 1), (3, 6), (7, 8)]
    v = embedder.embed(TEXTS[:9])
    sims = v @ v.T
    for a, b in pairs:
        others = [j for j in range(9) if j not in (a, b)]
        assert sims[a, b] > 0.5 > sims[a, others].max(), (a, b, sims[a])
        assert sims[b, a] > sims[b, others].max()


def test_int8_queries_rank_like_float32_ones() -> None:
    emb = LocalEmbedder(engine="onnx", model="mpnet")
    assert emb.query_weights == "int8"
    stored = emb.embed(TEXTS[:9])
    queries = emb.embed_queries(TEXTS[:9])
    cos = (queries * stored).sum(axis=1)
    # measured: mean 0.988-0.991, min 0.976-0.978 (float32 FFN output in layers 0-1,
    # smoothed int8 after); plain int8 there gave 0.94 on average
    assert cos.mean() > 0.985 and cos.min() > 0.97, cos
    for i, q in enumerate(queries):
        assert int(np.argmax(stored @ q)) == i


def test_a_changed_file_is_refused(tmp_path: Path) -> None:
    copy = tmp_path / "nixx" / "models" / models.MPNET.name
    for name in models.MPNET.files:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        if name == "model.safetensors":
            (copy / name).symlink_to(MODEL_DIR / name)  # 438 MB: read, not copied
        else:
            (copy / name).write_bytes((MODEL_DIR / name).read_bytes())
    verify_files(models.MPNET, copy)  # the copy is right
    config = json.loads((copy / "config.json").read_text())
    config["layer_norm_eps"] = 1e-12
    (copy / "config.json").write_text(json.dumps(config))
    with pytest.raises(ModelCorrupt, match="config.json"):
        verify_files(models.MPNET, copy)
    # and the embedder refuses to load it (a fresh process: models load once per process)
    code = (
        "from nixx.embed.local import LocalEmbedder\n"
        "from nixx.errors import ModelCorrupt\n"
        "try:\n"
        "    LocalEmbedder(model='mpnet', engine='numpy').embed(['x'])\n"
        "except ModelCorrupt as exc:\n"
        "    print('KIND', exc.kind)\n"
        "    print(exc)\n"
    )
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert "KIND model_corrupt" in proc.stdout, proc.stderr
    assert "nixx embedder install mpnet --force" in proc.stdout
