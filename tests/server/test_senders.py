"""A client names itself (issue 39): ``X-Nixx-Origin`` takes a client's own name besides
the origins, ``X-Nixx-Client`` names it outright, a known User-Agent names it when it says
nothing; the name is on both rows of the turn (``meta.client``) and search filters on it.
The real CLIs' User-Agents are checked in test_real_clients.py."""

from __future__ import annotations

from typing import Any

from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import Nixx


def turn(nixx: Nixx, llm: FakeLLM, path: str, text: str, headers: dict[str, str]) -> Any:
    llm.queue(Reply(content=f"noted: {text}"))
    if path == "/v1/messages":
        body: dict[str, Any] = {"model": "fake-model", "max_tokens": 64,
                                "messages": [{"role": "user", "content": text}]}
    elif path == "/v1/responses":
        body = {"model": "fake-model", "input": text, "store": False}
    else:
        body = {"model": "fake-model", "messages": [{"role": "user", "content": text}]}
    return nixx.client.post(path, json=body, headers=headers)


def told(nixx: Nixx, text: str) -> list[tuple[str, str, Any]]:
    """(role, origin, meta.client) of the rows of the turn that said `text`."""
    return [(r["role"], r["origin"], r["meta"].get("client")) for r in nixx.rows()
            if text in r["content"]]


def test_a_client_names_itself_on_every_route(nixx: Nixx, llm: FakeLLM) -> None:
    cases = [
        ("/v1/chat/completions", {"X-Nixx-Origin": "my-script"}, "api", "my-script"),
        ("/v1/messages", {"X-Nixx-Origin": "Zed.Agent_2"}, "anthropic", "zed.agent_2"),
        ("/v1/responses", {"X-Nixx-Client": "cron-job"}, "responses", "cron-job"),
        # an origin and a name together: the row keeps the origin, meta the name
        ("/v1/chat/completions", {"X-Nixx-Origin": "tui", "X-Nixx-Client": "my-tui"},
         "tui", "my-tui"),
        # X-Nixx-Client wins over a name in X-Nixx-Origin
        ("/v1/chat/completions", {"X-Nixx-Origin": "first", "X-Nixx-Client": "second"},
         "api", "second"),
        # a known User-Agent names the client when it says nothing itself...
        ("/v1/messages", {"User-Agent": "claude-cli/2.1.197 (external, cli)"},
         "anthropic", "claude-code"),
        ("/v1/responses", {"User-Agent": "codex_cli_rs/0.171.0 (Debian 12.0.0; x86_64)"},
         "responses", "codex-cli"),
        # ...and never over its own word; an unknown one names nothing
        ("/v1/messages", {"User-Agent": "claude-cli/2.1.197", "X-Nixx-Client": "mine"},
         "anthropic", "mine"),
        ("/v1/chat/completions", {"User-Agent": "curl/8.5.0"}, "api", None),
    ]
    for i, (path, headers, origin, client) in enumerate(cases):
        text = f"case {i} on {path}"
        r = turn(nixx, llm, path, text, headers)
        assert r.status_code == 200, (headers, r.text)
        assert told(nixx, text) == [("user", origin, client), ("assistant", origin, client)], \
            headers


def test_a_name_outside_the_safe_charset_is_refused_with_the_rule(
    nixx: Nixx, llm: FakeLLM
) -> None:
    for path in ("/v1/chat/completions", "/v1/messages", "/v1/responses"):
        for headers, param in [({"X-Nixx-Origin": "emacs; rm -rf"}, "X-Nixx-Origin"),
                               ({"X-Nixx-Origin": "-dash-first"}, "X-Nixx-Origin"),
                               ({"X-Nixx-Origin": "x" * 41}, "X-Nixx-Origin"),
                               ({"X-Nixx-Client": "two words"}, "X-Nixx-Client")]:
            r = turn(nixx, llm, path, "refused", headers)
            assert r.status_code == 400, (path, headers)
            said = r.text
            assert param in said and "at most 40" in said, said
    assert nixx.rows() == []  # nothing written for a refused turn


def test_search_keeps_to_one_client(nixx: Nixx, llm: FakeLLM) -> None:
    for client, fact in [("claude-code", "the staging database is called heron"),
                         ("my-script", "the staging bucket is called heron-archive"),
                         ("codex-cli", "the heron deploy runs at noon")]:
        assert turn(nixx, llm, "/v1/chat/completions", fact,
                    {"X-Nixx-Client": client}).status_code == 200
    assert turn(nixx, llm, "/v1/messages", "heron is the staging host", {}).status_code == 200
    nixx.idle()

    def found(**filter_: str) -> set[tuple[str, Any]]:
        r = nixx.client.post("/v1/episodic/search",
                             json={"query": "heron staging", "limit": 20, **filter_})
        assert r.status_code == 200, r.text
        answer = r.json()
        if filter_:
            assert answer["summaries"] == []
            assert all(h["kind"] == "buffer" for h in answer["results"])
        return {(h["origin"], h["meta"].get("client")) for h in answer["results"]}

    everyone = found()
    assert {("api", "claude-code"), ("api", "my-script"), ("anthropic", None)} <= everyone
    assert found(client="claude-code") == {("api", "claude-code")}
    assert found(client="my-script") == {("api", "my-script")}
    assert found(client="anthropic") == {("anthropic", None)}  # an origin filters too
    assert found(client="nobody") == set()
    bad = nixx.client.post("/v1/episodic/search", json={"query": "heron", "client": "a b"})
    assert bad.status_code == 400
