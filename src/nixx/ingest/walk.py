"""Walk a folder or git repository: every file worth reading, in a stable order.

Honours ``.gitignore`` files at every level (and ``.git/info/exclude``) with git's own
rules (via `pathspec`), never enters ``.git``, does not follow symlinked folders, skips
symlinked files that lead outside the folder, files over the size limit and secrets
(`nixx.paths.SECRET_PATHS`: ``.env``, ``.nxs*``, key files…, listed as skipped).
The walk only lists: the pipeline opens each file again beneath the folder without
following symlinks (`nixx.paths.open_beneath`), so a folder swapped for a symlink after
it was listed is not read through. Whether a
file is text is decided when it is read (see `nixx.ingest.document.decode_text`).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from nixx.paths import is_secret

SKIP_DIRS = frozenset({".git", ".hg", ".svn"})
# Version-control plumbing and lock files: noise in semantic memory (counted as ignored).
SKIP_FILES = frozenset(
    {
        ".gitignore",
        ".gitattributes",
        ".gitmodules",
        ".DS_Store",
        "package-lock.json",
        "yarn.lock",
        "pnpm-lock.yaml",
        "poetry.lock",
        "Cargo.lock",
        "uv.lock",
        "Pipfile.lock",
        "composer.lock",
        "go.sum",
    }
)


@dataclass(frozen=True)
class Skipped:
    path: str  # relative to the walked folder (or the file's own path)
    reason: str


@dataclass
class WalkResult:
    root: Path
    files: list[Path] = field(default_factory=list)  # absolute paths, sorted
    skipped: list[Skipped] = field(default_factory=list)
    ignored: int = 0  # files left out by .gitignore rules

    @property
    def is_git_repo(self) -> bool:
        return (self.root / ".git").exists()


class _Ignores:
    """The .gitignore specs in force, deepest folder last."""

    def __init__(self) -> None:
        self.specs: list[tuple[PurePosixPath, object]] = []

    def load(self, rel_dir: PurePosixPath, file: Path) -> None:
        from pathspec import GitIgnoreSpec

        try:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return
        self.specs.append((rel_dir, GitIgnoreSpec.from_lines(lines)))

    def ignored(self, rel: PurePosixPath, is_dir: bool) -> bool:
        # The deepest .gitignore with a matching pattern decides (git's precedence).
        for base, spec in reversed(self.specs):
            if base != PurePosixPath(".") and base not in rel.parents:
                continue
            sub = rel.relative_to(base).as_posix() + ("/" if is_dir else "")
            result = spec.check_file(sub)  # type: ignore[attr-defined]
            if result.include is not None:
                return bool(result.include)
        return False


def walk(root: Path, *, max_file_bytes: int) -> WalkResult:
    """Every readable-looking file under `root` (a folder), sorted by relative path."""
    root = root.resolve()
    result = WalkResult(root)
    ignores = _Ignores()
    exclude = root / ".git" / "info" / "exclude"
    if exclude.is_file():
        ignores.load(PurePosixPath("."), exclude)
    _walk_dir(root, root, PurePosixPath("."), ignores, max_file_bytes, result)
    return result


def _walk_dir(
    root: Path,
    folder: Path,
    rel_dir: PurePosixPath,
    ignores: _Ignores,
    max_file_bytes: int,
    result: WalkResult,
) -> None:
    depth_specs = len(ignores.specs)
    gitignore = folder / ".gitignore"
    if gitignore.is_file():
        ignores.load(rel_dir, gitignore)
    try:
        entries = sorted(os.scandir(folder), key=lambda e: e.name)
    except OSError as exc:
        result.skipped.append(Skipped(rel_dir.as_posix(), f"cannot list: {exc.strerror}"))
        return
    for entry in entries:
        rel = rel_dir / entry.name if rel_dir != PurePosixPath(".") else PurePosixPath(entry.name)
        try:
            is_link = entry.is_symlink()
            is_dir = entry.is_dir(follow_symlinks=False)
        except OSError:
            continue
        if is_dir:
            if entry.name in SKIP_DIRS or ignores.ignored(rel, True):
                continue
            if _secret(rel, result, "/"):
                continue
            _walk_dir(root, Path(entry.path), rel, ignores, max_file_bytes, result)
            continue
        if entry.name in SKIP_FILES or ignores.ignored(rel, False):
            result.ignored += 1
            continue
        if _secret(rel, result, ""):
            continue
        path = Path(entry.path)
        if is_link:
            try:
                target = path.resolve(strict=True)
            except (OSError, RuntimeError):
                result.skipped.append(Skipped(rel.as_posix(), "broken symlink"))
                continue
            if not target.is_relative_to(root):
                result.skipped.append(Skipped(rel.as_posix(), "symlink leads outside the folder"))
                continue
            if not target.is_file():
                continue  # a symlinked folder: not followed
        elif not entry.is_file(follow_symlinks=False):
            continue  # sockets, fifos, devices
        try:
            size = path.stat().st_size
        except OSError as exc:
            result.skipped.append(Skipped(rel.as_posix(), f"cannot stat: {exc.strerror}"))
            continue
        if size > max_file_bytes:
            result.skipped.append(
                Skipped(rel.as_posix(), f"{size} bytes, over the {max_file_bytes}-byte limit")
            )
            continue
        result.files.append(path)
    del ignores.specs[depth_specs:]


def _secret(rel: PurePosixPath, result: WalkResult, suffix: str) -> bool:
    """Skip (and list) `rel` when it is a secret (`nixx.paths.SECRET_PATHS`)."""
    hit = is_secret(rel.parts)
    if hit is None:
        return False
    result.skipped.append(Skipped(rel.as_posix() + suffix, f"a secret (pattern {hit!r}): not read"))
    return True
