"""The request-size limit against a real uvicorn server: refused with 413 and the OpenAI
envelope while the body is being read (a declared length before any of it is read, a
chunked body as soon as it passes the limit), configurable, and `/health` keeps
answering throughout."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from nixx.server.app import create_app
from nixx.testing.live_server import LiveServer

LIMIT = 64 * 1024


@pytest.fixture
def small(make_settings: Any) -> Iterator[LiveServer]:
    with LiveServer(create_app(make_settings(max_request_bytes=LIMIT))) as server:
        yield server


def _read_response(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        piece = sock.recv(65536)
        assert piece, data
        data += piece
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        piece = sock.recv(65536)
        assert piece
        body += piece
    return int(lines[0].split()[1]), headers, body


def test_a_declared_length_over_the_limit_is_refused_before_the_body_is_sent(
    small: LiveServer,
) -> None:
    with socket.create_connection(("127.0.0.1", small.port)) as sock:
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {96 * 1024 * 1024}\r\n\r\n".encode()
        )
        # not one byte of the 96 MB body was sent, and the answer is already here
        status, headers, body = _read_response(sock)
    assert status == 413
    assert headers["connection"] == "close"
    err = json.loads(body)["error"]
    assert err["code"] == "request_too_large" and err["type"] == "invalid_request_error"
    assert f"{LIMIT} bytes" in err["message"] and "NIXX_MAX_REQUEST_BYTES" in err["message"]


def test_a_chunked_body_is_refused_once_it_passes_the_limit(small: LiveServer) -> None:
    sent = {"bytes": 0}

    def body() -> Iterator[bytes]:
        yield b'{"model": "m", "messages": [{"role": "user", "content": "'
        for _ in range(10_000):  # up to 80 MB, never all sent
            sent["bytes"] += 8192
            yield b"x" * 8192

    with httpx.Client(base_url=small.base_url, timeout=30) as client:
        try:
            r = client.post("/v1/chat/completions", content=body(),
                            headers={"Content-Type": "application/json"})
            status, payload = r.status_code, r.json()
        except httpx.HTTPError:  # the server closed while we were still sending
            status, payload = 413, None
        assert status == 413
        if payload is not None:
            assert payload["error"]["code"] == "request_too_large"
        assert sent["bytes"] < 40 * 1024 * 1024  # it stopped reading long before the end
        assert client.get("/health").status_code == 200
    # nothing of the refused request reached the buffer
    with httpx.Client(base_url=small.base_url) as client:
        rows = client.get("/v1/episodic/transcript", params={"start": 1}).json()["rows"]
    assert rows == []


def test_bodies_under_the_limit_work_and_health_answers_during_an_upload(
    small: LiveServer,
) -> None:
    with httpx.Client(base_url=small.base_url, timeout=30) as client:
        r = client.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [{"role": "user", "content": "y" * (LIMIT // 2)}]},
        )
        assert r.status_code == 200, r.text
        # an upload under way (headers and half the body sent) does not hold /health up
        payload = json.dumps(
            {"model": "m", "messages": [{"role": "user", "content": "slow upload"}]}
        ).encode()
        with socket.create_connection(("127.0.0.1", small.port)) as sock:
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\n"
                + f"Content-Length: {len(payload)}\r\n\r\n".encode()
                + payload[:10]
            )
            assert client.get("/health").status_code == 200
            sock.sendall(payload[10:])
            status, _, body = _read_response(sock)
        assert status == 200 and json.loads(body)["choices"][0]["message"]["content"]


def test_the_default_limit_is_16_mib(settings: Any) -> None:
    assert settings.max_request_bytes == 16 * 1024 * 1024


def test_a_body_sent_too_slowly_is_refused_and_its_connection_closed(make_settings: Any) -> None:
    """Slow loris: connections that trickle a body are answered 408 and closed once
    NIXX_REQUEST_BODY_TIMEOUT has passed, instead of staying open for ever; a client
    that sends its body at once is unaffected."""
    settings = make_settings(request_body_timeout=1.0)
    assert settings.request_body_timeout == 1.0
    with LiveServer(create_app(settings)) as live:
        socks = []
        for _ in range(5):
            sock = socket.create_connection(("127.0.0.1", live.port))
            sock.settimeout(30)  # far longer than the limit: the server must act first
            sock.sendall(
                b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                b"Content-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"
            )
            socks.append(sock)
        for sock in socks:
            with sock:
                status, headers, body = _read_response(sock)
                assert status == 408, body
                err = json.loads(body)["error"]
                assert err["code"] == "request_timeout"
                assert "NIXX_REQUEST_BODY_TIMEOUT" in err["message"]
                assert headers.get("connection") == "close"
                assert sock.recv(100) == b""  # closed by the server
        r = httpx.post(live.base_url + "/v1/chat/completions", timeout=30, json={
            "model": "m", "messages": [{"role": "user", "content": "at once"}]})
        assert r.status_code == 200, r.text
