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
from dataclasses import dataclass
from pathlib import Path

from nixx.errors import NoWorkspace, WorkspaceError

NXS_DIR = ".nxs"
DB_NAME = "db.sqlite"
PERSONAS_DIR = ".nxs-personas"


@dataclass(frozen=True)
class Workspace:
    root: Path
    db_path: Path

    @property
    def personas_dir(self) -> Path:
        return self.root / PERSONAS_DIR

    @property
    def state_dir(self) -> Path:
        """Device-local files beside the log (e.g. the declarations cache)."""
        return self.db_path.parent

    @classmethod
    def for_db(cls, db_path: Path) -> Workspace:
        db_path = db_path.absolute()
        parent = db_path.parent
        root = parent.parent if parent.name == NXS_DIR else parent
        return cls(root=root, db_path=db_path)


def _env(env: Mapping[str, str], name: str) -> str | None:
    value = env.get(name)
    return value if value else None


def find_workspace(
    cwd: Path | None = None, *, db: str | Path | None = None, env: Mapping[str, str] | None = None
) -> Workspace:
    """The workspace for a verb: `db`, else `NXC_DB`, else the nearest `.nxs/db.sqlite`."""
    env = os.environ if env is None else env
    here = Path.cwd() if cwd is None else Path(cwd)
    if db is not None and str(db):
        path = Path(db)
        path = path if path.is_absolute() else here / path
        source = "--db"
    elif (value := _env(env, "NXC_DB")) is not None:
        path = Path(value)
        if not path.is_absolute():
            raise WorkspaceError(f"NXC_DB must be an absolute path, got {value!r}")
        source = "NXC_DB"
    else:
        for folder in (here, *here.parents):
            candidate = folder / NXS_DIR / DB_NAME
            if candidate.is_file():
                return Workspace.for_db(candidate)
        raise NoWorkspace(
            f"no workspace here: no {NXS_DIR}/{DB_NAME} in {here} or any folder above it; "
            "run `nxs init` at the top of your project (or set NXC_DB)"
        )
    if not path.is_file():
        raise NoWorkspace(f"no workspace log at {path} (from {source}); run `nxs init` to create one")
    return Workspace.for_db(path)


def init_root(cwd: Path | None = None) -> Path:
    """Where `nxs init` puts the workspace: the git top level, else `cwd`."""
    here = (Path.cwd() if cwd is None else Path(cwd)).absolute()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def init_workspace(
    cwd: Path | None = None, *, db: str | Path | None = None, replica: str | None = None
) -> tuple[Workspace, bool]:
    """Create the workspace log (idempotent). Returns it and whether it was created now."""
    from nixx.log.ids import is_replica_prefix, new_replica_prefix
    from nixx.log.store import create_store

    here = Path.cwd() if cwd is None else Path(cwd)
    if db is not None and str(db):
        path = Path(db)
        path = path if path.is_absolute() else here / path
    else:
        path = init_root(here) / NXS_DIR / DB_NAME
    if replica is not None and not is_replica_prefix(replica):
        raise WorkspaceError(
            f"replica prefix {replica!r} must be 1-16 characters of 0-9 a-z (no i, l, o, u)"
        )
    existed = path.is_file()
    create_store(path, replica or new_replica_prefix())
    ignore = path.parent / ".gitignore"
    if path.parent.name == NXS_DIR and not ignore.exists():
        ignore.write_text("# the workspace log is device state: never commit it\n*\n")
    return Workspace.for_db(path), not existed
