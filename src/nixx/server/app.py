"""`create_app(settings)`: the nixx FastAPI application.

The lifespan opens the store (`settings.database_url`), the embedder, one LLM client
and the tool registry in a `NixxService` (`nixx.memory.service.open_service`), held at
``app.state.service``;
routes reach it through `nixx.server.deps.get_service`. `/mcp` serves the MCP tools over
streamable HTTP (`nixx.mcp.http`). Nothing is opened at import.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator

from fastapi import FastAPI

from nixx import __version__
from nixx.config import Settings

log = logging.getLogger(__name__)


def startup_line(settings: Settings, embedder_model: str) -> str:
    """The one line the lifespan logs once the service is up: what is used."""
    from nixx.store.maintenance import display_url

    model = settings.chat_model or "(as each client asks)"
    return (
        f"nixx {__version__}: store {display_url(settings.database_url)}, backend "
        f"{settings.chat_base_url}, model {model}, embedder {settings.embed_provider} "
        f"{embedder_model}, workspace {settings.workspace}"
    )


def create_app(settings: Settings) -> FastAPI:
    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        from nixx.memory.service import open_service

        async with open_service(settings, tools=True) as service:
            app.state.service = service
            await service.start()  # row-vector backfill, queued repairs, warm indexes
            log.info("%s", startup_line(settings, service.embedding_model))
            try:
                from nixx.mcp.http import run_mcp

                async with run_mcp(app, settings):
                    yield
            finally:
                jobs = getattr(app.state, "web_jobs", None)
                if jobs is not None:
                    await jobs.close()

    from fastapi import Depends

    from nixx.server.edge import check_json_values

    app = FastAPI(
        title="nixx",
        dependencies=[Depends(check_json_values)],
        version=__version__,
        description="An OpenAI-compatible memory server: every turn is remembered, "
        "summarised, recalled and steered by the current intent. See docs/api.md.",
        lifespan=lifespan,
    )
    app.state.settings = settings

    from nixx.server.errors import install_error_handlers, install_openapi
    from nixx.server.limits import RequestSizeLimit
    from nixx.server.routes import include_routes

    install_error_handlers(app)
    install_openapi(app)
    include_routes(app)
    app.add_middleware(RequestSizeLimit, max_bytes=settings.max_request_bytes,
                       body_timeout=settings.request_timeout,
                       max_inflight=settings.max_inflight_bytes,
                       max_items=settings.max_json_items)
    from nixx.mcp.http import PATH, MCPEndpoint

    # an ASGI app, not a request handler: Starlette runs a non-function endpoint as one
    app.router.add_route(PATH, MCPEndpoint(), include_in_schema=False)  # type: ignore[arg-type]
    from nixx.web.routes import router as web_router

    app.include_router(web_router)
    from nixx.web.security import Sessions, SignInThrottle

    app.state.web_sessions = Sessions()  # the page's signed-in browsers (with a key)
    app.state.web_throttle = SignInThrottle()
    if settings.api_key:
        from nixx.server.auth import APIKeyMiddleware

        app.add_middleware(APIKeyMiddleware, api_key=settings.api_key,
                           sessions=app.state.web_sessions)
    from nixx.server.errors import ErrorBarrier
    from nixx.server.guard import RequestGuard

    # Host, Origin and body type, before the key: one check for every route
    app.add_middleware(RequestGuard, bound=settings.host, allowed_hosts=settings.allowed_hosts)
    app.add_middleware(ErrorBarrier)  # added last: the outermost
    return app
