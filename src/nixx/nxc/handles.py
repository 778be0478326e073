"""Qualified handles `<origin>/<agent>`: who is acting, resolved in one place.

- agent: `NXC_ACTOR`, else `$USER`, else the literal ``nxc``.
- origin: `NXC_ORIGIN`, else the origin the workspace declares in
  `.nxs-personas/workspace.yaml` (shared by every clone of the repository, so one person
  or persona is one handle on every machine: docs/sync.md), else the workspace's replica
  prefix.
- A variable set to an empty string counts as unset.
- `NXC_ACTOR` that already holds a qualified handle (``ab12/coder``) is used as is.

The CLI and the library both call `resolve_handle`; a test runs the CLI in a subprocess
and compares.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nixx.errors import ValidationError

_BAD_CHARS = set(" \t\r\n\x00,")


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None


def check_agent(agent: str, *, what: str = "agent name") -> str:
    if not agent or "/" in agent or _BAD_CHARS & set(agent):
        raise ValidationError(
            f"{what} {agent!r} is not valid: non-empty, no '/', no spaces or commas"
        )
    return agent


def check_handle(handle: str, *, what: str = "handle") -> str:
    origin, sep, agent = handle.partition("/")
    if not sep or not origin or _BAD_CHARS & set(origin):
        raise ValidationError(f"{what} {handle!r} is not a qualified handle `<origin>/<agent>`")
    check_agent(agent, what=what)
    return handle


def resolve_origin(replica: str, env: Mapping[str, str] | None = None,
                   declared: str | None = None) -> str:
    env = os.environ if env is None else env
    origin = _env(env, "NXC_ORIGIN") or declared or replica
    if "/" in origin or _BAD_CHARS & set(origin):
        raise ValidationError(f"NXC_ORIGIN {origin!r} is not valid: no '/', no spaces")
    return origin


def resolve_handle(replica: str, env: Mapping[str, str] | None = None,
                   declared: str | None = None) -> str:
    """The acting handle for this process in a workspace with replica prefix `replica`
    (and the origin it declares, if any)."""
    env = os.environ if env is None else env
    actor = _env(env, "NXC_ACTOR")
    if actor is not None and "/" in actor:
        return check_handle(actor, what="NXC_ACTOR")
    agent = actor or _env(env, "USER") or "nxc"
    check_agent(agent, what="NXC_ACTOR" if actor else "$USER" if _env(env, "USER") else "agent")
    return f"{resolve_origin(replica, env, declared)}/{agent}"


def qualify(name: str, origin: str) -> str:
    """``coder`` → ``<origin>/coder``; a qualified handle is returned unchanged."""
    name = name.strip()
    if "/" in name:
        return check_handle(name)
    return f"{origin}/{check_agent(name, what='handle')}"


def parse_handle_list(text: str, origin: str) -> list[str]:
    """``a,b, ab12/c`` → qualified handles in the given order, duplicates dropped."""
    out: list[str] = []
    for part in text.split(","):
        if part.strip():
            handle = qualify(part, origin)
            if handle not in out:
                out.append(handle)
    return out
