"""The hybrid logical clock (HLC) that orders operations across replicas.

A clock value is a wall time in milliseconds plus a counter, encoded as 16 lower-case
hex characters (12 for the wall time, 4 for the counter) so that string order is time
order. A replica's next clock is strictly greater than every clock it has seen (its own
and every foreign one stored in its log) and never behind its own wall clock.
"""

from __future__ import annotations

import time

WALL_DIGITS = 12
COUNTER_DIGITS = 4
CLOCK_LEN = WALL_DIGITS + COUNTER_DIGITS
_COUNTER_MAX = 16**COUNTER_DIGITS - 1


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


def tick(last: str | None, wall_ms: int | None = None) -> str:
    """The next clock after `last` (the greatest clock seen), at wall time `wall_ms`."""
    wall = now_ms() if wall_ms is None else wall_ms
    if last is None:
        return encode(wall, 0)
    last_wall, last_counter = decode(last)
    if wall > last_wall:
        return encode(wall, 0)
    if last_counter >= _COUNTER_MAX:
        return encode(last_wall + 1, 0)
    return encode(last_wall, last_counter + 1)
