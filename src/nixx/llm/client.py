"""`ChatClient`: an async client for any OpenAI-compatible chat backend; `SyncChatClient`,
its blocking twin for one-shot processes (nxc's built-in agent runtime).

One client (one `httpx.AsyncClient`, one connection pool) is opened per server and
reused for every call. Failures become nixx errors:

- nothing answers at the URL (connection refused, DNS, connect timeout) →
  `BackendUnavailable` naming the URL and the variable that sets it;
- the backend answers an HTTP error → `BackendError` carrying the backend's own message;
- a stream that breaks before it finished → `BackendError` with ``code="stream_interrupted"``
  (raised from the iterator, after the chunks already received were yielded); so does a
  stream that ends with ``[DONE]`` before any chunk carried a finish reason (what
  llama-cpp-python sends when it gives its one slot to another request);
- a chunk or completion of the wrong shape (`check_chunk`, `check_completion`) →
  `BackendError` too (a stream: ``stream_interrupted``, after the good chunks).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncGenerator
from typing import TYPE_CHECKING, Any, NotRequired, TypedDict, cast

import httpx

from nixx.errors import BackendError, BackendUnavailable
from nixx.llm import slot
from nixx.llm.facts import BackendFacts, probe
from nixx.llm.gate import BackendGate, Step, Steps
from nixx.llm.stream import (
    AnswerMessage,
    Completion,
    CompletionChunk,
    StreamAccumulator,
    check_chunk,
    check_completion,
)
from nixx.secret import reveal
from nixx.sse import aparse_lines

if TYPE_CHECKING:
    from pydantic import SecretStr

PROBE_TIMEOUT = 3.0  # seconds a question about the backend itself may take


class ModelEntry(TypedDict, total=False):
    """One model of OpenAI's list; a backend may add keys of its own (passed on as sent)."""

    id: str
    object: str
    created: int
    owned_by: str


class ModelList(TypedDict):
    """A backend's `GET /models` (checked: `data` is a list)."""

    object: NotRequired[str]
    data: list[ModelEntry]


class _Errors:
    """The one mapping from transport failures and HTTP errors to nixx errors, shared by
    the async `ChatClient` and the blocking `SyncChatClient`."""

    def __init__(self, base_url: str, timeout: float, env_var: str, where: str = "") -> None:
        self.base_url = base_url.rstrip("/")
        self.env_var = env_var
        self.timeout = timeout
        self.where = where  # where the URL came from (the config file read, or none)

    def _options(
        self, api_key: SecretStr | str | None, headers: dict[str, str] | None
    ) -> dict[str, Any]:
        """What both httpx clients are built with (the one place the key is revealed)."""
        key = reveal(api_key)
        return {
            "base_url": self.base_url,
            "headers": {**({"Authorization": f"Bearer {key}"} if key else {}),
                        **(headers or {})},
            "timeout": httpx.Timeout(self.timeout, connect=min(10.0, self.timeout)),
        }

    def _unavailable(self, exc: Exception) -> BackendUnavailable:
        return BackendUnavailable(
            f"no LLM backend answers at {self.base_url} ({type(exc).__name__}: {exc}). "
            f"Start it, or set {self.env_var} to the URL of an OpenAI-compatible server"
            + (f" ({self.where})." if self.where else "."),
            url=self.base_url,
            variable=self.env_var,
        )

    def _timeout(self) -> BackendError:
        return BackendError(
            f"the LLM backend at {self.base_url} did not answer within {self.timeout:g}s "
            "(raise NIXX_CHAT_TIMEOUT if it is just slow)",
            code="timeout",
        )

    def _transport_error(self, exc: httpx.HTTPError) -> BackendError:
        """The error for a request that got no answer (refused, timed out, broken)."""
        if isinstance(exc, (httpx.ConnectError, httpx.ConnectTimeout)):
            return self._unavailable(exc)
        if isinstance(exc, httpx.TimeoutException):
            return self._timeout()
        return BackendError(f"the LLM backend at {self.base_url} failed: {exc}")

    @staticmethod
    def _http_error(response: httpx.Response, body: bytes) -> BackendError:
        message = body.decode("utf-8", "replace").strip()[:2000]
        try:
            data = json.loads(body)
            err = data.get("error") if isinstance(data, dict) else None
            if isinstance(err, dict) and err.get("message"):
                message = str(err["message"])
                if isinstance(err.get("n_ctx"), int):  # llama.cpp says its context so
                    message += f" (n_ctx {err['n_ctx']})"
            elif isinstance(err, str):
                message = err
            elif isinstance(data, dict) and data.get("detail"):
                message = str(data["detail"])
        except ValueError:
            pass
        return BackendError(
            f"the LLM backend answered HTTP {response.status_code}: {message or response.reason_phrase}",
            status=response.status_code,
        )

    def _json(self, response: httpx.Response) -> Any:
        if response.status_code >= 400:
            raise self._http_error(response, response.content)
        try:
            return response.json()
        except ValueError:
            raise BackendError(
                f"the LLM backend at {self.base_url} answered something that is not JSON: "
                f"{response.text[:200]!r}"
            ) from None

    def _check_models(self, data: Any) -> ModelList:
        if not isinstance(data, dict) or not isinstance(data.get("data"), list):
            raise BackendError(f"the LLM backend at {self.base_url} sent a malformed model list")
        return cast(ModelList, data)


class SyncChatClient(_Errors):
    """Blocking `/models` and `/chat/completions` (for one-shot processes such as nxc's
    built-in agent runtime); the same errors as `ChatClient`."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: SecretStr | str | None = None,
        timeout: float = 120.0,
        env_var: str = "NIXX_CHAT_BASE_URL",
        headers: dict[str, str] | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        super().__init__(base_url, timeout, env_var)
        self._http = httpx.Client(**self._options(api_key, headers), transport=transport)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> SyncChatClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        try:
            response = self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        return self._json(response)

    def list_models(self) -> ModelList:
        return self._check_models(self._request("GET", "/models"))

    def create(self, body: dict[str, Any]) -> Completion:
        """A non-streaming chat completion; returns the backend's JSON answer."""
        return check_completion(
            self._request("POST", "/chat/completions", {**body, "stream": False}))

    def post(self, path: str, body: Any) -> Any:
        """Any other POST of JSON (`nixx serve`'s own routes); its JSON answer."""
        return self._request("POST", path, body)


class ChatClient(_Errors):
    """OpenAI-compatible `/models` and `/chat/completions` over one pooled HTTP client.

    It also holds what the backend said of itself (`facts`: context length, slots;
    `nixx.llm.facts`) and the `gate` that keeps nixx's own calls (`background`) out of
    the way of a user's turns (`nixx.llm.gate`)."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: SecretStr | str | None = None,
        timeout: float = 120.0,
        env_var: str = "NIXX_CHAT_BASE_URL",
        transport: httpx.AsyncBaseTransport | None = None,
        slots: int | None = None,
        quiet: float = 0.0,
        where: str = "",
    ) -> None:
        super().__init__(base_url, timeout, env_var, where)
        self._http = httpx.AsyncClient(
            **self._options(api_key, None),
            limits=httpx.Limits(max_connections=64, max_keepalive_connections=16),
            transport=transport,
        )
        self.gate = BackendGate(slots, quiet=quiet)
        self.slot = slot.Slot()  # what a one-slot backend holds (`nixx.llm.slot`)
        self._slots_set = slots is not None
        self._facts: dict[str, BackendFacts] = {}
        self._probed: dict[str, Any] = {}  # what the backend answered a probe (`probe_json`)

    async def aclose(self) -> None:
        await self.gate.aclose()
        await self._http.aclose()

    # ---- calls ----------------------------------------------------------------------
    async def _request(self, method: str, path: str, body: Any = None) -> Any:
        try:
            response = await self._http.request(method, path, json=body)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        return self._json(response)

    async def probe_json(self, method: str, url: str, body: Any = None) -> Any:
        """A quick request for what a backend says of itself (`nixx.llm.facts`): its JSON
        answer, or None when it fails in any way (an OpenAI server has no `/props`).

        What the backend answered (a 404 too) is kept and not asked again: on a one-slot
        server such a request can wait for the slot (llama-cpp-python's ``/v1/models``
        does) and, waiting, cut the stream of the user's turn that holds it."""
        key = f"{method} {url} {json.dumps(body, sort_keys=True)}"
        if key in self._probed:
            return self._probed[key]
        try:
            response = await self._http.request(method, url, json=body, timeout=PROBE_TIMEOUT)
        except httpx.HTTPError:
            return None  # no answer (down, or busy past the probe's time): asked again
        try:
            found = response.json() if response.status_code == 200 else None
        except ValueError:
            found = None
        self._probed[key] = found
        return found

    async def facts(self, model: str) -> BackendFacts:
        """What the backend says of `model` (asked once, then kept; `learn_context`
        corrects it from a refusal)."""
        found = self._facts.get(model)
        if found is None:
            found = await probe(self, model)
            if found.answered:
                self._facts[model] = found
            if found.slots and not self._slots_set:
                self.gate.slots = found.slots
        return found

    def known_context(self, model: str) -> tuple[int | None, str]:
        """(the context length learned for `model`, its source) without asking."""
        facts = self._facts.get(model)
        return (facts.context_length, facts.source) if facts else (None, "")

    def known_facts(self, model: str) -> BackendFacts | None:
        """What was learned of `model`, without asking (None: nothing yet)."""
        return self._facts.get(model)

    def learn_context(self, model: str, length: int, source: str) -> None:
        """The backend refused a request for its length and named it."""
        facts = self._facts.setdefault(model, BackendFacts())
        facts.context_length, facts.source = length, source

    async def background(
        self, body: dict[str, Any], *, budget: float, what: str, context: int | None = None
    ) -> Completion:
        """One of nixx's own completions (a summary, the intent): through the `gate`, so
        it runs only while no user's turn does, within `budget` seconds (the caller
        bounds the answer with ``max_tokens``); streamed from the backend, returned whole
        (`create`'s shape). On a one-slot backend it continues the user's conversation
        and is sent in slices (`nixx.llm.slot`), when it fits `context` tokens (else the
        context learned for its model)."""
        return await self.gate.background(
            lambda: self._own_steps(body, context), budget=budget, what=what)

    def continuation_room(self, body: dict[str, Any], context: int | None) -> int | None:
        """The characters of material own call `body` may carry and still continue the
        conversation on a one-slot backend (`Slot.room`); None: it would go alone anyway."""
        if not self.gate.keeps_prefix:
            return None
        return self.slot.room(body, context or self.known_context(str(body.get("model")))[0])

    def _own_steps(self, body: dict[str, Any], context: int | None) -> Steps[Completion]:
        """One attempt at an own call, laid out for what the backend holds now."""
        if not self.gate.keeps_prefix:
            return Steps((), lambda: self._streamed(body))
        length = context or self.known_context(str(body.get("model")))[0]
        request = self.slot.continuation(body, length)
        if request is None:
            self.slot.alone += 1
            request = body
        else:
            self.slot.continued += 1
        return Steps(self._warm_steps(request), lambda: self._streamed(request),
                     continues=request is not body)

    def _warm_steps(self, request: dict[str, Any]) -> list[Step]:
        """Requests for one token that fill the backend's cache with `request`'s prompt a
        slice at a time (cut when they run, from what the backend holds then)."""
        target = request["messages"]
        plain = {k: v for k, v in request.items() if k not in ("max_tokens", "messages")}
        steps: list[Step] = []
        for prefix in slot.slices(self.slot.held, target, self.slot.size.chars):
            async def warm(prefix: list[dict[str, Any]] = prefix) -> object:
                before = slot.shared(self.slot.held, prefix)
                new = sum(len(slot.text_of(m)) for m in prefix[before[0]:]) - before[1]
                started = asyncio.get_running_loop().time()
                result = await self._streamed({**plain, "messages": prefix, "max_tokens": 1})
                self.slot.size.observe(new, asyncio.get_running_loop().time() - started)
                return result
            steps.append(warm)
        return steps

    def keep_prefix(
        self, request: dict[str, Any], answer: str, *, budget: float, resend: bool = True
    ) -> None:
        """After a user's turn: `request` (what was sent) with `answer` appended is what
        the backend's prefix cache should hold for the next turn. On a one-slot backend
        nixx's own calls continue it (`background`); one that could not displaced it, and
        the gate sends it again, in slices of one token asked each (`nixx.llm.gate`): the
        backend evaluates the conversation, ready for the next message (which begins with
        exactly this; not with `resend` off)."""
        if not answer:
            self.gate.keep(None, budget=budget)
            return
        self.slot.keep(request, answer)
        if not resend:
            self.gate.keep(None, budget=budget)
            return
        conversation = self.slot.conversation

        def restore() -> list[Step]:
            assert conversation is not None
            whole = {**conversation, "max_tokens": 1}
            return [*self._warm_steps(whole), lambda: self._streamed(whole)]

        self.gate.keep(restore, budget=budget)

    async def _streamed(self, body: dict[str, Any]) -> Completion:
        """A completion asked for as a stream (so that stopping it — a user's turn took
        the slot — closes the connection and a local server stops generating; a request
        not streamed runs to its end on llama-cpp-python), in the shape of `create`'s."""
        acc = StreamAccumulator()
        async for chunk in self.stream(body):
            acc.add(chunk)
        message: AnswerMessage = {"role": "assistant", "content": acc.content}
        return {
            "object": "chat.completion",
            "model": acc.model,
            "choices": [{"index": 0, "message": message, "finish_reason": acc.finish_reason}],
            "usage": acc.usage,
        }

    async def list_models(self, *, fresh: bool = True) -> ModelList:
        """The backend's `GET /models` document (OpenAI list shape); the facts' probe of
        it (`probe_json`) uses it from then on. `fresh=False`: the one already fetched, if
        any (a one-slot llama-cpp-python answers it only when the slot is free)."""
        key = f"GET /models {json.dumps(None)}"
        if not fresh and isinstance(self._probed.get(key), dict):
            try:
                return self._check_models(self._probed[key])
            except BackendError:
                pass
        data = self._check_models(await self._request("GET", "/models"))
        self._probed[key] = data
        return data

    async def create(self, body: dict[str, Any]) -> Completion:
        """A non-streaming chat completion; returns the backend's JSON answer."""
        return check_completion(
            await self._request("POST", "/chat/completions", {**body, "stream": False}))

    async def stream(self, body: dict[str, Any]) -> AsyncGenerator[CompletionChunk, None]:
        """Stream a chat completion: yields each parsed SSE chunk (dicts) in order."""
        request = self._http.build_request(
            "POST", "/chat/completions", json={**body, "stream": True}
        )
        messages = body.get("messages")
        if isinstance(messages, list):
            self.slot.sent(messages)
        answer: list[str] = []  # its text, for what a one-slot backend holds after it
        try:
            response = await self._http.send(request, stream=True)
        except httpx.HTTPError as exc:
            raise self._transport_error(exc) from None
        try:
            if response.status_code >= 400:
                raise self._http_error(response, await response.aread())
            done = False
            finished = False
            try:
                async for event in aparse_lines(response.aiter_lines()):
                    if event.done:
                        done = True
                        break
                    data = event.data
                    try:
                        chunk = json.loads(data)
                    except ValueError:
                        raise BackendError(
                            f"the LLM backend sent a malformed stream chunk: {data[:200]!r}",
                            code="stream_interrupted",
                        ) from None
                    if isinstance(chunk, dict) and chunk.get("error"):
                        err = chunk["error"]
                        msg = err.get("message") if isinstance(err, dict) else str(err)
                        raise BackendError(
                            f"the LLM backend reported an error mid-stream: {msg}",
                            code="stream_interrupted",
                        )
                    check_chunk(chunk)
                    for choice in chunk.get("choices") or []:
                        if choice.get("finish_reason"):
                            finished = True
                        text = (choice.get("delta") or {}).get("content")
                        if isinstance(text, str):
                            answer.append(text)
                    yield chunk
            except httpx.TimeoutException:
                raise BackendError(
                    f"the LLM backend at {self.base_url} stopped sending for "
                    f"{self.timeout:g}s mid-stream",
                    code="stream_interrupted",
                ) from None
            except httpx.HTTPError as exc:
                raise BackendError(
                    f"the stream from the LLM backend broke: {type(exc).__name__}: {exc}",
                    code="stream_interrupted",
                ) from None
            if done and not finished:
                # llama-cpp-python, by default, ends a request this way when another one
                # waits for its slot: the answer is not complete, whatever [DONE] says
                raise BackendError(
                    "the stream from the LLM backend ended with [DONE] but no finish reason: "
                    "the answer is not complete (a local server that serves one request at "
                    "a time may have given the slot to another request)",
                    code="stream_interrupted",
                )
            if not finished:
                raise BackendError(
                    "the stream from the LLM backend ended before the answer was complete",
                    code="stream_interrupted",
                )
            if isinstance(messages, list):
                self.slot.answered(messages, "".join(answer))
        finally:
            await response.aclose()
