"""Whether a session may be started, and with which bounds: the policy of the spawn
chain (the mechanism is `nixx.nxc.delivery.spawn`).

Hop guard. A human's send starts hop 1; a send from inside a session starts hop
(that session's recorded hop + 1). The recorded hop is authoritative: `NXC_HOP` can
raise it but never lower it. The limit is `NXC_MAX_HOPS` in the shell of whoever starts
a chain (default 8), recorded on each session and inherited down the chain; a lower
`NXC_MAX_HOPS` further down still lowers it, a higher one cannot raise it. A spawn past
the limit is refused and the refusal is recorded in the thread (`outcomes`). The resume
bounds (`NXC_MAX_THREAD_RESUMES`, `NXC_MAX_CHAIN_RESUMES`: `chain_bounds`) are recorded
and inherited the same way and enforced by `sessions.deliver` / `finish_or_take`.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Mapping

    from nixx.nxc.delivery.shapes import ChainBounds, SessionRecord

DEFAULT_MAX_HOPS = 8


def _int(value: str | None) -> int | None:
    if value is None or not value.strip():
        return None
    try:
        number = int(value.strip())
    except ValueError:
        return None
    return number if number >= 0 else None


def hop_limit(env: Mapping[str, str], current: SessionRecord | None, *,
              env_hop: bool = True) -> tuple[int, int]:
    """(the hop a spawn from here gets, the limit that applies to it). `current` is the
    spawning session (None: a person). `env_hop=False` ignores `NXC_HOP` (a round's member
    is started by whoever's process settles the previous one, at the round's depth)."""
    own = current["hop"] if current else 0
    hop = max(own, (_int(env.get("NXC_HOP")) or 0) if env_hop else 0) + 1
    limits = [x for x in (_int(env.get("NXC_MAX_HOPS")),
                          current["max_hops"] if current else None) if x is not None]
    return hop, min(limits) if limits else DEFAULT_MAX_HOPS


def _bound(env: Mapping[str, str], name: str, recorded: int | None) -> int | None:
    """A chain bound: the lower of this shell's `name` and the one recorded on the chain
    (a higher value cannot lift it); None: neither is set (the default applies)."""
    values = [x for x in (_int(env.get(name)), recorded) if x is not None]
    return min(values) if values else None


def chain_bounds(env: Mapping[str, str], current: SessionRecord | None) -> ChainBounds:
    """The chain a spawn from here joins, and its resume bounds (see `sessions`)."""
    return {
        "chain": current["chain"] if current else None,
        "max_thread_resumes": _bound(env, "NXC_MAX_THREAD_RESUMES",
                                     current["max_thread_resumes"] if current else None),
        "max_chain_resumes": _bound(env, "NXC_MAX_CHAIN_RESUMES",
                                    current["max_chain_resumes"] if current else None),
    }
