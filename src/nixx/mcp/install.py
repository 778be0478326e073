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

Each entry carries what `nixx mcp` needs to reach the user's server, since a client may
pass its servers only part of its environment (Codex: HOME, LANG, PATH, PWD, SHELL, TERM):
`env` with `NIXX_HOME` (the home the installer's settings use, whose config.toml holds the
port and key) and `NIXX_MCP_URL` (where `nixx serve` is reached with those settings), so
`nixx mcp` connects there or says it cannot. The API key is never written by value unless
asked (`with_key`): a key read from `config.toml` needs nothing (the entry names the home);
a key set only in the environment is passed by name — Codex `env_vars = ["NIXX_API_KEY"]`,
a reference the client expands for the JSON files (`KEY_REFERENCE`). With `with_key` the
value is written and each change warns that the file now holds it in plain text.

The command written is the absolute path of the executable (`executable`: the one beside
the running interpreter — a venv's ``bin/`` — else the one on PATH), since a client
started from another shell does not have the venv on its PATH; it is run once
(``--help``) when installing, and a warning says so when it is not found or does not
run (the bare name is then written). An entry or hook nixx wrote before with the bare
name is replaced by the absolute one.

Every change merges with what is there: other servers, hooks and settings are kept; an
existing `nixx` entry is replaced when nixx wrote it (its command is this one or the bare
name, its args `["mcp"]`: an older entry without `env` is brought up to date), else left as
it is unless `force` (a Codex table is rewritten only when it is nixx's own and has no
sub-tables); a file that does not parse is an
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


KEY = "NIXX_API_KEY"
# how each JSON client's `env` names a variable of its own environment (their docs)
KEY_REFERENCE = {"claude-code": "${NIXX_API_KEY:-}", "cursor": "${env:NIXX_API_KEY}",
                 "gemini": "${NIXX_API_KEY}"}


class ServerEntry(TypedDict):
    """The `nixx` entry of a client's `mcpServers` (`server_entry`)."""

    type: NotRequired[str]  # Claude Code's "stdio"
    command: str
    args: list[str]
    env: NotRequired[dict[str, str]]


class Reach(TypedDict):
    """What an entry carries to reach the user's server (`reach`)."""

    env: dict[str, str]  # NIXX_HOME, NIXX_MCP_URL (and the key's value with `with_key`)
    key: str  # "config" (in $NIXX_HOME/config.toml), "environment", "written" or "none"


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
    env: NotRequired[dict[str, str]]  # install_servers: the entry's env, the key masked
    key: NotRequired[str]  # install_servers: how the entry authenticates (`Reach`)


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


def reach(*, with_key: bool = False) -> Reach:
    """The home and server URL of the installer's settings (environment, then
    `$NIXX_HOME/config.toml`), and where the API key comes from: `"config"` when the
    file in that home sets it (`nixx mcp` reads it there), `"environment"` when only
    `NIXX_API_KEY` does (passed by name), `"written"` with `with_key`, else `"none"`."""
    from nixx.config import config_file_path, config_keys, load_settings
    from nixx.local_server import default_url
    from nixx.secret import reveal

    settings = load_settings()
    env = {"NIXX_HOME": str(settings.home.resolve()), "NIXX_MCP_URL": default_url(settings)}
    value = reveal(settings.api_key)
    if not value:
        return {"env": env, "key": "none"}
    if with_key:
        return {"env": {**env, KEY: value}, "key": "written"}
    in_file = bool(config_keys(config_file_path()).get("api_key"))
    return {"env": env, "key": "config" if in_file and KEY not in os.environ else
            "environment"}


def server_entry(client: str, command: str = COMMAND,
                 env: dict[str, str] | None = None, key: str = "none") -> ServerEntry:
    """The JSON clients' entry: `env` as given, plus the key by reference when it is in
    the environment only. No `env` (and `key` "none"): the bare entry of older versions."""
    entry: ServerEntry = {"command": command, "args": list(ARGS)}
    if client == "claude-code":
        entry = {"type": "stdio", **entry}
    if env or key == "environment":
        entry["env"] = {**(env or {})}
        if key == "environment":
            entry["env"][KEY] = KEY_REFERENCE[client]
    return entry


def _ours(old: Any, command: str) -> bool:
    """Whether an existing entry is one nixx wrote (this command or the bare name, args
    `["mcp"]`, nothing but type/command/args/env): replaced without `force`."""
    return (isinstance(old, dict) and old.get("command") in (command, COMMAND)
            and old.get("args") == ARGS and set(old) <= {"type", "command", "args", "env"})


def _masked(env: dict[str, str]) -> dict[str, str]:
    return {k: ("***" if k == KEY and not v.startswith("$") else v) for k, v in env.items()}


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
                    force: bool = False, with_key: bool = False) -> list[Change]:
    """Add the `nixx` server entry to each client's project file under `root`. Each
    change carries ``command`` (what was written), ``env`` (the key masked), ``key`` (how
    the entry authenticates, `reach`) and ``warning`` (None, or why the command may not
    run, or that the key was written in plain text)."""
    command, warning = executable(COMMAND)
    target = reach(with_key=with_key)
    changes: list[Change] = []
    for client in clients:
        path = os.path.join(root, FILES[client])
        if client == "codex":
            action = _toml_server(path, command, target, dry_run=dry_run, force=force)
        else:
            entry = server_entry(client, command, target["env"], target["key"])

            def add(data: dict[str, Any], entry: ServerEntry = entry, path: str = path) -> str:
                servers = data.setdefault("mcpServers", {})
                if not isinstance(servers, dict):
                    raise ConfigError(f'"mcpServers" is not an object in {path}: fix the file first')
                old = servers.get(SERVER_NAME)
                if old == entry:
                    return "unchanged"
                if old is not None and not _ours(old, entry["command"]) and not force:
                    return "kept"
                servers[SERVER_NAME] = entry
                return "replaced" if old is not None else "added"

            action = _merge_json(path, add, dry_run=dry_run)
        note = warning
        if target["key"] == "written" and action not in ("unchanged", "kept"):
            note = ((warning + "; ") if warning else "") + (
                f"{path} now holds the API key in plain text (--with-key): keep it out of "
                "version control")
        changes.append({"client": client, "file": path, "action": action,
                        "dry_run": dry_run, "command": command, "warning": note,
                        "env": _masked(target["env"]), "key": target["key"]})
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


def toml_table(command: str, target: Reach) -> str:
    """Codex's `[mcp_servers.nixx]`: `env` inline, and `env_vars` naming the key when it
    is in the environment only (Codex forwards a listed variable from its own
    environment; none other reaches the server)."""
    env = ", ".join(f"{k} = {json.dumps(v)}" for k, v in target["env"].items())
    table = (f"[mcp_servers.{SERVER_NAME}]\ncommand = {json.dumps(command)}\n"
             f"args = {json.dumps(ARGS)}\nenv = {{ {env} }}\n")
    if target["key"] == "environment":
        table += f"env_vars = {json.dumps([KEY])}\n"
    return table


def _toml_server(path: str, command: str, target: Reach, *, dry_run: bool,
                 force: bool) -> str:
    import tomllib

    text = _read(path)
    table = toml_table(command, target)
    new = (text or "")
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
            if old == tomllib.loads(table)["mcp_servers"][SERVER_NAME]:
                return "unchanged"
            rewritten = _replace_table(text, table) if _ours_toml(old, command) else None
            if rewritten is None:
                if not force:
                    return "kept"
                raise ConfigError(f"{path} has its own [mcp_servers.{SERVER_NAME}]: nixx does "
                                  "not rewrite it, edit it by hand (see docs/mcp.md)")
            if not dry_run:
                _write(path, rewritten)
            return "replaced"
    if dry_run:
        return "added" if text is not None else "created"
    if new and not new.endswith("\n"):
        new += "\n"
    _write(path, new + ("\n" if new else "") + table)
    return "added" if text is not None else "created"


def _ours_toml(old: Any, command: str) -> bool:
    return (isinstance(old, dict) and old.get("command") in (command, COMMAND)
            and old.get("args") == ARGS and set(old) <= {"command", "args", "env", "env_vars"}
            and all(isinstance(v, str) for v in (old.get("env") or {}).values()))


def _replace_table(text: str, table: str) -> str | None:
    """`text` with nixx's `[mcp_servers.nixx]` table (header to the next header) replaced
    by `table`; None when the table has sub-tables or is not written as one block (then
    nixx leaves it to the user), or the result would not parse as expected."""
    import re
    import tomllib

    header = re.compile(rf"^\s*\[mcp_servers\.{SERVER_NAME}\]\s*(#.*)?$", re.M)
    if re.search(rf"^\s*\[+\s*mcp_servers\.{SERVER_NAME}\.", text, re.M):
        return None
    found = list(header.finditer(text))
    if len(found) != 1:
        return None
    start = found[0].start()
    after = re.search(r"^\s*\[", text[found[0].end():], re.M)
    end = found[0].end() + after.start() if after else len(text)
    block_end = "\n" if after else ""
    out = text[:start] + table + block_end + text[end:].lstrip("\n")
    try:
        parsed = tomllib.loads(out)["mcp_servers"][SERVER_NAME]
    except (tomllib.TOMLDecodeError, KeyError):
        return None
    return out if parsed == tomllib.loads(table)["mcp_servers"][SERVER_NAME] else None


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
