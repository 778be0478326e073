"""`NixxClient`: the nixx HTTP API as async methods, for the terminal chat.

One `httpx.AsyncClient` per app. Every request carries `X-Nixx-Origin: tui` (and the
bearer key when one is configured). Failures become the nixx exception hierarchy with
the server's own message: the OpenAI error envelope ``{"error": {"message", ...}}`` is
unpacked, a server that does not answer is `BackendUnavailable` naming the URL.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import httpx

from nixx.errors import (
    BackendError,
    BackendUnavailable,
    Conflict,
    Forbidden,
    NixxError,
    NotFound,
    Unauthorized,
    ValidationError,
)
from nixx.secret import reveal
from nixx.sse import aparse_lines

if TYPE_CHECKING:
    from pydantic import SecretStr

ORIGIN = "tui"

_BY_STATUS: dict[int, type[NixxError]] = {
    400: ValidationError,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    422: ValidationError,
    502: BackendError,
    503: BackendUnavailable,
    504: BackendError,
}


@dataclass
class StreamEvent:
    """One piece of a streamed answer: text (`delta`), a tool the server ran (`tool`),
    token `usage`, or the end (`done`, with the finish reason)."""

    kind: str  # "delta" | "tool" | "usage" | "done"
    text: str = ""
    data: dict[str, Any] = field(default_factory=dict)


def error_from_response(status: int, body: Any, url: str) -> NixxError:
    """The nixx error for an HTTP error answer (OpenAI envelope or FastAPI `detail`)."""
    message = ""
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict):
            message = str(err.get("message") or "")
        elif isinstance(err, str):
            message = err
        elif "detail" in body:
            detail = body["detail"]
            message = detail if isinstance(detail, str) else json.dumps(detail)[:300]
    elif isinstance(body, str):
        message = body.strip()[:300]
    cls = _BY_STATUS.get(status, BackendError if status >= 500 else NixxError)
    return cls(message or f"the nixx server answered HTTP {status} for {url}")


class NixxClient:
    """Async client of one nixx server."""

    def __init__(
        self,
        base_url: str,
        *,
        api_key: SecretStr | str | None = None,
        timeout: float = 300.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        headers = {"X-Nixx-Origin": ORIGIN}
        key = reveal(api_key)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            headers=headers,
            timeout=httpx.Timeout(timeout, connect=5.0),
            transport=transport,
        )

    async def aclose(self) -> None:
        await self._http.aclose()

    # ---- plumbing ----------------------------------------------------------------
    def _unreachable(self, exc: Exception) -> BackendUnavailable:
        return BackendUnavailable(
            f"no nixx server answers at {self.base_url} ({type(exc).__name__}): "
            "start one with `nixx serve` or give `nixx chat --url URL`",
            server_down=True,
        )

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            resp = await self._http.request(method, path, **kwargs)
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.RemoteProtocolError) as exc:
            raise self._unreachable(exc) from None
        except httpx.TimeoutException:
            raise BackendError(
                f"the nixx server at {self.base_url} did not answer in time"
            ) from None
        except httpx.HTTPError as exc:
            raise BackendError(f"request to {self.base_url}{path} failed: {exc}") from None
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = resp.text
        if resp.status_code >= 400:
            raise error_from_response(resp.status_code, body, f"{self.base_url}{path}")
        return body

    # ---- health & models -----------------------------------------------------------
    async def health(self) -> dict[str, Any]:
        return await self._request("GET", "/health")

    async def models(self) -> list[str]:
        body = await self._request("GET", "/v1/models")
        return [m.get("id", "") for m in (body or {}).get("data", []) if isinstance(m, dict)]

    # ---- chat ----------------------------------------------------------------------
    async def stream_chat(
        self, messages: list[dict[str, Any]], *, model: str | None = None
    ) -> AsyncIterator[StreamEvent]:
        """POST /v1/chat/completions with `stream: true`; yields events as they arrive.

        Raises the nixx error for an HTTP error answer, and `BackendError` when the
        stream ends with an error event or breaks before `[DONE]`.
        """
        payload: dict[str, Any] = {
            "messages": messages,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if model:
            payload["model"] = model
        path = "/v1/chat/completions"
        try:
            async with self._http.stream("POST", path, json=payload) as resp:
                if resp.status_code >= 400:
                    raw = await resp.aread()
                    try:
                        body: Any = json.loads(raw)
                    except ValueError:
                        body = raw.decode("utf-8", "replace")
                    raise error_from_response(resp.status_code, body, self.base_url + path)
                finish = None
                async for event in aparse_lines(resp.aiter_lines()):
                    if event.done:
                        yield StreamEvent("done", data={"finish_reason": finish})
                        return
                    try:
                        chunk = json.loads(event.data)
                    except ValueError:
                        continue
                    if event.event == "error" or (isinstance(chunk, dict) and "error" in chunk):
                        raise error_from_response(502, chunk, self.base_url + path)
                    for out in _chunk_events(chunk):
                        if out.kind == "done":
                            finish = out.data.get("finish_reason")
                        else:
                            yield out
                raise BackendError("the answer stream ended before it was complete")
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise self._unreachable(exc) from None
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise BackendError(f"the answer stream broke: {exc}") from None
        except httpx.TimeoutException:
            raise BackendError(f"the nixx server at {self.base_url} stopped answering") from None

    # ---- episodic memory -----------------------------------------------------------
    async def session(self) -> list[dict[str, Any]]:
        body = await self._request("GET", "/v1/buffer/session")
        return _rows(body)

    async def clear_session(self) -> Any:
        return await self._request("POST", "/v1/buffer/clear")

    async def status(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/episodic/status") or {}

    async def configure(self, *, interval: int | None = None, recall: bool | None = None) -> Any:
        body: dict[str, Any] = {}
        if interval is not None:
            body["interval"] = interval
        if recall is not None:
            body["recall"] = recall
        return await self._request("POST", "/v1/episodic/config", json=body)

    async def summarise(self, tags: list[str]) -> Any:
        return await self._request("POST", "/v1/episodic/summary", json={"tags": tags})

    async def search(
        self, query: str, limit: int = 10, *, client: str | None = None
    ) -> dict[str, Any]:
        """The fused search; `client`: only the rows that client's turns wrote (its own
        name, ``meta.client``, or an origin)."""
        asked: dict[str, Any] = {"query": query, "limit": limit}
        if client is not None:
            asked["client"] = client
        body = await self._request("POST", "/v1/episodic/search", json=asked)
        return body or {}

    async def transcript(
        self, start: int, end: int | None = None
    ) -> tuple[list[dict[str, Any]], bool]:
        """Rows start..end and whether the server stopped early (its row limit)."""
        params: dict[str, Any] = {"start": start}
        if end is not None:
            params["end"] = end
        body = await self._request("GET", "/v1/episodic/transcript", params=params)
        truncated = bool(body.get("truncated")) if isinstance(body, dict) else False
        return _rows(body), truncated

    async def debug_context(self) -> dict[str, Any]:
        return await self._request("GET", "/v1/debug/context") or {}

    # ---- intent --------------------------------------------------------------------
    async def intent(self) -> Intent | None:
        return _intent_of(await self._request("GET", "/v1/intent"))

    async def set_intent(self, text: str) -> Intent | None:
        return _intent_of(await self._request("POST", "/v1/intent", json={"intent": text}))

    async def clear_intent(self) -> None:
        await self._request("DELETE", "/v1/intent")

    async def derive_intent(self) -> Intent | None:
        return _intent_of(await self._request("POST", "/v1/intent/derive"))

    # ---- semantic memory -----------------------------------------------------------
    async def create_source(
        self, name: str, start_id: int | None = None, end_id: int | None = None
    ) -> dict[str, Any]:
        body: dict[str, Any] = {"name": name}
        if start_id is not None:
            body["start_id"] = start_id
        if end_id is not None:
            body["end_id"] = end_id
        return await self._request("POST", "/v1/sources", json=body) or {}

    # ---- forgetting ----------------------------------------------------------------
    async def forget_matches(self, query: str) -> dict[str, Any]:
        return await self._request("POST", "/v1/forget", json={"query": query}) or {}

    async def forget_query(self, query: str, ids: list[str]) -> dict[str, Any]:
        body = {"query": query, "dry_run": False, "ids": ids}
        return await self._request("POST", "/v1/forget", json=body) or {}

    async def forget_ids(self, ids: list[str]) -> dict[str, Any]:
        return await self._request("POST", "/v1/forget/ids", json={"ids": ids}) or {}

    async def ingest(self, target: str) -> Any:
        key = "url" if target.startswith(("http://", "https://")) else "path"
        return await self._request("POST", "/v1/ingest", json={key: target})


    async def approvals(self, *, include_decided: bool = False) -> list[dict[str, Any]]:
        body = await self._request("GET", "/v1/nxc/approvals",
                                   params={"all": "true"} if include_decided else None)
        return list(body.get("approvals", [])) if isinstance(body, dict) else []

    async def decide(self, approval: str, decision: str, note: str) -> dict[str, Any]:
        """`decision`: approve | deny."""
        return await self._request("POST", f"/v1/nxc/approvals/{approval}",
                                   json={"decision": decision, "note": note}) or {}


def _chunk_events(chunk: Any) -> list[StreamEvent]:
    events: list[StreamEvent] = []
    if not isinstance(chunk, dict):
        return events
    nixx_ext = chunk.get("nixx")
    run = nixx_ext.get("tool_run") if isinstance(nixx_ext, dict) else None
    if isinstance(run, dict) and run.get("name"):  # a server-side tool ran
        events.append(StreamEvent("tool", text=str(run["name"]), data=run))
    for choice in chunk.get("choices") or []:
        delta = choice.get("delta") or {}
        text = delta.get("content")
        if isinstance(text, str) and text:
            events.append(StreamEvent("delta", text=text))
        if choice.get("finish_reason"):
            events.append(StreamEvent("done", data={"finish_reason": choice["finish_reason"]}))
    usage = chunk.get("usage")
    if isinstance(usage, dict) and not usage.get("estimated"):
        # nixx's own estimate (the backend counted nothing) is no gauge of the context
        events.append(StreamEvent("usage", data=usage))
    return events


def _rows(body: Any) -> list[dict[str, Any]]:
    if isinstance(body, list):
        return body
    if isinstance(body, dict):
        for key in ("rows", "data", "buffer", "messages"):
            if isinstance(body.get(key), list):
                return body[key]
    return []


@dataclass(frozen=True)
class Intent:
    """The current intent and where it came from (`manual` or `derived`, and when)."""

    text: str
    source: str | None = None
    updated_at: str | None = None

    @property
    def provenance(self) -> str:
        """``manual, 2026-12-01 11:50`` (UTC), or what of it is known."""
        when = (self.updated_at or "").replace("T", " ")[:16]
        return ", ".join(p for p in (self.source, when and f"{when} UTC") if p)


def _intent_of(body: Any) -> Intent | None:
    """The intent from `{"intent": "...", "source", "updated_at"}` (or `{"intent":
    {"text": ...}}`, `{"text"}`)."""
    if not isinstance(body, dict):
        return None
    value = body.get("intent", body.get("text"))
    meta = body
    if isinstance(value, dict):
        meta, value = value, value.get("text")
    if not (isinstance(value, str) and value):
        return None
    source, updated = meta.get("source"), meta.get("updated_at")
    return Intent(
        value,
        source if isinstance(source, str) else None,
        updated if isinstance(updated, str) else None,
    )
