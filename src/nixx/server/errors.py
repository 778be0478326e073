"""The error shapes: OpenAI's envelope for every route but Anthropic's Messages API,

    {"error": {"message": "...", "type": "...", "param": null, "code": "..."}}

and Anthropic's on `/v1/messages` and below (`anthropic_envelope`, chosen by path in
`envelope_for`, so its clients' SDKs read every refusal, from the API-key check to the
last-resort 500):

    {"type": "error", "error": {"type": "invalid_request_error", "message": "..."}}

`NixxError`s answer their `http_status` (``code`` is their `kind`); request validation
failures answer 400 (never FastAPI's 422); unknown routes 404; anything unexpected a
500 that names no internals (`ErrorBarrier`, which also keeps the connection open).

Whether to try again (`retry_headers`): clients retry on their own (Anthropic's and
OpenAI's SDKs, and Claude Code above them, retry 401, 409, 5xx and ``overloaded_error``
with backoff: Claude Code retried a 503 for 184 s before it showed the message, and a
wrong key past 100 s). An answer no retry will fix carries ``x-should-retry: false``,
which those clients obey before their own rules: every 4xx but 408, 409 and 429 (a wrong
key included), the backend refusing connections (503 ``backend_unavailable``), and the
backend's own 4xx (502). ``overloaded_error`` (503, ``Retry-After``) is only for real
busyness: nixx at its in-flight budget (``server_busy``) or the backend answering 429 or
503 (``backend_busy``, `answer_of`). No error answers an empty message.
"""

from __future__ import annotations

import json
import logging
from typing import Any, Literal, TypedDict

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from nixx.errors import BackendError, NixxError

log = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    405: "invalid_request_error",
    409: "conflict_error",
    413: "invalid_request_error",
    502: "backend_error",
    503: "backend_unavailable",
}
# codes whose status is shared with another cause: the type says which one it is (a 503
# `server_busy` is nixx itself at its in-flight budget, `backend_busy` the backend saying
# it is, neither the backend being unreachable)
BUSY_CODES = ("server_busy", "backend_busy")
_CODE_TYPES = {code: "overloaded_error" for code in BUSY_CODES}
RETRY_HEADER = "x-should-retry"
BACKEND_BUSY_RETRY_AFTER = "2"  # seconds; the backend's own Retry-After is not kept
SERVER_BUSY_RETRY_AFTER = "1"  # nixx's own budget frees as soon as a request ends
_RETRIED_4XX = (408, 409, 429)  # the clients' own rule: these may pass on a retry


def retry_headers(
    status: int, code: str | None = None, backend_status: int | None = None
) -> dict[str, str]:
    """``x-should-retry: false`` on an answer no retry will fix, ``Retry-After`` on a
    busy backend (the module's docstring)."""
    if code == "backend_busy":
        return {"retry-after": BACKEND_BUSY_RETRY_AFTER}
    if code == "server_busy":
        return {"retry-after": SERVER_BUSY_RETRY_AFTER}
    if code in BUSY_CODES:
        return {}
    final = (400 <= status < 500 and status not in _RETRIED_4XX) or code == "backend_unavailable"
    if backend_status is not None and 400 <= backend_status < 500:
        final = final or backend_status not in _RETRIED_4XX
    return {RETRY_HEADER: "false"} if final else {}


def answer_of(exc: NixxError) -> tuple[int, str]:
    """The status and code a `NixxError` is answered with: its own, but a backend that
    answered 429 or 503 is busy (503 ``backend_busy``, ``overloaded_error``), not broken."""
    if isinstance(exc, BackendError) and exc.details.get("status") in (429, 503):
        return 503, "backend_busy"
    return exc.http_status, exc.kind


def error_type(status: int, code: str | None = None) -> str:
    if code in _CODE_TYPES:
        return _CODE_TYPES[code]
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


class ErrorDetail(TypedDict):
    message: str
    type: str  # for the HTTP status (`error_type`)
    param: str | None  # the request field at fault
    code: str | None  # nixx's error kind


class Envelope(TypedDict):
    """OpenAI's error body (every route but Anthropic's)."""

    error: ErrorDetail


class AnthropicError(TypedDict):
    type: str
    message: str


class AnthropicEnvelope(TypedDict):
    """Anthropic's error body (``/v1/messages``)."""

    type: Literal["error"]
    error: AnthropicError


def envelope(
    message: str, status: int, *, param: str | None = None, code: str | None = None
) -> Envelope:
    return {"error": {"message": message, "type": error_type(status, code), "param": param,
                      "code": code}}


ANTHROPIC_PATH = "/v1/messages"
_ANTHROPIC_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
}


def anthropic_envelope(message: str, status: int, code: str | None = None) -> AnthropicEnvelope:
    """Anthropic's error body: its ``error.type`` for the HTTP status; a 503 is
    ``overloaded_error`` only when something is busy (`BUSY_CODES`), else ``api_error``
    (a backend that refuses connections is not overloaded, and clients retry that type)."""
    if code in BUSY_CODES:
        kind = "overloaded_error"
    else:
        kind = _ANTHROPIC_TYPES.get(status, "api_error" if status >= 500
                                    else "invalid_request_error")
    return {"type": "error", "error": {"type": kind, "message": _said(message, status)}}


def _said(message: str, status: int) -> str:
    """`message`, never empty."""
    return message.strip() or f"HTTP {status} with no further detail (see the server log)"


def is_anthropic(path: str) -> bool:
    return path == ANTHROPIC_PATH or path.startswith(ANTHROPIC_PATH + "/")


def envelope_for(
    path: str, message: str, status: int, *, param: str | None = None, code: str | None = None
) -> Envelope | AnthropicEnvelope:
    """The error body a client of `path` reads: Anthropic's on its routes, else OpenAI's."""
    if is_anthropic(path):
        return anthropic_envelope(message, status, code)
    return envelope(_said(message, status), status, param=param, code=code)


def error_response(
    message: str,
    status: int,
    *,
    param: str | None = None,
    code: str | None = None,
    headers: dict[str, str] | None = None,
    path: str = "",
    backend_status: int | None = None,
) -> JSONResponse:
    return JSONResponse(
        envelope_for(path, message, status, param=param, code=code),
        status_code=status,
        headers={**retry_headers(status, code, backend_status), **(headers or {})},
    )


async def send_error(
    send: Any,
    message: str,
    status: int,
    *,
    code: str | None = None,
    headers: list[tuple[bytes, bytes]] | None = None,
    path: str = "",
) -> None:
    """Answer the envelope straight over ASGI `send` (for plain ASGI middlewares that
    refuse a request before the app sees it); `path` picks the shape (`envelope_for`)."""
    body = json.dumps(envelope_for(path, message, status, code=code)).encode()
    retry = [(k.encode(), v.encode()) for k, v in retry_headers(status, code).items()]
    await send_response(
        send, status, body, [(b"content-type", b"application/json"), *retry, *(headers or [])]
    )


async def send_response(
    send: Any, status: int, body: bytes, headers: list[tuple[bytes, bytes]]
) -> None:
    """One whole response over ASGI `send` (`send_error`; the sign-in redirect)."""
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [*headers, (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def nixx_error_body(exc: NixxError) -> Envelope:
    return envelope(exc.message, exc.http_status, param=exc.param, code=exc.kind)


def _loc(loc: tuple[Any, ...]) -> str:
    if loc and loc[0] in ("body", "query", "path", "header"):  # where, not which field
        loc = loc[1:]
    return ".".join(str(p) for p in loc)


def _body_fields(request: Request | None) -> list[str]:
    """The field names the route's JSON body accepts (for "did you mean")."""
    route = request.scope.get("route") if request is not None else None
    model = getattr(getattr(route, "body_field", None), "type_", None)
    fields = getattr(model, "model_fields", None)
    return list(fields) if isinstance(fields, dict) else []


def validation_message(
    exc: RequestValidationError, request: Request | None = None
) -> tuple[str, str | None]:
    """One message in the user's terms (``unknown field q; did you mean query?``) and the
    `param` it is about (the first field named)."""
    from nixx.config import nearest

    errors = exc.errors()
    if not errors:
        return "invalid request", None
    # unknown fields first: a misspelt field explains the "required" one it was meant as
    errors = sorted(errors, key=lambda e: e.get("type") != "extra_forbidden")
    choices = _body_fields(request) or [
        str(e["loc"][-1]) for e in errors if e.get("type") == "missing" and e.get("loc")
    ]
    meant: set[str] = set()
    problems: list[str] = []
    params: list[str] = []
    for err in errors:
        loc = tuple(err.get("loc", ()))
        where = _loc(loc)
        kind = err.get("type")
        if kind == "extra_forbidden":
            hint = nearest(str(loc[-1]), [c for c in choices if c != str(loc[-1])])
            if hint:
                meant.add(hint.removeprefix("; did you mean ").removesuffix("?"))
            problems.append(f"unknown field {where}{hint}")
        elif kind == "missing":
            if where in meant:
                continue
            problems.append(f"{where} is required")
        elif kind == "json_invalid":
            problems.append("the body is not valid JSON")
        else:
            msg = err.get("msg", "invalid")
            problems.append(f"{where}: {msg}" if where else msg)
        if where:
            params.append(where)
    shown = problems[:5]
    more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
    return "invalid request: " + "; ".join(shown) + more, (params[0] if params else None)


def install_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(NixxError)
    async def _nixx(request: Request, exc: NixxError) -> JSONResponse:
        if exc.http_status >= 500:
            log.warning("%s %s: %s", request.method, request.url.path, exc.message)
        status, code = answer_of(exc)
        backend = exc.details.get("status") if isinstance(exc, BackendError) else None
        return error_response(exc.message, status, param=exc.param, code=code,
                              path=request.url.path,
                              backend_status=backend if isinstance(backend, int) else None)

    @app.exception_handler(RequestValidationError)
    async def _validation(request: Request, exc: RequestValidationError) -> JSONResponse:
        message, param = validation_message(exc, request)
        return error_response(
            message, 400, param=param, code="invalid_request", path=request.url.path
        )

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        if exc.status_code == 404:
            message = f"no such endpoint: {request.method} {request.url.path}"
        elif exc.status_code == 405:
            message = f"{request.method} is not allowed on {request.url.path}"
        else:
            message = str(exc.detail)
        return error_response(
            message,
            exc.status_code,
            code=str(exc.status_code),
            headers=dict(exc.headers) if exc.headers else None,
            path=request.url.path,
        )


class ErrorBarrier:
    """The outermost of nixx's ASGI middlewares: an unexpected exception becomes a 500
    envelope that names no internals (logged with its traceback) and does not travel on,
    so the server does not close the keep-alive connection after it (Starlette's own
    error middleware re-raises, and uvicorn then drops the connection). An exception
    after a response was complete is logged and dropped; one in the middle of a
    response (a stream) goes on, since only closing the connection can end that."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "complete": False}

        async def tracked(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                state["complete"] = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception as exc:
            log.error(
                "unexpected error on %s %s",
                scope.get("method"),
                scope.get("path"),
                exc_info=exc,
            )
            if state["started"] and not state["complete"]:
                raise
            if state["complete"]:
                return
            message = f"internal error ({type(exc).__name__}); see the server log"
            await send_error(send, message, 500, code="internal", path=scope.get("path") or "")


ERROR_SCHEMA: dict[str, Any] = {
    "title": "Error",
    "description": "OpenAI's error envelope: every refusal and failure has this shape.",
    "type": "object",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string"},
                "param": {"type": ["string", "null"]},
                "code": {"type": ["string", "null"]},
            },
        }
    },
}


def install_openapi(app: FastAPI) -> None:
    """Make `/openapi.json` say what the server really answers: a 400 with the error
    envelope for bad input (FastAPI would advertise 422 `HTTPValidationError`, which nixx
    never sends), 413 for a body over the size limit, and the envelope for 500."""
    from fastapi.openapi.utils import get_openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema:
            return app.openapi_schema
        schema = get_openapi(
            title=app.title, version=app.version, description=app.description, routes=app.routes
        )
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        components.pop("HTTPValidationError", None)
        components.pop("ValidationError", None)
        components["Error"] = ERROR_SCHEMA
        ref = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
        for item in schema.get("paths", {}).values():
            for operation in item.values():
                responses = operation.setdefault("responses", {})
                responses.pop("422", None)
                responses["400"] = {"description": "Invalid request", "content": ref}
                if "requestBody" in operation:
                    responses["413"] = {
                        "description": "Request body over NIXX_MAX_REQUEST_BYTES",
                        "content": ref,
                    }
                responses["500"] = {"description": "Internal error", "content": ref}
        app.openapi_schema = schema
        return schema

    app.openapi = openapi  # type: ignore[method-assign]
