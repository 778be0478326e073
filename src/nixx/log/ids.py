"""Identifiers: ULID-style ids for things (messages, threads), content hashes for
operations, and the workspace's replica prefix.

- `new_ulid()`: 26 Crockford base32 characters, 48-bit millisecond time then 80 random
  bits, so ids sort by creation time.
- `op_id(...)`: ``o`` + the first 32 hex characters of the sha256 of the operation's
  canonical JSON (sorted keys, compact). The same operation always has the same id, so
  re-delivering it is a no-op, and anyone can verify an id against its content.
- `new_replica_prefix()`: 4 random Crockford base32 characters, lower case (~1M values).
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
