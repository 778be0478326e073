"""File tools confined to the workspace: read_file, write_file, list_dir, delete_file.

Confinement is enforced on open file descriptors, not on names. A path is walked one
component at a time from an open handle on the workspace's real directory: every folder
is opened with ``O_NOFOLLOW`` relative to its parent's handle (``os.open(name,
dir_fd=...)``), and a symlink met on the way is read (``readlink``) and expanded by this
walk itself, so every hop is checked and the kernel never follows a link on our behalf.
``..`` pops the walk's own stack, never the file system's, and popping past the workspace
is refused. The file is then opened (or created, replaced, unlinked) relative to the
handle of the folder that was checked: a process that swaps a folder for a symlink in
the meantime changes nothing (the handle still names the folder that was checked; a
final component that turned into a symlink fails ``O_NOFOLLOW`` and is walked again).

So `../x`, `/etc/passwd`, a symlink inside the workspace pointing outside, a sibling
whose name merely starts with the workspace's name (`/ws-secret` next to `/ws`), and a
folder flipped to a symlink mid-call are all refused with `WorkspaceError`.

`write_file` and `delete_file` also follow the *write policy* (`nixx.paths.write_refusal`,
docs/tools.md#the-write-policy): they refuse the paths of the deny list
(`nixx.paths.DEFAULT_PROTECTED`, the setting `NIXX_TOOLS_PROTECTED`: code that runs later
and secrets) whatever else allows them, and, unless `NIXX_TOOLS_WRITE_ALLOW` names the
path, any hidden component (`.git`, `.github`, `.vscode`, `.gemini`, ...), a build, test,
package, CI or agent file (`nixx.paths.BUILD_FILES`: `Makefile`, `pyproject.toml`,
`package.json`, `AGENTS.md`, ...) at any depth, and an existing executable file. Names are
compared as every platform resolves them (`nixx.paths.normalise_name`: NFC, trailing dots
and spaces, case): `.git.`, `.git ` and `.GIT` are `.git`. The check runs on the real path
the walk reached, before any folder is created. `read_file` refuses secrets (`nixx.paths.SECRET_PATHS`:
`.env`, `.nxs*`, key files) whatever the setting: what a tool reads is sent to the LLM
backend, and a key must not travel there. A hard link is another name for the same file,
which those names do not see, so `read_file` also refuses a regular file with more than
one link unless `NIXX_ALLOW_HARD_LINKS` is on (checked with ``fstat`` on the descriptor it
reads). Code paths can be read.

Every function raises `WorkspaceError` (or `NoWorkspace`) for anything the caller can get
wrong; the registry turns those into text the model can read.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, TypeVar

from nixx.errors import NoWorkspace, WorkspaceError
from nixx.paths import (
    DEFAULT_PROTECTED,
    hard_link_refusal,
    is_secret,
    matches,
    write_refusal,
)
from nixx.tools.schema import ToolSpec, function_spec, object_schema

READ_MAX_BYTES = 256 * 1024
WRITE_MAX_BYTES = 4 * 1024 * 1024
LIST_MAX_ENTRIES = 500
PATH_MAX_CHARS = 4096  # Linux PATH_MAX
NAME_MAX_BYTES = 255  # one component
MAX_SYMLINKS = 40  # as the kernel's own limit
_RETRIES = 100  # a component that keeps changing type while it is opened


T = TypeVar("T")

_O_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


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


@dataclass
class _Target:
    """Where a path leads: `name` inside the folder open as `dir_fd`, or the folder
    itself when `name` is None. `parts` is the real path relative to the workspace.
    `dir_fd` is None when a folder on the way does not exist (then nothing is open)."""

    dir_fd: int | None
    name: str | None
    parts: tuple[str, ...]

    @property
    def rel(self) -> str:
        return "/".join(self.parts) if self.parts else "."


def _check_path(path: object) -> str:
    if not isinstance(path, str) or not path.strip():
        raise WorkspaceError("path is empty: give a path relative to the workspace")
    if "\x00" in path:
        raise WorkspaceError(f"path contains a NUL byte: {path!r}")
    if len(path) > PATH_MAX_CHARS:
        raise WorkspaceError(
            f"path is too long ({len(path)} characters; the limit is {PATH_MAX_CHARS})"
        )
    for part in path.split("/"):
        if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX_BYTES:
            raise WorkspaceError(
                f"a name in the path is too long ({len(part)} characters; the limit is "
                f"{NAME_MAX_BYTES} bytes per name): {part[:40]}..."
            )
    return path


def _relative_parts(real_root: Path, root: Path, path: str) -> list[str]:
    """The path's components relative to the workspace (an absolute path must lie in it)."""
    candidate = Path(path).expanduser() if path.startswith("~") else Path(path)
    if not candidate.is_absolute():
        return list(PurePosixPath(path).parts)
    rest = _under(candidate, real_root, root)
    if rest is not None:
        return rest
    # an absolute path through symlinks elsewhere: map it by name only; the walk from the
    # workspace's handle below decides what it really reaches
    try:
        resolved = candidate.resolve(strict=False)
    except (OSError, RuntimeError):
        raise WorkspaceError(f"path escapes the workspace: {path}") from None
    if not resolved.is_relative_to(real_root):
        raise WorkspaceError(f"path escapes the workspace: {path}")
    return list(resolved.relative_to(real_root).parts)


def _link_parts(real_root: Path, root: Path, target: str, path: str) -> list[str] | None:
    """An absolute symlink target as components from the workspace root."""
    rest = _under(Path(target), real_root, root)
    if rest is None:
        raise WorkspaceError(f"path escapes the workspace: {path}")
    return rest


def _under(candidate: Path, real_root: Path, root: Path) -> list[str] | None:
    """The components of absolute `candidate` after the workspace's own path, compared
    component by component and without collapsing `..` (``ws/link/..`` is not ``ws``)."""
    parts = candidate.parts
    for base in (real_root, Path(os.path.abspath(root))):
        if parts[: len(base.parts)] == base.parts:
            return list(parts[len(base.parts) :])
    return None


def _os_error(path: str, exc: OSError, doing: str = "open") -> WorkspaceError:
    if exc.errno == errno.ENAMETOOLONG:
        return WorkspaceError(f"path is too long: {path[:80]}...")
    if exc.errno == errno.ELOOP:
        return WorkspaceError(f"path runs into a symlink loop: {path}")
    return WorkspaceError(f"cannot {doing} {path}: {exc.strerror or exc}")


@contextlib.contextmanager
def _walk(
    root: Path, path: str, *, follow_last: bool = True, create_dirs: bool = False
) -> Iterator[_Target]:
    """Walk `path` from the workspace's handle (see the module doc); yields the target
    with its parent folder open, and closes every handle afterwards."""
    _check_path(path)
    real_root = workspace_root(root)
    try:
        root_fd = os.open(real_root, _O_DIR)
    except OSError as exc:
        raise NoWorkspace(f"cannot open the workspace {real_root}: {exc.strerror}") from None
    stack: list[int] = [root_fd]
    names: list[str] = []
    try:
        yield _resolve(real_root, root, path, stack, names, follow_last, create_dirs)
    finally:
        for fd in stack:
            os.close(fd)


def _resolve(
    real_root: Path,
    root: Path,
    path: str,
    stack: list[int],
    names: list[str],
    follow_last: bool,
    create_dirs: bool,
) -> _Target:
    todo = deque(_relative_parts(real_root, root, path))
    links = 0
    retries = 0
    while todo:
        comp = todo.popleft()
        if comp in ("", "."):
            continue
        if comp == "..":
            if not names:
                raise WorkspaceError(f"path escapes the workspace: {path}")
            os.close(stack.pop())
            names.pop()
            continue
        last = not any(c not in ("", ".") for c in todo)
        cur = stack[-1]
        try:
            st = os.stat(comp, dir_fd=cur, follow_symlinks=False)
        except FileNotFoundError:
            if last:
                return _Target(cur, comp, (*names, comp))
            if not create_dirs:
                return _missing(path, names, comp, todo)
            try:
                os.mkdir(comp, 0o777, dir_fd=cur)
            except FileExistsError:
                pass  # someone else made it: look again
            except OSError as exc:
                raise _os_error(path, exc, "create the folder for") from None
            todo.appendleft(comp)
            continue
        except NotADirectoryError:
            raise WorkspaceError(f"cannot create {path}: a parent is a file") from None
        except OSError as exc:
            raise _os_error(path, exc) from None
        if stat.S_ISLNK(st.st_mode) and (follow_last or not last):
            links += 1
            if links > MAX_SYMLINKS:
                raise WorkspaceError(f"path runs into a symlink loop: {path}")
            try:
                target = os.readlink(comp, dir_fd=cur)
            except OSError:
                todo.appendleft(comp)  # it changed again: look again
                retries += 1
                if retries > _RETRIES:
                    raise WorkspaceError(f"{path} keeps changing; try again") from None
                continue
            todo = _through_link(real_root, root, path, target, todo, stack, names)
            continue
        if last:
            return _Target(cur, comp, (*names, comp))
        if not stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"cannot create {path}: a parent is a file")
        try:
            fd = os.open(comp, _O_DIR, dir_fd=cur)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENOENT):
                # swapped for a symlink or a file since the stat: look again
                retries += 1
                if retries > _RETRIES:
                    raise WorkspaceError(f"{path} keeps changing; try again") from None
                todo.appendleft(comp)
                continue
            raise _os_error(path, exc) from None
        stack.append(fd)
        names.append(comp)
    return _Target(stack[-1], None, tuple(names))


def _through_link(real_root: Path, root: Path, path: str, target: str, todo: deque[str],
                  stack: list[int], names: list[str]) -> deque[str]:
    """What is left to walk after a symlink to `target`: an absolute target inside the
    workspace restarts the walk at its root (the folders held so far are closed), a
    relative one continues from the link's folder."""
    rest = list(todo)
    if os.path.isabs(target):
        parts = _link_parts(real_root, root, target, path)
        while len(stack) > 1:
            os.close(stack.pop())
        names.clear()
        return deque([*(parts or []), *rest])
    return deque([*PurePosixPath(target).parts, *rest])


def _missing(path: str, names: list[str], comp: str, todo: deque[str]) -> _Target:
    """The target below a folder that does not exist: the rest is taken by name."""
    parts = [*names, comp]
    for rest in todo:
        if rest in ("", "."):
            continue
        if rest == "..":  # `..` out of a folder that does not exist: the kernel refuses too
            raise WorkspaceError(f"no such directory: {'/'.join([*names, comp])} (in {path})")
        else:
            parts.append(rest)
    return _Target(None, parts[-1] if parts else None, tuple(parts))


def is_protected(parts: Sequence[str], patterns: Sequence[str]) -> str | None:
    """The first pattern that protects the workspace-relative path `parts`, or None
    (`nixx.paths.matches`: names compared as `nixx.paths.normalise_name` reads them)."""
    return matches(parts, patterns)


def _refuse_write(parts: Sequence[str], protected: Sequence[str], allow: Sequence[str],
                  mode: int | None = None) -> None:
    """Raise when the write policy (`nixx.paths.write_refusal`) refuses `parts`."""
    why = write_refusal(parts, protected=protected, allow=allow, mode=mode)
    if why is not None:
        raise WorkspaceError(why, param="path")


def confine(root: Path, path: str) -> Path:
    """The real path `path` (relative to `root`, or absolute) reaches inside `root`.

    Symlinks are followed, including a dangling final link (its target counts).
    Raises `WorkspaceError` when the result is outside the workspace, the path is empty,
    malformed or too long, or it runs into a symlink loop. The file tools do not use the
    returned name to open anything: they walk the path again on handles (`_walk`).
    """
    with _walk(root, path) as target:
        return workspace_root(root).joinpath(*target.parts)


def display(root: Path, resolved: Path) -> str:
    """`resolved` relative to the workspace, for messages ("." for the root)."""
    rel = resolved.relative_to(workspace_root(root))
    return rel.as_posix() if rel.parts else "."


def _open_final(target: _Target, path: str, flags: int) -> int:
    """Open the target's last component relative to its checked folder, never following
    a symlink (``O_NOFOLLOW``). Raises FileNotFoundError / OSError(ELOOP) to the caller."""
    assert target.dir_fd is not None
    if target.name is None:
        return os.dup(target.dir_fd)
    return os.open(target.name, flags | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=target.dir_fd)


def _retrying(root: Path, path: str, attempt: Callable[[_Target], T], **walk_kw: bool) -> T:
    """Run `attempt(target)` on a fresh walk; walk again when the last component turned
    into a symlink between the walk and the open (ELOOP from ``O_NOFOLLOW``)."""
    for _ in range(_RETRIES):
        with _walk(root, path, **walk_kw) as target:
            try:
                return attempt(target)
            except OSError as exc:
                if exc.errno != errno.ELOOP:
                    raise
    raise WorkspaceError(f"{path} keeps changing; try again")


def read_file(root: Path, path: str, *, max_bytes: int = READ_MAX_BYTES,
              allow_hard_links: bool = False) -> str:
    """The file's text, cut at `max_bytes` with a note saying so. A secret
    (`nixx.paths.SECRET_PATHS`: `.env`, `.nxs*`, key files), reached by its name or
    through a symlink, is refused; so is a regular file with more than one link (a hard
    link may be a secret under another name: `nixx.paths.hard_link_refusal`) unless
    `allow_hard_links` (the setting `NIXX_ALLOW_HARD_LINKS`)."""

    def attempt(target: _Target) -> tuple[int, bytes]:
        secret = is_secret(target.parts)
        if secret is not None:
            # what a tool reads goes to the LLM backend: a key must never travel there
            raise WorkspaceError(
                f"{'/'.join(target.parts)} is a secret (pattern {secret!r}): the file tools "
                "never read secrets (nixx.paths.SECRET_PATHS; docs/tools.md)"
            )
        if target.dir_fd is None:
            raise WorkspaceError(f"no such file: {path}")
        try:
            fd = _open_final(target, path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            raise WorkspaceError(f"no such file: {path}") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise
            raise _os_error(path, exc, "read") from None
        try:
            st = os.fstat(fd)
            if stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"{path} is a directory: use list_dir")
            if not stat.S_ISREG(st.st_mode):
                raise WorkspaceError(f"{path} is not a regular file")
            linked = None if allow_hard_links else hard_link_refusal(st, "/".join(target.parts))
            if linked is not None:
                raise WorkspaceError(linked)
            chunks: list[bytes] = []
            left = max_bytes + 1
            while left > 0:
                chunk = os.read(fd, min(left, 1 << 20))
                if not chunk:
                    break
                chunks.append(chunk)
                left -= len(chunk)
            return st.st_size, b"".join(chunks)
        except OSError as exc:
            raise _os_error(path, exc, "read") from None
        finally:
            os.close(fd)

    size, data = _retrying(root, path, attempt)
    truncated = len(data) > max_bytes
    data = data[:max_bytes]
    if b"\x00" in data[:8192]:
        raise WorkspaceError(f"{path} is a binary file ({size} bytes); not shown")
    text = data.decode("utf-8", errors="replace")
    if truncated:
        text += f"\n[truncated: showed the first {max_bytes} of {max(size, len(data) + 1)} bytes]"
    return text


def write_file(
    root: Path,
    path: str,
    content: str,
    *,
    max_bytes: int = WRITE_MAX_BYTES,
    protected: Sequence[str] = DEFAULT_PROTECTED,
    allow: Sequence[str] = (),
) -> str:
    """Write `content` atomically (temp file + rename, both relative to the checked
    folder's handle), creating parent folders. An existing file keeps its permission
    bits. Protected paths are refused. Returns a one-line confirmation."""
    if not isinstance(content, str):
        raise WorkspaceError("content must be a string")
    try:
        data = content.encode("utf-8")
    except UnicodeEncodeError:
        raise WorkspaceError("content is not valid Unicode (a lone surrogate)") from None
    if len(data) > max_bytes:
        raise WorkspaceError(f"content is {len(data)} bytes; the limit is {max_bytes}")
    # decide protection before any folder is created
    with _walk(root, path) as planned:
        if planned.name is None:
            raise WorkspaceError(f"{path} is a directory; give a file path")
        _refuse_write(planned.parts, protected, allow)

    def attempt(target: _Target) -> str:
        if target.name is None or target.dir_fd is None:
            raise WorkspaceError(f"{path} is a directory; give a file path")
        _refuse_write(target.parts, protected, allow)
        parent, name = target.dir_fd, target.name
        mode = None
        try:
            st = os.stat(name, dir_fd=parent, follow_symlinks=False)
        except FileNotFoundError:
            pass
        except OSError as exc:
            raise _os_error(path, exc, "write") from None
        else:
            if stat.S_ISLNK(st.st_mode):
                raise OSError(errno.ELOOP, "became a symlink")  # walk again
            if stat.S_ISDIR(st.st_mode):
                raise WorkspaceError(f"{path} is a directory; give a file path")
            _refuse_write(target.parts, protected, allow, st.st_mode)
            mode = stat.S_IMODE(st.st_mode)
        tmp = f".{name[:200]}.{secrets.token_hex(6)}.nixx-tmp"
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
        try:
            fd = os.open(tmp, flags, 0o666 if mode is None else 0o600, dir_fd=parent)
        except OSError as exc:
            raise _os_error(path, exc, "write") from None
        try:
            try:
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view) :]
                if mode is not None:
                    os.fchmod(fd, mode)
                os.fsync(fd)
            finally:
                os.close(fd)
            # rename never follows a symlink at `name`: it replaces the entry itself
            os.replace(tmp, name, src_dir_fd=parent, dst_dir_fd=parent)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.unlink(tmp, dir_fd=parent)
            if exc.errno in (errno.EISDIR, errno.ENOTEMPTY):
                raise WorkspaceError(f"{path} is a directory; give a file path") from None
            raise _os_error(path, exc, "write") from None
        return f"wrote {len(data)} bytes to {target.rel}"

    return _retrying(root, path, attempt, create_dirs=True)


def list_dir(root: Path, path: str = ".", *, max_entries: int = LIST_MAX_ENTRIES) -> str:
    """One entry per line, sorted: `name/` for folders, `name (N bytes)` for files,
    `name@` for symlinks (their targets are not revealed)."""
    path = path or "."

    def attempt(target: _Target) -> str:
        if target.dir_fd is None:
            raise WorkspaceError(f"no such directory: {path}")
        try:
            fd = _open_final(target, path, os.O_RDONLY | os.O_DIRECTORY)
        except FileNotFoundError:
            raise WorkspaceError(f"no such directory: {path}") from None
        except NotADirectoryError:
            raise WorkspaceError(f"{path} is a file: use read_file") from None
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise
            raise _os_error(path, exc, "list") from None
        lines = []
        try:
            with os.scandir(fd) as it:
                entries = sorted(it, key=lambda e: e.name)
            for entry in entries[:max_entries]:
                try:
                    if entry.is_symlink():
                        lines.append(f"{entry.name}@")
                    elif entry.is_dir(follow_symlinks=False):
                        lines.append(f"{entry.name}/")
                    else:
                        size = entry.stat(follow_symlinks=False).st_size
                        lines.append(f"{entry.name} ({size} bytes)")
                except OSError:
                    lines.append(f"{entry.name} (unreadable)")
        except OSError as exc:
            raise _os_error(path, exc, "list") from None
        finally:
            os.close(fd)
        if not lines:
            return f"{target.rel} is empty"
        header = f"{target.rel}: {len(entries)} entries"
        if len(entries) > max_entries:
            header += f" (showing the first {max_entries})"
        return header + "\n" + "\n".join(lines)

    return _retrying(root, path, attempt)


def delete_file(root: Path, path: str, *, protected: Sequence[str] = DEFAULT_PROTECTED,
                allow: Sequence[str] = ()) -> str:
    """Delete one file. A symlink is removed itself (its target is untouched) and only
    when the link and its target are both inside the workspace. Folders and protected
    paths are refused."""
    _check_path(path)
    if PurePosixPath(path).name in ("", ".", ".."):
        raise WorkspaceError("refusing to delete the workspace itself or a folder reference")
    with _walk(root, path) as followed:  # a symlink's target must be inside too
        if followed.name is None:
            raise WorkspaceError("refusing to delete the workspace itself or a folder reference")
    with _walk(root, path, follow_last=False) as target:
        if target.name is None:
            raise WorkspaceError("refusing to delete the workspace itself or a folder reference")
        if target.dir_fd is None:
            raise WorkspaceError(f"no such file: {path}")
        _refuse_write(target.parts, protected, allow)
        try:
            st = os.stat(target.name, dir_fd=target.dir_fd, follow_symlinks=False)
        except FileNotFoundError:
            raise WorkspaceError(f"no such file: {path}") from None
        except OSError as exc:
            raise _os_error(path, exc, "delete") from None
        if stat.S_ISDIR(st.st_mode):
            raise WorkspaceError(f"{path} is a directory; delete_file removes files only")
        _refuse_write(target.parts, protected, allow, st.st_mode)
        try:
            os.unlink(target.name, dir_fd=target.dir_fd)  # never follows a symlink
        except FileNotFoundError:
            raise WorkspaceError(f"no such file: {path}") from None
        except OSError as exc:
            if exc.errno in (errno.EISDIR, errno.EPERM):
                raise WorkspaceError(
                    f"{path} is a directory; delete_file removes files only"
                ) from None
            raise _os_error(path, exc, "delete") from None
        return f"deleted {target.rel}"


# ---- how a model is told about them (the server's tools and the built-in agent's) ------
_WS = "Paths are relative to the workspace folder; nothing outside it is reachable."


#: name -> (description, JSON-schema parameters) of each file tool, as offered to a model.
TOOL_SCHEMAS: dict[str, tuple[str, dict[str, Any]]] = {
    "read_file": (
        f"Read a UTF-8 text file from the workspace (at most {READ_MAX_BYTES // 1024} KB; "
        f"longer files are truncated). {_WS}",
        object_schema({"path": {"type": "string", "description": "file path"}}, ["path"]),
    ),
    "write_file": (
        "Create or overwrite a text file in the workspace with the given content; missing "
        f"folders are created. {_WS}",
        object_schema(
            {
                "path": {"type": "string", "description": "file path"},
                "content": {"type": "string", "description": "the full new content"},
            },
            ["path", "content"],
        ),
    ),
    "list_dir": (
        f"List a folder of the workspace: `name/` folders, `name (N bytes)` files. {_WS}",
        object_schema({"path": {"type": "string", "description": "folder path (default '.')"}}, []),
    ),
    "delete_file": (
        f"Delete one file (not a folder) from the workspace. {_WS}",
        object_schema({"path": {"type": "string", "description": "file path"}}, ["path"]),
    ),
}


def tool_spec(name: str) -> ToolSpec:
    """The OpenAI `tools` entry of file tool `name`."""
    return function_spec(name, *TOOL_SCHEMAS[name])
