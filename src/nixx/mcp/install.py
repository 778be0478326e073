"""Wiring nixx into coding agents' project files: `nixx mcp install` and `nxs init`'s hooks.

Each client's PROJECT configuration (checked in their documentation, docs/mcp.md):

    claude-code   .mcp.json               {"mcpServers": {"nixx": {...}}}
    cursor        .cursor/mcp.json        {"mcpServers": {"nixx": {...}}}
    codex         .codex/config.toml      [mcp_servers.nixx]  (read in trusted projects)
    gemini        .gemini/settings.json   {"mcpServers": {"nixx": {...}}}

Session-start hooks (`nxs init`): `hooks.SessionStart` in Claude Code's
`.claude/settings.json` runs `nxs prime` (its text is added to the session's context), in
Gemini CLI's `.gemini/settings.json` `nxs prime --hook gemini` (the same block as the JSON
Gemini reads: `hookSpecificOutput.additionalContext`).

The command written is the absolute path of the executable (`executable`: the one beside
the running interpreter — a venv's ``bin/`` — else the one on PATH), since a client
started from another shell does not have the venv on its PATH; it is run once
(``--help``) when installing, and a warning says so when it is not found or does not
run (the bare name is then written). An entry or hook nixx wrote before with the bare
name is replaced by the absolute one.

Every change merges with what is there: other servers, hooks and settings are kept; an
existing `nixx` entry is left as it is unless `force`; a file that does not parse is an
error naming it, and nothing is written. A second run changes nothing. Files are replaced
atomically (written beside, then renamed).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from typing import Any, NotRequired, TypedDict

from nixx.errors import ConfigError, ValidationError

CLIENTS = ("claude-code", "cursor", "codex", "gemini")
FILES = {
    "claude-code": ".mcp.json",
    "cursor": os.path.join(".cursor", "mcp.json"),
    "codex": os.path.join(".codex", "config.toml"),
    "gemini": os.path.join(".gemini", "settings.json"),
}
SERVER_NAME = "nixx"
COMMAND, ARGS = "nixx", ["mcp"]
CLAUDE_SETTINGS = os.path.join(".claude", "settings.json")
GEMINI_SETTINGS = os.path.join(".gemini", "settings.json")


class ServerEntry(TypedDict):
    """The `nixx` entry of a client's `mcpServers` (`server_entry`)."""

    type: NotRequired[str]  # Claude Code's "stdio"
    command: str
    args: list[str]


class Change(TypedDict):
    """One file `install_servers` or `install_hooks` looked at (`nixx mcp install
    --json`, `nxs init`)."""

    client: str
    file: str
    # "created" (the file), "added", "replaced", "unchanged" or "kept" (an entry nixx did
    # not write)
    action: str
    dry_run: bool
    command: str  # what was (or would be) written
    warning: str | None  # why the command may not run in the client
    hook: NotRequired[str]  # install_hooks: the hook's event ("SessionStart")


def executable(name: str) -> tuple[str, str | None]:
    """(the command to write for nixx's executable `name`, a warning or None): the
    absolute path of the `name` beside the running interpreter (a venv's ``bin/``; the
    interpreter's path is not resolved, a venv's python is a link), else of the one on
    PATH; checked by running ``<path> --help``. Not found or not runnable: the bare name,
    with a warning saying what the client will need."""
    here = os.path.join(os.path.dirname(os.path.abspath(sys.executable)), name)
    found = here if os.path.isfile(here) and os.access(here, os.X_OK) else shutil.which(name)
    if not found:
        return name, (f"no {name} executable was found beside {sys.executable} or on PATH: "
                      f"the file names the bare command {name!r}, which runs only where "
                      f"{name} is on the PATH of the client")
    path = os.path.abspath(found)
    try:
        done = subprocess.run([path, "--help"], capture_output=True, timeout=30,
                              stdin=subprocess.DEVNULL)
        problem = None if done.returncode == 0 else f"exited {done.returncode}"
    except (OSError, subprocess.TimeoutExpired) as exc:
        problem = str(exc)
    if problem:
        return path, f"{path} did not run ({problem}): the client will fail to start it"
    return path, None


def server_entry(client: str, command: str = COMMAND) -> ServerEntry:
    if client == "claude-code":
        return {"type": "stdio", "command": command, "args": list(ARGS)}
    return {"command": command, "args": list(ARGS)}


def warnings(changes: list[Change]) -> list[str]:
    """The distinct warnings of `changes`, in order (the shells print them to stderr)."""
    return list(dict.fromkeys(w for c in changes if (w := c["warning"])))


def resolve_clients(names: list[str] | None) -> list[str]:
    if not names or "all" in names:
        return list(CLIENTS)
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        raise ValidationError(f"unknown client {unknown[0]!r}: one of {', '.join(CLIENTS)} or all",
                              param="client")
    return [c for c in CLIENTS if c in names]


def install_servers(root: str, clients: list[str], *, dry_run: bool = False,
                    force: bool = False) -> list[Change]:
    """Add the `nixx` server entry to each client's project file under `root`. Each
    change carries ``command`` (what was written) and ``warning`` (None, or why the
    command may not run)."""
    command, warning = executable(COMMAND)
    changes: list[Change] = []
    for client in clients:
        path = os.path.join(root, FILES[client])
        if client == "codex":
            action = _toml_server(path, command, dry_run=dry_run, force=force)
        else:
            entry = server_entry(client, command)
            bare = server_entry(client)

            def add(data: dict[str, Any], entry: ServerEntry = entry, path: str = path,
                    bare: ServerEntry = bare) -> str:
                servers = data.setdefault("mcpServers", {})
                if not isinstance(servers, dict):
                    raise ConfigError(f'"mcpServers" is not an object in {path}: fix the file first')
                old = servers.get(SERVER_NAME)
                if old == entry:
                    return "unchanged"
                if old is not None and old != bare and not force:
                    return "kept"
                servers[SERVER_NAME] = entry
                return "replaced" if old is not None else "added"

            action = _merge_json(path, add, dry_run=dry_run)
        changes.append({"client": client, "file": path, "action": action,
                        "dry_run": dry_run, "command": command, "warning": warning})
    return changes


HOOKS = {  # client: (project settings file, the hook's arguments, extra fields of the hook)
    "claude-code": (CLAUDE_SETTINGS, "prime", {}),
    "gemini": (GEMINI_SETTINGS, "prime --hook gemini", {"name": "nxs-prime"}),
}


def install_hooks(root: str, *, dry_run: bool = False) -> list[Change]:
    """Register `nxs prime` as the SessionStart hook of every client that has one: Claude
    Code (`.claude/settings.json`, plain text is added to the context) and Gemini CLI
    (`.gemini/settings.json`, which wants JSON: `nxs prime --hook gemini`)."""
    nxs, warning = executable("nxs")
    changes: list[Change] = []
    for client, (rel, arguments, extra) in HOOKS.items():
        path = os.path.join(root, rel)
        command = f"{shlex.quote(nxs)} {arguments}"

        def add(data: dict[str, Any], path: str = path, command: str = command,
                extra: dict[str, Any] = extra, bare: str = f"nxs {arguments}") -> str:
            hooks = data.setdefault("hooks", {})
            if not isinstance(hooks, dict):
                raise ConfigError(f'"hooks" is not an object in {path}: fix the file first')
            groups = hooks.setdefault("SessionStart", [])
            if not isinstance(groups, list):
                raise ConfigError(f'"hooks.SessionStart" is not a list in {path}: fix the file first')
            for group in groups:
                for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                    if isinstance(hook, dict) and hook.get("command") == command:
                        return "unchanged"
            for group in groups:  # the bare command nixx wrote before: made absolute
                for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                    if isinstance(hook, dict) and hook.get("command") == bare != command:
                        hook["command"] = command
                        return "replaced"
            groups.append({"hooks": [{**extra, "type": "command", "command": command}]})
            return "added"

        action = _merge_json(path, add, dry_run=dry_run)
        changes.append({"client": client, "file": path, "hook": "SessionStart",
                        "command": command, "action": action, "dry_run": dry_run,
                        "warning": warning})
    return changes


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc}") from exc


def _merge_json(path: str, change: Callable[[dict[str, Any]], str], *, dry_run: bool) -> str:
    text = _read(path)
    data: Any = {}
    if text is not None and text.strip():
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc}): fix it, nothing was "
                              "changed") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path} does not hold a JSON object: fix it, nothing was changed")
    action = change(data)
    if action in ("unchanged", "kept"):
        return action
    if dry_run:
        return "created" if text is None else action
    _write(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    return "created" if text is None else action


def _toml_server(path: str, command: str, *, dry_run: bool, force: bool) -> str:
    import tomllib

    text = _read(path)
    table = f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(command)}\nargs = {json.dumps(ARGS)}\n"
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML ({exc}): fix it, nothing was "
                              "changed") from exc
        servers = data.get("mcp_servers") or {}
        if not isinstance(servers, dict):
            raise ConfigError(f"mcp_servers is not a table in {path}: fix the file first")
        old = servers.get(SERVER_NAME)
        if old is not None:
            if isinstance(old, dict) and old.get("command") == command and old.get("args") == ARGS:
                return "unchanged"
            if not force:
                return "kept"
            raise ConfigError(f"{path} has its own [mcp_servers.{SERVER_NAME}]: nixx does not "
                              "rewrite TOML tables, edit it by hand (see docs/mcp.md)")
    if dry_run:
        return "added" if text is not None else "created"
    new = (text or "")
    if new and not new.endswith("\n"):
        new += "\n"
    _write(path, new + ("\n" if new else "") + table)
    return "added" if text is not None else "created"


def _write(path: str, text: str) -> None:
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".nixx-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        if os.path.exists(path):
            os.chmod(tmp, os.stat(path).st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
