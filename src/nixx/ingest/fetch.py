"""Fetch a web page for ingest, safely.

Only ``http`` and ``https``. The host name is resolved here and, unless
``NIXX_INGEST_ALLOW_PRIVATE_URLS`` is set, every address it resolves to must be a
public one: loopback, private, link-local (cloud metadata at 169.254.169.254),
carrier-grade NAT, multicast and reserved addresses are refused, and so is an IPv6
address embedding such an IPv4 one (NAT64, 6to4, Teredo, IPv4-mapped/-compatible). The connection then
goes to the address that was checked (the name is kept for the ``Host`` header and TLS
SNI/certificate checks), so a DNS answer that changes between check and connect cannot
smuggle in an internal address. Redirects are followed by hand (at most
`MAX_REDIRECTS`), each hop checked the same way. No proxy from the environment is used.
The body is capped at the size limit and the whole fetch at the time limit; the
content type must be one a reader handles (HTML or text).
"""

from __future__ import annotations

import ipaddress
import socket
import time
from dataclasses import dataclass

import httpx

from nixx.errors import Forbidden, NotFound, ValidationError
from nixx.ingest.readers import reader_for_media_type, supported_media_types

MAX_REDIRECTS = 5
USER_AGENT = "nixx-ingest/0.1 (+https://github.com/nixx)"


@dataclass(frozen=True)
class Fetched:
    url: str  # the final URL, after redirects
    media_type: str  # "text/html"
    charset: str | None
    data: bytes

    def utf8(self) -> bytes:
        """The body re-encoded as UTF-8 when the server declared another charset."""
        if not self.charset or self.charset.lower().replace("_", "-") in ("utf-8", "utf8"):
            return self.data
        try:
            return self.data.decode(self.charset, errors="replace").encode("utf-8")
        except LookupError:  # an unknown charset name: let the reader try UTF-8
            return self.data


_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # RFC 6052 well-known prefix
_NAT64_LOCAL = ipaddress.ip_network("64:ff9b:1::/48")  # RFC 8215 local-use prefix
_V4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d
_V4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")  # RFC 2765 ::ffff:0:a.b.c.d


def embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address carries and would reach through a translator
    or tunnel: IPv4-mapped and -translated, IPv4-compatible, NAT64 (the well-known
    ``64:ff9b::/96`` and the local-use ``64:ff9b:1::/48`` with its RFC 6052 /48 layout),
    6to4 (``2002::/16``) and Teredo (server and client)."""
    value = int(ip)
    low32 = ipaddress.IPv4Address(value & 0xFFFFFFFF)
    found: list[ipaddress.IPv4Address] = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip in _V4_TRANSLATED or ip in _NAT64:
        found.append(low32)
    if ip in _V4_COMPATIBLE and value > 1:  # not :: or ::1 (judged as IPv6 below)
        found.append(low32)
    if ip in _NAT64_LOCAL:
        # RFC 6052 for a /48 prefix: bits 48-63 and 72-87 (bits 64-71 are the "u" octet)
        # (the suffix is zero), or the low 32 bits for a /96 prefix inside the range; the
        # operator's prefix length is not known here, so every non-zero reading counts
        high = (value >> 64) & 0xFFFF
        rest = (value >> 40) & 0xFFFF
        readings = [ipaddress.IPv4Address((high << 16) | rest), low32]
        found.extend([v4 for v4 in readings if int(v4)] or [low32])
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    return found


def check_address(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    """True when `ip` is a public (globally routable) unicast address. An IPv6 address
    that embeds IPv4 addresses (`embedded_ipv4`) is judged by them: every one of them
    must be public, as the address would reach them through a translator or tunnel."""
    if isinstance(ip, ipaddress.IPv6Address):
        embedded = embedded_ipv4(ip)
        if embedded:
            return all(check_address(v4) for v4 in embedded)
    return ip.is_global and not ip.is_multicast


IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


def resolve(host: str, port: int) -> list[IPAddress]:
    try:
        return [ipaddress.ip_address(host.strip("[]"))]
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except (socket.gaierror, UnicodeError) as exc:
        raise ValidationError(f"cannot resolve the host {host!r}: {exc}") from None
    addresses = []
    for info in infos:
        ip = ipaddress.ip_address(str(info[4][0]).split("%", 1)[0])
        if ip not in addresses:
            addresses.append(ip)
    if not addresses:
        raise ValidationError(f"the host {host!r} has no address")
    return addresses


def fetch(url: str, *, allow_private: bool, max_bytes: int, timeout: float) -> Fetched:
    """GET `url` under the rules above. Raises `ValidationError`, `NotFound` or `Forbidden`."""
    deadline = time.monotonic() + timeout
    current = _parse(url)
    with httpx.Client(
        timeout=httpx.Timeout(timeout),
        follow_redirects=False,
        trust_env=False,
        headers={"User-Agent": USER_AGENT, "Accept": "text/html, text/plain;q=0.9, */*;q=0.1"},
    ) as client:
        for _ in range(MAX_REDIRECTS + 1):
            result = _get_once(client, current, allow_private, max_bytes, deadline, timeout)
            if isinstance(result, Fetched):
                return result
            current = result  # a redirect target
    raise ValidationError(f"{url} redirects more than {MAX_REDIRECTS} times")


def _parse(url: str) -> httpx.URL:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise ValidationError(f"not a valid URL: {url!r} ({exc})") from None
    if parsed.scheme not in ("http", "https"):
        raise ValidationError(f"only http:// and https:// URLs can be ingested (got {url!r})")
    if not parsed.host:
        raise ValidationError(f"the URL {url!r} has no host")
    return parsed


def _get_once(
    client: httpx.Client,
    url: httpx.URL,
    allow_private: bool,
    max_bytes: int,
    deadline: float,
    timeout: float,
) -> Fetched | httpx.URL:
    """One GET of `url` at an address checked first: the page, or where it redirects."""
    response = _connect(client, url, _checked_addresses(url, allow_private), timeout)
    try:
        if response.is_redirect:
            location = response.headers.get("location", "")
            if not location:
                raise ValidationError(f"{url} redirects without a Location")
            return _parse(str(url.join(location)))
        if response.status_code in (404, 410):
            raise NotFound(f"{url} answered HTTP {response.status_code} (no such page)")
        if response.status_code >= 400:
            raise ValidationError(f"{url} answered HTTP {response.status_code}")
        content_type = response.headers.get("content-type", "")
        media_type = content_type.split(";", 1)[0].strip().lower()
        if reader_for_media_type(media_type) is None:
            raise ValidationError(
                f"{url} is {media_type or 'of no declared type'}, not HTML or text "
                f"(ingest reads {', '.join(supported_media_types())})"
            )
        body = _read_body(response, url, max_bytes, deadline, timeout)
        return Fetched(str(url), media_type, response.charset_encoding, body)
    finally:
        response.close()


def _checked_addresses(url: httpx.URL, allow_private: bool) -> list[IPAddress]:
    """Every address `url`'s host resolves to, refused if any is private (unless allowed):
    the connection goes to one of these, so a second lookup cannot rebind it."""
    port = url.port or (443 if url.scheme == "https" else 80)
    addresses = resolve(url.host, port)
    if not allow_private:
        for ip in addresses:
            if not check_address(ip):
                inner = embedded_ipv4(ip) if isinstance(ip, ipaddress.IPv6Address) else []
                carried = f" (it carries {', '.join(map(str, inner))})" if inner else ""
                raise Forbidden(
                    f"{url} resolves to {ip}{carried}, a private, loopback or link-local "
                    "address; "
                    "ingest refuses those (set NIXX_INGEST_ALLOW_PRIVATE_URLS=true to allow)",
                    param="url",
                )
    return addresses


def _connect(
    client: httpx.Client, url: httpx.URL, addresses: list[IPAddress], timeout: float
) -> httpx.Response:
    """The streamed response of the first of `addresses` that connects, asked with `url`'s
    host as Host and TLS server name."""
    host_header = url.host if url.port is None else f"{url.host}:{url.port}"
    extensions = {"sni_hostname": url.host} if url.scheme == "https" else {}
    failure: Exception | None = None
    for ip in addresses:  # the checked addresses, in resolver order
        request = client.build_request(
            "GET",
            url.copy_with(host=str(ip)),
            headers={"Host": host_header},
            extensions=extensions,
        )
        try:
            return client.send(request, stream=True)
        except httpx.ConnectError as exc:
            failure = exc
        except httpx.TimeoutException:
            raise ValidationError(f"{url} did not answer within {timeout:g}s") from None
        except httpx.HTTPError as exc:
            raise ValidationError(f"{url} does not answer: {exc}") from None
    raise ValidationError(f"{url} does not answer: {failure}")


def _read_body(
    response: httpx.Response, url: httpx.URL, max_bytes: int, deadline: float, timeout: float
) -> bytes:
    """The body, refused past `max_bytes` (declared or read) or past the deadline."""
    declared = response.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > max_bytes:
        raise ValidationError(
            f"{url} is {declared} bytes, over the {max_bytes}-byte limit "
            "(NIXX_INGEST_MAX_FILE_BYTES)"
        )
    body = bytearray()
    try:
        for part in response.iter_bytes():
            body.extend(part)
            if len(body) > max_bytes:
                raise ValidationError(
                    f"{url} is over the {max_bytes}-byte limit (NIXX_INGEST_MAX_FILE_BYTES)"
                )
            if time.monotonic() > deadline:
                raise ValidationError(
                    f"{url} took longer than {timeout:g}s (NIXX_INGEST_URL_TIMEOUT)"
                )
    except httpx.TimeoutException:
        raise ValidationError(f"{url} did not answer within {timeout:g}s") from None
    except httpx.HTTPError as exc:
        raise ValidationError(f"{url} broke off: {exc}") from None
    return bytes(body)
