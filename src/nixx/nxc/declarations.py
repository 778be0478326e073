"""Declarations, not registrations: `.nxs-personas/<handle>.yaml` and `channels.yaml`.

Nothing in nxc creates a participant: this folder is the whole model. Parsing is strict
(an unknown key is an error, so a typo never silently changes meaning) and every error
is a `ValidationError` naming the file and the field. A missing folder is not an error.

Reading is bounded, because the model's own `write_file` can reach this folder: a file
over `MAX_FILE_BYTES` is refused unread, and a document that expands to more than
`MAX_VALUES` values (YAML anchors and aliases can make 512 bytes mean a billion) or
nests deeper than `MAX_DEPTH` is refused while it is walked — each a `ValidationError`
naming the file, cached like any other verdict so every verb after it fails as fast.

Parsed YAML is cached per file in `.nxs/declarations.json`, keyed by each file's
(mtime_ns, ctime_ns, size, inode) and the folder's mtime, so a verb that needs the
declarations does not pay for importing PyYAML when nothing changed. Validation always
runs on the cached data, so a cache hit and a fresh parse give the same result.
"""

from __future__ import annotations

import json
import os

from nixx.errors import ValidationError
from nixx.nxc.durations import parse_duration_ms, parse_instant_ms
from nixx.nxc.handles import check_agent, qualify

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.nxc.shapes import AddressableList, BuiltinRuntime, CommandRuntime

CHANNELS_FILE = "channels.yaml"
#: the steps a declaration may hold for a person's approval (`approve:`; `nixx.nxc.approvals`)
PERSONA_STEPS = ("start", "run")
CHANNEL_STEPS = ("start", "hand_back")
#: the workspace's own settings that travel with the repository: `origin`
WORKSPACE_FILE = "workspace.yaml"
#: bounds on one declaration file (docs/limits-and-safety.md)
MAX_FILE_BYTES = 256 * 1024
MAX_VALUES = 100_000
MAX_DEPTH = 64
CACHE_FILE = "declarations.json"
_CACHE_VERSION = 1

#: placeholders a runtime argv template may use (issue 8 fills them in)
RUNTIME_PLACEHOLDERS = frozenset({"prompt", "session", "runtime_session", "thread", "handle",
                                  "db", "workspace"})
BUILTIN_RUNTIMES = frozenset({"nixx"})

_PERSONA_KEYS = {
    "handle", "system_prompt", "job_title", "job_description", "expected_output", "model",
    "stage", "tools", "permissions", "prime", "addressable", "working_tree", "runtime",
    "shared_memory", "approve",
}
_CHANNEL_KEYS = {
    "name", "members", "description", "kind", "expects", "on_complete", "summary_prompt",
    "visibility", "flow", "timeout", "approve",
}


class _Record:
    """A small keyword-built record (dataclasses cost a CLI start-up its import)."""

    __slots__: tuple[str, ...] = ()
    _defaults: dict[str, Any] = {}

    def __init__(self, **values: Any) -> None:
        for name in self.__slots__:
            if name in values:
                value = values.pop(name)
            elif name in self._defaults:
                value = self._defaults[name]
                value = value() if callable(value) else value
            else:
                raise TypeError(f"{type(self).__name__} needs {name}")
            object.__setattr__(self, name, value)
        if values:
            raise TypeError(f"{type(self).__name__} has no field {sorted(values)[0]}")

    def __eq__(self, other: object) -> bool:
        return type(other) is type(self) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__
        )

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}={getattr(self, n)!r}" for n in self.__slots__)
        return f"{type(self).__name__}({fields})"


class Runtime(_Record):
    """How a persona's sessions start and resume: a built-in name or argv templates."""

    __slots__ = ("builtin", "start", "resume", "format", "preset")
    _defaults = {"builtin": None, "start": (), "resume": (), "format": None, "preset": None}
    builtin: str | None
    start: tuple[str, ...]
    resume: tuple[str, ...]
    format: str | None  # how its stdout becomes a transcript (nixx.nxc.delivery.stream_formats)
    preset: str | None  # `runtime: claude-code` etc. (nixx.nxc.delivery.presets)

    def to_dict(self) -> BuiltinRuntime | CommandRuntime:
        if self.builtin:
            return {"builtin": self.builtin}
        out: CommandRuntime = {"start": list(self.start), "resume": list(self.resume),
                               "transcript": self.format or "stream-json"}
        if self.preset:
            out["preset"] = self.preset
        return out


class Addressable(_Record):
    """Who may address a persona directly: `general` (anyone), `none` (only through a
    channel) or `list` (the `personas` named, plus humans when `humans`)."""

    __slots__ = ("mode", "personas", "humans")
    _defaults = {"mode": "general", "personas": (), "humans": True}
    mode: str
    personas: tuple[str, ...]
    humans: bool

    def to_dict(self) -> str | AddressableList:
        if self.mode == "list":
            return {"personas": list(self.personas), "humans": self.humans}
        return self.mode


class Persona(_Record):
    """One `.nxs-personas/<handle>.yaml`. `tools`: None = the runtime's default set,
    () = none, else exactly those."""

    __slots__ = ("handle", "file", "system_prompt", "job_title", "job_description",
                 "expected_output", "model", "stage", "tools", "permissions", "prime",
                 "addressable", "working_tree", "runtime", "shared_memory", "approve")
    _defaults = {"job_title": None, "job_description": None, "expected_output": None,
                 "model": None, "stage": None, "tools": None, "permissions": None,
                 "prime": True, "addressable": Addressable, "working_tree": "shared",
                 "runtime": None, "shared_memory": True, "approve": ()}
    handle: str  # qualified
    file: str
    system_prompt: str
    job_title: str | None
    job_description: str | None
    expected_output: str | None
    model: str | None
    stage: str | None
    tools: tuple[str, ...] | None
    permissions: Any
    prime: Any
    addressable: Addressable
    working_tree: str
    runtime: Runtime | None
    shared_memory: bool  # the built-in runtime goes through a reachable `nixx serve`
    approve: tuple[str, ...]  # steps a person approves first (`nixx.nxc.approvals`)

    @property
    def agent(self) -> str:
        return self.handle.split("/", 1)[1]


class ChannelDecl(_Record):
    """One entry of channels.yaml; `members` and `expects` are qualified handles in
    declaration order (`expects: all` resolved to the members)."""

    __slots__ = ("name", "file", "members", "expects", "description", "kind", "on_complete",
                 "summary_prompt", "visibility", "flow", "timeout", "timeout_ms",
                 "timeout_at_ms", "approve")
    _defaults = {"description": None, "kind": "group", "on_complete": "pass_through",
                 "summary_prompt": None, "visibility": "requester_only", "flow": "parallel",
                 "timeout": None, "timeout_ms": None, "timeout_at_ms": None, "approve": ()}
    name: str
    file: str
    members: tuple[str, ...]
    expects: tuple[str, ...]
    description: str | None
    kind: str
    on_complete: str
    summary_prompt: str | None
    visibility: str
    flow: str
    timeout: str | None  # as written
    timeout_ms: int | None  # a duration
    timeout_at_ms: int | None  # an instant
    approve: tuple[str, ...]  # steps a person approves first (`nixx.nxc.approvals`)

    @property
    def id(self) -> str:
        return "decl:" + self.name


class Declarations:
    """Everything the folder declares: personas by qualified handle, channels by name."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.files = 0
        self.personas: dict[str, Persona] = {}
        self.channels: dict[str, ChannelDecl] = {}

    def find_persona(self, name: str, origin: str) -> Persona | None:
        if "/" in name:
            return self.personas.get(name)
        return self.personas.get(f"{origin}/{name}")

    def channel_by_id(self, channel_id: str) -> ChannelDecl | None:
        if channel_id.startswith("decl:"):
            return self.channels.get(channel_id[5:])
        return None


# -- loading -------------------------------------------------------------------------


class _TooBig(Exception):
    pass


def _plain(value: Any) -> Any:
    """YAML values as JSON values (timestamps become ISO strings), recursively, counting
    every value visited — an alias is visited each time it is used, which is exactly the
    expansion a reader of the data pays — so a bomb stops at `MAX_VALUES`."""
    budget = [MAX_VALUES]

    def walk(v: Any, depth: int) -> Any:
        budget[0] -= 1
        if budget[0] < 0:
            raise _TooBig(f"expands to more than {MAX_VALUES:,} values (YAML anchors and "
                          "aliases); write the values out")
        if depth > MAX_DEPTH:
            raise _TooBig(f"nests deeper than {MAX_DEPTH} levels")
        if isinstance(v, dict):
            return {str(k): walk(x, depth + 1) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, depth + 1) for x in v]
        if hasattr(v, "isoformat"):
            return v.isoformat()
        return v

    return walk(value, 0)


def _parse_yaml(path: str) -> dict[str, Any]:
    """{'data': ...} or {'error': message} for one file."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(MAX_FILE_BYTES + 1)
        if len(raw) > MAX_FILE_BYTES:
            return {"error": f"is larger than {MAX_FILE_BYTES // 1024} KiB; a declaration "
                             "file is a few lines of YAML"}
        text = raw.decode("utf-8")
        return {"data": _plain(yaml.load(text, Loader=loader))}
    except UnicodeDecodeError as exc:
        return {"error": f"not UTF-8 text: {exc}"}
    except OSError as exc:
        return {"error": f"cannot read: {exc}"}
    except _TooBig as exc:
        return {"error": str(exc)}
    except RecursionError:
        return {"error": "nests too deeply to read"}
    except yaml.YAMLError as exc:
        return {"error": "not valid YAML: " + " ".join(str(exc).split())}


def _stat_key(st: os.stat_result) -> list[int]:
    return [st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_ino]


def _read_raw(folder: str, cache_dir: str | None) -> dict[str, dict[str, Any]]:
    """file name → {'data'|'error'} for every `*.yaml`/`*.yml` in `folder`."""
    stats = {}
    with os.scandir(folder) as entries:
        for entry in entries:
            if entry.name.startswith(".") or not entry.name.endswith((".yaml", ".yml")):
                continue
            if entry.is_file():
                stats[entry.name] = _stat_key(entry.stat())
    cache_path = os.path.join(cache_dir, CACHE_FILE) if cache_dir is not None else None
    cached: dict[str, Any] = {}
    if cache_path is not None:
        try:
            with open(cache_path, encoding="utf-8") as fh:
                cached = json.load(fh)
        except (OSError, ValueError):
            cached = {}
        if not isinstance(cached, dict) or cached.get("version") != _CACHE_VERSION or cached.get(
            "folder"
        ) != folder:
            cached = {}
    old_files = cached.get("files", {})
    old_data = cached.get("data", {})
    raw: dict[str, dict[str, Any]] = {}
    dirty = set(stats) != set(old_files)
    for name, key in stats.items():
        if old_files.get(name) == key and name in old_data:
            raw[name] = old_data[name]
        else:
            raw[name] = _parse_yaml(os.path.join(folder, name))
            dirty = True
    if dirty and cache_dir is not None and cache_path is not None:
        body = {"version": _CACHE_VERSION, "folder": folder, "files": stats, "data": raw}
        tmp = os.path.join(cache_dir, f".{CACHE_FILE}.{os.getpid()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as fh:
                json.dump(body, fh)
            os.replace(tmp, cache_path)
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return raw


def load_declarations(
    folder: str | os.PathLike[str], origin: str, *, cache_dir: str | os.PathLike[str] | None = None
) -> Declarations:
    """Read and validate every declaration in `folder`; bare handles get `origin`."""
    folder = os.path.abspath(os.fspath(folder))
    cache_dir = None if cache_dir is None else os.fspath(cache_dir)
    decls = Declarations(folder)
    if not os.path.isdir(folder):
        return decls
    raw = _read_raw(folder, cache_dir)
    decls.files = len(raw)
    for name in sorted(raw):
        path = os.path.join(folder, name)
        entry = raw[name]
        if "error" in entry:
            raise ValidationError(f"{path}: {entry['error']}", file=str(path))
        if name in (WORKSPACE_FILE, "workspace.yml"):
            _workspace_origin(path, entry["data"])
            continue
        if name in (CHANNELS_FILE, "channels.yml"):
            for channel in _channels(path, entry["data"], origin):
                if channel.name in decls.channels:
                    raise _err(path, f"[{channel.name}].name", "is declared twice")
                decls.channels[channel.name] = channel
        else:
            persona = _persona(path, entry["data"], origin)
            other = decls.personas.get(persona.handle)
            if other is not None:
                raise _err(path, "handle", f"{persona.handle!r} is also declared in {other.file}")
            decls.personas[persona.handle] = persona
    return decls


def declared_origin(folder: str | os.PathLike[str], *,
                    cache_dir: str | os.PathLike[str] | None = None) -> str | None:
    """The handle origin `.nxs-personas/workspace.yaml` declares (`origin: team`), or None
    when the file is absent (one `stat`, no parse). Every clone of the repository reads
    the same file, so a bare handle is the same qualified handle on every machine."""
    folder = os.path.abspath(os.fspath(folder))
    for name in (WORKSPACE_FILE, "workspace.yml"):
        if os.path.isfile(os.path.join(folder, name)):
            break
    else:
        return None
    raw = _read_raw(folder, None if cache_dir is None else os.fspath(cache_dir))
    entry = raw.get(name)
    path = os.path.join(folder, name)
    if entry is None:
        return None
    if "error" in entry:
        raise ValidationError(f"{path}: {entry['error']}", file=str(path))
    return _workspace_origin(path, entry["data"])


def _workspace_origin(path: str, data: Any) -> str | None:
    if data is None:
        return None
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: workspace.yaml must be a YAML map (`origin: team`)",
                              file=str(path))
    unknown = sorted(set(data) - {"origin"})
    if unknown:
        raise _err(path, unknown[0], "is not a workspace field (origin)")
    origin = data.get("origin")
    if origin is None:
        return None
    if (not isinstance(origin, str) or not origin or "/" in origin
            or any(c in origin for c in " \t\r\n\x00,")):
        raise _err(path, "origin", "must be a name without '/', spaces or commas "
                   "(e.g. `origin: team`)")
    return origin


# -- validation ----------------------------------------------------------------------


def _err(path: str, fld: str, msg: str) -> ValidationError:
    return ValidationError(f"{path}: field `{fld}` {msg}", param=fld, file=str(path))


def _opt_str(path: str, data: dict[str, Any], key: str, fld: str | None = None) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _err(path, fld or key, f"must be a string, got {type(value).__name__}")
    return value


def _choice(path: str, data: dict[str, Any], key: str, choices: tuple[str, ...], fld: str) -> str:
    value = data.get(key, choices[0])
    if value not in choices:
        raise _err(path, fld, f"must be one of {', '.join(choices)}; got {value!r}")
    return str(value)  # one of `choices`


def _handle(path: str, value: Any, origin: str, fld: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _err(path, fld, f"must be a handle (`agent` or `origin/agent`), got {value!r}")
    try:
        return qualify(value, origin)
    except ValidationError as exc:
        raise _err(path, fld, exc.message) from exc


def _handles(path: str, value: Any, origin: str, fld: str, *, empty_ok: bool) -> tuple[str, ...]:
    if not isinstance(value, list) or (not value and not empty_ok):
        raise _err(path, fld, "must be a non-empty list of handles")
    out: list[str] = []
    for i, item in enumerate(value):
        handle = _handle(path, item, origin, f"{fld}[{i}]")
        if handle in out:
            raise _err(path, f"{fld}[{i}]", f"names {handle!r} twice")
        out.append(handle)
    return tuple(out)


def _argv(path: str, value: Any, fld: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value or not all(isinstance(a, str) for a in value):
        raise _err(path, fld, "must be a non-empty list of strings (an argv template)")
    import string

    for arg in value:
        try:
            names = [f for _, f, _, _ in string.Formatter().parse(arg) if f is not None]
        except ValueError as exc:
            raise _err(path, fld, f"has a bad template {arg!r}: {exc}") from exc
        for name in names:
            if name not in RUNTIME_PLACEHOLDERS:
                raise _err(
                    path, fld,
                    f"uses unknown placeholder {{{name}}}; known: "
                    + ", ".join("{" + p + "}" for p in sorted(RUNTIME_PLACEHOLDERS)),
                )
    return tuple(value)


def _runtime(path: str, value: Any) -> Runtime | None:
    if value is None:
        return None
    if isinstance(value, str):
        from nixx.nxc.delivery.presets import PRESETS

        preset = PRESETS.get(value)
        if preset is not None:
            return Runtime(start=preset.start, resume=preset.resume, format=preset.format,
                           preset=value)
        if value not in BUILTIN_RUNTIMES:
            names = sorted(BUILTIN_RUNTIMES | set(PRESETS))
            raise _err(
                path, "runtime",
                f"names no built-in runtime or preset ({', '.join(names)}); "
                "declare `{start: [...], resume: [...]}` for another one",
            )
        return Runtime(builtin=value)
    if not isinstance(value, dict):
        raise _err(path, "runtime", "must be a built-in name or a map with `start`, `resume`")
    unknown = set(value) - {"start", "resume", "transcript"}
    if unknown:
        raise _err(path, f"runtime.{sorted(unknown)[0]}",
                   "is not a runtime field (start, resume, transcript)")
    fmt = value.get("transcript", "stream-json")
    from nixx.nxc.delivery.stream_formats import FORMATS

    if fmt not in FORMATS:
        raise _err(path, "runtime.transcript", f"must be one of {', '.join(FORMATS)}; got {fmt!r}")
    if "start" not in value:
        raise _err(path, "runtime.start", "is required")
    start = _argv(path, value["start"], "runtime.start")
    resume = _argv(path, value["resume"], "runtime.resume") if "resume" in value else ()
    return Runtime(start=start, resume=resume, format=fmt)


def _addressable(path: str, value: Any, origin: str) -> Addressable:
    if value is None or value == "general":
        return Addressable()
    if value == "none":
        return Addressable(mode="none", humans=False)
    if isinstance(value, dict):
        unknown = set(value) - {"personas", "humans"}
        if unknown:
            raise _err(path, f"addressable.{sorted(unknown)[0]}", "is not allowed (personas, humans)")
        personas = _handles(path, value.get("personas", []), origin, "addressable.personas",
                            empty_ok=True)
        humans = value.get("humans", False)
        if not isinstance(humans, bool):
            raise _err(path, "addressable.humans", "must be true or false")
        return Addressable(mode="list", personas=personas, humans=humans)
    raise _err(path, "addressable", "must be `general`, `none` or {personas: [...], humans: bool}")


def _approve(path: str, value: Any, steps: tuple[str, ...], fld: str) -> tuple[str, ...]:
    """`approve:` — the steps a person approves first: a list out of `steps`."""
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) and v in steps for v in value):
        raise _err(path, fld, f"must be a list of steps out of {', '.join(steps)} "
                              f"(a person approves each before it is taken)")
    return tuple(dict.fromkeys(value))


def _persona(path: str, data: Any, origin: str) -> Persona:
    if not isinstance(data, dict):
        raise ValidationError(f"{path}: a persona file must be a YAML map", file=str(path))
    unknown = sorted(set(data) - _PERSONA_KEYS)
    if unknown:
        raise _err(path, unknown[0], "is not a persona field (" + ", ".join(sorted(_PERSONA_KEYS)) + ")")
    if "handle" not in data:
        raise _err(path, "handle", "is required")
    handle = _handle(path, data["handle"], origin, "handle")
    if handle.split("/", 1)[1].startswith("__"):
        raise _err(path, "handle", "may not start with `__` (reserved for engine identities)")
    try:
        check_agent(handle.split("/", 1)[1])
    except ValidationError as exc:
        raise _err(path, "handle", exc.message) from exc
    prompt = _opt_str(path, data, "system_prompt")
    if not prompt or not prompt.strip():
        raise _err(path, "system_prompt", "is required (a non-empty string)")
    tools = data.get("tools")
    if tools is not None:
        if not isinstance(tools, list) or not all(isinstance(t, str) and t for t in tools):
            raise _err(path, "tools", "must be a list of tool names ([] for none)")
        tools = tuple(tools)
    prime = data.get("prime", True)
    if not isinstance(prime, bool) and not (
        isinstance(prime, dict) and all(isinstance(v, bool) for v in prime.values())
    ):
        raise _err(path, "prime", "must be true, false or a map of product: true/false")
    shared_memory = data.get("shared_memory", True)
    if not isinstance(shared_memory, bool):
        raise _err(path, "shared_memory", "must be true or false")
    permissions = data.get("permissions")
    if permissions is not None and not isinstance(permissions, dict | list):
        raise _err(path, "permissions", "must be a map or a list")
    return Persona(
        handle=handle,
        file=path,
        system_prompt=prompt,
        job_title=_opt_str(path, data, "job_title"),
        job_description=_opt_str(path, data, "job_description"),
        expected_output=_opt_str(path, data, "expected_output"),
        model=_opt_str(path, data, "model"),
        stage=_opt_str(path, data, "stage"),
        tools=tools,
        permissions=permissions,
        prime=prime,
        addressable=_addressable(path, data.get("addressable"), origin),
        working_tree=_choice(path, data, "working_tree", ("shared", "exclusive"), "working_tree"),
        runtime=_runtime(path, data.get("runtime")),
        shared_memory=shared_memory,
        approve=_approve(path, data.get("approve"), PERSONA_STEPS, "approve"),
    )


def _channels(path: str, data: Any, origin: str) -> list[ChannelDecl]:
    if data is None:
        return []
    if not isinstance(data, list):
        raise ValidationError(f"{path}: channels.yaml must be a YAML list of channels",
                              file=str(path))
    out = []
    for i, item in enumerate(data):
        where = f"[{i}]"
        if not isinstance(item, dict):
            raise _err(path, where, "must be a map with at least `name` and `members`")
        name = item.get("name")
        if isinstance(name, str) and name:
            where = f"[{name}]"
        unknown = sorted(set(item) - _CHANNEL_KEYS)
        if unknown:
            raise _err(path, f"{where}.{unknown[0]}",
                       "is not a channel field (" + ", ".join(sorted(_CHANNEL_KEYS)) + ")")
        if not isinstance(name, str) or not name or any(
            not (c.isalnum() or c in "-_.") for c in name
        ):
            raise _err(path, f"{where}.name", "is required: letters, digits, `-`, `_`, `.`")
        kind = item.get("kind", "group")
        if kind == "direct":
            raise _err(
                path, f"{where}.kind",
                "may not be `direct`: direct channels are derived from two handles "
                "(nxc send --to <persona>), never declared; use `group` or `public`",
            )
        kind = _choice(path, item, "kind", ("group", "public"), f"{where}.kind")
        if "members" not in item:
            raise _err(path, f"{where}.members", "is required")
        members = _handles(path, item["members"], origin, f"{where}.members", empty_ok=False)
        expects_raw = item.get("expects", "all")
        if expects_raw == "all":
            expects = members
        else:
            expects = _handles(path, expects_raw, origin, f"{where}.expects", empty_ok=False)
            for handle in expects:
                if handle not in members:
                    raise _err(path, f"{where}.expects", f"names {handle!r}, who is not a member")
        on_complete = _choice(path, item, "on_complete", ("pass_through", "summarize"),
                              f"{where}.on_complete")
        summary_prompt = _opt_str(path, item, "summary_prompt", f"{where}.summary_prompt")
        if on_complete == "summarize" and not summary_prompt:
            raise _err(path, f"{where}.summary_prompt", "is required when on_complete is summarize")
        timeout = item.get("timeout")
        timeout_ms = timeout_at = None
        if timeout is not None:
            text = str(timeout)
            timeout_ms = parse_duration_ms(text)
            if timeout_ms is None:
                timeout_at = parse_instant_ms(text)
            if timeout_ms is None and timeout_at is None:
                raise _err(path, f"{where}.timeout",
                           f"must be a duration (30s, 10m, 2h, 1d, 1w) or an RFC3339 instant; got {text!r}")
        out.append(
            ChannelDecl(
                name=name,
                file=path,
                members=members,
                expects=expects,
                description=_opt_str(path, item, "description", f"{where}.description"),
                kind=kind,
                on_complete=on_complete,
                summary_prompt=summary_prompt,
                visibility=_choice(path, item, "visibility", ("requester_only", "all_members"),
                                   f"{where}.visibility"),
                flow=_choice(path, item, "flow", ("parallel", "sequential"), f"{where}.flow"),
                timeout=None if timeout is None else str(timeout),
                timeout_ms=timeout_ms,
                timeout_at_ms=timeout_at,
                approve=_approve(path, item.get("approve"), CHANNEL_STEPS, f"{where}.approve"),
            )
        )
    return out
