"""The named shapes of the log's seams: an op as it travels (`OpWire`: what sync sends and
`Op.from_wire` checks) and as `nxs log --json` prints it (`OpJson`).

Annotations only: imported under ``TYPE_CHECKING`` (``typing`` costs start-up); at run
time these are plain dicts."""

from __future__ import annotations

from typing import Any, TypedDict


class OpWire(TypedDict):
    """`Op.to_wire`: every identity field, no `seq`, no `local`."""

    id: str
    domain: str
    kind: str
    target: str
    origin: str
    clock: str
    actor: str
    payload: dict[str, Any]  # the reducer's own JSON
    created: int


class OpJson(OpWire):
    """`Op.to_dict` (`nxs log --json`): the wire form plus where it sits here."""

    seq: int | None
    local: bool
