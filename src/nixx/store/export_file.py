"""Export files: a whole memory store as JSON Lines, and back (docs/export-format.md).

    nixx export backup.jsonl          write_export(store, path)
    nixx import backup.jsonl          read_export(store, path)

The records are those of `MemoryStore.export_records()` (one JSON object per line, in
the order header, embedder, state, buffer, summary, source, memory, each type by
ascending id). Lines are written canonically — top-level keys in the documented order,
keys of nested objects sorted, no spaces — so two stores holding the same memory give
byte-identical files whatever their backend.

The store checks what it imports itself (`nixx.store.export_check.RecordReader`: order,
fields, values), so a bad file is refused with the line that is wrong before anything is
stored; this module does not import the store (it is handed one).
"""

from __future__ import annotations

import io
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from nixx.errors import ValidationError
from nixx.store.portable import RECORD_TYPES

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nixx.store.base import MemoryStore

#: The keys of each record type, in the order they are written.
FIELDS: dict[str, tuple[str, ...]] = {
    "header": ("type", "format", "version"),
    "embedder": ("type", "model", "dim"),
    "state": ("type", "key", "value"),
    "buffer": ("type", "id", "role", "content", "origin", "created_at", "meta", "embedding"),
    "summary": (
        "type",
        "id",
        "content",
        "embedding",
        "tags",
        "entities",
        "start_buffer_id",
        "end_buffer_id",
        "created_at",
    ),
    "source": (
        "type",
        "id",
        "name",
        "source_type",
        "summary",
        "start_id",
        "end_id",
        "meta",
        "created_at",
    ),
    "memory": ("type", "id", "source_id", "content", "embedding", "metadata", "created_at"),
    "forget": ("type", "id", "at", "kind", "ids", "counts"),
}

ExportProgress = Callable[[str, int], None]  # (record type, records of that type so far)


def _sorted(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    if isinstance(value, list):
        return [_sorted(v) for v in value]
    return value


def dumps_record(record: Mapping[str, Any]) -> str:
    """One record as its canonical JSON line (without the newline)."""
    order = FIELDS.get(record.get("type", ""), ())
    keys = [k for k in order if k in record] + sorted(k for k in record if k not in order)
    canonical = {k: _sorted(record[k]) for k in keys}
    return json.dumps(canonical, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def write_export(
    store: MemoryStore, target: str | Path | IO[str], *, progress: ExportProgress | None = None
) -> dict[str, int]:
    """Write every record of `store` to `target` (a path, ``-`` for stdout, or a text
    stream). A path is written to a temp file and renamed, so a failed export never
    leaves a truncated file behind. Returns counts per record type."""
    counts = dict.fromkeys(RECORD_TYPES[1:], 0)

    def write(out: IO[str]) -> None:
        for record in store.export_records():
            out.write(dumps_record(record))
            out.write("\n")
            kind = record["type"]
            if kind in counts:
                counts[kind] += 1
                if progress:
                    progress(kind, counts[kind])

    if isinstance(target, io.TextIOBase) or hasattr(target, "write"):
        write(target)  # type: ignore[arg-type]
    elif str(target) == "-":
        write(sys.stdout)
        sys.stdout.flush()
    else:
        path = Path(target)
        check_export_target(path)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.partial")
        try:
            with tmp.open("w", encoding="utf-8", newline="\n") as out:
                write(out)
            tmp.replace(path)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise ValidationError(
                f"cannot write the export {path}: {exc.strerror or exc}; "
                "choose a writable place (or `-` for stdout)"
            ) from None
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    return counts


def check_export_target(path: Path) -> None:
    """Refuse, before anything is read, an export path whose folder is missing or that
    is a folder itself."""
    folder = path.parent
    if not folder.is_dir():
        raise ValidationError(
            f"cannot write the export {path}: there is no folder {folder}; "
            f"create it (`mkdir -p {folder}`) or choose another path"
        )
    if path.is_dir():
        raise ValidationError(
            f"cannot write the export {path}: it is a folder; name a file in it"
        )


def iter_export(source: str | Path | IO[str]) -> Iterator[dict[str, Any]]:
    """The records of an export file (a path, ``-`` for stdin, or a text stream).
    Raises `ValidationError` naming the line that is not a JSON object."""

    def parse(lines: Iterable[str], name: str) -> Iterator[dict[str, Any]]:
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValidationError(f"{name}:{number}: not valid JSON ({exc.msg})") from None
            if not isinstance(record, dict):
                raise ValidationError(f"{name}:{number}: a record must be a JSON object")
            yield record

    if hasattr(source, "read"):
        yield from parse(source, "<stream>")  # type: ignore[arg-type]
    elif str(source) == "-":
        yield from parse(sys.stdin, "<stdin>")
    else:
        path = Path(source)
        if not path.is_file():
            raise ValidationError(f"no export file at {path}")
        with path.open(encoding="utf-8") as lines:
            yield from parse(lines, str(path))


def read_export(
    store: MemoryStore, source: str | Path | IO[str], *, progress: ExportProgress | None = None
) -> dict[str, int]:
    """Import an export file into `store` (which must be empty: else `Conflict`).
    All or nothing: one transaction. Returns counts per record type."""
    if not hasattr(source, "read") and str(source) != "-" and not Path(source).is_file():
        raise ValidationError(f"no export file at {source}")  # before touching the store
    records: Iterable[dict[str, Any]] = iter_export(source)
    if progress:
        records = _counting(records, progress)
    return store.import_records(records)


def _counting(records: Iterable[dict[str, Any]], progress: ExportProgress) -> Iterator[dict[str, Any]]:
    counts: dict[str, int] = {}
    for record in records:
        kind = record.get("type", "")
        counts[kind] = counts.get(kind, 0) + 1
        progress(kind, counts[kind])
        yield record
