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
from nixx.testing.fake_llm import Reply
from nixx.testing.live_server import LiveServer

LIMIT = 64 * 1024


@pytest.fixture
def small(make_settings: Any) -> Iterator[LiveServer]:
    # a context window the bodies fit: this is about bytes, not tokens
    settings = make_settings(max_request_bytes=LIMIT, chat_context_length=100_000)
    with LiveServer(create_app(settings)) as server:
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


def test_a_client_sending_a_body_over_the_limit_at_once_reads_the_413(small: LiveServer) -> None:
    """A body over the limit but not huge (16 MiB, more than the socket buffers hold) is
    read and dropped before the 413, so a client that sends it whole reads the answer
    (closing with it unread resets the connection: its send fails, no answer)."""
    size = 16 * 1024 * 1024
    with socket.create_connection(("127.0.0.1", small.port)) as sock:
        sock.settimeout(60)
        sock.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {size}\r\n\r\n".encode() + b"{" + b" " * (size - 2) + b"}"
        )
        status, _, body = _read_response(sock)
    assert status == 413
    assert json.loads(body)["error"]["code"] == "request_too_large"


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
    NIXX_REQUEST_TIMEOUT has passed, instead of staying open for ever; a client
    that sends its body at once is unaffected."""
    settings = make_settings(request_timeout=1.0)
    assert settings.request_timeout == 1.0
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
                assert "NIXX_REQUEST_TIMEOUT" in err["message"]
                assert headers.get("connection") == "close"
                assert sock.recv(100) == b""  # closed by the server
        r = httpx.post(live.base_url + "/v1/chat/completions", timeout=30, json={
            "model": "m", "messages": [{"role": "user", "content": "at once"}]})
        assert r.status_code == 200, r.text


def test_bodies_past_the_inflight_budget_are_told_to_retry(make_settings: Any) -> None:
    """Concurrent large requests: while one body of 40 KB is being received, a second
    that would take the sum past NIXX_MAX_INFLIGHT_BYTES is answered 503 with
    Retry-After at once; small requests still pass, and once the first is done the
    second is served."""
    settings = make_settings(max_request_bytes=LIMIT, max_inflight_bytes=60_000,
                             chat_context_length=100_000)
    assert settings.max_inflight_bytes == 60_000
    body = json.dumps({"model": "m", "messages": [
        {"role": "user", "content": "z" * 40_000}]}).encode()
    with LiveServer(create_app(settings)) as live, socket.create_connection(
        ("127.0.0.1", live.port)
    ) as first:
        first.settimeout(30)
        first.sendall(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {len(body)}\r\n\r\n".encode() + body[:100]
        )
        with httpx.Client(base_url=live.base_url, timeout=30) as client:
            assert client.get("/health").status_code == 200
            # the first request is in flight once the server reads its body: wait for that
            busy = None
            for _ in range(100):
                busy = client.post("/v1/chat/completions", content=body,
                                   headers={"Content-Type": "application/json"})
                if busy.status_code == 503:
                    break
            assert busy is not None and busy.status_code == 503, busy.text
            err = busy.json()["error"]
            assert err["code"] == "server_busy" and "NIXX_MAX_INFLIGHT_BYTES" in err["message"]
            assert err["type"] == "overloaded_error"  # nixx is busy, not the backend
            assert busy.headers["retry-after"] == "1"
            small = client.post("/v1/chat/completions", json={
                "model": "m", "messages": [{"role": "user", "content": "small"}]})
            assert small.status_code == 200, small.text
            first.sendall(body[100:])
            status, _, _ = _read_response(first)
            assert status == 200
            again = client.post("/v1/chat/completions", content=body,
                                headers={"Content-Type": "application/json"})
            assert again.status_code == 200, again.text


def test_a_body_refused_for_the_budget_still_gets_its_answer(make_settings: Any) -> None:
    """A client refused for the in-flight budget reads the 503 telling it to retry, even
    when its body is larger than the socket buffers: the server reads and drops the body
    first. (Closing with it unread resets the connection: the client's send fails with
    EPIPE/ECONNRESET and the answer is never read.)"""
    size = 8 * 1024 * 1024
    settings = make_settings(max_request_bytes=2 * size, max_inflight_bytes=size + size // 2)
    head = (b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/json\r\n"
            + f"Content-Length: {size}\r\n\r\n".encode())
    body = b"{" + b" " * (size - 2) + b"}"
    with LiveServer(create_app(settings)) as live, socket.create_connection(
        ("127.0.0.1", live.port)
    ) as first:
        first.sendall(head + body[:100])  # declares 8 MiB of the budget and trickles
        with httpx.Client(base_url=live.base_url, timeout=30) as client:
            assert client.get("/health").status_code == 200
        with socket.create_connection(("127.0.0.1", live.port)) as second:
            second.settimeout(60)
            second.sendall(head + body)  # fails here when the server closes unread
            status, headers, answer = _read_response(second)
        assert status == 503, answer
        assert headers["retry-after"] == "1"
        assert json.loads(answer)["error"]["code"] == "server_busy"


def test_a_message_larger_than_the_context_window_is_refused_before_anything(
    make_settings: Any, llm: Any
) -> None:
    """A 10 MiB message went to an 8,192-token backend whole (trimming keeps the last
    message always) after being stored, indexed and embedded. Now it is a 400
    context_length_exceeded, streamed or not: nothing stored, nothing sent."""
    with LiveServer(create_app(make_settings(chat_context_length=8192))) as live:
        big = "word " * (200 * 1024)  # ~1 MB: ~256k tokens by nixx's estimate
        for stream in (False, True):
            r = httpx.post(live.base_url + "/v1/chat/completions", timeout=60, json={
                "model": "m", "stream": stream, "messages": [
                    {"role": "user", "content": "earlier"}, {"role": "assistant", "content": "ok"},
                    {"role": "user", "content": big}]})
            assert r.status_code == 400, r.text
            err = r.json()["error"]
            assert err["code"] == "context_length_exceeded"
            assert err["param"] == "messages.2.content"
            assert "8192" in err["message"] and "NIXX_CHAT_CONTEXT_LENGTH" in err["message"]
        rows = httpx.get(live.base_url + "/v1/episodic/transcript", params={"start": 1}).json()
        assert rows["rows"] == []
        assert llm.chat_requests == [] and llm.embed_requests == []
        # a message that fits is a turn as before
        ok = httpx.post(live.base_url + "/v1/chat/completions", timeout=60, json={
            "model": "m", "messages": [{"role": "user", "content": "word " * 4000}]})
        assert ok.status_code == 200, ok.text


def test_system_instructions_larger_than_the_context_are_refused_on_every_dialect(
    make_settings: Any, llm: Any
) -> None:
    """A 12-15 MiB ``system`` or ``instructions`` went to the backend whole, past the
    context length (trimming drops history, never the instructions). Now each dialect's
    way of giving them — a chat system message, Messages' ``system``, Responses'
    ``instructions`` and ``developer`` input — is a 400 context_length_exceeded naming
    ``system`` when they cannot fit: nothing stored, nothing sent."""
    big = "rule " * (200 * 1024)  # ~1 MB: ~256k tokens by nixx's estimate
    asks = [
        ("/v1/chat/completions", {"model": "m", "messages": [
            {"role": "system", "content": big}, {"role": "user", "content": "hi"}]}),
        ("/v1/messages", {"model": "m", "max_tokens": 64, "system": big,
                          "messages": [{"role": "user", "content": "hi"}]}),
        ("/v1/responses", {"model": "m", "instructions": big, "input": "hi"}),
        ("/v1/responses", {"model": "m", "input": [
            {"role": "developer", "content": big}, {"role": "user", "content": "hi"}]}),
    ]
    with LiveServer(create_app(make_settings(chat_context_length=8192))) as live:
        for path, body in asks:
            for stream in (False, True):
                r = httpx.post(live.base_url + path, timeout=60, json={**body, "stream": stream})
                assert r.status_code == 400, (path, r.text[:300])
                said = r.text
                assert "context_length_exceeded" in said or "invalid_request" in said, said
                assert "system instructions" in said and "NIXX_CHAT_CONTEXT_LENGTH" in said
        rows = httpx.get(live.base_url + "/v1/episodic/transcript", params={"start": 1}).json()
        assert rows["rows"] == []
        assert llm.chat_requests == [] and llm.embed_requests == []
        # instructions that fit are a turn as before
        ok = httpx.post(live.base_url + "/v1/messages", timeout=60, json={
            "model": "m", "max_tokens": 64, "system": "rule " * 2000,
            "messages": [{"role": "user", "content": "hi"}]})
        assert ok.status_code == 200, ok.text


@pytest.mark.parametrize("protocol", ["httptools", "h11"])
def test_the_header_time_limit_holds_on_both_of_uvicorns_protocols(
    make_settings: Any, protocol: str
) -> None:
    """`nixx serve`'s protocol class (`nixx.server.run._protocol_class`) over httptools (what
    it runs) and over h11 (its fallback): a connection that sends nothing, or a header
    line and no more, is closed once the limit has passed; on a kept-alive connection the
    limit starts again after each answer, and a request sent in time is served."""
    from uvicorn.protocols.http.h11_impl import H11Protocol
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    from nixx.server.run import _http_protocol, _protocol_class

    assert _http_protocol() is HttpToolsProtocol  # a dependency: always the one served
    base = {"httptools": HttpToolsProtocol, "h11": H11Protocol}[protocol]
    settings = make_settings(request_timeout=1.0)
    http = _protocol_class(settings.request_timeout, base)
    assert issubclass(http, base)
    # uvicorn's own keep-alive limit (5 s) pushed past the socket timeout: only the
    # header limit can close the idle kept-alive connection
    with LiveServer(create_app(settings), http=http, timeout_keep_alive=60) as live:
        socks = []
        for data in (b"", b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n"):
            sock = socket.create_connection(("127.0.0.1", live.port))
            sock.settimeout(30)  # far past the limit: the server must act first
            sock.sendall(data)
            socks.append(sock)
        with socket.create_connection(("127.0.0.1", live.port)) as kept:
            kept.settimeout(30)
            for _ in range(2):  # answered, then again on the same connection in time
                kept.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                status, headers, _ = _read_response(kept)
                assert status == 200 and headers.get("connection") != "close"
            assert kept.recv(100) == b""  # then idle past the limit: closed
        for sock in socks:
            with sock:
                assert sock.recv(100) == b""  # closed without an answer
        assert httpx.get(live.base_url + "/health").status_code == 200


def test_a_body_of_too_many_json_items_is_refused_before_it_is_parsed(
    make_settings: Any, llm: Any
) -> None:
    """Millions of empty content blocks take gigabytes once parsed (2.6 GB for 15 MiB on
    /v1/messages): a body with more objects and arrays than NIXX_MAX_JSON_ITEMS is a 400
    naming the limit on every dialect, in its own error shape, before the app parses it
    (the backend is never called, nothing is stored). Braces inside strings do not count,
    and a body within the limit is served."""
    settings = make_settings(max_json_items=1_000, chat_context_length=100_000)
    blocks = [{"type": "text", "text": ""}] * 1_200
    bodies = {
        "/v1/messages": {"model": "m", "max_tokens": 10,
                         "messages": [{"role": "user", "content": blocks}]},
        "/v1/responses": {"model": "m", "input": [
            {"role": "user", "content": [{"type": "input_text", "text": ""}] * 1_200}]},
        "/v1/chat/completions": {"model": "m", "messages": [
            {"role": "user", "content": blocks}]},
        "/v1/intent": {"intent": [[]] * 1_200},
    }
    with LiveServer(create_app(settings)) as live, httpx.Client(
        base_url=live.base_url, timeout=30
    ) as client:
        for path, body in bodies.items():
            r = client.post(path, json=body)
            assert r.status_code == 400, (path, r.text)
            assert "NIXX_MAX_JSON_ITEMS" in r.text and "1000" in r.text, r.text
            if path == "/v1/messages":
                assert r.json()["error"]["type"] == "invalid_request_error"
            else:
                assert r.json()["error"]["code"] == "too_many_items"
            assert r.headers.get("connection") != "close"
        assert llm.chat_requests == []
        stored = live.call(lambda: live.service.run(live.service._store.get_buffer, 1))
        assert stored == []
        # 2,000 braces in a string are text, not items: served
        llm.queue(Reply(content="fine"))
        r = client.post("/v1/chat/completions", json={
            "model": "m", "messages": [{"role": "user", "content": "{[" * 1_000 + '\\"{'}]})
        assert r.status_code == 200, r.text
