"""Who may use the page, and which form posts are genuine.

- **Access.** With no API key (the loopback default) the page is open, like the API.
  With ``NIXX_API_KEY`` set, a browser signs in once on ``/ui/login`` with the key; the
  answer sets a cookie holding an HMAC of the key (never the key itself), ``HttpOnly``
  (no script reads it) and ``SameSite=Strict`` (no other site's page sends it). The API
  key middleware (`nixx.server.auth`) accepts that cookie for ``/ui`` paths only: the
  JSON API still needs the bearer header.
- **Cross-site posts.** Every form that changes something carries a token, an HMAC of a
  secret made when the server starts; another site's page cannot read it, so its
  forged post is refused with 403. A post whose ``Origin`` (or ``Sec-Fetch-Site``) says
  it came from elsewhere is refused too, token or not.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from urllib.parse import urlsplit

from nixx.secret import reveal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pydantic import SecretStr

SESSION_COOKIE = "nixx_ui"
UI_PREFIX = "/ui"
LOGIN_PATH = "/ui/login"
OPEN_UI_PATHS = frozenset({LOGIN_PATH, "/ui/static/style.css"})


def session_value(api_key: SecretStr | str) -> str:
    """The cookie value that proves the browser was given the key."""
    key = (reveal(api_key) or "").encode()
    return hmac.new(key, b"nixx-ui-session-v1", hashlib.sha256).hexdigest()


def has_session(cookie_header: str, api_key: SecretStr | str) -> bool:
    want = session_value(api_key)
    for part in cookie_header.split(";"):
        name, _, value = part.strip().partition("=")
        if name == SESSION_COOKIE and hmac.compare_digest(value.strip(), want):
            return True
    return False


class CsrfGuard:
    """Tokens for the forms of one server process."""

    def __init__(self, secret: bytes | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)

    def token(self) -> str:
        return hmac.new(self._secret, b"nixx-ui-form-v1", hashlib.sha256).hexdigest()

    def check(self, token: str | None, *, host: str, origin: str | None, fetch_site: str | None
              ) -> str | None:
        """None when the post is genuine, else why it is refused."""
        if fetch_site and fetch_site not in ("same-origin", "none"):
            return f"a form posted from another site ({fetch_site}) was refused"
        if origin and origin != "null":
            if urlsplit(origin).netloc.lower() != host.lower():
                return f"a form posted from {origin} was refused: only this page may post"
        elif origin == "null":
            return "a form posted from an opaque origin was refused"
        if not token or not hmac.compare_digest(token, self.token()):
            return "the form's token is missing or stale: reload the page and try again"
        return None
