"""Dependencies shared by the routers."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Header, Request

from nixx.memory.episodic import check_origin
from nixx.memory.service import NixxService


def get_service(request: Request) -> NixxService:
    return request.app.state.service  # type: ignore[no-any-return]


def get_origin(
    x_nixx_origin: str | None = Header(
        default=None, description="Which client sent the turn: tui, vscode or api (default)."
    ),
) -> str:
    return check_origin(x_nixx_origin)


ServiceDep = Annotated[NixxService, Depends(get_service)]
OriginDep = Annotated[str, Depends(get_origin)]
