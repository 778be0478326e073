"""Channel ids and kinds.

- declared channel: ``decl:<name>`` (kind `group` or `public`, from channels.yaml)
- direct channel:   ``dm:`` + first 24 hex of sha256(the two sorted handles joined by NUL),
  so both sides compute the same id with no rendezvous.

A declared channel's supervisor is the engine identity ``<origin>/__channel-<name>``: a
round's thread expects it, it opens one slot thread per member under that thread and
posts the hand-back (`nixx.nxc.delivery.rounds`).
"""

from __future__ import annotations

try:
    from _sha256 import sha256
except ImportError:  # pragma: no cover
    from hashlib import sha256

KINDS = ("group", "public", "direct")


def dm_id(a: str, b: str) -> str:
    first, second = sorted((a, b))
    digest: str = sha256(f"{first}\x00{second}".encode()).hexdigest()
    return "dm:" + digest[:24]


def decl_id(name: str) -> str:
    return "decl:" + name


def is_dm(channel_id: str) -> bool:
    return channel_id.startswith("dm:")


SUPERVISOR_PREFIX = "__channel-"


def supervisor_handle(origin: str, channel: str) -> str:
    return f"{origin}/{SUPERVISOR_PREFIX}{channel}"


def is_supervisor(handle: str) -> bool:
    return handle.partition("/")[2].startswith(SUPERVISOR_PREFIX)
