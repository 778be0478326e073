"""Reducers: how a product folds its domain's operations into views.

A product registers one `Reducer` per domain with the store it opens. The store calls
`fold` for every newly stored operation of that domain inside the same transaction as
the insert, and `drop_views` + `create_views` + `fold` over the whole log when the
reducer's `version` differs from the one the views were built with (or on `refold`).

Contract, which the store relies on and the property tests check:

- `fold` is order-independent: any delivery order, duplication or partial delivery of
  the same set of operations leaves identical views (merge rules are commutative,
  associative and idempotent).
- `fold` never raises for bad input: an operation it cannot fold (unknown kind, bad
  shape, not allowed) returns False and writes nothing. It stays in the log.
  (Should a reducer raise anyway, the store rolls back that op's partial writes to a
  savepoint and counts it unfolded.)
- Views are owned by the reducer: tables named with the domain's prefix.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from collections.abc import Iterator

    from apsw import Connection

    from nixx.log.op import Op


class Reducer:
    """Base class: subclass, set `domain` and `version`, implement the three methods."""

    domain: str = ""
    version: int = 1

    def create_views(self, conn: Connection) -> None:
        raise NotImplementedError

    def drop_views(self, conn: Connection) -> None:
        raise NotImplementedError

    def fold(self, conn: Connection, op: Op) -> bool:
        """Apply `op` to the views; False (and nothing written) when it is not folded."""
        raise NotImplementedError


class ReducerRegistry:
    """Domain → reducer. Built explicitly by whoever opens a store (nothing global)."""

    def __init__(self, reducers: list[Reducer] | tuple[Reducer, ...] = ()) -> None:
        self._by_domain: dict[str, Reducer] = {}
        for reducer in reducers:
            self.register(reducer)

    def register(self, reducer: Reducer) -> None:
        if not reducer.domain:
            raise ValueError("a reducer needs a domain")
        if reducer.domain in self._by_domain:
            raise ValueError(f"domain {reducer.domain!r} already has a reducer")
        self._by_domain[reducer.domain] = reducer

    def get(self, domain: str) -> Reducer | None:
        return self._by_domain.get(domain)

    def __iter__(self) -> Iterator[Reducer]:
        return iter(self._by_domain.values())

    def domains(self) -> list[str]:
        return sorted(self._by_domain)
