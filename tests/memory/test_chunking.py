"""The structure-aware chunker: exact offsets, full coverage, bounded sizes, structure kept."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nixx.errors import ValidationError
from nixx.memory.chunking import Chunk, chunk_text


def check_invariants(text: str, chunks: list[Chunk], target: int, overlap: int) -> None:
    if not text.strip():
        assert chunks == []
        return
    assert chunks, "non-blank text gives at least one chunk"
    assert chunks[0].start == 0
    assert chunks[-1].end == len(text)
    covered_to = 0
    prev_core_start = 0
    for i, chunk in enumerate(chunks):
        assert chunk.text == text[chunk.start : chunk.end]
        assert chunk.start < chunk.end
        assert len(chunk.text) <= target + overlap
        # the core (without carried overlap) starts exactly where the previous one ended
        core_start = covered_to
        assert chunk.start <= core_start
        assert chunk.end - core_start <= target
        if i:
            assert chunk.start >= prev_core_start
            assert core_start - chunk.start <= overlap
        prev_core_start = core_start
        covered_to = chunk.end
    assert covered_to == len(text)


# ---- properties ------------------------------------------------------------------

alphabet = st.sampled_from(list("abc xyz.\n\n#`~-=\t") + ["```", "# ", "## ", "\n\n", "def f():\n"])
texts = st.lists(alphabet, max_size=300).map("".join)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    text=texts,
    target=st.integers(min_value=1, max_value=120),
    overlap_frac=st.floats(min_value=0, max_value=0.9),
    kind=st.sampled_from(["text", "markdown", "code"]),
)
def test_chunks_cover_input_with_exact_offsets_and_bounded_sizes(
    text: str, target: int, overlap_frac: float, kind: str
) -> None:
    overlap = min(int(target * overlap_frac), target - 1)
    chunks = chunk_text(text, target_chars=target, overlap_chars=overlap, kind=kind)
    check_invariants(text, chunks, target, overlap)
    # deterministic
    assert chunks == chunk_text(text, target_chars=target, overlap_chars=overlap, kind=kind)


@settings(max_examples=100, deadline=None)
@given(text=st.text(max_size=2000), kind=st.sampled_from(["text", "markdown", "code"]))
def test_arbitrary_unicode_text(text: str, kind: str) -> None:
    chunks = chunk_text(text, target_chars=200, overlap_chars=30, kind=kind)
    check_invariants(text, chunks, 200, 30)


@settings(max_examples=100, deadline=None)
@given(
    words=st.lists(st.from_regex(r"[a-z]{1,12}", fullmatch=True), min_size=1, max_size=400),
    seps=st.lists(st.sampled_from([" ", " ", " ", "\n", "\n\n"]), min_size=400, max_size=400),
)
def test_overlap_starts_on_word_boundary(words: list[str], seps: list[str]) -> None:
    text = "".join(w + s for w, s in zip(words, seps, strict=False))
    chunks = chunk_text(text, target_chars=100, overlap_chars=30)
    check_invariants(text, chunks, 100, 30)
    for chunk in chunks[1:]:
        assert chunk.start == 0 or text[chunk.start - 1].isspace()
        assert not text[chunk.start].isspace()


# ---- structure -------------------------------------------------------------------


def paragraphs(n: int, size: int = 300) -> list[str]:
    return [
        f"Paragraph {i} " + ("word " * (size // 5))[: size - 14].strip() + "." for i in range(n)
    ]


def test_splits_on_blank_lines_first() -> None:
    paras = paragraphs(6, 300)
    text = "\n\n".join(paras)
    chunks = chunk_text(text, target_chars=800, overlap_chars=0)
    # Two 300-char paragraphs fit in 800, three do not: every chunk ends at a paragraph end.
    assert len(chunks) == 3
    for chunk in chunks:
        assert chunk.text.rstrip().endswith(".")
        assert chunk.text.startswith("Paragraph")


def test_overlap_carries_the_tail_of_the_previous_chunk() -> None:
    text = "\n\n".join(paragraphs(6, 300))
    chunks = chunk_text(text, target_chars=800, overlap_chars=100)
    for prev, nxt in zip(chunks, chunks[1:], strict=False):
        carried = text[nxt.start : prev.end]
        assert 0 < len(carried) <= 100
        assert prev.text.endswith(carried)


def test_small_text_is_one_chunk() -> None:
    assert chunk_text("hello world") == [Chunk("hello world", 0, 11, None)]
    assert chunk_text("   \n\n  \t") == []
    assert chunk_text("") == []


def test_markdown_heading_path_goes_with_each_chunk() -> None:
    body = "Some words about the topic at hand. " * 12  # ~430 chars
    text = (
        "# Guide\n\nIntro text.\n\n"
        "## Install\n\n" + body + "\n\n" + body + "\n\n"
        "### From source\n\n" + body + "\n\n"
        "## Usage\n\n" + body + "\n"
    )
    chunks = chunk_text(text, target_chars=800, overlap_chars=50, kind="markdown")
    check_invariants(text, chunks, 800, 50)
    headings = [c.heading for c in chunks]
    assert "Guide > Install" in headings
    assert "Guide > Install > From source" in headings
    assert "Guide > Usage" in headings
    usage = next(c for c in chunks if c.heading == "Guide > Usage")
    assert text[usage.start : usage.end].count("## Usage") == 1
    # a heading starts its chunk's core instead of dangling at the end of the previous one
    for chunk in chunks:
        assert not chunk.text.rstrip().endswith(("## Usage", "### From source"))


def test_setext_headings() -> None:
    text = "Title\n=====\n\nIntro.\n\nPart\n----\n\n" + "Body text here. " * 80
    chunks = chunk_text(text, target_chars=300, overlap_chars=0, kind="markdown")
    assert chunks[0].heading == "Title"
    assert chunks[-1].heading == "Title > Part"


def test_fenced_code_block_is_never_split_when_it_fits() -> None:
    code = "```python\n" + "".join(f"x{i} = {i}\n\ny{i} = x{i}\n" for i in range(25)) + "```\n"
    assert len(code) < 600
    text = "# Doc\n\n" + ("Lead paragraph words. " * 20) + "\n\n" + code + "\nAfter the code.\n"
    chunks = chunk_text(text, target_chars=600, overlap_chars=80, kind="markdown")
    check_invariants(text, chunks, 600, 80)
    start = text.index("```python")
    end = start + len(code)
    holders = [c for c in chunks if c.start <= start and end <= c.end]
    assert holders, "the whole fence sits inside one chunk"
    # no chunk core boundary falls inside the fence
    cores = [chunks[0].start] + [p.end for p in chunks[:-1]]
    assert not any(start < b < end for b in cores)


def test_fence_with_blank_lines_and_headings_inside_is_one_block() -> None:
    code = "~~~\n# not a heading\n\nstill code\n~~~\n"
    text = "# Real\n\n" + code
    chunks = chunk_text(text, target_chars=1000, kind="markdown")
    assert len(chunks) == 1 and chunks[0].heading == "Real"


def test_oversized_fence_is_split_on_lines() -> None:
    lines = [f"line_{i:03d} = compute({i})\n" for i in range(100)]
    text = "```\n" + "".join(lines) + "```\n"
    chunks = chunk_text(text, target_chars=300, overlap_chars=0, kind="markdown")
    check_invariants(text, chunks, 300, 0)
    assert len(chunks) > 5
    for chunk in chunks:
        assert chunk.end == len(text) or text[chunk.end - 1] == "\n"


def test_code_splits_on_top_level_definitions() -> None:
    funcs = []
    for i in range(8):
        funcs.append(f"def function_{i}(a, b):\n    x = a + b\n\n    y = x * {i}\n    return y\n")
    text = "import os\n\n\n" + "\n\n".join(funcs)
    chunks = chunk_text(text, target_chars=150, overlap_chars=0, kind="code")
    check_invariants(text, chunks, 150, 0)
    # each function body (which has a blank line inside) stays whole in one chunk
    for i in range(8):
        assert sum(f"def function_{i}(a, b)" in c.text for c in chunks) == 1
        holder = next(c for c in chunks if f"def function_{i}(a, b)" in c.text)
        assert f"y = x * {i}" in holder.text
    # a chunk's heading is the signature of the first definition it holds
    for chunk in chunks:
        if "def function_" in chunk.text:
            first = chunk.text[chunk.text.index("def function_") :].split("\n")[0]
            assert chunk.heading == first


def test_long_line_without_spaces_is_cut_hard() -> None:
    text = "x" * 1000
    chunks = chunk_text(text, target_chars=300, overlap_chars=50)
    check_invariants(text, chunks, 300, 50)
    assert [len(c.text) for c in chunks] == [300, 300, 300, 100]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"kind": "pdf"},
        {"target_chars": 0},
        {"overlap_chars": -1},
        {"target_chars": 100, "overlap_chars": 100},
    ],
)
def test_bad_arguments(kwargs: dict) -> None:
    with pytest.raises(ValidationError):
        chunk_text("hello", **kwargs)
