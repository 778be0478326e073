"""`/v1/buffer/*`: the current session of the episodic buffer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from nixx.server import shapes
from nixx.server.deps import OriginDep, ServiceDep

router = APIRouter(tags=["buffer"])


@router.get("/v1/buffer/session")
async def session(service: ServiceDep) -> dict[str, Any]:
    """The non-marker rows after the newest `session_clear` marker, oldest first."""

    def work() -> tuple[int, list[Any]]:
        return service.episodic.session_start(), service.episodic.session_rows()

    start, rows = await service.run(work)
    return {"session_start_id": start, "rows": [shapes.row(r) for r in rows]}


@router.post("/v1/buffer/clear")
async def clear(service: ServiceDep, origin: OriginDep) -> dict[str, Any]:
    """End the session: writes a `marker` row (content `session_clear`); deletes nothing."""
    marker = await service.run(service.episodic.clear_session, origin)
    return {"marker": shapes.row(marker), "session_start_id": marker.id + 1}
