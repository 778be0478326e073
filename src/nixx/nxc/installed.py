"""The reducers this installation folds the workspace log with: nxc's chat views, its
tasks and leases (`nixx.nxc.work`) and the delivery outcomes. The one list for every process that opens the log with all of nxc's
views (`nxs`, `nxs sync`, the sync daemon, the supervisor's `Deliverer.open`); the
engine folds chat itself and takes the rest from its delivery (`LiveDelivery.reducers`:
`delivery_reducers()` here). `nixx.log` itself knows no product.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.log.reducer import Reducer


def reducers() -> list[Reducer]:
    """A fresh instance of every product reducer (a store registers its own)."""
    from nixx.nxc.reducer import ChatReducer
    from nixx.nxc.work import WorkReducer

    return [ChatReducer(), WorkReducer(), *delivery_reducers()]


def delivery_reducers() -> list[Reducer]:
    """The reducers live delivery adds to the chat one: the delivery outcomes."""
    from nixx.nxc.delivery.outcomes import DeliveryReducer

    return [DeliveryReducer()]
