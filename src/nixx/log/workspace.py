"""Finding and creating the workspace: the folder whose `.nxs/db.sqlite` is the log.

- `nxs init` creates `.nxs/db.sqlite` at the git top level (the nearest folder upwards
  holding `.git`), else in the current folder, and mints the replica prefix.
- Every other verb walks up from the current folder to the nearest `.nxs/db.sqlite`.
  `--db PATH` (relative to the current folder) or `NXC_DB` (must be absolute) overrides.
- The workspace root is the folder holding `.nxs/` (for a log elsewhere: its folder);
  declarations live in `<root>/.nxs-personas/`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from nixx.errors import NoWorkspace, WorkspaceError

NXS_DIR = ".nxs"
DB_NAME = "db.sqlite"
PERSONAS_DIR = ".nxs-personas"


class Workspace:
    """Paths of one workspace, as plain strings (kept off the CLI start-up: no pathlib)."""

    __slots__ = ("root", "db_path")

    def __init__(self, root: str, db_path: str) -> None:
        self.root = root
        self.db_path = db_path

    def __repr__(self) -> str:
        return f"Workspace(root={self.root!r}, db_path={self.db_path!r})"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Workspace) and (self.root, self.db_path) == (
            other.root, other.db_path)

    @property
    def personas_dir(self) -> str:
        return os.path.join(self.root, PERSONAS_DIR)

    @property
    def state_dir(self) -> str:
        """Device-local files beside the log (e.g. the declarations cache)."""
        return os.path.dirname(self.db_path)

    @classmethod
    def for_db(cls, db_path: str | os.PathLike[str]) -> Workspace:
        db_path = os.path.abspath(os.fspath(db_path))
        parent = os.path.dirname(db_path)
        root = os.path.dirname(parent) if os.path.basename(parent) == NXS_DIR else parent
        return cls(root=root, db_path=db_path)


def _parents(folder: str) -> list[str]:
    out = [folder]
    while True:
        up = os.path.dirname(folder)
        if up == folder:
            return out
        out.append(up)
        folder = up


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None


def find_workspace(
    cwd: str | os.PathLike[str] | None = None, *, db: str | os.PathLike[str] | None = None,
    env: Mapping[str, str] | None = None,
) -> Workspace:
    """The workspace for a verb: `db`, else `NXC_DB`, else the nearest `.nxs/db.sqlite`."""
    env = os.environ if env is None else env
    here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    if db is not None and os.fspath(db):
        path = os.path.join(here, os.fspath(db))
        source = "--db"
    elif (value := _env(env, "NXC_DB")) is not None:
        path = value
        if not os.path.isabs(path):
            raise WorkspaceError(f"NXC_DB must be an absolute path, got {value!r}")
        source = "NXC_DB"
    else:
        for folder in _parents(here):
            candidate = os.path.join(folder, NXS_DIR, DB_NAME)
            if os.path.isfile(candidate):
                return Workspace.for_db(candidate)
        raise NoWorkspace(
            f"no workspace here: no {NXS_DIR}/{DB_NAME} in {here} or any folder above it; "
            "run `nxs init` at the top of your project (or set NXC_DB)"
        )
    if not os.path.isfile(path):
        raise NoWorkspace(f"no workspace log at {path} (from {source}); run `nxs init` to create one")
    return Workspace.for_db(path)


def init_root(cwd: str | os.PathLike[str] | None = None) -> str:
    """Where `nxs init` puts the workspace: the git top level, else `cwd`."""
    here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    for folder in _parents(here):
        if os.path.exists(os.path.join(folder, ".git")):
            return folder
    return here


def init_workspace(
    cwd: str | os.PathLike[str] | None = None, *, db: str | os.PathLike[str] | None = None,
    replica: str | None = None,
) -> tuple[Workspace, bool]:
    """Create the workspace log (idempotent). Returns it and whether it was created now."""
    from nixx.log.ids import is_replica_prefix, new_replica_prefix
    from nixx.log.store import create_store

    here = os.path.abspath(os.getcwd() if cwd is None else os.fspath(cwd))
    if db is not None and os.fspath(db):
        path = os.path.join(here, os.fspath(db))
    else:
        path = os.path.join(init_root(here), NXS_DIR, DB_NAME)
    if replica is not None and not is_replica_prefix(replica):
        raise WorkspaceError(
            f"replica prefix {replica!r} must be 1-16 characters of 0-9 a-z (no i, l, o, u)"
        )
    existed = os.path.isfile(path)
    create_store(path, replica or new_replica_prefix())
    ignore = os.path.join(os.path.dirname(path), ".gitignore")
    if os.path.basename(os.path.dirname(path)) == NXS_DIR and not os.path.exists(ignore):
        with open(ignore, "w", encoding="utf-8") as fh:
            fh.write("# the workspace log is device state: never commit it\n*\n")
    return Workspace.for_db(path), not existed
