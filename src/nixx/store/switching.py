"""Moving a store to another embedder in the background: `MemoryStore`'s part for it
(a mixin over the store's engine; `nixx.memory.model_switch` runs it in the server).

The live vectors stay the bound embedder's, and are the ones searched, until every row
has its vector of the next embedder; those are kept apart (the `vectors_next` table) and
replace the live ones in one transaction (`finish_switch`). No search ever sees two
models' vectors, and a row forgotten meanwhile takes its staged vector with it.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable, Mapping, Sequence

import numpy as np

from nixx.errors import Conflict
from nixx.store import validation
from nixx.store.database import CONTENT_TABLES, Database, RowVector, Tx
from nixx.store.portable import as_vector, checked_pieces
from nixx.store.records import BufferRow, EmbeddingInfo, EmbedFn

#: The `state` key of a move to another embedder: {"model", "dim"}.
SWITCH_KEY = "embedder_next"


@dataclasses.dataclass(frozen=True)
class SwitchItem:
    """Something that needs a vector of the next embedder (`switch_pending`)."""

    kind: str  # "buffer" | "summaries" | "memories"
    id: int
    text: str  # a summary's or memory's content; a buffer row's content
    digest: str


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass")).hexdigest()


def _switch_target(tx: Tx) -> EmbeddingInfo | None:
    found, value = tx.state(SWITCH_KEY)
    return EmbeddingInfo(str(value["model"]), int(value["dim"])) if found else None


def _staged_rows(
    items: Sequence[SwitchItem],
    vectors: Sequence[np.ndarray],
    pieces: Mapping[int, np.ndarray] | None,
    dim: int,
) -> list[tuple[str, int, bytes, bytes | None, str]]:
    rows = []
    for item, vec in zip(items, vectors, strict=True):
        arr = as_vector(vec, dim, what=f"{item.kind} {item.id}")
        blob = checked_pieces(pieces, item.id, dim) if item.kind == "buffer" else None
        rows.append((item.kind, item.id, arr.astype("<f4").tobytes(), blob, item.digest))
    return rows


def _pending(tx: Tx) -> list[SwitchItem]:
    staged = tx.staged_digests()
    out = []
    for row in tx.non_marker_rows():
        digest = _digest(row.content)
        if staged.get(("buffer", row.id)) != digest:
            out.append(SwitchItem("buffer", row.id, row.content, digest))
    for table in CONTENT_TABLES:
        for i, text in tx.contents(table).items():
            digest = _digest(text)
            if staged.get((table, i)) != digest:
                out.append(SwitchItem(table, i, text, digest))
    return out


class Switching:
    """The switch's methods of `MemoryStore` (see the module docstring)."""

    _engine: Database

    def switch_target(self) -> EmbeddingInfo | None:
        """The embedder the store is moving to, if a switch is under way."""
        with self._engine.read() as tx:
            found, value = tx.state(SWITCH_KEY)
        if not found:
            return None
        return EmbeddingInfo(str(value["model"]), int(value["dim"]))

    def begin_switch(self, model: str, dim: int) -> bool:
        """Start (or go on with) a move to (model, dim); False when the store is bound to
        it already (nothing to do). A move to another target drops what was staged."""
        dim = validation.embedder(model, dim, "begin_switch")
        with self._engine.write() as tx:
            tx.lock("embedder")
            current = tx.embedder()
            if current is not None and (current.model, current.dim) == (model, dim):
                return False
            found, value = tx.state(SWITCH_KEY, for_update=True)
            if not found or (value["model"], value["dim"]) != (model, dim):
                tx.clear_staged()
                tx.put_state(SWITCH_KEY, {"model": model, "dim": dim})
            return True

    def abandon_switch(self) -> None:
        """Drop a move under way and what it staged (the configured embedder is the
        store's again)."""
        with self._engine.write() as tx:
            tx.lock("embedder")
            tx.clear_staged()
            tx.drop_state(SWITCH_KEY)

    def switch_pending(self) -> list[SwitchItem]:
        """What still needs a vector of the next embedder: buffer rows (non-marker),
        summaries and memories without a staged vector or whose text changed since,
        oldest first, buffer rows first. Empty when no switch is under way."""
        with self._engine.snapshot() as tx:
            return _pending(tx) if _switch_target(tx) is not None else []

    def switch_progress(self) -> tuple[int, int]:
        """(staged and still current, total) vectors of the move."""
        with self._engine.snapshot() as tx:
            total = len(tx.non_marker_rows()) + sum(tx.count(t) for t in CONTENT_TABLES)
            return total - len(_pending(tx)), total

    def stage_vectors(
        self,
        model: str,
        items: Sequence[SwitchItem],
        vectors: Sequence[np.ndarray],
        pieces: Mapping[int, np.ndarray] | None = None,
    ) -> int:
        """Keep `vectors` of `model` for `items` apart until `finish_switch` (`pieces`: a
        buffer row's sentence vectors, as for `add_buffer_vectors`); refused (`Conflict`)
        when the store is not moving to `model`. Returns how many."""
        with self._engine.write() as tx:
            target = _switch_target(tx)
            if target is None or target.model != model:
                raise Conflict(f"the store is not moving to {model}: nothing staged")
            tx.stage(_staged_rows(items, vectors, pieces, target.dim))
            return len(items)

    def finish_switch(
        self,
        model: str,
        embed: EmbedFn,
        buffer_text: Callable[[Sequence[BufferRow]], list[list[str]]],
    ) -> int:
        """Replace every live vector by its staged one and bind (model, dim), in one write
        transaction; rows written since the last staging are embedded inside it (`embed`,
        `buffer_text` as for `reindex`). Returns the vectors now live."""
        with self._engine.write() as tx:
            tx.lock("embedder")
            target = _switch_target(tx)
            if target is None or target.model != model:
                raise Conflict(f"the store is not moving to {model}")
            late = _pending(tx)
            if late:  # written since the last batch: few
                rows = tx.buffer_rows(sorted(i.id for i in late if i.kind == "buffer"))
                texts = buffer_text(rows) if rows else []
                flat = [t for group in texts for t in group]
                flat += [i.text for i in late if i.kind != "buffer"]
                vecs = embed(flat) if flat else np.zeros((0, target.dim), dtype=np.float32)
                by_id = {i.id: i for i in late if i.kind == "buffer"}
                items: list[SwitchItem] = []
                vectors: list[np.ndarray] = []
                pieces: dict[int, np.ndarray] = {}
                at = 0
                for row, group in zip(rows, texts, strict=True):
                    items.append(by_id[row.id])
                    vectors.append(vecs[at])
                    pieces[row.id] = vecs[at + 1 : at + len(group)]
                    at += len(group)
                for item in late:
                    if item.kind != "buffer":
                        items.append(item)
                        vectors.append(vecs[at])
                        at += 1
                tx.stage(_staged_rows(items, vectors, pieces, target.dim))
            tx.start_reindex()
            tx.clear_buffer_vectors()
            live = [
                RowVector(i, np.frombuffer(v, dtype="<f4").astype(np.float32), p)
                for i, v, p in tx.staged("buffer")
            ]
            written = tx.put_buffer_vectors(live) if live else 0
            for table in CONTENT_TABLES:
                current = tx.contents(table)
                staged = {
                    i: np.frombuffer(v, dtype="<f4").astype(np.float32)
                    for i, v, _ in tx.staged(table)
                    if i in current
                }
                tx.set_vectors(table, staged)
                written += len(staged)
            tx.finish_reindex(model, target.dim)
            tx.clear_staged()
            tx.drop_state(SWITCH_KEY)
        self._engine.after_write("buffer_vectors")
        return written

