"""The one exception hierarchy of nixx.

Every failure a user can cause or meet is a `NixxError`. Each shell renders it once:
the CLIs print ``error: <message>`` (or ``{"error": {"kind", "msg"}}`` with ``--json``)
and exit 1, the server answers the OpenAI error envelope with `http_status`, the TUI
shows a notice.

    NixxError                      kind            http
    ├── ConfigError                config          500
    ├── ValidationError            validation      400
    │   └── ContextLengthExceeded  context_length_exceeded 400
    ├── NotFound                   not_found       404
    ├── Forbidden                  forbidden       403
    ├── Unauthorized               unauthorized    401
    ├── Conflict                   conflict        409
    │   └── AlreadyRunning         already_running 409
    ├── StoreError                 store           500
    │   ├── EmbedderMismatch       embedder_mismatch 409
    │   └── SchemaError            schema          500
    ├── BackendError               backend         502
    │   └── BackendUnavailable     backend_unavailable 503
    ├── ModelMissing               model_missing   500
    │   └── ModelCorrupt           model_corrupt   500
    ├── ServerBusy                 server_busy     503
    ├── SyncError                  sync            502
    └── WorkspaceError             workspace       400
        └── NoWorkspace            no_workspace    404
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any


class NixxError(Exception):
    """Base of every error nixx raises on purpose. `str(err)` is the user-facing message."""

    kind = "error"
    http_status = 500

    def __init__(self, message: str, *, param: str | None = None, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.param = param
        self.details = details

    def to_dict(self) -> dict[str, Any]:
        """The CLI's JSON error shape: ``{"error": {"kind", "msg", ...details}}``."""
        body: dict[str, Any] = {"kind": self.kind, "msg": self.message}
        if self.param:
            body["param"] = self.param
        body.update(self.details)
        return {"error": body}


class ConfigError(NixxError):
    kind = "config"


class ValidationError(NixxError):
    kind = "validation"
    http_status = 400


class ContextLengthExceeded(ValidationError):
    """One message larger than the backend's whole context window (`NIXX_CHAT_CONTEXT_LENGTH`):
    no trimming can make it fit, so the turn is refused before anything is stored (OpenAI
    answers the same code)."""

    kind = "context_length_exceeded"


class NotFound(NixxError):
    kind = "not_found"
    http_status = 404


class Forbidden(NixxError):
    kind = "forbidden"
    http_status = 403


class Unauthorized(NixxError):
    kind = "unauthorized"
    http_status = 401


class Conflict(NixxError):
    kind = "conflict"
    http_status = 409


class AlreadyRunning(Conflict):
    kind = "already_running"


class StoreError(NixxError):
    kind = "store"


class EmbedderMismatch(StoreError):
    """The store was built with another embedding model or dimension."""

    kind = "embedder_mismatch"
    http_status = 409


class SchemaError(StoreError):
    kind = "schema"


class BackendError(NixxError):
    """An LLM or embedding backend answered, but not usefully."""

    kind = "backend"
    http_status = 502


class BackendUnavailable(BackendError):
    """No LLM or embedding backend answers at the configured URL."""

    kind = "backend_unavailable"
    http_status = 503


class ModelMissing(NixxError):
    """Local model files are not installed."""

    kind = "model_missing"


class ModelCorrupt(ModelMissing):
    """Local model files are there but not the pinned ones (a sha256 differs)."""

    kind = "model_corrupt"


class ServerBusy(NixxError):
    """nixx itself is at its in-flight budget (`NIXX_MAX_INFLIGHT_BYTES`): retry soon."""

    kind = "server_busy"
    http_status = 503


class SyncError(NixxError):
    """A sync remote (a git remote, a PostgreSQL server) failed, refused or is unreachable."""

    kind = "sync"
    http_status = 502


class WorkspaceError(NixxError):
    kind = "workspace"
    http_status = 400


class NoWorkspace(WorkspaceError):
    kind = "no_workspace"
    http_status = 404
