"""The transport interface: how a sync pass moves operations through an existing engine.

A transport is bound to one stream and knows the local replica prefix. It offers two
calls, each safe to repeat after a crash:

- `push(batches)`: make these batches of operations durable on the remote. Pushing an
  operation that is already there is harmless (readers deduplicate by op id; a transport
  may skip it).
- `pull(cursor, limit, max_op_bytes)`: operations past `cursor` (an opaque string the
  transport made; each with the replica that pushed it, `Pulled.pushers`;
  None = from the start), about `limit` of them (a transport may round to whole
  segments), with the cursor that follows them and whether more remain. An entry longer
  than `max_op_bytes` is never decoded nor held whole in memory: only its size and the
  fields its ends name come back (`Pulled.oversized`), and the engine refuses it
  (docs/sync.md, "Trust"). Operations this
  replica pushed itself may be left out, except in the first catch-up from a None cursor
  (after a (re)bind): that one returns them too, so a workspace restored from a backup
  gets back what it had pushed since.

Adding a transport is adding a module: a class implementing `Transport`, named in
`TRANSPORTS` by the scheme of the remote URLs it serves.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypedDict

from nixx.errors import ValidationError
from nixx.log.op import Op, canonical_json

if TYPE_CHECKING:
    from nixx.log.store import LogStore

#: transport name → "module:Class" (imported only when used)
TRANSPORTS = {
    "git": "nixx.sync.git_transport:GitTransport",
    "postgres": "nixx.sync.pg_transport:PgTransport",
}
_PG_SCHEMES = ("postgresql://", "postgres://")


class Oversized(TypedDict):
    """An entry longer than the pass's `max_op_bytes`, read no further than its ends: what
    they name of the op (empty when they do not), its size, who pushed it."""

    op: str
    origin: str
    domain: str
    kind: str
    target: str
    size: int  # bytes of the entry (its wire JSON)
    pusher: str


#: bytes kept of each end of an oversized entry: enough for every field but the payload
#: (the wire JSON's keys are sorted: actor … origin, payload, target)
END_BYTES = 4096


@dataclass
class Pulled:
    ops: list[Op]
    cursor: str | None
    more: bool
    rejected: int = 0  # entries that were not valid operations (bad JSON, id ≠ content)
    notes: list[str] = field(default_factory=list)
    #: the replica that pushed each op (aligned with `ops`): the origin of the git ref it
    #: was read from, the `pusher` column of PostgreSQL. The engine refuses an op whose
    #: own `origin` is another replica (docs/sync.md, "Trust")
    pushers: list[str] = field(default_factory=list)
    #: entries longer than the pass's `max_op_bytes`, not decoded (`Oversized`)
    oversized: list[Oversized] = field(default_factory=list)


class Transport:
    """Base class of every transport (see the module docstring)."""

    name = ""

    def push(self, batches: Sequence[Sequence[Op]]) -> None:
        raise NotImplementedError

    def pull(self, cursor: str | None, limit: int, max_op_bytes: int) -> Pulled:
        raise NotImplementedError

    def describe(self) -> str:
        """The remote, fit to print (no password)."""
        raise NotImplementedError

    def close(self) -> None:
        pass

    def __enter__(self) -> Transport:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def transport_for_url(url: str) -> str:
    """Which transport serves a remote URL: PostgreSQL for ``postgresql://``, else git."""
    return "postgres" if url.lower().startswith(_PG_SCHEMES) else "git"


def open_transport(name: str, *, remote: str, stream: str, replica: str,
                   state_dir: str, source: str | None = None) -> Transport:
    """Build the transport `name` (see `TRANSPORTS`). `state_dir` is the workspace's
    device-local folder (`.nxs/`), where a transport may keep its own files; `source`
    names the log file the ops' `seq` belong to (`source_id`), so a transport may
    recognise what this very log pushed before."""
    import importlib

    try:
        module_name, _, cls_name = TRANSPORTS[name].partition(":")
    except KeyError:
        raise ValidationError(f"unknown sync transport {name!r}; known: {sorted(TRANSPORTS)}",
                              param="transport") from None
    cls = getattr(importlib.import_module(module_name), cls_name)
    transport: Transport = cls(remote=remote, stream=stream, replica=replica,
                               state_dir=state_dir, source=source)
    return transport


def source_id(store: LogStore) -> str:
    """The identity of one log file: its replica prefix and creation time."""
    return f"{store.replica}:{store.get_meta('created')}"


# -- the wire encoding shared by transports that store text --------------------------------

def encode_op(op: Op) -> str:
    """One op as canonical JSON (the wire form: no `seq`, no `local`)."""
    return canonical_json(op.to_wire())


def decode_op(text: str | bytes, *, verify: bool = True) -> Op | None:
    """An op from its wire JSON, or None when it is not one (unparsable, a field missing;
    with `verify`, also an id that does not match the content or a bad clock). Transports
    pass ``verify=False``: the log's `insert` verifies every op anyway, and the engine
    filters out a bad one when it refuses a chunk (one id computation per op, not two)."""
    try:
        op = Op.from_wire(json.loads(text))
    except (ValueError, TypeError):
        return None
    return op if not verify or op.verify() else None


def _field(name: str, text: str) -> str:
    found = re.search(rf'"{name}":"((?:[^"\\]|\\.){{0,200}})"', text)
    return found.group(1) if found else ""


def oversized(head: bytes, tail: bytes, size: int, pusher: str) -> Oversized:
    """What the ends of an entry too long to decode name of its op (`Oversized`): the
    wire JSON's sorted keys put every field but `target` before the payload, and
    `target` after it."""
    first = head.decode("utf-8", "replace")
    last = tail.decode("utf-8", "replace")
    target = last.rpartition('"target":"')[2].partition('"')[0] if '"target":"' in last else ""
    return {"op": _field("id", first), "origin": _field("origin", first),
            "domain": _field("domain", first), "kind": _field("kind", first),
            "target": target[:200], "size": size, "pusher": pusher}
