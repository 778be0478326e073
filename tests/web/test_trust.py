"""What another site's page and a visitor without the key can do to the memory browser,
in a real headless Chromium against a live server: a rebound name reaches nothing, a
cross-site fetch changes nothing, wrong keys are throttled, a sign-in is a fresh session
that sign-out ends, a signed-out visitor sees no form token and an address puts no words
of its own on a page."""

from __future__ import annotations

import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LiveServer

from .conftest import CHROMIUM, CHROMIUM_ARGS, make_server

pytestmark = pytest.mark.slow
KEY = "a-long-enough-test-key"


@pytest.fixture
def keyed(llm: FakeLLM, workspace: Path) -> Iterator[LiveServer]:
    with make_server(llm, workspace, api_key=KEY) as live:
        yield live


def _sign_in(server: LiveServer, key: str = KEY, cookies: dict[str, str] | None = None
             ) -> httpx.Response:
    return httpx.post(server.base_url + "/ui/login", data={"key": key}, cookies=cookies)


def _opens(server: LiveServer, cookie: str) -> bool:
    r = httpx.get(server.base_url + "/ui/settings", cookies={"nixx_ui": cookie})
    assert r.status_code in (200, 303)
    return r.status_code == 200


def test_a_rebound_name_reaches_nothing_in_a_real_browser(server: LiveServer, browser: Any
                                                          ) -> None:
    """DNS rebinding, as the browser sees it: evil.example resolves to 127.0.0.1, so its
    page is same-origin with whatever answers there. nixx answers that name with a refusal."""
    rules = "--host-resolver-rules=MAP evil.example 127.0.0.1"
    rebound = browser.browser_type.launch(executable_path=CHROMIUM, args=[*CHROMIUM_ARGS, rules])
    try:
        page = rebound.new_page()
        answer = page.goto(f"http://evil.example:{server.port}/ui/settings")
        assert answer is not None and answer.status == 421
        assert "NIXX_ALLOWED_HOSTS" in page.locator("p.error").inner_text()
        assert "csrf" not in page.content()
        page.goto(f"http://evil.example:{server.port}/health")  # no CSP: scripts may fetch
        status = page.evaluate(
            """async () => (await fetch('/v1/buffer/delete', {method: 'POST',
                 headers: {'Content-Type': 'application/json'},
                 body: JSON.stringify({start_id: 1, end_id: 99})})).status""")
        assert status == 421
    finally:
        rebound.close()


@pytest.fixture
def other_site() -> Iterator[str]:
    """Another origin (another loopback port) serving a blank page to run scripts in."""

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = b"<!doctype html><title>elsewhere</title>"
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{httpd.server_address[1]}"
    httpd.shutdown()


def test_simple_cross_site_requests_change_nothing(
    server: LiveServer, page: Any, other_site: str
) -> None:
    """The requests a page may send anywhere without a preflight (no-cors fetch: text/plain,
    a form encoding, a typeless body) reach no route: the intent and the session stand."""
    httpx.post(server.base_url + "/v1/intent", json={"intent": "Manual intent."})
    page.goto(other_site)
    page.evaluate(
        """async (base) => {
             const go = (path, init) => fetch(base + path, {method: 'POST', mode: 'no-cors', ...init});
             await go('/v1/buffer/clear', {body: 'x', headers: {'Content-Type': 'text/plain'}});
             await go('/v1/intent/derive', {body: new URLSearchParams({a: 'b'})});
             await go('/v1/episodic/summary', {body: new Blob(['{}'])});
             await go('/v1/intent', {body: new Blob(['{"intent": "theirs"}'])});
             await go('/ui/intent', {body: new URLSearchParams({action: 'clear'})});
           }""",
        server.base_url,
    )
    assert httpx.get(server.base_url + "/v1/intent").json()["intent"] == "Manual intent."
    rows = httpx.get(server.base_url + "/v1/episodic/transcript", params={"start": 1}).json()
    assert rows["rows"] == []


def test_wrong_keys_are_throttled_and_then_even_the_right_one_waits(keyed: LiveServer) -> None:
    from nixx.web.security import MAX_FAILURES

    for _ in range(MAX_FAILURES):
        r = _sign_in(keyed, "not-the-key")
        assert r.status_code == 401 and "wrong key" in r.text
    r = _sign_in(keyed)
    assert r.status_code == 429, r.text
    assert "too many wrong keys" in r.text and int(r.headers["retry-after"]) > 0
    assert "nixx_ui" not in r.cookies


def test_the_throttle_forgets_failures_older_than_its_window() -> None:
    from nixx.web.security import FAILURE_WINDOW, MAX_FAILURES, SignInThrottle

    now = [1000.0]
    throttle = SignInThrottle(clock=lambda: now[0])
    for _ in range(MAX_FAILURES):
        assert throttle.wait("10.0.0.1") == 0
        throttle.failed("10.0.0.1")
    assert throttle.wait("10.0.0.1") == pytest.approx(FAILURE_WINDOW)
    assert throttle.wait("10.0.0.2") == 0  # per address
    now[0] += FAILURE_WINDOW / 2
    assert throttle.wait("10.0.0.1") == pytest.approx(FAILURE_WINDOW / 2)
    now[0] += FAILURE_WINDOW / 2
    assert throttle.wait("10.0.0.1") == 0


def test_a_guesser_with_many_addresses_is_held_to_the_rate_of_all() -> None:
    """One wrong key from each of many addresses (an IPv6 prefix; more addresses than the
    per-address table keeps) passes no per-address limit; the limit over all of them
    stops every sign-in until the oldest of those failures is a window old."""
    from nixx.web.security import (
        FAILURE_WINDOW,
        MAX_FAILURES_ALL,
        MAX_TRACKED_ADDRESSES,
        SignInThrottle,
    )

    now = [1000.0]
    throttle = SignInThrottle(clock=lambda: now[0])
    tried = 0
    while throttle.wait(f"2001:db8::{tried:x}") == 0 and tried <= MAX_TRACKED_ADDRESSES + 10:
        throttle.failed(f"2001:db8::{tried:x}")
        tried += 1
    assert tried == MAX_FAILURES_ALL
    assert throttle.wait("127.0.0.1") == pytest.approx(FAILURE_WINDOW)  # everyone waits
    now[0] += FAILURE_WINDOW
    assert throttle.wait("127.0.0.1") == 0


def test_each_sign_in_is_a_new_session_and_sign_out_ends_it(keyed: LiveServer, page: Any
                                                             ) -> None:
    page.goto(keyed.base_url + "/ui/settings")
    page.fill("input[name=key]", KEY)
    page.click("main form button")
    assert page.url.endswith("/ui")
    first = page.context.cookies()[0]["value"]
    assert _opens(keyed, first)

    again = _sign_in(keyed, cookies={"nixx_ui": first})  # signing in again rotates it
    second = again.cookies["nixx_ui"]
    assert second != first and _opens(keyed, second) and not _opens(keyed, first)

    page.context.clear_cookies()
    page.context.add_cookies([{"name": "nixx_ui", "value": second, "url": keyed.base_url}])
    page.goto(keyed.base_url + "/ui/settings")
    page.click("form.logout button")
    assert page.url.endswith("/ui/login?notice=signed-out")
    assert "signed out" in page.locator(".notice").inner_text()
    assert not _opens(keyed, second)  # the cookie a copy kept no longer works


def test_a_signed_out_visitor_is_shown_no_form_token(keyed: LiveServer) -> None:
    login = httpx.get(keyed.base_url + "/ui/login")
    assert login.status_code == 200 and 'name="key"' in login.text
    assert "csrf" not in login.text
    signed_in = httpx.get(keyed.base_url + "/ui/settings",
                          cookies={"nixx_ui": _sign_in(keyed).cookies["nixx_ui"]})
    tokens = re.findall(r'name="csrf" value="([0-9a-f]+)"', signed_in.text)
    assert tokens and len(set(tokens)) == 1


def test_an_address_puts_no_words_of_its_own_on_a_page(server: LiveServer, page: Any) -> None:
    lie = "Your memory was wiped: sign in at evil.example"
    page.goto(server.base_url + "/ui/settings?" + httpx.QueryParams({"notice": lie}).__str__())
    assert page.locator(".notice").count() == 0
    assert "evil.example" not in page.content()
    page.goto(server.base_url + "/ui/summaries?notice=summary-deleted&n=7")
    assert page.locator(".notice").inner_text() == "summary 7 deleted"
    page.goto(server.base_url + "/ui/summaries?notice=summary-deleted&n=evil.example")
    assert page.locator(".notice").inner_text() == "summary deleted"
