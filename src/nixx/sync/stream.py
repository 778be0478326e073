"""The stream id: every clone of one repository lands on the same stream.

The `origin` URL is normalised to ``host/owner/repo``:

- the scp form (``git@host:owner/repo.git``), ``ssh://``, ``git://``, ``http(s)://`` and
  ``git+ssh://`` URLs are unified: the scheme, ``user[:password]@`` and ``:port`` are
  dropped;
- a trailing ``/`` and one ``.git`` suffix are stripped; everything is lower-cased;
- deeper paths are kept (``gitlab.com/group/sub/repo``);
- a local path or ``file://`` URL becomes ``file`` + the absolute path (a relative path is
  resolved against the repository that names it), so clones of one bare repository on one
  machine share a stream.

The stream id is ``stream-`` + the first 24 hex characters of the sha256 of that string.
A stream that derives from no origin (`nxs sync bind --create`) is ``stream-`` + 24
random hex characters.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess

from nixx.errors import ValidationError

STREAM_RE = re.compile(r"^stream-[0-9a-f]{24}$")
_URL_RE = re.compile(r"^(?P<scheme>[a-zA-Z][a-zA-Z0-9+.-]*)://(?P<rest>.*)$")
_SCP_RE = re.compile(r"^(?:(?P<user>[^@/]+)@)?(?P<host>[^:/]+):(?P<path>.*)$")


def _clean_path(path: str) -> str:
    path = path.strip().strip("/")
    while path.endswith("/"):
        path = path[:-1]
    if path.endswith(".git"):
        path = path[: -len(".git")]
    return path.strip("/")


def normalize_origin(url: str, *, base: str | None = None) -> str:
    """``host/owner/repo`` for a git remote URL (see the module docstring).

    `base` is the folder a relative local path is relative to (default: the current one).
    ValidationError for an empty URL or one without a repository path."""
    raw = url.strip()
    if not raw:
        raise ValidationError("the origin URL is empty", param="origin")
    match = _URL_RE.match(raw)
    if match and match.group("scheme").lower() != "file":
        rest = match.group("rest")
        authority, _, path = rest.partition("/")
        host = authority.rpartition("@")[2]  # drop user[:password]@
        if host.startswith("["):  # [ipv6]:port
            host = host[: host.index("]") + 1] if "]" in host else host
        else:
            host = host.partition(":")[0]
        out = f"{host}/{_clean_path(path)}"
    elif match:  # file://[host]/path
        path = match.group("rest")
        path = "/" + path.partition("/")[2] if not path.startswith("/") else path
        out = "file/" + _clean_path(os.path.normpath(path))
    elif (scp := _SCP_RE.match(raw)) and not raw.startswith(("/", ".", "~")):
        out = f"{scp.group('host')}/{_clean_path(scp.group('path'))}"
    else:  # a local path
        path = os.path.expanduser(raw)
        if not os.path.isabs(path):
            path = os.path.join(base or os.getcwd(), path)
        out = "file/" + _clean_path(os.path.normpath(path))
    out = out.lower().strip("/")
    host, _, path = out.partition("/")
    if not host or not path:
        raise ValidationError(f"cannot derive a stream from the remote URL {url!r}: "
                              "it names no repository path", param="origin")
    return out


def stream_id(normalized: str) -> str:
    return "stream-" + hashlib.sha256(normalized.encode("utf-8")).hexdigest()[:24]


def stream_for_url(url: str, *, base: str | None = None) -> str:
    return stream_id(normalize_origin(url, base=base))


def new_stream_id() -> str:
    return "stream-" + os.urandom(12).hex()


def check_stream_id(value: str) -> str:
    if not STREAM_RE.match(value):
        raise ValidationError(
            f"{value!r} is not a stream id: expected 'stream-' and 24 hex characters "
            "(as `nxs sync status` prints it on the workspace you join)", param="join")
    return value


def origin_url(root: str) -> str | None:
    """The URL of the git remote `origin` of the repository at `root`, or None when `root`
    is not in a git repository or it has no `origin` (``insteadOf`` rules are applied)."""
    try:
        proc = subprocess.run(
            ["git", "-C", root, "remote", "get-url", "origin"],
            capture_output=True, text=True, timeout=30,
            env={**os.environ, "GIT_TERMINAL_PROMPT": "0"},
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    url = proc.stdout.strip()
    return url if proc.returncode == 0 and url else None


def resolve_remote(url: str, root: str) -> str:
    """A remote URL usable from anywhere: a relative local path is made absolute against
    the repository `root` (git resolves it that way for `origin`)."""
    if _URL_RE.match(url) or (_SCP_RE.match(url) and not url.startswith(("/", ".", "~"))):
        return url
    path = os.path.expanduser(url)
    return os.path.normpath(path if os.path.isabs(path) else os.path.join(root, path))
