"""One router per resource; `include_routes(app)` mounts them all."""

from __future__ import annotations

import importlib
import logging

from fastapi import FastAPI

log = logging.getLogger(__name__)

_ROUTERS = (
    "health",
    "models",
    "chat",
    "responses",
    "messages",
    "embeddings",
    "buffer",
    "episodic",
    "intent",
    "sources",
    "forget",
    "debug",
    "background",
    "approvals",
)
_OPTIONAL = ("ingest",)  # owned by the ingest package; mounted when present


def include_routes(app: FastAPI) -> None:
    for name in _ROUTERS:
        module = importlib.import_module(f"nixx.server.routes.{name}")
        app.include_router(module.router)
    for name in _OPTIONAL:
        try:
            module = importlib.import_module(f"nixx.server.routes.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"nixx.server.routes.{name}":
                raise
            continue
        app.include_router(module.router)
