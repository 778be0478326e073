"""`/v1/intent`: the current intent (persisted in the store)."""

from __future__ import annotations

from typing import TypedDict

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from nixx.memory.intent import IntentValue
from nixx.server import shapes
from nixx.server.deps import ServiceDep

router = APIRouter(tags=["intent"])


class IntentBody(BaseModel):
    model_config = ConfigDict(extra="forbid")
    intent: str = Field(description="One or two sentences on what the user is working on.")


class IntentJson(TypedDict):
    intent: str | None
    source: str | None  # "manual" | "derived"
    updated_at: str | None


def _shape(value: IntentValue | None) -> IntentJson:
    if not value:
        return {"intent": None, "source": None, "updated_at": None}
    return {
        "intent": value.get("text"),
        "source": value.get("source"),
        "updated_at": value.get("updated_at"),
    }


@router.get("/v1/intent", response_model=shapes.BODY)
async def get_intent(service: ServiceDep) -> IntentJson:
    return _shape(await service.get_intent())


@router.post("/v1/intent", response_model=shapes.BODY)
async def set_intent(body: IntentBody, service: ServiceDep) -> IntentJson:
    return _shape(await service.set_intent(body.intent))


@router.delete("/v1/intent", response_model=shapes.BODY)
async def clear_intent(service: ServiceDep) -> IntentJson:
    await service.clear_intent()
    return _shape(None)


@router.post("/v1/intent/derive", response_model=shapes.BODY)
async def derive_intent(service: ServiceDep) -> IntentJson:
    """Ask the backend for the intent now, from the current session's latest messages."""
    return _shape(await service.derive_intent())
