"""Who may use the page, and which form posts are genuine.

- **Access.** With no API key (the loopback default) the page is open, like the API.
  With ``NIXX_API_KEY`` set, a browser signs in once on ``/ui/login`` with the key; the
  answer sets a cookie holding a new random session token (`Sessions`: made at each
  sign-in, forgotten at sign-out, after `SESSION_LIFETIME` and when the server stops),
  ``HttpOnly`` (no script reads it) and ``SameSite=Strict`` (no other site's page sends
  it). The API key middleware (`nixx.server.auth`) accepts that cookie for ``/ui`` paths
  only: the JSON API still needs the bearer header.
- **Guessing.** Wrong keys are counted per client address (`SignInThrottle`): after
  `MAX_FAILURES` within `FAILURE_WINDOW` seconds, every sign-in from there — the right key
  too — is refused with 429 until the oldest failure is that old; past `MAX_FAILURES_ALL`
  from all addresses together, every sign-in waits the same way (so a guesser with many
  addresses is held to that rate: it is throttled before anyone else waits).
- **The owner's way back.** A throttled form can keep the owner out as well; the owner
  holds the key, so `nixx web link` asks the server (``POST /v1/web/sign-in-link``, with
  the key as every API call) for a one-time link, ``/ui/login/once/<token>``, good for
  `LINK_LIFETIME` seconds and one use (`Sessions.link`, `Sessions.redeem`). Opening it
  signs the browser in whatever the throttle says; the link's token is as hard to guess
  as a session's.
- **Cross-site posts.** Every form that changes something carries a token, an HMAC of a
  secret made when the server starts and of the browser's session (of nothing when the
  page is open); a signed-out visitor is shown none. Another site's page cannot read it,
  so its forged post is refused with 403. Where a post comes from (``Origin``,
  ``Sec-Fetch-Site``) is checked before, for every route, by `nixx.server.guard`.
- **Notices.** A page shows a notice from a fixed list (`NOTICES`), named by its code in
  ``?notice=``; anything else in the address shows nothing.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections import OrderedDict, deque
from collections.abc import Callable

SESSION_COOKIE = "nixx_ui"
UI_PREFIX = "/ui"
LOGIN_PATH = "/ui/login"
ONCE_PATH = "/ui/login/once/"  # + a one-time sign-in link's token
OPEN_UI_PATHS = frozenset({LOGIN_PATH, "/ui/static/style.css"})
LINK_LIFETIME = 600.0  # seconds a one-time sign-in link is good for
MAX_LINKS = 20  # unused links kept; the oldest lapses past it
SESSION_LIFETIME = 7 * 24 * 3600.0  # seconds a sign-in lasts
MAX_SESSIONS = 100  # signed-in browsers kept; the oldest is signed out past it
MAX_FAILURES = 5  # wrong keys from one address ...
FAILURE_WINDOW = 60.0  # ... within this many seconds, then sign-in waits
MAX_TRACKED_ADDRESSES = 1024
MAX_FAILURES_ALL = 10  # wrong keys from all addresses within the window, then all wait

#: ``?notice=<code>`` → the text shown; ``{n}`` is the page's ``?n=`` number.
NOTICES = {
    "intent-set": "intent set",
    "intent-cleared": "intent cleared",
    "intent-derived": "intent derived from the current session",
    "settings-saved": "settings saved",
    "summary-saved": "summary saved and re-embedded",
    "summary-deleted": "summary {n} deleted",
    "source-deleted": "source {n} deleted with its memories",
    "signed-out": "signed out",
    "task-claimed": "task claimed",
    "task-released": "task released",
    "task-done": "task done",
    "lease-released": "lease released",
    "approval-approved": "approved: the step goes on",
    "approval-denied": "denied: the thread is told why",
    "reply-posted": "reply posted",
}


def notice_text(code: str | None, number: str | None) -> str | None:
    """The notice a page shows for ``?notice=code&n=number``: None unless `code` is known;
    ``{n}`` is filled only with a whole number."""
    text = NOTICES.get(code or "")
    if text is None:
        return None
    if "{n}" in text:
        if not (number or "").isdigit() or len(number or "") > 19:
            return text.replace(" {n}", "")
        return text.replace("{n}", str(int(number or "0")))
    return text


def cookie_value(cookie_header: str) -> str | None:
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE:
            return value.strip()
    return None


class Sessions:
    """The signed-in browsers of one server process: random tokens (their SHA-256 kept,
    never the token), each valid until sign-out or `SESSION_LIFETIME`."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._until: OrderedDict[str, float] = OrderedDict()
        self._links: OrderedDict[str, float] = OrderedDict()  # one-time sign-in links

    @staticmethod
    def _digest(token: str) -> str:
        return hashlib.sha256(token.encode()).hexdigest()

    def link(self) -> str:
        """A one-time sign-in link's token (`LINK_LIFETIME`, one use), for the owner."""
        token = secrets.token_urlsafe(32)
        self._links[self._digest(token)] = self._clock() + LINK_LIFETIME
        while len(self._links) > MAX_LINKS:
            self._links.popitem(last=False)
        return token

    def redeem(self, link: str) -> str | None:
        """A new session for a valid, unused link (which is then used up), else None."""
        until = self._links.pop(self._digest(link), None)
        if until is None or until <= self._clock():
            return None
        return self.start()

    def start(self) -> str:
        token = secrets.token_urlsafe(32)
        self._until[self._digest(token)] = self._clock() + SESSION_LIFETIME
        while len(self._until) > MAX_SESSIONS:
            self._until.popitem(last=False)
        return token

    def valid(self, token: str | None) -> bool:
        if not token:
            return False
        digest = self._digest(token)
        until = self._until.get(digest)
        if until is None:
            return False
        if until <= self._clock():
            del self._until[digest]
            return False
        return True

    def from_cookies(self, cookie_header: str) -> str | None:
        """The session token of a ``Cookie`` header when it is a valid one, else None."""
        token = cookie_value(cookie_header)
        return token if self.valid(token) else None

    def end(self, token: str | None) -> None:
        if token:
            self._until.pop(self._digest(token), None)


class SignInThrottle:
    """Wrong keys per client address: `MAX_FAILURES` within `FAILURE_WINDOW`, then wait;
    and from all addresses together: `MAX_FAILURES_ALL` within the window, then every
    address waits (a guesser with many addresses — an IPv6 prefix, or more than
    `MAX_TRACKED_ADDRESSES` of them, which pushes its oldest out of the per-address
    table — is held to that rate too). Kept in memory: a restart forgets the counts."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._failures: OrderedDict[str, deque[float]] = OrderedDict()
        self._all: deque[float] = deque(maxlen=MAX_FAILURES_ALL)

    def _waiting(self, failures: deque[float] | None, limit: int, now: float) -> float:
        while failures and failures[0] <= now - FAILURE_WINDOW:
            failures.popleft()
        if not failures or len(failures) < limit:
            return 0.0
        return max(failures[0] + FAILURE_WINDOW - now, 0.001)

    def wait(self, address: str) -> float:
        """Seconds before `address` may try again (0: now)."""
        now = self._clock()
        return max(self._waiting(self._failures.get(address), MAX_FAILURES, now),
                   self._waiting(self._all, MAX_FAILURES_ALL, now))

    def failed(self, address: str) -> None:
        failures = self._failures.setdefault(address, deque(maxlen=MAX_FAILURES))
        self._failures.move_to_end(address)
        now = self._clock()
        failures.append(now)
        self._all.append(now)
        while len(self._failures) > MAX_TRACKED_ADDRESSES:
            self._failures.popitem(last=False)


class CsrfGuard:
    """Tokens for the forms of one server process, bound to the browser's session."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token(self, session: str = "") -> str:
        return hmac.new(self._secret, b"nixx-ui-form-v2:" + session.encode(),
                        hashlib.sha256).hexdigest()

    def check(self, token: str | None, session: str = "") -> str | None:
        """None when the form's token is the one of this session, else why it is refused."""
        if not token or not hmac.compare_digest(token, self.token(session)):
            return "the form's token is missing or stale: reload the page and try again"
        return None
