"""Durations (`30s`, `10m`, `2h`, `1d`, `1w`) and RFC3339 instants, as milliseconds.

A deadline is checked here for every entry (CLI, MCP, library: `check_deadline`): after
now and at most `MAX_DEADLINE_MS` ahead (docs/limits-and-safety.md), so no caller can
set one in 1970 (a thread stale on arrival) or past any date that means something.
"""

from __future__ import annotations

import time

from nixx.errors import ValidationError

#: how far ahead a deadline may be: one year
MAX_DEADLINE_MS = 366 * 86_400_000
_UNITS = {"s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}


def parse_duration_ms(text: str) -> int | None:
    """``10m`` → 600000; None if `text` is not a duration."""
    text = text.strip()
    if len(text) < 2 or text[-1] not in _UNITS or not text[:-1].isdigit():
        return None
    return int(text[:-1]) * _UNITS[text[-1]]


def parse_instant_ms(text: str) -> int | None:
    """An RFC3339 instant (``2026-05-01T12:00:00Z``, with offset) → epoch ms, else None."""
    from datetime import datetime

    value = text.strip()
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    if parsed.tzinfo is None or "T" not in value.upper():
        return None
    return int(parsed.timestamp() * 1000)


def parse_deadline(text: str, *, now_ms: int | None = None, what: str = "--deadline") -> int:
    """A duration from now or an RFC3339 instant → absolute epoch ms."""
    now = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    duration = parse_duration_ms(text)
    if duration is not None:
        return check_deadline(now + duration, now_ms=now, what=what, text=text)
    instant = parse_instant_ms(text)
    if instant is not None:
        return check_deadline(instant, now_ms=now, what=what, text=text)
    raise ValidationError(
        f"{what} {text!r} is neither a duration (30s, 10m, 2h, 1d, 1w) nor an RFC3339 "
        "instant with a time zone (2026-05-01T12:00:00Z)",
        param=what,
    )


def check_deadline(ms: int, *, now_ms: int, what: str = "--deadline",
                   text: str | None = None) -> int:
    """`ms` when it is after `now_ms` and at most `MAX_DEADLINE_MS` ahead, else a
    ValidationError naming the range."""
    given = repr(text) if text is not None else str(ms)
    if type(ms) is not int or ms <= now_ms:
        raise ValidationError(f"{what} {given} is not in the future", param=what)
    if ms - now_ms > MAX_DEADLINE_MS:
        raise ValidationError(f"{what} {given} is more than a year ahead (366 days at most)",
                              param=what)
    return ms


def iso(ms: int | None) -> str | None:
    """Epoch ms → RFC3339 UTC with milliseconds (``2026-05-01T12:00:00.000Z``)."""
    if ms is None:
        return None
    seconds, millis = divmod(int(ms), 1000)
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(seconds)) + f".{millis:03d}Z"
