"""`/v1/buffer/*`: the current session of the episodic buffer."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from nixx.server import shapes
from nixx.server.deps import OriginDep, ServiceDep
from nixx.server.edge import MAX_ID

router = APIRouter(tags=["buffer"])


class DeleteRange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start_id: StrictInt = Field(ge=1, le=MAX_ID, description="First buffer id to delete.")
    end_id: StrictInt = Field(ge=1, le=MAX_ID, description="Last buffer id to delete (inclusive).")


@router.get("/v1/buffer/session")
async def session(service: ServiceDep) -> dict[str, Any]:
    """The non-marker rows after the newest `session_clear` marker, oldest first."""
    start, rows = await service.session()
    return {"session_start_id": start, "rows": [shapes.row(r) for r in rows]}


@router.post("/v1/buffer/clear")
async def clear(service: ServiceDep, origin: OriginDep) -> dict[str, Any]:
    """End the session: writes a `marker` row (content `session_clear`); deletes nothing."""
    marker = await service.clear_session(origin)
    return {"marker": shapes.row(marker), "session_start_id": marker.id + 1}


@router.delete("/v1/buffer/{row_id}")
async def delete_row(service: ServiceDep, row_id: int = Path(ge=1, le=MAX_ID)) -> dict[str, Any]:
    """Forget one buffer row with its full-text entry; summaries that covered it are
    removed and summarised again from the rows that remain (docs/memory.md)."""
    return dict(await service.forget_buffer_row(row_id))


@router.post("/v1/buffer/delete")
async def delete_range(body: DeleteRange, service: ServiceDep) -> dict[str, Any]:
    """Forget every buffer row with start_id <= id <= end_id (markers included)."""
    return dict(await service.forget_buffer_range(body.start_id, body.end_id))
