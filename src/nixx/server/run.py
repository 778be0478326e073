"""Run the server under uvicorn, refusing unsafe binds."""

from __future__ import annotations

from nixx.config import Settings
from nixx.errors import ConfigError


def check_bind(settings: Settings) -> None:
    if not settings.is_loopback and not settings.api_key:
        raise ConfigError(
            f"refusing to bind {settings.host}: a non-loopback address needs NIXX_API_KEY "
            "(set it, or bind 127.0.0.1)"
        )


def serve(settings: Settings) -> None:
    import uvicorn

    from nixx.server.app import create_app

    check_bind(settings)
    app = create_app(settings)
    uvicorn.run(app, host=settings.host, port=settings.port, log_level=settings.log_level)
