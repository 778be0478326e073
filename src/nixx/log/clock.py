"""The hybrid logical clock (HLC) that orders operations across replicas.

A clock value is a wall time in milliseconds plus a counter, encoded as 16 lower-case
hex characters (12 for the wall time, 4 for the counter) so that string order is time
order. A replica's next clock is strictly greater than every clock it has seen (its own
and every foreign one stored in its log) and never behind its own wall clock.

Clocks from outside are bounded: one more than `MAX_AHEAD_MS` ahead of this machine's
wall clock (`ceiling`) is refused on arrival, never folded, and never raises the local
clock (`tick` ignores such a `last`), so one op with a clock like ``ffffffffffffffff``
cannot stop a replica's writes or push its own clocks past 16 digits.
"""

from __future__ import annotations

import time

WALL_DIGITS = 12
COUNTER_DIGITS = 4
CLOCK_LEN = WALL_DIGITS + COUNTER_DIGITS
_COUNTER_MAX = 16**COUNTER_DIGITS - 1
#: how far ahead of the local wall clock a clock from elsewhere may be (1 hour): more is
#: refused on arrival and never folded (docs/sync.md, "Trust")
MAX_AHEAD_MS = 3_600_000


def encode(wall_ms: int, counter: int) -> str:
    return f"{wall_ms:012x}{counter:04x}"


def decode(clock: str) -> tuple[int, int]:
    """`(wall_ms, counter)` of an encoded clock; ValueError if it is not one."""
    if len(clock) != CLOCK_LEN:
        raise ValueError(f"not a clock: {clock!r}")
    return int(clock[:WALL_DIGITS], 16), int(clock[WALL_DIGITS:], 16)


def is_clock(value: object) -> bool:
    if not isinstance(value, str) or len(value) != CLOCK_LEN:
        return False
    try:
        int(value, 16)
    except ValueError:
        return False
    return value == value.lower()


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def ceiling(wall_ms: int | None = None) -> str:
    """The greatest clock accepted from elsewhere at wall time `wall_ms`."""
    wall = now_ms() if wall_ms is None else wall_ms
    return encode(wall + MAX_AHEAD_MS, _COUNTER_MAX)


def too_far_ahead(clock: str, wall_ms: int | None = None) -> bool:
    """True when `clock` is more than `MAX_AHEAD_MS` ahead of the wall clock (or longer
    than a clock: it sorts after every valid one)."""
    return len(clock) != CLOCK_LEN or clock > ceiling(wall_ms)


def tick(last: str | None, wall_ms: int | None = None) -> str:
    """The next clock after `last` (the greatest clock seen), at wall time `wall_ms`. A
    `last` that is not a clock, or too far ahead (`too_far_ahead`), is ignored: the next
    clock always has 16 digits and follows the wall clock."""
    wall = now_ms() if wall_ms is None else wall_ms
    if last is None or not is_clock(last) or too_far_ahead(last, wall):
        return encode(wall, 0)
    last_wall, last_counter = decode(last)
    if wall > last_wall:
        return encode(wall, 0)
    if last_counter >= _COUNTER_MAX:
        return encode(last_wall + 1, 0)
    return encode(last_wall, last_counter + 1)
