"""Where nixx keeps files by default (XDG base directories); which workspace paths hold
secrets (ingest never reads them) or code that runs later (the file tools never write or
delete either by default): one list of each, used by `nixx.ingest` and `nixx.tools.files`;
and opening a file beneath a folder without following symlinks (`open_beneath`)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path


def xdg_data_home() -> Path:
    value = os.environ.get("XDG_DATA_HOME")
    return Path(value) if value else Path.home() / ".local" / "share"


def default_home() -> Path:
    """`$NIXX_HOME`, else `$XDG_DATA_HOME/nixx`, else `~/.local/share/nixx`."""
    value = os.environ.get("NIXX_HOME")
    return Path(value).expanduser() if value else xdg_data_home() / "nixx"


#: Secrets: never read by ingest (a folder walk skips them, a file named is refused),
#: never read by the file tools (what they read goes to the LLM backend) and, unless
#: NIXX_TOOLS_PROTECTED says otherwise, never written or deleted by them. `.nxs*` holds nixx's own state (a
#: session's `backend.json` with the backend's key, the workspace log).
SECRET_PATHS: tuple[str, ...] = (
    ".env",
    ".env.*",
    ".envrc",
    ".nxs*",
    ".ssh",
    ".gnupg",
    ".aws",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "id_dsa*",
)

#: Code that runs later on the user's machine: git hooks and config, the virtualenv,
#: agent and editor configuration (which name commands an agent or an editor runs), CI
#: workflows, pre-commit hooks, direnv files, Python start-up hooks. The file tools
#: never write or delete these by default (reading them is fine).
CODE_PATHS: tuple[str, ...] = (
    ".git",
    ".venv",
    ".claude",
    ".mcp.json",
    ".cursor",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".github/workflows",
    ".gitlab-ci.yml",
    ".husky",
    ".pre-commit-config.yaml",
    "sitecustomize.py",
    "usercustomize.py",
)

# Workspace paths `write_file` / `delete_file` refuse unless NIXX_TOOLS_PROTECTED says
# otherwise: code that runs later and secrets. Patterns are globs matched without regard
# to case (`.GIT/hooks` is `.git/hooks` on a case-insensitive file system); see
# `matches`.
DEFAULT_PROTECTED: tuple[str, ...] = CODE_PATHS + tuple(
    p for p in SECRET_PATHS if p not in CODE_PATHS)


def matches(parts: Sequence[str], patterns: Sequence[str]) -> str | None:
    """The first pattern that matches the relative path `parts`, or None. A pattern
    without `/` matches any one component (``.git`` matches ``sub/.git/config``); one
    with `/` matches the path from the start, or a leading part of it. Case is ignored."""
    import fnmatch

    folded = [part.casefold() for part in parts]
    for pattern in patterns:
        pattern = pattern.strip().strip("/")
        if not pattern:
            continue
        want = pattern.casefold()
        if "/" in want:
            for i in range(1, len(folded) + 1):
                if fnmatch.fnmatchcase("/".join(folded[:i]), want):
                    return pattern
        elif any(fnmatch.fnmatchcase(part, want) for part in folded):
            return pattern
    return None


def is_secret(parts: Sequence[str]) -> str | None:
    """The `SECRET_PATHS` pattern that `parts` matches, or None (ingest reads none)."""
    return matches(parts, SECRET_PATHS)


def hard_link_refusal(st: os.stat_result, shown: str) -> str | None:
    """Why a file opened by ingest or the file tools is not read, or None: a regular file
    with more than one link (``st_nlink > 1``, from ``fstat`` on the open descriptor).
    The secret rules match names and symlinks; a hard link to ``.env`` has another name
    and is the same file, and nothing cheap and complete says which names it has (another
    link may be outside the workspace). So any multiply linked file is refused unless the
    user allows them (`NIXX_ALLOW_HARD_LINKS`; docs/limits-and-safety.md)."""
    import stat

    if not stat.S_ISREG(st.st_mode) or st.st_nlink <= 1:
        return None
    return (f"{shown} is a hard link ({st.st_nlink} names for one file, which may be a "
            "secret such as .env under another name): not read; set NIXX_ALLOW_HARD_LINKS"
            "=true to read multiply linked files")


def open_beneath(base: str | os.PathLike[str], parts: Sequence[str], flags: int = os.O_RDONLY
                 ) -> int:
    """Open `base`/`parts` without following any symlink below `base`: each folder is
    opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor and the
    file with ``O_NOFOLLOW``, so a folder swapped for a symlink mid-way fails (OSError:
    ELOOP or ENOTDIR) instead of leading outside. ``..`` and empty parts are refused."""
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts):
        raise OSError(22, f"not a plain relative path: {'/'.join(parts)!r}")
    fd = os.open(base, dir_flags)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, dir_flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                       dir_fd=fd)
    finally:
        os.close(fd)
