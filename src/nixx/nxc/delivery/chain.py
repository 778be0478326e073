"""Whether a session may be started, and with which bounds: the policy of the spawn
chain (the mechanism is `nixx.nxc.delivery.runs`), and what a process's ``NXC_*``
variables say (`NxcEnv`, parsed once; what a child is given: `runs.child_env`).

Hop guard. A human's send starts hop 1; a send from inside a session starts hop
(that session's recorded hop + 1). The recorded hop is authoritative: `NXC_HOP` can
raise it but never lower it. The limit is `NXC_MAX_HOPS` in the shell of whoever starts
a chain (default 8), recorded on each session and inherited down the chain; a lower
`NXC_MAX_HOPS` further down still lowers it, a higher one cannot raise it. A spawn past
the limit is refused and the refusal is recorded in the thread (`outcomes`). The resume
bounds (`NXC_MAX_THREAD_RESUMES`, `NXC_MAX_CHAIN_RESUMES`: `chain_bounds`) are recorded
and inherited the same way and enforced by `sessions.deliver` / `finish_or_take`.

Environment. What delivery reads of a process's own environment is `NxcEnv`, parsed
once (by the `Deliverer`): `NXC_SESSION` (where no supervisor is an ancestor:
`Deliverer.here`), `NXC_HOP`, the bounds above, `NXC_TRANSCRIPT_KEEP_DAYS`
(handed to the run) and the `PATH` and `HOME` a child gets. An empty variable counts as
unset; a number that does not parse (or is negative) too.
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


def _keep_days(value: str | None) -> int | None:
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        return None


class NxcEnv:
    """What a process's environment says to delivery, parsed once (`parse`); every field
    None when unset (see the module)."""

    __slots__ = ("session", "hop", "max_hops", "max_thread_resumes", "max_chain_resumes",
                 "transcript_keep_days", "path", "home")

    def __init__(self, *, session: str | None = None, hop: int | None = None,
                 max_hops: int | None = None, max_thread_resumes: int | None = None,
                 max_chain_resumes: int | None = None, transcript_keep_days: int | None = None,
                 path: str | None = None, home: str | None = None) -> None:
        self.session = session  # NXC_SESSION
        self.hop = hop  # NXC_HOP
        self.max_hops = max_hops  # NXC_MAX_HOPS
        self.max_thread_resumes = max_thread_resumes  # NXC_MAX_THREAD_RESUMES
        self.max_chain_resumes = max_chain_resumes  # NXC_MAX_CHAIN_RESUMES
        self.transcript_keep_days = transcript_keep_days  # NXC_TRANSCRIPT_KEEP_DAYS
        self.path = path  # PATH and HOME: what a child gets from this shell
        self.home = home

    @classmethod
    def parse(cls, env: Mapping[str, str]) -> NxcEnv:
        return cls(session=env.get("NXC_SESSION") or None, hop=_int(env.get("NXC_HOP")),
                   max_hops=_int(env.get("NXC_MAX_HOPS")),
                   max_thread_resumes=_int(env.get("NXC_MAX_THREAD_RESUMES")),
                   max_chain_resumes=_int(env.get("NXC_MAX_CHAIN_RESUMES")),
                   transcript_keep_days=_keep_days(env.get("NXC_TRANSCRIPT_KEEP_DAYS")),
                   path=env.get("PATH") or None, home=env.get("HOME") or None)

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"NxcEnv({fields})"


def hop_limit(env: NxcEnv, current: SessionRecord | None, *,
              env_hop: bool = True) -> tuple[int, int]:
    """(the hop a spawn from here gets, the limit that applies to it). `current` is the
    spawning session (None: a person). `env_hop=False` ignores `NXC_HOP` (a round's member
    is started by whoever's process settles the previous one, at the round's depth)."""
    own = current["hop"] if current else 0
    hop = max(own, (env.hop or 0) if env_hop else 0) + 1
    limits = [x for x in (env.max_hops, current["max_hops"] if current else None)
              if x is not None]
    return hop, min(limits) if limits else DEFAULT_MAX_HOPS


def _bound(mine: int | None, recorded: int | None) -> int | None:
    """A chain bound: the lower of this shell's and the one recorded on the chain (a
    higher value cannot lift it); None: neither is set (the default applies)."""
    values = [x for x in (mine, recorded) if x is not None]
    return min(values) if values else None


def chain_bounds(env: NxcEnv, current: SessionRecord | None) -> ChainBounds:
    """The chain a spawn from here joins, and its resume bounds (see `sessions`)."""
    return {
        "chain": current["chain"] if current else None,
        "max_thread_resumes": _bound(env.max_thread_resumes,
                                     current["max_thread_resumes"] if current else None),
        "max_chain_resumes": _bound(env.max_chain_resumes,
                                    current["max_chain_resumes"] if current else None),
    }


def place(env: NxcEnv, current: SessionRecord | None, *,
          round_member: bool = False) -> tuple[int, int, ChainBounds]:
    """Where a spawn from here lands: (its hop, the hop limit that applies, the chain it
    joins and its resume bounds). `current` is the spawning session (None: a person); a
    round's member (`round_member`) is placed below the round's opener (`current`), so
    neither `NXC_HOP` nor — when a person opened the round — `NXC_MAX_HOPS` of the
    process that happens to start it counts."""
    if round_member:
        hop, limit = hop_limit(env if current else NxcEnv(), current, env_hop=False)
    else:
        hop, limit = hop_limit(env, current)
    return hop, limit, chain_bounds(env, current)
