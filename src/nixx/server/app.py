"""`create_app(settings)`: the nixx FastAPI application."""

from __future__ import annotations

from fastapi import FastAPI

from nixx import __version__
from nixx.config import Settings


def create_app(settings: Settings) -> FastAPI:
    app = FastAPI(title="nixx", version=__version__)
    app.state.settings = settings

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok", "version": __version__}

    return app
