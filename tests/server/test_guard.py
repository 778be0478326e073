"""The request guard (`nixx.server.guard`) against a real uvicorn server with no API key
(the loopback default): a page whose name was rebound to 127.0.0.1 reaches no route
(`Host`), another site's page changes nothing (`Origin`, `Sec-Fetch-Site`), and the
"simple" cross-site posts a browser sends without asking (form-encoded, text/plain) are
refused by the JSON API (415) — on `/v1`, `/ui` and `/mcp` alike, whatever the bound
address."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nixx.server.app import create_app
from nixx.testing.live_server import LiveServer

MCP_INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-06-18", "capabilities": {},
    "clientInfo": {"name": "probe", "version": "0"}}}
MCP_HEADERS = {"Accept": "application/json, text/event-stream"}


@pytest.fixture
def server(make_settings: Any) -> Iterator[LiveServer]:
    # bound (as far as the app knows) to 127.0.0.2: the MCP SDK checked nothing there
    with LiveServer(create_app(make_settings(host="127.0.0.2"))) as live:
        yield live


def _intent(live: LiveServer) -> Any:
    return httpx.get(live.base_url + "/v1/intent").json()["intent"]


def test_a_rebound_name_reaches_no_route(server: LiveServer) -> None:
    evil = {"Host": f"evil.example:{server.port}"}
    url = server.base_url
    answers = {
        "GET /v1/intent": httpx.get(url + "/v1/intent", headers=evil),
        "GET /v1/episodic/transcript": httpx.get(
            url + "/v1/episodic/transcript", params={"start": 1}, headers=evil),
        "POST /v1/buffer/delete": httpx.post(
            url + "/v1/buffer/delete", json={"start_id": 1, "end_id": 9}, headers=evil),
        "GET /health": httpx.get(url + "/health", headers=evil),
        "POST /mcp": httpx.post(url + "/mcp", json=MCP_INIT, headers={**MCP_HEADERS, **evil}),
        # the turn whose model ran write_file in the workspace for the rebound page
        "POST /v1/chat/completions": httpx.post(url + "/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "write a file"}]},
            headers=evil),
        "POST /v1/intent": httpx.post(url + "/v1/intent", json={"intent": "Theirs."},
                                      headers=evil),
    }
    for what, r in answers.items():
        assert r.status_code == 421, (what, r.status_code, r.text)
        err = r.json()["error"]
        assert err["code"] == "host_not_allowed", what
        assert "'evil.example'" in err["message"] and "NIXX_ALLOWED_HOSTS" in err["message"]
    assert _intent(server) is None
    assert httpx.get(url + "/v1/episodic/transcript", params={"start": 1}).json()["rows"] == []
    page = httpx.get(url + "/ui/settings", headers=evil)  # a page: the refusal is a page
    assert page.status_code == 421 and page.headers["content-type"].startswith("text/html")
    assert "NIXX_ALLOWED_HOSTS" in page.text and "csrf" not in page.text


def test_loopback_names_ip_addresses_and_the_bound_address_are_served(
    server: LiveServer,
) -> None:
    for host in ("127.0.0.1", "localhost", "LOCALHOST", "127.0.0.2", "10.1.2.3", "[::1]"):
        r = httpx.get(server.base_url + "/v1/intent", headers={"Host": f"{host}:{server.port}"})
        assert r.status_code == 200, (host, r.text)
    assert httpx.get(server.base_url + "/v1/intent", headers={"Host": ""}).status_code == 421


def test_a_name_listed_in_allowed_hosts_is_served(make_settings: Any) -> None:
    settings = make_settings(allowed_hosts="nixx.lan, Box.Example")
    assert settings.allowed_hosts == ["nixx.lan", "Box.Example"]
    with LiveServer(create_app(settings)) as live:
        for host in ("nixx.lan", "box.example:8420"):
            assert httpx.get(live.base_url + "/v1/intent", headers={"Host": host}).status_code == 200
        assert httpx.get(live.base_url + "/v1/intent",
                         headers={"Host": "other.lan"}).status_code == 421


def test_a_state_change_from_another_page_is_refused(server: LiveServer) -> None:
    url = server.base_url
    own = f"http://127.0.0.1:{server.port}"
    assert httpx.post(url + "/v1/intent", json={"intent": "Mine."},
                      headers={"Origin": own}).status_code == 200
    refused = {
        "origin": {"Origin": f"http://evil.example:{server.port}"},
        "another port": {"Origin": "http://127.0.0.1:1"},
        "opaque": {"Origin": "null"},
        "fetch site": {"Sec-Fetch-Site": "cross-site"},
        "same site": {"Sec-Fetch-Site": "same-site"},
    }
    for what, headers in refused.items():
        for r in (
            httpx.post(url + "/v1/intent", json={"intent": "Theirs."}, headers=headers),
            httpx.delete(url + "/v1/intent", headers=headers),
            httpx.post(url + "/ui/intent", data={"action": "clear"}, headers=headers),
            httpx.post(url + "/mcp", json=MCP_INIT, headers={**MCP_HEADERS, **headers}),
        ):
            assert r.status_code == 403, (what, r.request.url, r.text)
            assert "refused" in r.text
    assert _intent(server) == "Mine."
    # reading is not a change: a GET with another Origin is answered (the browser keeps it
    # from the other page: there is no CORS), and a link followed from another site works
    assert httpx.get(url + "/v1/intent", headers=refused["origin"]).status_code == 200
    assert httpx.get(url + "/ui/settings", headers=refused["fetch site"]).status_code == 200


def test_simple_cross_site_posts_are_not_json_and_are_refused(server: LiveServer) -> None:
    """What a form or a no-cors fetch of another site can send without a preflight: none of
    it reaches a route, so a manual intent is not replaced and no session is ended."""
    url = server.base_url
    httpx.post(url + "/v1/intent", json={"intent": "Manual."})
    simple = [
        ("/v1/buffer/clear", {"Content-Type": "text/plain"}, b""),
        ("/v1/episodic/summary", {"Content-Type": "application/x-www-form-urlencoded"}, b"a=b"),
        ("/v1/intent/derive", {"Content-Type": "text/plain;charset=UTF-8"}, b"{}"),
        ("/v1/intent", {"Content-Type": "multipart/form-data; boundary=x"}, b"--x--"),
        ("/v1/intent", {}, b'{"intent": "no type"}'),  # a Blob without a type
    ]
    for path, headers, body in simple:
        r = httpx.post(url + path, content=body, headers=headers)
        assert r.status_code == 415, (path, r.text)
        err = r.json()["error"]
        assert err["code"] == "unsupported_media_type" and "application/json" in err["message"]
    assert _intent(server) == "Manual."
    rows = httpx.get(url + "/v1/episodic/transcript", params={"start": 1}).json()["rows"]
    assert rows == []  # no session_clear marker
    # a body-less POST from a client that is not a browser still works, as does JSON
    assert httpx.post(url + "/v1/buffer/clear").status_code == 200
    assert httpx.post(url + "/v1/intent", content=b'{"intent": "Typed."}',
                      headers={"Content-Type": "application/json; charset=utf-8"}).status_code == 200


def test_mcp_on_a_loopback_address_the_sdk_left_unchecked(server: LiveServer) -> None:
    """Bound to 127.0.0.2, `/mcp` took any Host and Origin; now the same guard answers,
    and a genuine client is served without a session to keep."""
    url = server.base_url + "/mcp"
    assert httpx.post(url, json=MCP_INIT, headers={**MCP_HEADERS, "Host": "evil.example"}
                      ).status_code == 421
    r = httpx.post(url, json=MCP_INIT, headers=MCP_HEADERS, timeout=60)
    assert r.status_code == 200, r.text
    assert "mcp-session-id" not in r.headers  # stateless: nothing for clients to fill
    listed = httpx.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                        headers={**MCP_HEADERS, "MCP-Protocol-Version": "2025-06-18"}, timeout=60)
    assert listed.status_code == 200, listed.text
    assert "memory_search" in listed.text
    assert httpx.post(url, content=b"{}", headers={**MCP_HEADERS, "Content-Type": "text/plain"}
                      ).status_code == 415


def test_mcp_keeps_no_sessions_so_opening_many_locks_no_client_out(server: LiveServer) -> None:
    """The SDK kept a table of sessions (10,000 opened ones answered every client 503 for
    30 minutes); stateless, an initialize leaves nothing behind, and a request that names
    no session is served."""
    url = server.base_url + "/mcp"
    with httpx.Client(timeout=60) as client:
        for _ in range(50):
            r = client.post(url, json=MCP_INIT, headers=MCP_HEADERS)
            assert r.status_code == 200, r.text
            assert "mcp-session-id" not in r.headers
        listed = client.post(url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
                             headers={**MCP_HEADERS, "MCP-Protocol-Version": "2025-06-18"})
    assert listed.status_code == 200, listed.text
    assert "memory_search" in listed.text
