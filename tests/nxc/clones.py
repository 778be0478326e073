"""Three clones that received the same ops, each in its own order — for the property tests
of a merge rule (`test_work_merge_property`, `test_approvals_property`)."""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from nixx.log.op import Op
from nixx.log.store import LogStore
from nixx.log.workspace import init_workspace
from nixx.nxc.work import WorkReducer


@contextmanager
def delivered_apart(ops: Sequence[Op], orders: Sequence[random.Random],
                    cuts: Sequence[int]) -> Iterator[list[LogStore]]:
    """One store per (order, cut), folding the work views: each got every op of `ops`, a
    third of them twice, shuffled by its own random order, in batches of its own size."""
    with tempfile.TemporaryDirectory() as tmp:
        stores = [LogStore.open(init_workspace(f"{tmp}/{i}", replica=f"r{i}zz")[0].db_path,
                                [WorkReducer()]) for i in range(len(orders))]
        try:
            for store, rnd, cut in zip(stores, orders, cuts, strict=True):
                batch = [Op.from_wire(op.to_wire()) for op in ops]
                batch += rnd.sample(batch, len(batch) // 3)  # some twice
                rnd.shuffle(batch)
                for i in range(0, len(batch), cut):  # in partial batches
                    store.insert(batch[i:i + cut])
            yield stores
        finally:
            for s in stores:
                s.close()


def assert_alike(stores: Sequence[LogStore], state: Callable[[LogStore], Any]) -> None:
    """Every store shows the same `state`, and a re-fold of the last shows it again."""
    states = [state(s) for s in stores]
    assert all(s == states[0] for s in states)
    stores[-1].refold()
    assert state(stores[-1]) == states[0]
