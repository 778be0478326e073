"""The one check of where a request comes from, in front of every route (`/v1`, `/ui`,
`/mcp`, `/health`): a plain ASGI middleware, so a browser page of another site can drive
nothing, whatever the address the server is bound to and whether an API key is set.

- **Host.** The ``Host`` header must name this server: a loopback name (``localhost``),
  an IP address (no name is looked up, so it cannot be rebound), the address bound
  (``NIXX_HOST``), or a name listed in ``NIXX_ALLOWED_HOSTS``. Anything else — a page
  whose name was rebound to 127.0.0.1 (DNS rebinding) — is refused with 421
  ``host_not_allowed``, naming the setting that allows the name.
- **Origin.** A state-changing request (any method but GET, HEAD, OPTIONS) saying it came
  from another page is refused with 403 ``cross_origin``: a ``Sec-Fetch-Site`` other than
  ``same-origin`` or ``none``, an opaque ``Origin: null``, or an ``Origin`` whose host and
  port are not the request's own. Clients that are not browsers send neither header.
- **JSON.** A state-changing request to the JSON API (``/v1/...``, ``/mcp``) that carries
  a body must say ``Content-Type: application/json``; any other content type (a form,
  ``text/plain``: the "simple" requests another site may send without asking) is refused
  with 415 ``unsupported_media_type``, with or without a body.

A refusal under ``/ui`` is a short HTML page; elsewhere the OpenAI error envelope.
"""

from __future__ import annotations

import html
import ipaddress
from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from nixx.config import is_loopback_host
from nixx.server.errors import send_error, send_response

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
JSON_PREFIXES = ("/v1/", "/mcp")
WILDCARD_BINDS = frozenset({"0.0.0.0", "::", "[::]", ""})


def split_host(value: str) -> tuple[str, str]:
    """``"Example.org:8420"`` → ``("example.org", "8420")``; ``"[::1]:80"`` → ``("::1", "80")``."""
    value = value.strip().lower()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        return name, rest.removeprefix(":")
    name, _, port = value.rpartition(":") if value.count(":") == 1 else (value, "", "")
    return name, port


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class HostRule:
    """Which names in ``Host`` address this server."""

    def __init__(self, bound: str, allowed: Iterable[str]) -> None:
        names = {split_host(a)[0] for a in allowed if a.strip()}
        bound_name = split_host(bound)[0] if bound not in WILDCARD_BINDS else ""
        if bound_name:
            names.add(bound_name)
        self.names = frozenset(names)

    def allows(self, name: str) -> bool:
        return is_loopback_host(name) or _is_ip(name) or name in self.names


class RequestGuard:
    def __init__(self, app: Any, *, bound: str, allowed_hosts: Iterable[str]) -> None:
        self.app = app
        self.rule = HostRule(bound, allowed_hosts)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        why = self.check(scope)
        if why is None:
            await self.app(scope, receive, send)
            return
        status, code, message = why
        path = scope.get("path") or ""
        if path == "/ui" or path.startswith("/ui/"):
            body = (
                "<!doctype html><meta charset=utf-8><title>Refused</title>"
                f'<h1>Refused</h1><p class="error">{html.escape(message)}</p>'
            ).encode()
            await send_response(send, status, body, [
                (b"content-type", b"text/html; charset=utf-8"),
                (b"content-security-policy", b"default-src 'none'"),
            ])
            return
        await send_error(send, message, status, code=code)

    def check(self, scope: dict[str, Any]) -> tuple[int, str, str] | None:
        """None when the request may go on, else (status, code, message)."""
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers") or []:
            headers.setdefault(name, value)
        host = headers.get(b"host", b"").decode("latin-1")
        name, port = split_host(host)
        if not name:
            return 421, "host_not_allowed", "the request has no Host header"
        if not self.rule.allows(name):
            return 421, "host_not_allowed", (
                f"the Host {name!r} does not name this server: it answers to localhost, IP "
                f"addresses, its bound address (NIXX_HOST) and the names in "
                f"NIXX_ALLOWED_HOSTS; add {name!r} there if it is yours"
            )
        method = scope.get("method", "GET")
        if method in SAFE_METHODS:
            return None
        site = headers.get(b"sec-fetch-site", b"").decode("latin-1").strip().lower()
        if site and site not in ("same-origin", "none"):
            return 403, "cross_origin", (
                f"a {method} from another site (Sec-Fetch-Site: {site}) was refused: only "
                "this server's own pages and clients that are not browsers may change things"
            )
        origin = headers.get(b"origin")
        if origin is not None:
            text = origin.decode("latin-1").strip()
            parts = urlsplit(text)
            if text == "null" or not parts.hostname:
                return 403, "cross_origin", (
                    f"a {method} from an opaque origin ({text or 'empty'}) was refused"
                )
            default = "443" if parts.scheme == "https" else "80"
            own_default = "443" if scope.get("scheme") == "https" else "80"
            if (parts.hostname.lower(), str(parts.port or default)) != (name, port or own_default):
                return 403, "cross_origin", (
                    f"a {method} from the page {text} was refused: only this server's own "
                    "pages may change things"
                )
        path = scope.get("path") or ""
        if path.startswith(JSON_PREFIXES):
            ctype = headers.get(b"content-type", b"").decode("latin-1").split(";")[0].strip().lower()
            has_body = headers.get(b"content-length", b"0").strip() not in (b"0", b"") or (
                b"transfer-encoding" in headers
            )
            is_json = ctype == "application/json" or (
                ctype.startswith("application/") and ctype.endswith("+json")
            )
            if (ctype and not is_json) or (has_body and not ctype):
                return 415, "unsupported_media_type", (
                    f"{path} takes a JSON body: send Content-Type: application/json"
                    + (f" (got {ctype})" if ctype else " (got none)")
                )
        return None
