"""Checking an export's record stream as the store imports it (`MemoryStore.import_records`).

`RecordReader` validates records in order — the header first, each type in its section,
ids ascending, each record's fields present and of their type, enum values known — and
hands them out in batches of one type, so a bad file is refused with the record that is
wrong before anything is written. The file side (writing, reading lines) is
`nixx.store.export_file`; the format is docs/export-format.md.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from nixx.errors import ValidationError
from nixx.store.portable import RECORD_TYPES, check_header
from nixx.store.records import ORIGINS, ROLES, SOURCE_TYPES

_REQUIRED = object()
_OPT_INT = (int, type(None))
#: Per record type: field -> (accepted types, default when absent or _REQUIRED).
_CHECKS: dict[str, dict[str, tuple[type | tuple[type, ...], Any]]] = {
    "embedder": {"model": (str, _REQUIRED), "dim": (int, _REQUIRED)},
    "state": {"key": (str, _REQUIRED)},
    "buffer": {
        "id": (int, _REQUIRED),
        "role": (str, _REQUIRED),
        "content": (str, _REQUIRED),
        "origin": (str, _REQUIRED),
        "created_at": (str, _REQUIRED),
        "meta": (dict, {}),
        "embedding": ((list, type(None)), None),
    },
    "summary": {
        "id": (int, _REQUIRED),
        "content": (str, _REQUIRED),
        "embedding": (list, _REQUIRED),
        "tags": (list, []),
        "entities": (dict, {}),
        "start_buffer_id": (int, _REQUIRED),
        "end_buffer_id": (int, _REQUIRED),
        "created_at": (str, _REQUIRED),
    },
    "source": {
        "id": (int, _REQUIRED),
        "name": (str, _REQUIRED),
        "source_type": (str, _REQUIRED),
        "summary": ((str, type(None)), None),
        "start_id": (_OPT_INT, None),
        "end_id": (_OPT_INT, None),
        "meta": (dict, {}),
        "created_at": (str, _REQUIRED),
    },
    "memory": {
        "id": (int, _REQUIRED),
        "source_id": (int, _REQUIRED),
        "content": (str, _REQUIRED),
        "embedding": (list, _REQUIRED),
        "metadata": (dict, {}),
        "created_at": (str, _REQUIRED),
    },
    "forget": {
        "id": (int, _REQUIRED),
        "at": (str, _REQUIRED),
        "kind": (str, _REQUIRED),
        "ids": (dict, {}),
        "counts": (dict, {}),
    },
}
_ALLOWED = {"role": ROLES, "origin": ORIGINS, "source_type": SOURCE_TYPES}


def _check(record: Mapping[str, Any], kind: str, where: str) -> dict[str, Any]:
    """`record` with defaults filled in; `ValidationError` on a missing/mistyped field."""
    out = dict(record)
    for key, (types, default) in _CHECKS[kind].items():
        if key not in record or (record[key] is None and default is not _REQUIRED):
            if default is _REQUIRED:
                raise ValidationError(f"{where}: missing field {key!r}")
            out[key] = copy.copy(default)
            continue
        value = record[key]
        accepted = types if isinstance(types, tuple) else (types,)
        if not isinstance(value, accepted) or (isinstance(value, bool) and bool not in accepted):
            raise ValidationError(f"{where}: field {key!r} has the wrong type ({value!r})")
        if key in _ALLOWED and value not in _ALLOWED[key]:
            raise ValidationError(f"{where}: {key} {value!r} is not one of {_ALLOWED[key]}")
    if kind == "state" and "value" not in record:
        raise ValidationError(f"{where}: missing field 'value'")
    return out


class RecordReader:
    """Checks an export record stream and hands it out in batches of one type.

    Raises `ValidationError` (naming the record) on a missing header, records out of
    order, ids not ascending, missing or mistyped fields, or unknown enum values.
    `counts` holds the records seen per type once `batches()` is consumed."""

    def __init__(self, records: Iterable[Mapping[str, Any]], *, batch_size: int = 2000) -> None:
        self._records = records
        self._batch_size = batch_size
        self.counts: dict[str, int] = dict.fromkeys(RECORD_TYPES[1:], 0)

    def batches(self) -> Iterator[tuple[str, list[dict[str, Any]]]]:
        it = iter(self._records)
        first = next(it, None)
        if first is None:
            raise ValidationError("the export is empty: it must start with the nixx-export header")
        check_header(first)
        rank = 0
        last_id: int | None = None
        kind = ""
        batch: list[dict[str, Any]] = []
        for number, record in enumerate(it, 2):
            rkind = record.get("type")
            if rkind not in _CHECKS:
                raise ValidationError(f"record {number}: unknown record type {rkind!r}")
            where = f"record {number} ({rkind})"
            new_rank = RECORD_TYPES.index(rkind)
            if new_rank < rank:
                raise ValidationError(
                    f"{where}: out of order (records come as {', '.join(RECORD_TYPES)})"
                )
            if rkind == "embedder" and self.counts["embedder"]:
                raise ValidationError(f"{where}: a second embedder record")
            record = _check(record, rkind, where)
            if new_rank != rank:
                last_id = None
            if "id" in _CHECKS[rkind]:
                if last_id is not None and record["id"] <= last_id:
                    raise ValidationError(f"{where}: id {record['id']} is not ascending")
                last_id = record["id"]
            rank = new_rank
            if batch and (rkind != kind or len(batch) >= self._batch_size):
                yield kind, batch
                batch = []
            kind = rkind
            batch.append(record)
            self.counts[rkind] += 1
        if batch:
            yield kind, batch
