"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from nixx.errors import ValidationError
from nixx.memory.episodic import Sender, check_origin
from nixx.memory.service import NixxService
from nixx.store.records import ORIGINS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nixx.nxc.engine import Engine


async def get_service(request: Request) -> NixxService:
    return request.app.state.service  # type: ignore[no-any-return]


async def get_origin(
    x_nixx_origin: str | None = Header(
        default=None, description="Which client sent the turn: tui, vscode or api (default)."
    ),
) -> str:
    return check_origin(x_nixx_origin)


def sender_of(default: str) -> object:
    """The sender dependency of a route that runs turns (`nixx.memory.episodic.Sender`):
    ``X-Nixx-Origin`` (an origin, or a client's own name), ``X-Nixx-Client``,
    ``X-Nixx-Agent`` and, when the client names itself by neither, a known
    ``User-Agent``; the origin is `default` (the route's) unless one is named."""

    async def get(
        x_nixx_origin: str | None = Header(
            default=None,
            description=f"Which client sent the turn: an origin ({', '.join(ORIGINS)}; "
            f"default {default}) or the client's own name (`codex-cli`, `my-script`).",
        ),
        x_nixx_client: str | None = Header(
            default=None,
            description="The client's own name, kept in both rows' `meta.client` "
            "(search filters on it).",
        ),
        x_nixx_agent: str | None = Header(
            default=None,
            description="The nxc persona a turn runs for (`ab12/reviewer`), sent by nxc's "
            "built-in runtime: its buffer rows carry it in `meta.agent`, and nixx's own "
            "tools are not offered (the persona brings its own).",
        ),
        user_agent: str | None = Header(default=None, include_in_schema=False),
    ) -> Sender:
        return Sender.read(x_nixx_origin, default, client=x_nixx_client,
                           agent=_agent(x_nixx_agent), user_agent=user_agent)

    return Depends(get)


def _agent(value: str | None) -> str | None:
    if value is None or not value.strip():
        return None
    agent = value.strip()
    if len(agent) > 200 or not agent.isprintable():
        raise ValidationError("X-Nixx-Agent must be a printable handle of at most 200 "
                              "characters", param="X-Nixx-Agent")
    return agent


ServiceDep = Annotated[NixxService, Depends(get_service)]
OriginDep = Annotated[str, Depends(get_origin)]


def workspace_engine(request: Request) -> Engine:
    """An `nxc` engine on the server's workspace, acting as the person who runs the
    server, with live delivery (a reply or a decision starts what it starts from `nxc`)."""
    import os

    from nixx.log.workspace import find_workspace
    from nixx.nxc.delivery.dispatch import LiveDelivery
    from nixx.nxc.engine import Engine

    root = request.app.state.settings.workspace
    workspace = find_workspace(cwd=root or ".", env={})
    return Engine(workspace, env=os.environ, delivery=LiveDelivery())
