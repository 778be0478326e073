"""`ChatTools`: the agent-chat tools, over the same `Engine` methods the `nxc` CLI calls.

The workspace is found from `cwd` as `nxc` finds it (`NXC_DB`, else the nearest
`.nxs/db.sqlite` walking up); the caller's handle comes from `actor` (`--actor`), else
`NXC_ACTOR`, else `$USER`. Each call opens the engine, does one thing and closes it, in
a worker thread (the engine is synchronous and `wait` blocks), like one `nxc` verb.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any


class ChatTools:
    def __init__(
        self,
        *,
        cwd: str | os.PathLike[str] | None = None,
        actor: str | None = None,
        env: Mapping[str, str] | None = None,
        db: str | None = None,
    ) -> None:
        self.cwd = os.fspath(cwd) if cwd is not None else None
        self.db = db
        self.env = dict(os.environ if env is None else env)
        if actor:
            self.env["NXC_ACTOR"] = actor

    async def call(self, fn: Callable[[Any], Any]) -> Any:
        from anyio import to_thread

        return await to_thread.run_sync(lambda: self._run(fn))

    def _run(self, fn: Callable[[Any], Any]) -> Any:
        from nixx.nxc.delivery.dispatch import LiveDelivery
        from nixx.nxc.engine import Engine

        with Engine.open(db=self.db, cwd=self.cwd, env=self.env, delivery=LiveDelivery()) as engine:
            return fn(engine)
