"""`ToolRegistry`: the tools nixx offers the model, and their execution.

`specs()` is the OpenAI `tools` array; `execute(name, arguments)` runs one call with the
raw JSON arguments the model produced and always returns text. Mistakes the model can
make (bad JSON, an unknown tool, a missing or mistyped argument, a refused path, a
disabled tool) come back as ``error: ...`` lines it can read and correct; `execute`
never raises for them.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from nixx.config import Settings
from nixx.errors import NixxError
from nixx.store.base import MemoryStore
from nixx.tools import files, transcript
from nixx.tools.schema import ToolSpec, function_spec, object_schema
from nixx.values import MAX_ID, bad_json_value

log = logging.getLogger(__name__)

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "integer": (int,),
    "boolean": (bool,),
}

_ARTICLE = {"integer": "an"}


class ToolArgumentError(Exception):
    """A tool call's arguments do not fit the tool's schema (internal to the registry)."""


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    run: Callable[..., str]

    def spec(self) -> ToolSpec:
        return function_spec(self.name, self.description, self.parameters)

    def bind(self, args: dict[str, Any]) -> dict[str, Any]:
        """Check `args` against the schema; coerce integer strings ("5") to ints."""
        props: dict[str, Any] = self.parameters.get("properties", {})
        missing = [p for p in self.parameters.get("required", []) if args.get(p) is None]
        if missing:
            raise ToolArgumentError(
                f"{self.name} needs {', '.join(missing)}; got "
                f"{', '.join(sorted(args)) or 'no arguments'}"
            )
        bound: dict[str, Any] = {}
        for key, value in args.items():
            if key not in props:
                continue  # models add stray keys; ignoring them is kinder than failing
            if value is None:
                continue
            kind = props[key].get("type", "string")
            if kind == "integer" and isinstance(value, str) and value.strip().lstrip("-").isdigit():
                value = int(value)
            if kind == "integer" and isinstance(value, float) and value.is_integer():
                value = int(value)
            ok = isinstance(value, _JSON_TYPES.get(kind, (object,)))
            if kind == "integer" and isinstance(value, bool):
                ok = False
            if not ok:
                raise ToolArgumentError(
                    f"{self.name}: argument {key!r} must be {_ARTICLE.get(kind, 'a')} {kind}, got {json.dumps(value)[:80]}"
                )
            if kind == "integer" and not -MAX_ID <= value <= MAX_ID:
                raise ToolArgumentError(
                    f"{self.name}: argument {key!r} is out of range (at most {MAX_ID})"
                )
            bad = bad_json_value(value, key)
            if bad is not None:
                raise ToolArgumentError(f"{self.name}: argument {bad[0]!r} {bad[1]}")
            bound[key] = value
        return bound


class ToolRegistry:
    """The server-side tools, configured by `settings` and reading `store`."""

    def __init__(self, settings: Settings, store: MemoryStore) -> None:
        self.settings = settings
        self.store = store
        root = settings.workspace
        protected = settings.tools_protected
        allow = settings.tools_write_allow
        runs: dict[str, Callable[..., str]] = {
            "read_file": lambda path: files.read_file(
                root, path, allow_hard_links=settings.allow_hard_links
            ),
            "write_file": lambda path, content: files.write_file(
                root, path, content, protected=protected, allow=allow
            ),
            "list_dir": lambda path=".": files.list_dir(root, path),
            "delete_file": lambda path: files.delete_file(
                root, path, protected=protected, allow=allow
            ),
        }
        all_tools = [
            *(
                Tool(name, files.TOOL_SCHEMAS[name][0], files.TOOL_SCHEMAS[name][1], run)
                for name, run in runs.items()
            ),
            Tool(
                "search_transcript",
                "Full-text search of everything said in past conversations (the episodic "
                "buffer). Returns matching rows with their ids, best first.",
                object_schema(
                    {
                        "query": {"type": "string", "description": "words to look for"},
                        "limit": {
                            "type": "integer",
                            "description": f"rows to return (default 10, at most "
                            f"{transcript.SEARCH_MAX_LIMIT})",
                        },
                    },
                    ["query"],
                ),
                lambda query, limit=10: transcript.search_transcript(store, query, limit),
            ),
            Tool(
                "view_transcript",
                "Read the conversation transcript rows from id `start` to id `end` "
                f"(inclusive; at most {transcript.VIEW_MAX_ROWS} rows per call).",
                object_schema(
                    {
                        "start": {"type": "integer", "description": "first row id"},
                        "end": {"type": "integer", "description": "last row id (optional)"},
                    },
                    ["start"],
                ),
                lambda start, end=None: transcript.view_transcript(store, start, end),
            ),
        ]
        disabled = {
            "write_file": not settings.tools_write,
            "delete_file": not settings.tools_delete,
        }
        self._tools = {t.name: t for t in all_tools if not disabled.get(t.name)}
        self._disabled = {name for name, off in disabled.items() if off}

    def specs(self) -> list[ToolSpec]:
        """The OpenAI `tools` array for the enabled tools."""
        return [tool.spec() for tool in self._tools.values()]

    def names(self) -> set[str]:
        return set(self._tools)

    def execute(self, name: str, arguments: str) -> str:
        """Run tool `name` with the model's raw JSON `arguments`; always returns text."""
        tool = self._tools.get(name)
        if tool is None:
            if name in self._disabled:
                return f"error: the tool {name} is disabled on this server"
            return f"error: unknown tool {name!r}; available: {', '.join(sorted(self._tools))}"
        try:
            args = json.loads(arguments) if arguments and arguments.strip() else {}
        except (json.JSONDecodeError, TypeError) as exc:
            return f"error: the arguments of {name} are not valid JSON ({exc}); send an object"
        if not isinstance(args, dict):
            return f"error: the arguments of {name} must be a JSON object"
        try:
            return tool.run(**tool.bind(args))
        except ToolArgumentError as exc:
            return f"error: {exc}"
        except NixxError as exc:
            return f"error: {exc.message}"
        except Exception as exc:  # a tool bug must not kill the turn; log it, tell the model
            log.exception("tool %s failed", name)
            return f"error: {name} failed unexpectedly ({type(exc).__name__})"
