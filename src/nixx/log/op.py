"""The operation: the one immutable record every product writes to the workspace log.

Identity is the content: `id` is derived from every field below except `seq` and
`local` (see `nixx.log.ids`), so the same operation delivered twice is stored once.

    id       ``o`` + 32 hex of sha256(canonical JSON)        identity, dedup key
    domain   which product's reducer folds it ("message" = nxc chat)
    kind     what it does inside the domain (each kind has one merge rule)
    target   the id of the thing it acts on (a thread, a message, a channel...)
    origin   replica prefix of the workspace that wrote it
    clock    hybrid logical clock (`nixx.log.clock`), 16 sortable hex characters
    actor    the qualified handle that acted (``ab12/coder``)
    payload  JSON object, the kind's fields
    created  writer's wall time in ms (display only; never used to order)
    seq      local insertion sequence (watermark for sync; not part of identity)
    local    device-local: stored and folded here, never synced (e.g. sessions)

`pos` (``clock.origin.id``) is the total order every merge rule uses: last-writer-wins
keeps the greatest pos, first-writer-wins the least.
"""

from __future__ import annotations

import json

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.log.shapes import OpJson, OpWire

try:  # the builtin module: importing hashlib loads OpenSSL, which costs a CLI start-up
    from _sha256 import sha256
except ImportError:  # pragma: no cover - other Python builds
    from hashlib import sha256


_encode_str = json.encoder.encode_basestring  # what json.dumps(ensure_ascii=False) uses


def canonical_json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def compute_id(
    domain: str,
    kind: str,
    target: str,
    origin: str,
    clock: str,
    actor: str,
    payload: dict[str, Any],
    created: int,
    *,
    payload_json: str | None = None,
) -> str:
    """``o`` + 32 hex of sha256 over the canonical JSON of every identity field. The
    string is assembled by hand around the payload's canonical JSON (the same bytes
    `canonical_json` of the whole object gives), so the payload is encoded only once."""
    if payload_json is None:
        payload_json = canonical_json(payload)
    enc = _encode_str
    body = (
        f'{{"actor":{enc(actor)},"clock":{enc(clock)},"created":{int(created)},'
        f'"domain":{enc(domain)},"kind":{enc(kind)},"origin":{enc(origin)},'
        f'"payload":{payload_json},"target":{enc(target)}}}'
    )
    digest: str = sha256(body.encode("utf-8")).hexdigest()
    return "o" + digest[:32]


def short_digest(text: str) -> str:
    """16 hex of the sha256 of `text` (a content fingerprint, not an identity)."""
    digest: str = sha256(text.encode("utf-8")).hexdigest()
    return digest[:16]


class Op:
    __slots__ = ("id", "domain", "kind", "target", "origin", "clock", "actor", "payload",
                 "created", "seq", "local", "_payload_json")

    def __init__(
        self, id: str, domain: str, kind: str, target: str, origin: str, clock: str, actor: str,
        payload: dict[str, Any], created: int, seq: int | None = None, local: bool = False,
    ) -> None:
        self.id = id
        self.domain = domain
        self.kind = kind
        self.target = target
        self.origin = origin
        self.clock = clock
        self.actor = actor
        self.payload = payload
        self.created = created
        self.seq = seq
        self.local = local
        self._payload_json: str | None = None

    def __eq__(self, other: object) -> bool:  # identity fields only (not seq, local)
        return isinstance(other, Op) and self.to_wire() == other.to_wire()

    def __hash__(self) -> int:
        return hash(self.id)

    def __repr__(self) -> str:
        return (f"Op({self.id}, {self.domain}/{self.kind}, target={self.target}, "
                f"origin={self.origin}, clock={self.clock}, actor={self.actor}, seq={self.seq})")

    @classmethod
    def make(
        cls,
        *,
        domain: str,
        kind: str,
        target: str,
        origin: str,
        clock: str,
        actor: str,
        payload: dict[str, Any],
        created: int,
        local: bool = False,
    ) -> Op:
        payload_json = canonical_json(payload)
        op_id = compute_id(domain, kind, target, origin, clock, actor, payload, created,
                           payload_json=payload_json)
        op = cls(op_id, domain, kind, target, origin, clock, actor, payload, created, None, local)
        op._payload_json = payload_json
        return op

    def payload_json(self) -> str:
        """The payload's canonical JSON (computed once)."""
        if self._payload_json is None:
            self._payload_json = canonical_json(self.payload)
        return self._payload_json

    @property
    def pos(self) -> str:
        return f"{self.clock}.{self.origin}.{self.id}"

    def verify(self) -> bool:
        """True when `id` matches the content and `clock` is a clock (a transported op can
        be checked before it is stored)."""
        from nixx.log.clock import is_clock

        return is_clock(self.clock) and self.id == compute_id(
            self.domain,
            self.kind,
            self.target,
            self.origin,
            self.clock,
            self.actor,
            self.payload,
            self.created,
        )

    def to_wire(self) -> OpWire:
        """The synced form: every identity field, no `seq`, no `local`."""
        return {"id": self.id, "domain": self.domain, "kind": self.kind, "target": self.target,
                "origin": self.origin, "clock": self.clock, "actor": self.actor,
                "payload": self.payload, "created": self.created}

    def to_dict(self) -> OpJson:
        """The `nxs log --json` form: the wire form plus the local `seq`."""
        return {**self.to_wire(), "seq": self.seq, "local": self.local}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> Op:
        """Build an op received from elsewhere; ValueError if a field is missing or wrong."""
        try:
            op = cls(
                id=str(data["id"]),
                domain=str(data["domain"]),
                kind=str(data["kind"]),
                target=str(data["target"]),
                origin=str(data["origin"]),
                clock=str(data["clock"]),
                actor=str(data["actor"]),
                payload=data["payload"],
                created=int(data["created"]),
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f"not an operation: {exc}") from exc
        if not isinstance(op.payload, dict):
            raise ValueError("not an operation: payload is not an object")
        return op
