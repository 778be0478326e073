"""Each JSON route answers the shape its return annotation names (`nixx.server.shapes`:
FastAPI does not read the annotation, mypy checks the code against it, and this checks the
wire): every key a shape requires is there, no key it does not declare, down through the
nested shapes (a list's items, a union's member)."""

from __future__ import annotations

import json
import sys
import types
import typing
from typing import Any, Literal, get_args, get_origin, is_typeddict

from nixx.ingest.pipeline import SkippedJson
from nixx.llm.client import ModelEntry, ModelList
from nixx.memory.forget import ForgetAnswer
from nixx.memory.recall import RecallInfo
from nixx.memory.service import MemoryStatus
from nixx.server import shapes
from nixx.store.forgetting import ForgetLogJson
from nixx.testing.fake_llm import FakeLLM

from .conftest import Nixx
from .test_episodic import GOOD, summariser

# the names route modules import for their annotations only (under TYPE_CHECKING)
ANNOTATION_NAMES = {"ForgetAnswer": ForgetAnswer, "MemoryStatus": MemoryStatus,
                    "ForgetLogJson": ForgetLogJson, "RecallInfo": RecallInfo,
                    "SkippedJson": SkippedJson, "ModelEntry": ModelEntry,
                    "ModelList": ModelList}


def _routes(routes: list[Any]) -> list[Any]:
    """Every route, those of the included routers too (FastAPI keeps them nested)."""
    out = []
    for route in routes:
        inner = getattr(route, "original_router", None)
        out += _routes(inner.routes) if inner is not None else [route]
    return out


def declared(nixx: Nixx, method: str, path: str) -> Any:
    """The return annotation of the route answering `method` `path`, evaluated."""
    extra = ANNOTATION_NAMES
    for route in _routes(nixx.client.app.routes):  # type: ignore[attr-defined]
        if getattr(route, "path", None) == path and method in getattr(route, "methods", ()):
            assert route.response_model == shapes.BODY, f"{path}: not response_model=BODY"
            fn = route.endpoint
            return typing.get_type_hints(fn, globalns={**fn.__globals__, **extra})["return"]
    raise AssertionError(f"no route {method} {path}")


def mismatches(value: Any, tp: Any, where: str = "body") -> list[str]:
    """How `value` departs from `tp` (TypedDicts by their keys, lists by their items,
    unions by their closest member); [] when it conforms."""
    origin = get_origin(tp)
    if is_typeddict(tp):
        if not isinstance(value, dict):
            return [f"{where}: {type(value).__name__}, not an object"]
        home = vars(sys.modules[tp.__module__])
        hints = typing.get_type_hints(tp, globalns=home, localns=ANNOTATION_NAMES)
        required, optional = set(tp.__required_keys__), set(tp.__optional_keys__)
        out = [f"{where}: no {k!r}" for k in sorted(required - set(value))]
        out += [f"{where}: undeclared {k!r}" for k in sorted(set(value) - required - optional)]
        for key in sorted(set(value) & set(hints)):
            out += mismatches(value[key], hints[key], f"{where}.{key}")
        return out
    if origin is list:
        if not isinstance(value, list):
            return [f"{where}: not a list"]
        (item,) = get_args(tp) or (Any,)
        return [m for i, v in enumerate(value) for m in mismatches(v, item, f"{where}[{i}]")]
    if origin in (typing.Union, types.UnionType):
        tried = [mismatches(value, member, where) for member in get_args(tp)]
        return min(tried, key=len)
    if origin is Literal:
        return [] if value in get_args(tp) else [f"{where}: {value!r} not in {get_args(tp)}"]
    if tp is type(None):
        return [] if value is None else [f"{where}: {value!r}, not null"]
    return []  # str, int, dict[str, Any], Any: the key's presence is what is checked


def check(nixx: Nixx, method: str, path: str, *, url: str | None = None, **kw: Any) -> Any:
    answer = nixx.client.request(method, url or path, **kw)
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert mismatches(body, declared(nixx, method, path)) == [], path
    return body


def test_each_json_route_answers_the_shape_it_declares(nixx: Nixx, llm: FakeLLM):
    llm.responder = summariser([json.dumps(GOOD)])  # summaries get JSON, turns an echo
    assert nixx.chat("We picked SQLite with FTS5 for the buffer.").status_code == 200
    assert nixx.chat("And the summaries go in vectors.").status_code == 200
    nixx.idle()
    assert check(nixx, "POST", "/v1/episodic/summary")["summary"]["id"] >= 1
    check(nixx, "GET", "/v1/buffer/session")
    check(nixx, "GET", "/v1/episodic/status")
    found = check(nixx, "POST", "/v1/episodic/search", json={"query": "SQLite buffer"})
    assert found["results"] and found["buffer"]  # the nested shapes were checked too
    check(nixx, "GET", "/v1/episodic/transcript", params={"start": 1})
    check(nixx, "GET", "/v1/episodic/summaries")
    check(nixx, "POST", "/v1/intent", json={"intent": "Choosing a store."})
    check(nixx, "GET", "/v1/intent")
    check(nixx, "GET", "/v1/debug/context", params={"query": "SQLite"})
    check(nixx, "POST", "/v1/ingest", json={"text": "Ports: 5432 for PostgreSQL.",
                                            "name": "ports"})
    check(nixx, "GET", "/v1/sources")
    check(nixx, "POST", "/v1/sources/search", json={"query": "PostgreSQL port"})
    check(nixx, "POST", "/v1/embeddings", json={"input": ["one", "two"]})
    check(nixx, "GET", "/v1/models")
    dry = check(nixx, "POST", "/v1/forget", json={"query": "SQLite"})
    assert dry["dry_run"] is True and dry["ids"]
    done = check(nixx, "POST", "/v1/forget", json={"query": "SQLite", "dry_run": False,
                                                   "ids": dry["ids"]})
    assert done["dry_run"] is False
    check(nixx, "GET", "/v1/forget/log")
    cleared = check(nixx, "POST", "/v1/buffer/clear")
    check(nixx, "DELETE", "/v1/buffer/{row_id}", url=f"/v1/buffer/{cleared['marker']['id']}")


class Inner(typing.TypedDict):
    a: int


class Outer(typing.TypedDict, total=False):
    items: list[Inner]
    kind: Literal["x"]


def test_the_shape_check_sees_missing_undeclared_and_nested_keys():
    assert mismatches({"items": [{"a": 1}], "kind": "x"}, Outer) == []
    assert mismatches({"items": [{"b": 1}], "kind": "y", "extra": 0}, Outer) == [
        "body: undeclared 'extra'", "body.items[0]: no 'a'", "body.items[0]: undeclared 'b'",
        "body.kind: 'y' not in ('x',)"]
