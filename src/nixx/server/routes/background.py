"""`POST /v1/background/completions`: one of nixx's own completions, asked for by another
process of nixx (nxc's channel round summaries), run through the server's backend gate so
that it waits while a user's turn runs and never runs beside one on a one-slot backend
(`nixx.llm.gate`). Not a chat turn: no memory is added, nothing is stored."""

from __future__ import annotations

from typing import TypedDict

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field, StrictInt

from nixx.server import shapes
from nixx.server.deps import ServiceDep

router = APIRouter(tags=["background"])

MAX_BACKGROUND_TOKENS = 2048


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str = Field(pattern="^(system|user|assistant)$")
    content: str = Field(max_length=1_000_000)


class BackgroundRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    messages: list[Message] = Field(min_length=1, max_length=64)
    max_tokens: StrictInt = Field(default=400, ge=1, le=MAX_BACKGROUND_TOKENS)
    model: str | None = Field(default=None, max_length=200,
                              description="Default: the model nixx's own calls use.")
    what: str = Field(default="a completion", max_length=100,
                      description="What it is for, named in a timeout's error.")


class BackgroundJson(TypedDict):
    content: str
    model: str  # the model that answered


@router.post("/v1/background/completions", response_model=shapes.BODY)
async def background_completion(body: BackgroundRequest, service: ServiceDep) -> BackgroundJson:
    content, model = await service.own_completion(
        [m.model_dump() for m in body.messages], max_tokens=body.max_tokens,
        what=body.what, model=body.model,
    )
    return {"content": content, "model": model}
