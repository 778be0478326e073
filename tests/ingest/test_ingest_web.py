"""Web pages fetched from a real HTTP server on loopback. Loopback is a private address,
so these tests allow private URLs, except the ones proving the default refuses them."""

from __future__ import annotations

import ipaddress

import pytest

from nixx.errors import Forbidden, NotFound, ValidationError
from nixx.ingest.fetch import check_address
from nixx.ingest.pipeline import Ingestor
from nixx.store.base import MemoryStore

from .conftest import Page, Web

ARTICLE = (
    b"<html><head><title>Owl field notes</title></head><body>"
    b"<header><a href='/'>Blog home</a> | Subscribe to our newsletter</header>"
    b"<main><article><h1>Barn owls</h1>"
    b"<p>Barn owls hunt at night by sound alone: their heart-shaped facial disc funnels "
    b"the rustle of a vole in the grass towards ears set at different heights.</p>"
    b"<h2>Nesting</h2><p>They nest in old barns, church towers and hollow trees, and a pair "
    b"returns to the same site year after year to raise four to six chicks.</p>"
    b"</article></main><footer>Comments are closed. Share on social media.</footer>"
    b"</body></html>"
)


@pytest.fixture
def open_ingestor(make_settings, store: MemoryStore, embedder) -> Ingestor:
    return Ingestor(store, embedder, make_settings(ingest_allow_private_urls=True))


def test_page_is_fetched_extracted_and_found_by_meaning(
    open_ingestor: Ingestor, store: MemoryStore, web: Web
) -> None:
    web.pages["/owls"] = Page(ARTICLE)
    url = web.base_url + "/owls"
    result = open_ingestor.ingest_url(url, tags=["birds"])
    source = result.source
    assert source.type == "web" and source.name == "Barn owls"
    assert source.meta["url"] == url and source.meta["tags"] == ["birds"]
    chunks = store.source_chunks(source.id)
    text = "\n".join(m.content for m in chunks)
    assert "heart-shaped facial disc" in text
    assert "newsletter" not in text and "Comments are closed" not in text
    vector = open_ingestor.embedder.embed(["where do these birds raise their young"])[0]
    best = store.search_memories(vector, limit=1)[0]
    assert "nest in old barns" in best.memory.content
    assert best.memory.metadata["heading"].startswith("Barn owls")


def test_reingest_same_page_is_a_noop_and_changed_page_replaces(
    open_ingestor: Ingestor, store: MemoryStore, web: Web
) -> None:
    web.pages["/owls"] = Page(ARTICLE)
    url = web.base_url + "/owls"
    first = open_ingestor.ingest_url(url)
    assert open_ingestor.ingest_url(url).status == "unchanged"
    web.pages["/owls"] = Page(ARTICLE.replace(b"four to six chicks", b"two to three owlets"))
    changed = open_ingestor.ingest_url(url)
    assert changed.status == "replaced" and changed.source.id == first.source.id
    text = "\n".join(m.content for m in store.source_chunks(first.source.id))
    assert "owlets" in text and "four to six chicks" not in text
    assert len(store.list_sources()) == 1


def test_plain_text_page_and_redirect(
    open_ingestor: Ingestor, store: MemoryStore, web: Web
) -> None:
    web.pages["/old"] = Page(b"", status=301, headers={"Location": "/notes.txt"})
    web.pages["/notes.txt"] = Page(
        b"Plain notes: the ferry leaves at nine.\n", "text/plain; charset=utf-8"
    )
    result = open_ingestor.ingest_url(web.base_url + "/old")
    assert result.source.meta["final_url"] == web.base_url + "/notes.txt"
    assert "ferry leaves at nine" in store.source_chunks(result.source.id)[0].content
    assert web.hits == ["/old", "/notes.txt"]


def test_declared_charset_is_honoured(
    open_ingestor: Ingestor, store: MemoryStore, web: Web
) -> None:
    body = "<html><body><article><p>Le café crème coûte trois euros au comptoir.</p>" * 3
    web.pages["/fr"] = Page(
        (body + "</article></body></html>").encode("latin-1"), "text/html; charset=iso-8859-1"
    )
    result = open_ingestor.ingest_url(web.base_url + "/fr")
    assert "café crème coûte" in store.source_chunks(result.source.id)[0].content


def test_loopback_is_refused_by_default(ingestor: Ingestor, store: MemoryStore, web: Web) -> None:
    web.pages["/owls"] = Page(ARTICLE)
    for url in (web.base_url + "/owls", web.base_url.replace("127.0.0.1", "localhost") + "/owls"):
        with pytest.raises(Forbidden, match="NIXX_INGEST_ALLOW_PRIVATE_URLS"):
            ingestor.ingest_url(url)
    assert web.hits == []  # refused before any connection
    assert store.list_sources() == []


def test_only_public_addresses_pass_the_address_rule() -> None:
    # The rule applied to every address of every hop (redirects included). A public first
    # hop cannot be served from this sandbox, so the rule is checked on its own here.
    for private in (
        "127.0.0.1",
        "10.1.2.3",
        "192.168.0.1",
        "169.254.169.254",
        "100.64.0.1",
        "::1",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "0.0.0.0",
        "224.0.0.1",
    ):
        assert not check_address(ipaddress.ip_address(private)), private
    for public in ("93.184.216.34", "2606:2800:220:1::1", "::ffff:8.8.8.8"):
        assert check_address(ipaddress.ip_address(public)), public


@pytest.mark.parametrize(
    ("page", "error", "message"),
    [
        (Page(b'{"a": 1}', "application/json"), ValidationError, "not HTML or text"),
        (Page(b"\x89PNG....", "image/png"), ValidationError, "not HTML or text"),
        (Page(b"oops", "text/plain", 500), ValidationError, "answered HTTP 500"),
        (Page(b"gone", "text/plain", 404), NotFound, "HTTP 404"),
        (Page(b"<html><body></body></html>"), ValidationError, "no readable text"),
        (Page(b"x" * 5000, "text/plain"), ValidationError, "over the 4000-byte limit"),
    ],
)
def test_bad_pages_store_nothing(
    make_settings, store: MemoryStore, embedder, web: Web, page: Page, error, message: str
) -> None:
    ingestor = Ingestor(
        store, embedder, make_settings(ingest_allow_private_urls=True, ingest_max_file_bytes=4000)
    )
    web.pages["/p"] = page
    with pytest.raises(error, match=message):
        ingestor.ingest_url(web.base_url + "/p")
    assert store.list_sources() == [] and store.count_memories() == 0


def test_url_that_does_not_answer(open_ingestor: Ingestor, store: MemoryStore) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(ValidationError, match="does not answer"):
        open_ingestor.ingest_url(f"http://127.0.0.1:{port}/")
    for bad in ("file:///etc/passwd", "ftp://example.org/x", "not a url", "http://"):
        with pytest.raises(ValidationError):
            open_ingestor.ingest_url(bad)
    assert store.list_sources() == []


def test_too_many_redirects(open_ingestor: Ingestor, web: Web) -> None:
    web.pages["/loop"] = Page(b"", status=302, headers={"Location": "/loop"})
    with pytest.raises(ValidationError, match="redirects more than"):
        open_ingestor.ingest_url(web.base_url + "/loop")


def _nat64_local_48(v4: str) -> str:
    """RFC 6052 /48 layout of `v4` under 64:ff9b:1::/48 (bits 64-71 are zero)."""
    n = int(ipaddress.IPv4Address(v4))
    value = int(ipaddress.IPv6Address("64:ff9b:1::")) | ((n >> 16) << 64) | ((n & 0xFFFF) << 40)
    return str(ipaddress.IPv6Address(value))


PRIVATE_V4 = ["127.0.0.1", "10.0.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1", "0.0.0.0"]


@pytest.mark.parametrize("v4", PRIVATE_V4)
def test_ipv6_forms_embedding_a_private_ipv4_are_refused(v4: str) -> None:
    packed = ipaddress.IPv4Address(v4).packed.hex()
    hi, lo = packed[:4], packed[4:]
    forms = [
        f"64:ff9b::{v4}",  # NAT64 well-known prefix
        f"64:ff9b:1::{v4}",  # local-use NAT64, /96 layout
        _nat64_local_48(v4),  # local-use NAT64, /48 layout
        f"2002:{hi}:{lo}::1",  # 6to4
        f"::{v4}",  # IPv4-compatible
        f"::ffff:{v4}",  # IPv4-mapped
        f"::ffff:0:{v4}",  # IPv4-translated
    ]
    for form in forms:
        assert not check_address(ipaddress.ip_address(form)), form


def test_ipv6_forms_embedding_a_public_ipv4_are_judged_by_it() -> None:
    for form in ["64:ff9b::8.8.8.8", _nat64_local_48("8.8.8.8"), "2002:808:808::1", "::8.8.8.8"]:
        assert check_address(ipaddress.ip_address(form)), form


def test_an_embedded_private_address_is_refused_by_fetch_before_connecting() -> None:
    from nixx.ingest.fetch import fetch

    for url in ["http://[64:ff9b::7f00:1]:9/", "http://[2002:7f00:1::1]/", "http://[::127.0.0.1]/"]:
        with pytest.raises(Forbidden, match="private|public|address"):
            fetch(url, allow_private=False, max_bytes=1000, timeout=5)
