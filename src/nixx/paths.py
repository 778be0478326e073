"""Where nixx keeps files by default (XDG base directories), and which workspace paths
the file tools never write or delete by default."""

from __future__ import annotations

import os
from pathlib import Path


def xdg_data_home() -> Path:
    value = os.environ.get("XDG_DATA_HOME")
    return Path(value) if value else Path.home() / ".local" / "share"


def default_home() -> Path:
    """`$NIXX_HOME`, else `$XDG_DATA_HOME/nixx`, else `~/.local/share/nixx`."""
    value = os.environ.get("NIXX_HOME")
    return Path(value).expanduser() if value else xdg_data_home() / "nixx"


# Workspace paths `write_file` / `delete_file` refuse unless NIXX_TOOLS_PROTECTED says
# otherwise: code that runs later (git hooks, personas naming commands, the virtualenv)
# and secrets. Patterns are globs; see nixx.tools.files.is_protected.
DEFAULT_PROTECTED: tuple[str, ...] = (
    ".git",
    ".nxs*",
    ".venv",
    ".env",
    ".env.*",
    ".ssh",
    ".netrc",
    ".npmrc",
    ".pypirc",
    "*.pem",
    "*.key",
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
)
