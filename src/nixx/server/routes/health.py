"""`GET /health`: liveness (never needs the API key)."""

from __future__ import annotations

from fastapi import APIRouter

from nixx import __version__

router = APIRouter(tags=["health"])


@router.get("/health")
async def health() -> dict[str, str]:
    """Always 200 while the server runs: ``{"status": "ok", "version"}``."""
    return {"status": "ok", "version": __version__}
