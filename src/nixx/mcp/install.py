"""Wiring nixx into coding agents' project files: `nixx mcp install` and `nxs init`'s hooks.

Each client's PROJECT configuration (checked in their documentation, docs/mcp.md):

    claude-code   .mcp.json               {"mcpServers": {"nixx": {...}}}
    cursor        .cursor/mcp.json        {"mcpServers": {"nixx": {...}}}
    codex         .codex/config.toml      [mcp_servers.nixx]  (read in trusted projects)
    gemini        .gemini/settings.json   {"mcpServers": {"nixx": {...}}}

Session-start hooks (`nxs init`): Claude Code's `.claude/settings.json` `hooks.SessionStart`
runs `nxs prime`, whose output the session starts with.

Every change merges with what is there: other servers, hooks and settings are kept; an
existing `nixx` entry is left as it is unless `force`; a file that does not parse is an
error naming it, and nothing is written. A second run changes nothing. Files are replaced
atomically (written beside, then renamed).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from typing import Any

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
PRIME_COMMAND = "nxs prime"
CLAUDE_SETTINGS = os.path.join(".claude", "settings.json")


def server_entry(client: str) -> dict[str, Any]:
    entry: dict[str, Any] = {"command": COMMAND, "args": list(ARGS)}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    return entry


def resolve_clients(names: list[str] | None) -> list[str]:
    if not names or "all" in names:
        return list(CLIENTS)
    unknown = [n for n in names if n not in CLIENTS]
    if unknown:
        raise ValidationError(f"unknown client {unknown[0]!r}: one of {', '.join(CLIENTS)} or all",
                              param="client")
    return [c for c in CLIENTS if c in names]


def install_servers(root: str, clients: list[str], *, dry_run: bool = False,
                    force: bool = False) -> list[dict[str, Any]]:
    """Add the `nixx` server entry to each client's project file under `root`."""
    changes = []
    for client in clients:
        path = os.path.join(root, FILES[client])
        if client == "codex":
            action = _toml_server(path, dry_run=dry_run, force=force)
        else:
            entry = server_entry(client)

            def add(data: dict[str, Any], entry: dict[str, Any] = entry, path: str = path) -> str:
                servers = data.setdefault("mcpServers", {})
                if not isinstance(servers, dict):
                    raise ConfigError(f'"mcpServers" is not an object in {path}: fix the file first')
                old = servers.get(SERVER_NAME)
                if old == entry:
                    return "unchanged"
                if old is not None and not force:
                    return "kept"
                servers[SERVER_NAME] = entry
                return "replaced" if old is not None else "added"

            action = _merge_json(path, add, dry_run=dry_run)
        changes.append({"client": client, "file": path, "action": action,
                        "dry_run": dry_run})
    return changes


def install_hooks(root: str, *, dry_run: bool = False) -> list[dict[str, Any]]:
    """Register `nxs prime` as Claude Code's SessionStart hook in `.claude/settings.json`."""
    path = os.path.join(root, CLAUDE_SETTINGS)

    def add(data: dict[str, Any]) -> str:
        hooks = data.setdefault("hooks", {})
        if not isinstance(hooks, dict):
            raise ConfigError(f'"hooks" is not an object in {path}: fix the file first')
        groups = hooks.setdefault("SessionStart", [])
        if not isinstance(groups, list):
            raise ConfigError(f'"hooks.SessionStart" is not a list in {path}: fix the file first')
        for group in groups:
            for hook in (group.get("hooks") or []) if isinstance(group, dict) else []:
                if isinstance(hook, dict) and hook.get("command") == PRIME_COMMAND:
                    return "unchanged"
        groups.append({"hooks": [{"type": "command", "command": PRIME_COMMAND}]})
        return "added"

    action = _merge_json(path, add, dry_run=dry_run)
    return [{"client": "claude-code", "file": path, "hook": "SessionStart",
             "command": PRIME_COMMAND, "action": action, "dry_run": dry_run}]


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


def _toml_server(path: str, *, dry_run: bool, force: bool) -> str:
    import tomllib

    text = _read(path)
    table = f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(COMMAND)}\nargs = {json.dumps(ARGS)}\n"
    if text is not None:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path} is not valid TOML ({exc}): fix it, nothing was "
                              "changed") from exc
        old = (data.get("mcp_servers") or {}).get(SERVER_NAME)
        if old is not None:
            if old.get("command") == COMMAND and old.get("args") == ARGS:
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
