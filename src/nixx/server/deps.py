"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from nixx.memory.episodic import check_origin
from nixx.memory.service import NixxService


async def get_service(request: Request) -> NixxService:
    return request.app.state.service  # type: ignore[no-any-return]


async def get_origin(
    x_nixx_origin: str | None = Header(
        default=None, description="Which client sent the turn: tui, vscode or api (default)."
    ),
) -> str:
    return check_origin(x_nixx_origin)


def origin_or(default: str) -> object:
    """The origin dependency of a dialect's route: ``X-Nixx-Origin`` when sent, else
    `default` (the dialect's own origin, so the buffer tells its clients apart)."""

    async def get(
        x_nixx_origin: str | None = Header(
            default=None, description=f"Which client sent the turn (default {default})."
        ),
    ) -> str:
        return check_origin(x_nixx_origin or default)

    return Depends(get)


async def get_agent(
    x_nixx_agent: str | None = Header(
        default=None,
        description="The nxc persona a turn runs for (`ab12/reviewer`), sent by nxc's built-in "
        "runtime: its buffer rows carry it in `meta.agent`, and nixx's own tools are not "
        "offered (the persona brings its own).",
    ),
) -> str | None:
    if x_nixx_agent is None or not x_nixx_agent.strip():
        return None
    agent = x_nixx_agent.strip()
    if len(agent) > 200 or not agent.isprintable():
        from nixx.errors import ValidationError

        raise ValidationError("X-Nixx-Agent must be a printable handle of at most 200 "
                              "characters", param="X-Nixx-Agent")
    return agent


ServiceDep = Annotated[NixxService, Depends(get_service)]
OriginDep = Annotated[str, Depends(get_origin)]
AgentDep = Annotated[str | None, Depends(get_agent)]
