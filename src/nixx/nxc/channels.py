"""Channel ids and kinds.

- declared channel: ``decl:<name>`` (kind `group` or `public`, from channels.yaml)
- direct channel:   ``dm:`` + first 24 hex of sha256(the two sorted handles joined by NUL),
  so both sides compute the same id with no rendezvous.
"""

from __future__ import annotations

try:
    from _sha256 import sha256
except ImportError:  # pragma: no cover
    from hashlib import sha256

KINDS = ("group", "public", "direct")


def dm_id(a: str, b: str) -> str:
    first, second = sorted((a, b))
    digest = sha256(f"{first}\x00{second}".encode()).hexdigest()
    return "dm:" + digest[:24]


def decl_id(name: str) -> str:
    return "decl:" + name


def is_dm(channel_id: str) -> bool:
    return channel_id.startswith("dm:")
