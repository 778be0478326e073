"""Structure-aware chunking: split a text into pieces of about `target_chars`, with
`overlap_chars` carried from one chunk into the next.

The text is first cut into *blocks* that follow its structure:

- ``text``: paragraphs (blank lines separate them);
- ``markdown``: paragraphs, ATX (``# Title``) and setext headings, and fenced code
  blocks (```` ``` ```` / ``~~~``), which are never split unless one alone is larger than
  the target; every block knows the heading path it sits under (``"Guide > Install"``);
- ``code``: top-level units: a blank line followed by an unindented line starts a new
  unit, so a function or class body with blank lines inside stays whole.

A block larger than the target is split on blank lines, then lines, then sentences,
then whitespace, and as a last resort at exactly `target_chars`. Blocks are then packed
greedily into chunks; in Markdown a heading starts a new chunk once the current one is
a third full, and a heading is never left dangling at the end of a chunk when it can
move to the next one.

Guarantees (tested with hypothesis): each `Chunk.text` is exactly
``text[chunk.start:chunk.end]``; the chunks' *cores* (each chunk without the overlap
carried from the previous one) tile the input without gap, so every character is in
some chunk; a chunk is at most ``target_chars + overlap_chars`` long, its core at most
``target_chars``; the overlap starts on a word boundary and never reaches back past the
previous chunk's core; the same input always gives the same chunks. Text made only of
whitespace gives no chunk, and a chunk of whitespace alone appears only when a run of
whitespace longer than the target cannot join its neighbour.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from nixx.errors import ValidationError

KINDS: tuple[str, ...] = ("text", "markdown", "code")


@dataclass(frozen=True)
class Chunk:
    """A piece of the input: ``text == input[start:end]``."""

    text: str
    start: int  # char offset into the input, inclusive
    end: int  # char offset into the input, exclusive
    heading: str | None = None  # Markdown heading path ("A > B") or code definition line


@dataclass
class _Block:
    start: int
    end: int
    heading: str | None
    is_heading: bool = False


_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_ATX = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$")
_SETEXT = re.compile(r"^ {0,3}(=+|-+)[ \t]*$")
_CODE_DEF = re.compile(
    r"^(?:@|(?:export\s+|pub(?:\([^)]*\))?\s+|public\s+|private\s+|protected\s+|static\s+|"
    r"async\s+|abstract\s+|final\s+|default\s+)*"
    r"(?:def|class|function|fn|func|struct|enum|impl|trait|interface|type|module|"
    r"package|namespace|const|let|var|object|record|macro_rules!)\b)"
)
# Ways to split an oversized block, coarsest first; a cut goes right after the match.
_SEPARATORS: tuple[re.Pattern[str], ...] = (
    re.compile(r"\n[ \t]*\n\s*"),
    re.compile(r"\n"),
    re.compile(r"(?<=[.!?;:])\s+"),
    re.compile(r"\s+"),
)


def chunk_text(
    text: str, *, target_chars: int = 800, overlap_chars: int = 100, kind: str = "text"
) -> list[Chunk]:
    """Split `text` into chunks that respect its structure (see the module docstring)."""
    if kind not in KINDS:
        raise ValidationError(f"unknown chunk kind {kind!r}: use one of {', '.join(KINDS)}")
    if target_chars < 1:
        raise ValidationError(f"target_chars must be at least 1 (got {target_chars})")
    if not 0 <= overlap_chars < target_chars:
        raise ValidationError(
            f"overlap_chars must be at least 0 and below target_chars "
            f"(got {overlap_chars} with target {target_chars})"
        )
    if not text.strip():
        return []
    if kind == "markdown":
        blocks = _markdown_blocks(text)
    elif kind == "code":
        blocks = _code_blocks(text)
    else:
        blocks = _paragraph_blocks(text)
    blocks[0].start = 0  # leading blank lines belong to the first block
    units: list[_Block] = []
    for block in blocks:
        if block.end - block.start <= target_chars:
            units.append(block)
        else:
            for s, e in _split_span(text, block.start, block.end, target_chars, 0):
                units.append(_Block(s, e, block.heading, block.is_heading))
    cores = _pack(text, units, target_chars, section_break=kind == "markdown")
    return _with_overlap(text, cores, overlap_chars)


# ---- blocks ------------------------------------------------------------------------


def _lines(text: str) -> list[tuple[int, str]]:
    """(offset, line-with-its-newline) for every line of `text`."""
    out = []
    pos = 0
    for line in text.splitlines(keepends=True):
        out.append((pos, line))
        pos += len(line)
    return out


def _is_blank(line: str) -> bool:
    return not line.strip()


def _paragraph_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    gap = True
    for pos, line in _lines(text):
        end = pos + len(line)
        if _is_blank(line):
            gap = True
            if blocks:
                blocks[-1].end = end
        elif gap or not blocks:
            blocks.append(_Block(pos, end, None))
            gap = False
        else:
            blocks[-1].end = end
    return blocks


def _code_blocks(text: str) -> list[_Block]:
    """Top-level units: a new one starts at an unindented line after a blank line."""
    blocks: list[_Block] = []
    gap = True
    for pos, line in _lines(text):
        end = pos + len(line)
        if _is_blank(line):
            gap = True
            if blocks:
                blocks[-1].end = end
            continue
        top_level = not line[0].isspace() and line.lstrip()[0] not in ")]}"
        if not blocks or (gap and top_level):
            blocks.append(_Block(pos, end, None))
        else:
            blocks[-1].end = end
        if blocks[-1].heading is None and _CODE_DEF.match(line) and not line.startswith("@"):
            blocks[-1].heading = line.strip()[:120]
        gap = False
    return blocks


def _markdown_blocks(text: str) -> list[_Block]:
    blocks: list[_Block] = []
    path: list[tuple[int, str]] = []  # (level, title) of the enclosing headings
    fence: str | None = None  # the opening fence while inside a fenced block
    gap = True  # a blank line (or a block boundary) came since the last paragraph line
    para_lines = 0  # lines in the current paragraph block (for setext headings)

    def heading_path() -> str | None:
        return " > ".join(title for _, title in path) or None

    def enter(level: int, title: str) -> None:
        while path and path[-1][0] >= level:
            path.pop()
        path.append((level, title or "(untitled)"))

    for pos, line in _lines(text):
        end = pos + len(line)
        stripped = line.rstrip("\r\n")
        if fence is not None:
            blocks[-1].end = end
            close = _FENCE.match(stripped)
            if (
                close
                and close.group(1)[0] == fence[0]
                and len(close.group(1)) >= len(fence)
                and not stripped[close.end() :].strip()
            ):
                fence = None
                gap = True
            continue
        if _is_blank(line):
            gap = True
            para_lines = 0
            if blocks:
                blocks[-1].end = end
            continue
        opening = _FENCE.match(stripped)
        if opening and not (opening.group(1)[0] == "`" and "`" in stripped[opening.end() :]):
            fence = opening.group(1)
            blocks.append(_Block(pos, end, heading_path()))
            para_lines = 0
            continue
        atx = _ATX.match(stripped)
        if atx:
            enter(len(atx.group(1)), (atx.group(2) or "").strip())
            blocks.append(_Block(pos, end, heading_path(), is_heading=True))
            gap = True
            para_lines = 0
            continue
        setext = _SETEXT.match(stripped)
        if setext and not gap and para_lines == 1 and blocks and not blocks[-1].is_heading:
            block = blocks[-1]
            title = text[block.start : pos].strip()
            enter(1 if setext.group(1)[0] == "=" else 2, title)
            block.end = end
            block.heading = heading_path()
            block.is_heading = True
            gap = True
            para_lines = 0
            continue
        if gap or not blocks:
            blocks.append(_Block(pos, end, heading_path()))
            para_lines = 1
            gap = False
        else:
            blocks[-1].end = end
            para_lines += 1
    return blocks


# ---- splitting oversized blocks ----------------------------------------------------


def _split_span(text: str, start: int, end: int, limit: int, level: int) -> list[tuple[int, int]]:
    """Cut [start, end) into consecutive spans of at most `limit` chars."""
    if end - start <= limit:
        return [(start, end)]
    if level >= len(_SEPARATORS):
        cuts = list(range(start, end, limit))
        return [(c, min(c + limit, end)) for c in cuts]
    cuts = [m.end() for m in _SEPARATORS[level].finditer(text, start, end) if start < m.end() < end]
    if not cuts:
        return _split_span(text, start, end, limit, level + 1)
    pieces = list(zip([start, *cuts], [*cuts, end], strict=True))
    spans: list[tuple[int, int]] = []
    cur_start: int | None = None
    cur_end = start
    for s, e in pieces:
        if e - s > limit:
            if cur_start is not None:
                spans.append((cur_start, cur_end))
                cur_start = None
            spans.extend(_split_span(text, s, e, limit, level + 1))
        elif cur_start is None:
            cur_start, cur_end = s, e
        elif e - cur_start <= limit:
            cur_end = e
        else:
            spans.append((cur_start, cur_end))
            cur_start, cur_end = s, e
    if cur_start is not None:
        spans.append((cur_start, cur_end))
    return spans


# ---- packing and overlap -----------------------------------------------------------


def _pack(text: str, units: list[_Block], target: int, *, section_break: bool) -> list[_Block]:
    """Group consecutive units into chunk cores of at most `target` chars."""
    groups: list[list[_Block]] = []
    current: list[_Block] = []
    for unit in units:
        if current:
            size = unit.end - current[0].start
            only_headings = all(u.is_heading for u in current)
            new_section = (
                section_break
                and unit.is_heading
                and not only_headings
                and current[-1].end - current[0].start >= target // 3
            )
            if size > target or new_section:
                # Move trailing headings to the next chunk when they fit there.
                carried: list[_Block] = []
                while len(current) > 1 and current[-1].is_heading and not new_section:
                    if unit.end - current[-1].start > target:
                        break
                    carried.insert(0, current.pop())
                groups.append(current)
                current = carried
        current.append(unit)
    if current:
        groups.append(current)
    cores: list[_Block] = []
    for group in groups:
        if section_break:  # Markdown: the path the chunk's content sits under
            heading = next((u for u in group if not u.is_heading), group[0]).heading
        else:  # code: the first definition in the chunk
            heading = next((u.heading for u in group if u.heading), None)
        core = _Block(group[0].start, group[-1].end, heading)
        if (
            cores
            and not text[core.start : core.end].strip()
            and core.end - cores[-1].start <= target
        ):
            cores[-1].end = core.end  # no chunk of whitespace alone, when it fits
        else:
            cores.append(core)
    return cores


def _with_overlap(text: str, cores: list[_Block], overlap: int) -> list[Chunk]:
    chunks: list[Chunk] = []
    prev_start = 0
    for i, core in enumerate(cores):
        start = core.start
        if i and overlap:
            p = max(prev_start, core.start - overlap)
            # Begin the overlap on a word boundary (or carry none).
            while p < core.start and not (
                (p == 0 or text[p - 1].isspace()) and not text[p].isspace()
            ):
                p += 1
            start = p
        chunks.append(Chunk(text[start : core.end], start, core.end, core.heading))
        prev_start = core.start
    return chunks


__all__ = ["KINDS", "Chunk", "chunk_text"]
