"""Where a client reaches `nixx serve` (`nixx.local_server.server_url`): one answer for
the clients' default URL (`default_url`: `nixx chat`, `nixx mcp`) and the built-in
agent's backend file (`nixx.nxc.delivery.llm_backend.from_settings`)."""

from __future__ import annotations

import json

import pytest

from nixx.config import Settings
from nixx.local_server import default_url, server_url


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "[::]", "", " 0.0.0.0 "])
def test_a_wildcard_bind_is_reached_on_loopback(host):
    assert server_url(host, 8765) == "http://127.0.0.1:8765"


@pytest.mark.parametrize(("host", "url"), [
    ("127.0.0.1", "http://127.0.0.1:9000"),
    ("localhost", "http://localhost:9000"),
    ("::1", "http://[::1]:9000"),
    ("[::1]", "http://[::1]:9000"),
    ("fe80::2", "http://[fe80::2]:9000"),
    ("192.168.1.7", "http://192.168.1.7:9000"),
    ("nixx.lan", "http://nixx.lan:9000"),
])
def test_an_explicit_host_is_reached_where_it_is(host, url):
    assert server_url(host, 9000) == url


@pytest.mark.parametrize("host", ["::", "[::]", "0.0.0.0", "::1", "127.0.0.1"])
def test_the_clients_and_the_agents_backend_agree(host, monkeypatch, tmp_path):
    """The same settings give the same URL to `nixx chat`/`nixx mcp` and to the built-in
    agent's backend file (they disagreed on ``[::]`` before issue 29)."""
    from nixx.nxc.delivery.llm_backend import from_settings

    monkeypatch.setenv("NIXX_HOME", str(tmp_path))
    monkeypatch.setenv("NIXX_HOST", host)
    monkeypatch.setenv("NIXX_PORT", "8123")
    backend = from_settings()
    settings = Settings(host=host, port=8123)
    assert backend["server_url"] == default_url(settings) == server_url(host, 8123)
    json.dumps(backend)  # it is written to a file as JSON
