"""Fuzzing the two dialect routes against a real uvicorn server with the scripted backend:
schemathesis on their operations (more examples than the whole-API fuzz), and our own
hypothesis strategies that build near-valid requests — items and blocks of every kind
with wrong, missing and odd values — since the schemas take items as free objects. No
server error (500), and every refusal in the route's own API shape."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LiveServer

from .conftest import standalone_settings

pytestmark = pytest.mark.slow
EXAMPLES = 60
PATHS = ("/v1/responses", "/v1/messages", "/v1/messages/count_tokens")


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("fuzz-dialects")
    with FakeLLM() as llm, LiveServer(create_app(standalone_settings(base, llm))) as live:
        yield live


def problem(path: str, status: int, text: str) -> str | None:
    """What is wrong with one answer, or None."""
    if status >= 500 and status not in (502, 503):
        return f"{path}: {status} {text[:300]}"
    if status < 400:
        return None
    try:
        import json

        body = json.loads(text)
        err = body["error"]
        if path.startswith("/v1/messages"):
            ok = body["type"] == "error" and set(err) == {"type", "message"}
        else:
            ok = set(body) == {"error"} and {"message", "type", "param", "code"} <= set(err)
    except (ValueError, KeyError, TypeError):
        ok = False
    return None if ok else f"{path}: {status} not in the API's error shape: {text[:300]}"


FUZZ = settings(max_examples=EXAMPLES, deadline=None, database=None, phases=[Phase.generate],
                suppress_health_check=list(HealthCheck))


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_schemathesis_on_the_dialect_routes(server: LiveServer, mode: str) -> None:
    from schemathesis import GenerationMode

    generation = GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
    schema = schemathesis.openapi.from_url(server.base_url + "/openapi.json")
    ops = [r.ok() for r in schema.get_all_operations()]
    ops = [op for op in ops if op.path in PATHS]
    assert sorted(op.path for op in ops) == sorted(PATHS)
    problems: list[str] = []
    for op in ops:
        _fuzz(server, op, generation, problems)()
    assert problems == [], "\n".join(problems[:10])


def _fuzz(server: LiveServer, op: Any, generation: Any, problems: list[str]) -> Any:
    @FUZZ
    @given(case=op.as_strategy(generation_mode=generation))
    def run(case: Any) -> None:
        response = case.call(base_url=server.base_url, timeout=30)
        found = problem(op.path, response.status_code, response.text)
        if found:
            problems.append(found)

    return run


# ---- our own strategies: near-valid requests -----------------------------------------

odd = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.text(max_size=8),
                st.lists(st.text(max_size=4), max_size=2),
                st.dictionaries(st.sampled_from(["type", "text", "x"]), st.text(max_size=4),
                                max_size=2))
text = st.one_of(st.text(max_size=20), odd)


def maybe(**fields: Any) -> Any:
    """A dict with each field present or not, its value from the strategy."""
    return st.fixed_dictionaries({}, optional=fields)


response_part = maybe(type=st.sampled_from(["input_text", "output_text", "refusal",
                                            "input_image", "input_file", "zzz"]),
                      text=text, refusal=text, image_url=text, detail=text)
response_item = st.one_of(
    maybe(type=st.just("message"), role=st.sampled_from(["user", "assistant", "system",
                                                          "developer", "tool", "x"]),
          content=st.one_of(text, st.lists(st.one_of(response_part, odd), max_size=3))),
    maybe(type=st.just("function_call"), call_id=text, name=text, arguments=text),
    maybe(type=st.just("function_call_output"), call_id=text,
          output=st.one_of(text, st.lists(st.one_of(response_part, odd), max_size=2))),
    maybe(type=st.sampled_from(["reasoning", "item_reference", "web_search_call", "x"]),
          id=text),
)
responses_body = maybe(
    model=st.just("fake-model"),
    input=st.one_of(st.text(max_size=20), st.lists(response_item, max_size=4), odd),
    instructions=text,
    previous_response_id=st.one_of(st.text(max_size=10), st.none()),
    tools=st.lists(st.one_of(
        maybe(type=st.sampled_from(["function", "web_search", "custom"]), name=text,
              parameters=odd, description=text), odd), max_size=2),
    tool_choice=st.one_of(st.sampled_from(["auto", "none", "required", "x"]),
                          maybe(type=st.sampled_from(["function", "web_search"]), name=text)),
    stream=st.booleans(), store=st.booleans(), max_output_tokens=st.integers(-1, 64),
    text=st.one_of(odd, st.just({"format": {"type": "json_schema", "name": "x"}})),
    reasoning=odd, background=st.booleans(),
)

block = st.one_of(
    maybe(type=st.just("text"), text=text, cache_control=odd),
    maybe(type=st.just("image"), source=st.one_of(odd, maybe(
        type=st.sampled_from(["base64", "url", "file"]), media_type=text, data=text, url=text))),
    maybe(type=st.just("tool_use"), id=text, name=text, input=odd),
    maybe(type=st.just("tool_result"), tool_use_id=text, is_error=st.booleans(),
          content=st.one_of(text, st.lists(odd, max_size=2))),
    maybe(type=st.sampled_from(["thinking", "redacted_thinking", "document", "x"]),
          thinking=text),
)
message = maybe(role=st.sampled_from(["user", "assistant", "system", "x"]),
                content=st.one_of(text, st.lists(st.one_of(block, odd), max_size=3)))
messages_body = maybe(
    model=st.just("fake-model"), max_tokens=st.integers(-1, 64),
    messages=st.one_of(st.lists(message, max_size=3), odd),
    system=st.one_of(text, st.lists(st.one_of(block, odd), max_size=2)),
    tools=st.lists(st.one_of(maybe(type=st.sampled_from(["custom", "bash_20250124"]),
                                   name=text, input_schema=odd, description=text), odd),
                   max_size=2),
    tool_choice=st.one_of(odd, maybe(type=st.sampled_from(["auto", "any", "tool", "none", "x"]),
                                     name=text, disable_parallel_tool_use=st.booleans())),
    stop_sequences=st.one_of(odd, st.lists(st.text(max_size=3), max_size=2)),
    stream=st.booleans(), temperature=st.floats(-1, 2, allow_nan=False),
)


@pytest.mark.parametrize(("path", "bodies"), [
    ("/v1/responses", responses_body),
    ("/v1/messages", messages_body),
    ("/v1/messages/count_tokens", messages_body),
])
def test_near_valid_requests_give_no_server_error(server: LiveServer, path: str,
                                                  bodies: Any) -> None:
    problems: list[str] = []
    statuses: set[int] = set()

    with httpx.Client(base_url=server.base_url, timeout=30) as http:

        @FUZZ
        @given(body=bodies)
        def run(body: dict[str, Any]) -> None:
            response = http.post(path, json=body)
            statuses.add(response.status_code)
            found = problem(path, response.status_code, response.text)
            if found:
                problems.append(f"{found}\n  body: {body}")

        run()
    assert problems == [], "\n".join(problems[:10])
    assert 400 in statuses  # the strategies do reach the refusals
