"""File tools confined to the workspace: read_file, write_file, list_dir, delete_file.

Confinement is decided on real paths, never on strings: the requested path is joined
to the workspace, every symlink and `..` is resolved (`Path.resolve`), and the result
must be the workspace or lie under it, compared component by component
(`Path.is_relative_to`). So `../x`, `/etc/passwd`, a symlink inside the workspace that
points outside, and a sibling whose name merely starts with the workspace's name
(`/ws-secret` next to `/ws`) are all refused with `WorkspaceError`.

Every function raises `WorkspaceError` (or `NoWorkspace`) for anything the caller can get
wrong; the registry turns those into text the model can read.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

from nixx.errors import NoWorkspace, WorkspaceError

READ_MAX_BYTES = 256 * 1024
WRITE_MAX_BYTES = 4 * 1024 * 1024
LIST_MAX_ENTRIES = 500


def workspace_root(root: Path) -> Path:
    """The workspace's real path. Raises `NoWorkspace` when it is not a directory."""
    try:
        real = Path(root).resolve(strict=True)
    except (OSError, RuntimeError):
        raise NoWorkspace(
            f"the workspace {root} does not exist: create it or set NIXX_WORKSPACE"
        ) from None
    if not real.is_dir():
        raise NoWorkspace(f"the workspace {root} is not a directory: set NIXX_WORKSPACE")
    return real


def confine(root: Path, path: str) -> Path:
    """Resolve `path` (relative to `root`, or absolute) to a real path inside `root`.

    Symlinks are followed, including a dangling final link (its target counts).
    Raises `WorkspaceError` when the result is outside the workspace, the path is empty
    or malformed, or it runs into a symlink loop.
    """
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("path is empty: give a path relative to the workspace")
    if "\x00" in path:
        raise WorkspaceError(f"path contains a NUL byte: {path!r}")
    real_root = workspace_root(root)
    candidate = Path(path).expanduser() if path.startswith("~") else Path(path)
    if not candidate.is_absolute():
        candidate = real_root / candidate
    try:
        resolved = candidate.resolve(strict=False)
    except RuntimeError:  # Python 3.11 reports symlink loops this way
        raise WorkspaceError(f"path runs into a symlink loop: {path}") from None
    except OSError as exc:
        raise WorkspaceError(f"cannot resolve {path}: {exc.strerror or exc}") from None
    if not resolved.is_relative_to(real_root):
        raise WorkspaceError(f"path escapes the workspace: {path}")
    return resolved


def display(root: Path, resolved: Path) -> str:
    """`resolved` relative to the workspace, for messages ("." for the root)."""
    rel = resolved.relative_to(workspace_root(root))
    return rel.as_posix() if rel.parts else "."


def read_file(root: Path, path: str, *, max_bytes: int = READ_MAX_BYTES) -> str:
    """The file's text, cut at `max_bytes` with a note saying so."""
    target = confine(root, path)
    if not target.exists():
        raise WorkspaceError(f"no such file: {path}")
    if target.is_dir():
        raise WorkspaceError(f"{path} is a directory: use list_dir")
    if not target.is_file():
        raise WorkspaceError(f"{path} is not a regular file")
    try:
        size = target.stat().st_size
        with target.open("rb") as fh:
            data = fh.read(max_bytes + 1)
    except OSError as exc:
        raise WorkspaceError(f"cannot read {path}: {exc.strerror or exc}") from None
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\x00" in data[:8192]:
        raise WorkspaceError(f"{path} is a binary file ({size} bytes); not shown")
    text = data.decode("utf-8", errors="replace")
    if truncated:
        text += f"\n[truncated: showed the first {max_bytes} of {max(size, len(data) + 1)} bytes]"
    return text


def write_file(root: Path, path: str, content: str, *, max_bytes: int = WRITE_MAX_BYTES) -> str:
    """Write `content` atomically (temp file + rename), creating parent directories.

    An existing file keeps its permission bits. Returns a one-line confirmation.
    """
    if not isinstance(content, str):
        raise WorkspaceError("content must be a string")
    data = content.encode("utf-8")
    if len(data) > max_bytes:
        raise WorkspaceError(f"content is {len(data)} bytes; the limit is {max_bytes}")
    target = confine(root, path)
    if target == workspace_root(root) or target.is_dir():
        raise WorkspaceError(f"{path} is a directory; give a file path")
    parent = target.parent
    try:
        parent.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise WorkspaceError(f"cannot create {path}: a parent is a file") from None
    except OSError as exc:
        raise WorkspaceError(
            f"cannot create the folder for {path}: {exc.strerror or exc}"
        ) from None
    # The parent may not have existed when confine() ran: check it again now it does.
    if not parent.resolve().is_relative_to(workspace_root(root)):
        raise WorkspaceError(f"path escapes the workspace: {path}")
    mode = None
    with contextlib.suppress(FileNotFoundError):
        mode = stat.S_IMODE(target.stat().st_mode)
    fd, tmp_name = tempfile.mkstemp(dir=parent, prefix=f".{target.name}.", suffix=".nixx-tmp")
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp_name, mode)
        os.replace(tmp_name, target)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp_name)
        raise WorkspaceError(f"cannot write {path}: {exc.strerror or exc}") from None
    return f"wrote {len(data)} bytes to {display(root, target)}"


def list_dir(root: Path, path: str = ".", *, max_entries: int = LIST_MAX_ENTRIES) -> str:
    """One entry per line, sorted: `name/` for folders, `name (N bytes)` for files,
    `name@` for symlinks (their targets are not revealed)."""
    target = confine(root, path or ".")
    if not target.exists():
        raise WorkspaceError(f"no such directory: {path}")
    if not target.is_dir():
        raise WorkspaceError(f"{path} is a file: use read_file")
    try:
        entries = sorted(os.scandir(target), key=lambda e: e.name)
    except OSError as exc:
        raise WorkspaceError(f"cannot list {path}: {exc.strerror or exc}") from None
    lines = []
    for entry in entries[:max_entries]:
        try:
            if entry.is_symlink():
                lines.append(f"{entry.name}@")
            elif entry.is_dir():
                lines.append(f"{entry.name}/")
            else:
                lines.append(f"{entry.name} ({entry.stat().st_size} bytes)")
        except OSError:
            lines.append(f"{entry.name} (unreadable)")
    where = display(root, target)
    if not lines:
        return f"{where} is empty"
    header = f"{where}: {len(entries)} entries"
    if len(entries) > max_entries:
        header += f" (showing the first {max_entries})"
    return header + "\n" + "\n".join(lines)


def delete_file(root: Path, path: str) -> str:
    """Delete one file. A symlink is removed itself (its target is untouched) and only
    when the link and its target are both inside the workspace. Folders are refused."""
    resolved = confine(root, path)  # the target, symlinks followed, must be inside
    real_root = workspace_root(root)
    lexical = Path(path) if Path(path).is_absolute() else real_root / path
    if resolved == real_root or lexical.name in ("", ".", ".."):
        raise WorkspaceError("refusing to delete the workspace itself or a folder reference")
    parent = confine(root, str(lexical.parent))
    entry = parent / lexical.name
    if not entry.is_symlink():
        entry = resolved
    if not entry.exists() and not entry.is_symlink():
        raise WorkspaceError(f"no such file: {path}")
    if entry.is_dir() and not entry.is_symlink():
        raise WorkspaceError(f"{path} is a directory; delete_file removes files only")
    try:
        entry.unlink()
    except OSError as exc:
        raise WorkspaceError(f"cannot delete {path}: {exc.strerror or exc}") from None
    return f"deleted {entry.relative_to(real_root).as_posix()}"
