"""A scripted OpenAI-compatible backend over real HTTP, for tests and benchmarks.

It speaks the real protocol (JSON and SSE streaming, tool calls, `/v1/models`,
`/v1/embeddings`) on a loopback port and records every request, so a test can assert
on the exact prompt nixx built. It is the only stand-in in nixx's tests: the LLM.

    with FakeLLM() as llm:
        llm.queue(Reply(content="hello"))
        ... point nixx at llm.base_url ...
        assert llm.chat_requests[-1]["messages"][0]["role"] == "system"

Replies come from the queue first, then from `responder(body)`, then the default,
which echoes the user's words in the last user message as ``echo: <text>`` (not the
memory nixx added after them, `nixx.memory.layout`: a model that repeated it would put
that memory into the buffer, where a later turn recalls it — a cleared intent, say).

It can be told to behave as a local server does (llama.cpp, llama-cpp-python):

- ``FakeLLM(slots=1)`` serves one chat request at a time (the others wait for the slot);
  ``interrupt=True`` as well ends a running stream early when another request waits, the
  way llama-cpp-python does by default (``interrupt_requests``): after its current chunk,
  ``[DONE]`` with no finish reason. `peak_in_flight` is the most chat requests it ever
  held at once (arrived, not yet answered), waiting ones included.
- ``Reply(done_after=n)`` ends that one stream after `n` content chunks with ``[DONE]``
  and no finish reason; ``Reply(hold=seconds)`` keeps it open after its content until the
  client hangs up (`hung_up` counts those, `wait_hung_up` awaits them).
- ``FakeLLM(cache=PromptCache(...))`` keeps one evaluated prompt as a llama slot does:
  a request is evaluated from where its tokens differ from what the slot holds (its
  prompt and what it generated), at ``eval_rate`` tokens a second, and the evaluation
  finishes even when the client hangs up (a local server cannot stop it); generation
  takes ``1 / gen_rate`` seconds a token. `PromptCache.evaluations` records (tokens
  taken from the cache, tokens evaluated) of each request, as llama-cpp-python logs them.
- ``props`` (llama.cpp's ``GET /props``), ``show`` (Ollama's ``POST /api/show``) and
  ``model_fields`` (extra fields of each ``/v1/models`` entry, e.g. vLLM's
  ``max_model_len``) answer what those backends tell about the model; unset, those routes
  answer 404 as an OpenAI server's do.
"""

from __future__ import annotations

import hashlib
import json
import re
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

_WORD = re.compile(r"[a-z0-9]+")


@dataclass
class ToolCall:
    name: str
    arguments: dict[str, Any] | str = field(default_factory=dict)
    id: str = ""

    def arguments_json(self) -> str:
        return self.arguments if isinstance(self.arguments, str) else json.dumps(self.arguments)


@dataclass
class Reply:
    """One scripted answer to a /v1/chat/completions request."""

    content: str | None = None
    tool_calls: list[ToolCall] | None = None
    status: int = 200  # non-200: answer an OpenAI error body with `error` as message
    error: str = "scripted failure"
    cut_after: int | None = None  # SSE: drop the connection after this many content chunks
    delay: float = 0.0  # seconds to sleep before each streamed chunk (and before a JSON answer)
    finish_reason: str | None = None  # default: "tool_calls" with tool calls, else "stop"
    raw_body: str | None = None  # JSON mode: send this text verbatim (malformed-body tests)
    # SSE: after the content chunks, send these `data:` payloads verbatim (malformed-chunk
    # tests), then finish as usual
    raw_chunks: list[str] | None = None
    usage: bool = True  # False: report no token counts (as some backends and gateways do)
    # SSE: after this many content chunks send `[DONE]` with no finish reason (a local
    # server that gave the slot to another request)
    done_after: int | None = None
    # the prompt's tokens the backend's cache held (``usage.prompt_tokens_details``)
    cached_tokens: int | None = None
    # the model's thinking, sent apart from the answer as llama.cpp, vLLM and DeepSeek
    # do: SSE ``delta.reasoning_content`` chunks before the content, JSON
    # ``message.reasoning_content``
    reasoning: str | None = None
    # SSE: after the content chunks, hold the stream open (neither finish nor close it)
    # until the client hangs up, at most this many seconds, then finish as usual; a
    # hang-up is counted in `FakeLLM.hung_up` (a client that stops reading early)
    hold: float | None = None


@dataclass
class Evaluation:
    """What a `PromptCache` did with one request's prompt."""

    cached: int  # tokens taken from what the slot held
    evaluated: int  # tokens evaluated
    body: dict[str, Any]  # the request

    @property
    def messages(self) -> list[dict[str, Any]]:
        return list(self.body.get("messages") or [])


class PromptCache:
    """The one prompt a llama slot holds, over a toy chat template: a token is a word,
    each message is ``<|role|> words <|end|>``, the tools' JSON words come first and the
    prompt ends with ``<|assistant|>``. Prefixes behave as a real tokeniser's do for text
    cut before a space."""

    def __init__(self, eval_rate: float = 2000.0, gen_rate: float = 200.0) -> None:
        self.eval_rate = eval_rate
        self.gen_rate = gen_rate
        self.held: list[str] = []
        self.evaluations: list[Evaluation] = []
        self._lock = threading.Lock()

    @staticmethod
    def tokens(body: dict[str, Any]) -> list[str]:
        out: list[str] = []
        if body.get("tools"):
            out += json.dumps(body["tools"]).split()
        for message in body.get("messages", []):
            out.append(f"<|{message.get('role')}|>")
            out += _text_of(message.get("content")).split()
            if message.get("tool_calls"):
                out += json.dumps(message["tool_calls"]).split()
            out.append("<|end|>")
        return [*out, "<|assistant|>"]

    def evaluate(self, body: dict[str, Any]) -> None:
        """Evaluate the prompt: sleeps for the tokens past the shared prefix (all of them,
        whatever the client does meanwhile), then holds it."""
        prompt = self.tokens(body)
        with self._lock:
            shared = 0
            for a, b in zip(self.held, prompt[:-1], strict=False):
                if a != b:
                    break
                shared += 1
            self.evaluations.append(
                Evaluation(shared, len(prompt) - shared, body))
        time.sleep((len(prompt) - shared) / self.eval_rate)
        with self._lock:
            self.held = prompt

    def generated(self, piece: str) -> None:
        """One piece generated (a word: one token): its time, and the slot holds it."""
        time.sleep(1.0 / self.gen_rate)
        with self._lock:
            self.held += piece.split()


@dataclass
class Recorded:
    method: str
    path: str
    headers: dict[str, str]
    body: Any


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def user_words(body: dict[str, Any]) -> str:
    """The user's words in a request's last user message: its text before the memory
    nixx added after them (`nixx.memory.layout`), if any."""
    from nixx.memory.prompts import MEMORY_NOTE

    last = ""
    for message in body.get("messages", []):
        if message.get("role") == "user":
            last = _text_of(message.get("content"))
    return last.partition(f"\n\n{MEMORY_NOTE}")[0]


class _QuietServer(ThreadingHTTPServer):
    """A client hanging up mid-request (a cut test, a benchmark ending) is not an error."""

    def handle_error(self, request: Any, client_address: Any) -> None:
        import sys

        if isinstance(sys.exc_info()[1], (ConnectionError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class FakeLLM:
    """Scripted OpenAI-compatible server on 127.0.0.1 (a free port unless given)."""

    def __init__(
        self,
        *,
        embed_dim: int = 384,
        port: int = 0,
        model: str = "fake-model",
        slots: int | None = None,
        interrupt: bool = False,
        cache: PromptCache | None = None,
    ) -> None:
        self.embed_dim = embed_dim
        self.cache = cache
        # llama.cpp's `GET /props`, Ollama's `POST /api/show`, extra `/v1/models` fields
        self.props: dict[str, Any] | None = None
        self.show: dict[str, Any] | None = None
        self.model_fields: dict[str, Any] = {}
        self.slots = slots
        self.interrupt = interrupt
        self._slot = threading.BoundedSemaphore(slots) if slots else None
        self._in_flight = 0
        self.peak_in_flight = 0
        self._serving = 0
        self.peak_serving = 0  # the most chat requests it ever answered at once
        self.interrupted = 0  # streams ended early because another request waited
        self.hung_up = 0  # streams the client closed while a Reply(hold=) held them open
        self.models: list[str] = [model]
        self.responder: Callable[[dict[str, Any]], Reply] | None = None
        self.requests: list[Recorded] = []
        self.fail_embeddings = False
        self.fail_next_embeddings = 0  # answer this many /v1/embeddings calls with 500 first
        # scripted /v1/embeddings answer: a Reply (its status+error, or raw_body verbatim),
        # or None for the default vectors
        self.embed_responder: Callable[[dict[str, Any]], Reply | None] | None = None
        self._queue: list[Reply] = []
        self._lock = threading.Lock()
        self._hang_up = threading.Condition(self._lock)
        self._server = _QuietServer(("127.0.0.1", port), self._handler_class())
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    # ---- control ------------------------------------------------------------------
    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def queue(self, *replies: Reply) -> None:
        with self._lock:
            self._queue.extend(replies)

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._queue)

    @property
    def chat_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in list(self.requests) if r.path.endswith("/chat/completions")]

    @property
    def embed_requests(self) -> list[dict[str, Any]]:
        return [r.body for r in list(self.requests) if r.path.endswith("/embeddings")]

    @property
    def in_flight(self) -> int:
        """Chat requests arrived and not yet answered (waiting ones included)."""
        with self._lock:
            return self._in_flight

    def _enter(self) -> None:
        with self._lock:
            self._in_flight += 1
            self.peak_in_flight = max(self.peak_in_flight, self._in_flight)
        if self._slot is not None:
            self._slot.acquire()
        with self._lock:
            self._serving += 1
            self.peak_serving = max(self.peak_serving, self._serving)

    def _leave(self) -> None:
        with self._lock:
            self._serving -= 1
        if self._slot is not None:
            self._slot.release()
        with self._lock:
            self._in_flight -= 1

    def wait_hung_up(self, count: int = 1, timeout: float = 30.0) -> bool:
        """Wait until the client has hung up on `count` held streams (`Reply.hold`);
        False when it had not within `timeout` seconds."""
        with self._hang_up:
            return self._hang_up.wait_for(lambda: self.hung_up >= count, timeout)

    def _others_wait(self) -> bool:
        with self._lock:
            return self.interrupt and self.slots is not None and self._in_flight > self.slots

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> FakeLLM:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- behaviour ----------------------------------------------------------------
    @staticmethod
    def embedding_of(text: str, dim: int = 384) -> np.ndarray:
        """Deterministic bag-of-words vector: texts sharing words have higher cosine."""
        vec = np.zeros(dim, dtype=np.float32)
        for word in _WORD.findall(text.lower()):
            digest = hashlib.blake2b(word.encode(), digest_size=8).digest()
            index = int.from_bytes(digest[:4], "little") % dim
            vec[index] += 1.0 if digest[4] & 1 else -1.0
        norm = float(np.linalg.norm(vec))
        if norm == 0.0:
            vec[0] = 1.0
            return vec
        return vec / np.float32(norm)

    def _next_reply(self, body: dict[str, Any]) -> Reply:
        with self._lock:
            if self._queue:
                return self._queue.pop(0)
        if self.responder is not None:
            return self.responder(body)
        return Reply(content=f"echo: {user_words(body)}")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        return type("Handler", (_Handler,), {"fake": self})


class _Handler(BaseHTTPRequestHandler):
    """The fake's routes; `FakeLLM._handler_class` binds a subclass to its FakeLLM."""

    fake: FakeLLM
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stalls between writes

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _record(self) -> Any:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode(errors="replace")
        self.fake.requests.append(
            Recorded(self.command, self.path, dict(self.headers.items()), body)
        )
        return body

    def _json(self, status: int, payload: Any, raw: str | None = None) -> None:
        data = (raw if raw is not None else json.dumps(payload)).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _error(self, status: int, message: str) -> None:
        self._json(
            status,
            {"error": {"message": message, "type": "server_error", "param": None, "code": None}},
        )

    def do_GET(self) -> None:
        self._record()
        if self.path.rstrip("/").endswith("/models"):
            data = [
                {"id": m, "object": "model", "created": 0, "owned_by": "fake",
                 **self.fake.model_fields}
                for m in self.fake.models
            ]
            self._json(200, {"object": "list", "data": data})
        elif self.path.rstrip("/") == "/props" and self.fake.props is not None:
            self._json(200, self.fake.props)
        else:
            self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:
        body = self._record()
        if self.path.endswith("/chat/completions"):
            self.fake._enter()
            try:
                self._chat(body if isinstance(body, dict) else {})
            finally:
                self.fake._leave()
        elif self.path.rstrip("/") == "/api/show" and self.fake.show is not None:
            self._json(200, self.fake.show)
        elif self.path.endswith("/embeddings"):
            self._embeddings(body if isinstance(body, dict) else {})
        else:
            self._error(404, f"no route {self.path}")

    def _embeddings(self, body: dict[str, Any]) -> None:
        if self.fake.fail_embeddings:
            self._error(500, "embeddings failing (scripted)")
            return
        with self.fake._lock:
            if self.fake.fail_next_embeddings > 0:
                self.fake.fail_next_embeddings -= 1
                failing = True
            else:
                failing = False
        if failing:
            self._error(500, "embeddings failing (scripted)")
            return
        scripted = self.fake.embed_responder(body) if self.fake.embed_responder else None
        if scripted is not None:
            if scripted.status != 200:
                self._error(scripted.status, scripted.error)
            else:
                self._json(200, None, raw=scripted.raw_body or "")
            return
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        data = [
            {
                "object": "embedding",
                "index": i,
                "embedding": [float(x) for x in self.fake.embedding_of(str(t), self.fake.embed_dim)],
            }
            for i, t in enumerate(inputs)
        ]
        tokens = sum(len(str(t).split()) for t in inputs)
        self._json(
            200,
            {
                "object": "list",
                "data": data,
                "model": body.get("model", "fake-embed"),
                "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
            },
        )

    _max_tokens: int | None = None

    def _chat(self, body: dict[str, Any]) -> None:
        bound = body.get("max_tokens")
        self._max_tokens = bound if isinstance(bound, int) and bound > 0 else None
        if self.fake.cache is not None:
            self.fake.cache.evaluate(body)
        reply = self.fake._next_reply(body)
        if reply.status != 200:
            if reply.delay:
                time.sleep(reply.delay)
            self._error(reply.status, reply.error)
            return
        model = body.get("model") or self.fake.models[0]
        calls = [
            {
                "id": c.id or f"call_{i}",
                "type": "function",
                "function": {"name": c.name, "arguments": c.arguments_json()},
            }
            for i, c in enumerate(reply.tool_calls or [])
        ]
        finish = reply.finish_reason or ("tool_calls" if calls else "stop")
        prompt_tokens = sum(
            len(_text_of(m.get("content")).split()) for m in body.get("messages", [])
        )
        # the thinking counts as output, and apart (``completion_tokens_details``), as
        # OpenAI and vLLM report it
        reasoning_tokens = len((reply.reasoning or "").split())
        completion_tokens = len((reply.content or "").split()) + reasoning_tokens
        usage: dict[str, Any] = {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        }
        if reasoning_tokens:
            usage["completion_tokens_details"] = {"reasoning_tokens": reasoning_tokens}
        if reply.cached_tokens is not None:
            usage["prompt_tokens_details"] = {"cached_tokens": reply.cached_tokens}
        if body.get("stream"):
            self._stream(reply, model, calls, finish, usage)
            return
        if reply.delay:
            time.sleep(reply.delay)
        message: dict[str, Any] = {"role": "assistant", "content": reply.content}
        if reply.reasoning:
            message["reasoning_content"] = reply.reasoning
        if calls:
            message["tool_calls"] = calls
        payload: dict[str, Any] = {
            "id": "chatcmpl-fake",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        }
        if reply.usage:
            payload["usage"] = usage
        self._json(200, payload, raw=reply.raw_body)

    def _stream(
        self,
        reply: Reply,
        model: str,
        calls: list[dict[str, Any]],
        finish: str,
        usage: dict[str, int],
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()

        def send(obj: Any) -> None:
            data = obj if isinstance(obj, str) else json.dumps(obj)
            payload = f"data: {data}\n\n".encode()
            self.wfile.write(f"{len(payload):x}\r\n".encode() + payload + b"\r\n")
            self.wfile.flush()

        def chunk(delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
            return {
                "id": "chatcmpl-fake",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
            }

        send(chunk({"role": "assistant", "content": ""}))
        for thought in re.findall(r"\S+\s*|\s+", reply.reasoning or ""):
            send(chunk({"reasoning_content": thought}))
        pieces = re.findall(r"\S+\s*|\s+", reply.content or "")
        bound = self.fake.cache is not None and self._max_tokens is not None
        if bound and len(pieces) > (self._max_tokens or 0):
            pieces, finish = pieces[: self._max_tokens], "length"  # a slot's answer is bounded

        def done_unfinished() -> None:
            send("[DONE]")
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()

        for n, piece in enumerate(pieces):
            if reply.cut_after is not None and n >= reply.cut_after:
                self.close_connection = True
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if reply.done_after is not None and n >= reply.done_after:
                done_unfinished()
                return
            if self.fake._others_wait():
                with self.fake._lock:
                    self.fake.interrupted += 1
                done_unfinished()
                return
            if reply.delay:
                time.sleep(reply.delay)
            if self.fake.cache is not None:
                self.fake.cache.generated(piece)
            send(chunk({"content": piece}))
        if reply.hold is not None and self._held_until_hung_up(reply.hold):
            return
        for raw in reply.raw_chunks or []:
            send(raw)
        self._stream_calls(calls, send, chunk)
        final = chunk({}, finish)
        if reply.usage:
            final["usage"] = usage
        send(final)
        send("[DONE]")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _held_until_hung_up(self, seconds: float) -> bool:
        """Keep the stream open until the client closes the connection (True, counted)
        or `seconds` pass (False). The request was read whole, so the client sends nothing
        more on this connection: a read returns only at its end."""
        self.connection.settimeout(seconds)
        try:
            gone = self.connection.recv(1) == b""
        except ConnectionError:  # reset rather than closed: gone all the same
            gone = True
        except TimeoutError:
            gone = False
        finally:
            self.connection.settimeout(None)
        if gone:
            self.close_connection = True
            with self.fake._hang_up:
                self.fake.hung_up += 1
                self.fake._hang_up.notify_all()
        return gone

    @staticmethod
    def _stream_calls(
        calls: list[dict[str, Any]],
        send: Callable[[Any], None],
        chunk: Callable[[dict[str, Any]], dict[str, Any]],
    ) -> None:
        """Each tool call as OpenAI streams one: its name first, then its arguments in two
        halves."""
        for i, call in enumerate(calls):
            send(
                chunk(
                    {
                        "tool_calls": [
                            {
                                "index": i,
                                "id": call["id"],
                                "type": "function",
                                "function": {"name": call["function"]["name"], "arguments": ""},
                            }
                        ]
                    }
                )
            )
            args = call["function"]["arguments"]
            half = len(args) // 2
            for part in (args[:half], args[half:]):
                send(chunk({"tool_calls": [{"index": i, "function": {"arguments": part}}]}))
