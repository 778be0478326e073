"""Identifiers: ULID-style ids for things (messages, threads), content hashes for
operations, and the workspace's replica prefix.

- `new_ulid()`: 26 Crockford base32 characters, 48-bit millisecond time then 80 random
  bits, so ids sort by creation time.
- `op_id(...)`: ``o`` + the first 32 hex characters of the sha256 of the operation's
  canonical JSON (sorted keys, compact). The same operation always has the same id, so
  re-delivering it is a no-op, and anyone can verify an id against its content.
- `new_replica_prefix()`: 4 random Crockford base32 characters, lower case (~1M values).
- `new_thing_id(kind, replica)`: ``<kind>-<ULID>-<replica>``, the id of a thing written
  once (a message ``m-``, a thread ``t-``). It names the replica that minted it
  (`minter`), so a claim on it from any other replica is refused (docs/sync.md, "Trust").
  Ids minted before this rule (``m-<ULID>``) name no minter.
"""

from __future__ import annotations

import os
import time

CROCKFORD = "0123456789abcdefghjkmnpqrstvwxyz"
REPLICA_LEN = 4


def _b32(value: int, length: int) -> str:
    chars = []
    for _ in range(length):
        chars.append(CROCKFORD[value & 31])
        value >>= 5
    return "".join(reversed(chars))


def new_ulid(wall_ms: int | None = None) -> str:
    ms = time.time_ns() // 1_000_000 if wall_ms is None else wall_ms
    rand = int.from_bytes(os.urandom(10), "big")
    return _b32(ms, 10) + _b32(rand, 16)


def new_replica_prefix() -> str:
    return _b32(int.from_bytes(os.urandom(4), "big"), REPLICA_LEN)


def is_replica_prefix(value: str) -> bool:
    return 1 <= len(value) <= 16 and all(c in CROCKFORD for c in value)


def new_thing_id(kind: str, replica: str, wall_ms: int | None = None) -> str:
    """``<kind>-<ULID>-<replica>``: an id that names the replica minting it."""
    return f"{kind}-{new_ulid(wall_ms)}-{replica}"


def minter(thing_id: str) -> str | None:
    """The replica that minted `thing_id` (`new_thing_id`), None when the id names none."""
    kind, sep, rest = thing_id.partition("-")
    ulid, sep2, replica = rest.partition("-")
    if not (sep and sep2 and kind and len(ulid) == 26 and is_replica_prefix(replica)):
        return None
    if not all(c in CROCKFORD for c in ulid.lower()):
        return None
    return replica
