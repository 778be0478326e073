"""Where nixx keeps files by default (XDG base directories)."""

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
