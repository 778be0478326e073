"""The reducers this installation folds the workspace log with: nxc's chat views and the
delivery outcomes. The one list for every process that opens the log with all of nxc's
views (`nxs`, `nxs sync`, the sync daemon); `nixx.log` itself knows no product.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.log.reducer import Reducer


def reducers() -> list[Reducer]:
    """A fresh instance of every product reducer (a store registers its own)."""
    from nixx.nxc.delivery.outcomes import DeliveryReducer
    from nixx.nxc.reducer import ChatReducer

    return [ChatReducer(), DeliveryReducer()]
