"""`POST /v1/embeddings`: OpenAI's embeddings API, served by the configured embedder."""

from __future__ import annotations

import base64
from typing import Any, Literal, TypedDict

import numpy as np
from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from nixx.errors import ValidationError
from nixx.server import shapes
from nixx.server.deps import ServiceDep

router = APIRouter(tags=["embeddings"])
MAX_INPUTS = 2048


class EmbeddingsRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    input: str | list[str] | list[int] | list[list[int]] = Field(
        description="A text or a list of texts. Token arrays are refused with a 400 saying "
        "what to change: nixx cannot decode tokens made by the client's tokenizer."
    )
    model: str | None = Field(default=None, description="Ignored: the configured embedder answers.")
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = Field(
        default=None, description="Must be the embedder's dimension if given."
    )


class EmbeddingJson(TypedDict):
    object: str  # "embedding"
    index: int
    embedding: list[float] | str  # floats, or base64 of little-endian float32


class EmbeddingUsage(TypedDict):
    prompt_tokens: int  # words, not tokens: nixx's embedders count no tokens for clients
    total_tokens: int


class EmbeddingsJson(TypedDict):
    """OpenAI's embeddings list."""

    object: str  # "list"
    data: list[EmbeddingJson]
    model: str
    usage: EmbeddingUsage


@router.post("/v1/embeddings", response_model=shapes.BODY)
async def embeddings(body: EmbeddingsRequest, service: ServiceDep) -> EmbeddingsJson:
    given: list[Any] = [body.input] if isinstance(body.input, str) else list(body.input)
    if any(not isinstance(t, str) for t in given):
        raise ValidationError(
            "input is token ids, but nixx embeds text and cannot decode tokens made by the "
            "client's tokenizer: send the texts themselves (langchain-openai: "
            "OpenAIEmbeddings(..., check_embedding_ctx_length=False))",
            param="input",
        )
    texts: list[str] = given
    if not texts:
        raise ValidationError("input must not be empty", param="input")
    if len(texts) > MAX_INPUTS:
        raise ValidationError(f"at most {MAX_INPUTS} inputs per request", param="input")
    vectors = await service.embed_for_client(texts)
    if body.dimensions is not None and body.dimensions != vectors.shape[1]:
        raise ValidationError(
            f"this embedder ({service.embedding_model}) makes {vectors.shape[1]}-dimensional "
            f"vectors; dimensions={body.dimensions} cannot be served",
            param="dimensions",
        )
    data: list[EmbeddingJson] = []
    for i, vec in enumerate(vectors):
        vec32 = np.asarray(vec, dtype="<f4")
        value: list[float] | str = (
            base64.b64encode(vec32.tobytes()).decode()
            if body.encoding_format == "base64"
            else [float(x) for x in vec32]
        )
        data.append({"object": "embedding", "index": i, "embedding": value})
    tokens = sum(len(t.split()) for t in texts)
    return {
        "object": "list",
        "data": data,
        "model": service.embedding_model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }
