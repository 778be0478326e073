"""Checks on what callers hand the memory store, shared by every backend.

Each function raises `ValidationError` (with `param` naming the argument) or returns
the value normalised for storing. Backend-specific checks that need the database
(does a buffer row exist, the bound vector dimension) stay in the backends.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from nixx.errors import ValidationError
from nixx.store.records import ORIGINS, ROLES, SOURCE_TYPES, JsonObject


def json_object(value: Any, name: str) -> JsonObject:
    """`value` as a fresh dict ({} for None); it must be a JSON-serialisable object."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ValidationError(f"{name} must be a JSON object", param=name)
    try:
        json.dumps(value, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise ValidationError(f"{name} must be JSON-serialisable: {exc}", param=name) from None
    return dict(value)


def string_list(value: Sequence[str], name: str) -> list[str]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ValidationError(f"{name} must be a list of strings", param=name)
    return list(value)


def entities(value: dict[str, list[str]]) -> dict[str, list[str]]:
    if not isinstance(value, dict):
        raise ValidationError("entities must be an object of lists", param="entities")
    return {str(k): string_list(v, f"entities.{k}") for k, v in value.items()}


def buffer_row(role: str, content: str, origin: str, meta: Any) -> JsonObject:
    """Check an `append_buffer` call; return its metadata as a dict."""
    if role not in ROLES:
        raise ValidationError(f"role must be one of {', '.join(ROLES)}, got {role!r}", param="role")
    if origin not in ORIGINS:
        raise ValidationError(
            f"origin must be one of {', '.join(ORIGINS)}, got {origin!r}", param="origin"
        )
    if not isinstance(content, str):
        raise ValidationError("content must be text", param="content")
    return json_object(meta, "meta")


def summary(
    content: str,
    tags: Sequence[str],
    entity_lists: dict[str, list[str]],
    start_buffer_id: int,
    end_buffer_id: int,
) -> tuple[list[str], dict[str, list[str]]]:
    """Check an `add_summary` call (all but the embedding and whether the range's
    rows exist); return its tags and entities normalised."""
    if not isinstance(content, str) or not content.strip():
        raise ValidationError("a summary needs content", param="content")
    tag_list = string_list(tags, "tags")
    entity_map = entities(entity_lists)
    if start_buffer_id > end_buffer_id:
        raise ValidationError(
            f"summary range is reversed: {start_buffer_id} > {end_buffer_id}",
            param="start_buffer_id",
        )
    return tag_list, entity_map


def source(
    name: str, type: str, start_id: int | None, end_id: int | None, meta: Any
) -> JsonObject:
    """Check an `add_source` call (all but its chunks and whether the range's rows
    exist); return its metadata as a dict."""
    if not isinstance(name, str) or not name.strip():
        raise ValidationError("a source needs a name", param="name")
    if type not in SOURCE_TYPES:
        raise ValidationError(
            f"source type must be one of {', '.join(SOURCE_TYPES)}, got {type!r}",
            param="type",
        )
    if start_id is not None and end_id is not None and start_id > end_id:
        raise ValidationError(f"source range is reversed: {start_id} > {end_id}")
    return json_object(meta, "meta")


def chunk_content(index: int, content: Any) -> str:
    if not isinstance(content, str):
        raise ValidationError(f"chunk {index} content must be text")
    return content


def embedder(model: str, dim: int, what: str) -> int:
    """Check a (model, dimension) pair given to `what`; return the dimension as int."""
    if not model or int(dim) <= 0:
        raise ValidationError(f"{what} needs a model name and a positive dimension")
    return int(dim)


def state_key(key: Any) -> str:
    if not isinstance(key, str) or not key:
        raise ValidationError("a state key must be a non-empty string")
    return key
