"""Runtimes are declared, not hard-coded: the argv that starts and resumes a persona.

A persona's `runtime` is the built-in name ``nixx``, a preset for an agent CLI
(``claude-code``, ``codex``, ``gemini``: `nixx.nxc.delivery.presets`), or argv templates:

    runtime:
      start:  [claude, -p, "{prompt}", --output-format, stream-json, --verbose]
      resume: [claude, -p, "{prompt}", --resume, "{runtime_session}",
               --output-format, stream-json, --verbose]
      # optional: how its stdout is read into the transcript
      #   stream-json (Claude Code's JSON lines) | codex-json | gemini-json
      #   | nixx (normalised entries) | none

Placeholders (each argument is formatted on its own, so a value never splits into
several arguments and is never re-parsed): ``{prompt}`` the session prompt,
``{session}`` the internal session id, ``{runtime_session}`` the runtime's own id (bound
with `nxc session bind`, or read from the stream's init line), ``{thread}``,
``{handle}`` (the persona), ``{db}`` (the absolute log path), ``{workspace}`` (its root).

Resume uses `resume` when declared and, if it names ``{runtime_session}``, only once that
id is bound; otherwise it starts the runtime afresh with the resume prompt (which is
self-contained: the thread id and the answers).

The built-in ``nixx`` runtime is `python -m nixx.nxc.delivery.builtin_runtime` (see `nixx.nxc.delivery.builtin_runtime`): the
persona's model and tools through an OpenAI-compatible backend, plus nxc send/reply.
"""

from __future__ import annotations

import string
import sys

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.nxc.declarations import Runtime
    from nixx.nxc.delivery.shapes import StoredRuntime


def runtime_dict(runtime: Runtime) -> StoredRuntime:
    """The JSON form stored with a session (from a `declarations.Runtime`)."""
    if runtime.builtin:
        return {"builtin": runtime.builtin, "format": "nixx"}
    return {"start": list(runtime.start), "resume": list(runtime.resume),
            "format": runtime.format or "stream-json"}


def _fields(template: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(template) if f}


def fill(template: list[str], values: dict[str, str]) -> list[str]:
    return [arg.format_map(values) for arg in template]


def build_argv(
    runtime: StoredRuntime, *, mode: str, values: dict[str, str], prompt_file: str,
    backend_file: str | None,
) -> list[str]:
    """The argv of one run. `mode` is ``start`` or ``resume``."""
    if runtime.get("builtin") == "nixx":
        argv = [sys.executable, "-m", "nixx.nxc.delivery.builtin_runtime", "--session", values["session"],
                "--prompt-file", prompt_file]
        if backend_file:
            argv += ["--backend-file", backend_file]
        if mode == "resume":
            argv.append("--resume")
        return argv
    template = runtime["start"]
    if mode == "resume" and runtime.get("resume"):
        wants_id = any("runtime_session" in _fields(a) for a in runtime["resume"])
        if not wants_id or values.get("runtime_session"):
            template = runtime["resume"]
    return fill(list(template), values)
