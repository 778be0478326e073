"""`GET /v1/models`: the backend's models, in OpenAI's list shape."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter

from nixx.server import shapes
from nixx.server.deps import ServiceDep

if TYPE_CHECKING:
    from nixx.llm.client import ModelEntry, ModelList

router = APIRouter(tags=["models"])


@router.get("/v1/models", response_model=shapes.BODY)
async def list_models(service: ServiceDep) -> ModelList:
    """The chat backend's `/models`, passed through (503 when no backend answers)."""
    return await service.models()


@router.get("/v1/models/{model_id:path}", response_model=shapes.BODY)
async def retrieve_model(model_id: str, service: ServiceDep) -> ModelEntry:
    """One of the backend's models (`client.models.retrieve(id)`); 404 naming the models
    there are when the backend has no such model."""
    return await service.model(model_id)
