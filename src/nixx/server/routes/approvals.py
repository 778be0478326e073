"""`/v1/nxc/approvals`: the steps held for a person's approval in the server's workspace
(`nixx.nxc.approvals`), for clients that are not a page — `nixx chat`'s `/approvals`,
`/approve`, `/deny`. The server acts as the person who runs it (`NXC_ACTOR`, else
`$USER`), as the page and `nxc` do; a step held on this clone is taken at once."""

from __future__ import annotations

from typing import Literal

from anyio import to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from nixx.nxc.approvals import MAX_NOTE
from nixx.server import shapes
from nixx.server.deps import workspace_engine

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only (`response_model=shapes.BODY`: FastAPI does not read them)
    from nixx.nxc.shapes import ApprovalRecord

router = APIRouter(tags=["agents"])


class Decision(BaseModel):
    model_config = ConfigDict(extra="forbid")
    decision: Literal["approve", "deny"]
    note: str = Field(default="", max_length=MAX_NOTE, description="Why, for the record.")


@router.get("/v1/nxc/approvals", response_model=shapes.BODY)
async def list_approvals(request: Request, all: bool = False) -> dict[str, list[ApprovalRecord]]:
    """The pending approvals, oldest first (`all`: decided ones too)."""

    def read() -> list[ApprovalRecord]:
        with workspace_engine(request) as engine:
            return engine.approvals(include_decided=all)

    return {"approvals": await to_thread.run_sync(read)}


@router.post("/v1/nxc/approvals/{approval_id}", response_model=shapes.BODY)
async def decide(request: Request, approval_id: str, body: Decision) -> ApprovalRecord:
    """Approve or deny a held step; `taken`: what this clone did with it now."""
    decision = "approved" if body.decision == "approve" else "denied"

    def run() -> ApprovalRecord:
        with workspace_engine(request) as engine:
            return engine.decide(approval_id, decision, body.note.strip())

    return await to_thread.run_sync(run)
