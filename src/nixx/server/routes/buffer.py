"""`/v1/buffer/*`: the current session of the episodic buffer."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypedDict

from fastapi import APIRouter, Path
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from nixx.server import shapes
from nixx.server.deps import OriginDep, ServiceDep
from nixx.server.edge import MAX_ID

if TYPE_CHECKING:
    from nixx.memory.forget import ForgetAnswer

router = APIRouter(tags=["buffer"])


class DeleteRange(BaseModel):
    model_config = ConfigDict(extra="forbid")
    start_id: StrictInt = Field(ge=1, le=MAX_ID, description="First buffer id to delete.")
    end_id: StrictInt = Field(ge=1, le=MAX_ID, description="Last buffer id to delete (inclusive).")


class SessionJson(TypedDict):
    session_start_id: int  # the first buffer id of the session
    rows: list[shapes.RowJson]


class ClearedJson(TypedDict):
    marker: shapes.RowJson  # the `session_clear` marker row written
    session_start_id: int  # the next session's first id


@router.get("/v1/buffer/session", response_model=shapes.BODY)
async def session(service: ServiceDep) -> SessionJson:
    """The non-marker rows after the newest `session_clear` marker, oldest first."""
    start, rows = await service.session()
    return {"session_start_id": start, "rows": [shapes.row(r) for r in rows]}


@router.post("/v1/buffer/clear", response_model=shapes.BODY)
async def clear(service: ServiceDep, origin: OriginDep) -> ClearedJson:
    """End the session: writes a `marker` row (content `session_clear`); deletes nothing."""
    marker = await service.clear_session(origin)
    return {"marker": shapes.row(marker), "session_start_id": marker.id + 1}


@router.delete("/v1/buffer/{row_id}", response_model=shapes.BODY)
async def delete_row(service: ServiceDep, row_id: int = Path(ge=1, le=MAX_ID)) -> ForgetAnswer:
    """Forget one buffer row with its full-text entry; summaries that covered it are
    removed and summarised again from the rows that remain (docs/memory.md)."""
    return await service.forget_buffer_row(row_id)


@router.post("/v1/buffer/delete", response_model=shapes.BODY)
async def delete_range(body: DeleteRange, service: ServiceDep) -> ForgetAnswer:
    """Forget every buffer row with start_id <= id <= end_id (markers included)."""
    return await service.forget_buffer_range(body.start_id, body.end_id)
