"""A schema-driven fuzz of `/openapi.json` (schemathesis) against a real uvicorn server
with the scripted backend: every operation, valid and invalid inputs, a bounded number of
examples each. Zero server errors (500), and every refusal is the error envelope of its
API (OpenAI's; Anthropic's on `/v1/messages`)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis  # the dev extra
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Unsatisfiable

from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LiveServer

from .conftest import standalone_settings

pytestmark = pytest.mark.slow
EXAMPLES = 12


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    base = tmp_path_factory.mktemp("fuzz")
    (base / "ws").mkdir()
    (base / "ws" / "note.md").write_text("# Note\n\nSomething to ingest.\n")
    with FakeLLM() as llm:
        s = standalone_settings(
            base, llm, workspace=base / "ws", ingest_url_timeout=2, max_request_bytes=1 << 20
        )
        with LiveServer(create_app(s)) as live:
            yield live


def _operations(server: LiveServer) -> list[Any]:
    schema = schemathesis.openapi.from_url(server.base_url + "/openapi.json")
    ops = [result.ok() for result in schema.get_all_operations()]
    assert len(ops) >= 20
    return ops


def _check(response: Any, label: str, problems: list[str]) -> None:
    status = response.status_code
    if status >= 500 and status not in (502, 503):
        problems.append(f"{label}: {status} {response.text[:300]}")
        return
    if status >= 400:
        try:
            body = response.json()
            err = body["error"]
            if label.split(" ", 1)[1].startswith("/v1/messages"):  # Anthropic's own shape
                ok = body["type"] == "error" and set(err) == {"type", "message"}
            else:
                ok = set(body) == {"error"} and {"message", "type", "param", "code"} <= set(err)
        except (ValueError, KeyError, TypeError):
            ok = False
        if not ok:
            problems.append(f"{label}: {status} is not the error envelope: {response.text[:300]}")


def _runner(
    server: LiveServer, strategy: Any, label: str, problems: list[str], calls: dict[str, int]
) -> Any:
    """A bounded hypothesis run over one operation's generated cases."""

    @settings(
        max_examples=EXAMPLES,
        deadline=None,
        database=None,
        phases=[Phase.generate],
        suppress_health_check=list(HealthCheck),
    )
    @given(case=strategy)
    def run(case: Any) -> None:
        response = case.call(base_url=server.base_url, timeout=30)
        calls["n"] += 1
        _check(response, label, problems)

    return run


@pytest.mark.parametrize("mode", ["positive", "negative"])
def test_fuzz_every_operation_gives_no_server_error(server: LiveServer, mode: str) -> None:
    from schemathesis import GenerationMode

    generation = GenerationMode.POSITIVE if mode == "positive" else GenerationMode.NEGATIVE
    problems: list[str] = []
    calls = {"n": 0}
    for operation in _operations(server):
        label = f"{operation.method.upper()} {operation.path}"
        strategy = operation.as_strategy(generation_mode=generation)

        run = _runner(server, strategy, label, problems, calls)
        try:
            run()
        except Unsatisfiable:  # nothing to make invalid (no parameters, no body)
            assert mode == "negative", label
    assert calls["n"] > 100
    assert problems == [], "\n".join(problems[:20])


def test_health_still_answers_after_the_fuzz(server: LiveServer) -> None:
    import httpx

    assert httpx.get(server.base_url + "/health").json()["status"] in ("ok", "degraded")
