"""Slash commands of the terminal chat: the table, and parsing a line into a `Command`.

Parsing is pure (no I/O), so every rule is unit-tested. `parse(line)` returns None for a
line that is a chat message, a `Command` for a well-formed command, and raises
`CommandError` — whose message is one line: what was wrong and the usage — otherwise.
A line starting with `//` is a message that starts with `/` (the first slash is dropped).
"""

from __future__ import annotations

import difflib
import re
import shlex
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class CommandSpec:
    name: str
    usage: str
    help: str
    aliases: tuple[str, ...] = ()


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("help", "/help", "List the commands and key bindings"),
    CommandSpec("context", "/context", "Show the system prompt the next turn sends"),
    CommandSpec(
        "summary",
        "/summary [tag ...]",
        "Summarise now (asks for tags when none are given)",
    ),
    CommandSpec(
        "search",
        "/search [client:NAME] [query]",
        "Search by words and meaning (default: last message)",
    ),
    CommandSpec("transcript", "/transcript <id> [end_id]", "Show buffer rows id..end_id"),
    CommandSpec("clear", "/clear", "New session (the buffer keeps everything)"),
    CommandSpec("interval", "/interval [n]", "Show or set the summary threshold (words)"),
    CommandSpec("recall", "/recall [on|off]", "Toggle or set episodic recall"),
    CommandSpec(
        "intent",
        "/intent [text | --clear | --derive]",
        "Show, set, clear or re-derive the intent",
    ),
    CommandSpec(
        "source",
        '/source "name" [start end]',
        "Keep rows (default: this session) as a source",
    ),
    CommandSpec("ingest", "/ingest <file|url>", "Read a file or web page into memory"),
    CommandSpec(
        "forget",
        "/forget <query | buffer:ID ...>",
        "Find and delete from memory (asks first)",
    ),
    CommandSpec("approvals", "/approvals [--all]",
                "Steps your agents wait to take until you approve them"),
    CommandSpec("approve", "/approve <id> [note]", "Approve a held step: it goes on"),
    CommandSpec("deny", "/deny <id> [note]", "Deny a held step: its thread is told why"),
    CommandSpec("quit", "/quit", "Leave nixx chat", aliases=("exit", "q")),
)

_BY_NAME: dict[str, CommandSpec] = {}
for _spec in COMMANDS:
    _BY_NAME[_spec.name] = _spec
    for _alias in _spec.aliases:
        _BY_NAME[_alias] = _spec


class CommandError(Exception):
    """A malformed command. `str()` is the one-line hint shown to the user."""


@dataclass(frozen=True)
class Command:
    name: str
    args: dict[str, Any] = field(default_factory=dict)


def spec(name: str) -> CommandSpec:
    return _BY_NAME[name]


def is_command(line: str) -> bool:
    stripped = line.lstrip()
    return stripped.startswith("/") and not stripped.startswith("//")


def unescape_message(line: str) -> str:
    """`//text` is sent as the message `/text`."""
    stripped = line.lstrip()
    return stripped[1:] if stripped.startswith("//") else line


def parse(line: str) -> Command | None:
    """Parse one input line. None when it is a chat message."""
    if not is_command(line):
        return None
    body = line.strip()[1:]
    word, _, rest = body.partition(" ")
    rest = rest.strip()
    name = word.lower()
    if not name:
        raise CommandError("type a command after /, e.g. /help")
    found = _BY_NAME.get(name)
    if found is None:
        close = difflib.get_close_matches(name, list(_BY_NAME), n=1)
        hint = f"; did you mean /{close[0]}?" if close else ""
        raise CommandError(f"unknown command /{name}{hint} (/help lists them)")
    try:
        return Command(found.name, _PARSERS[found.name](rest))
    except _Usage as exc:
        detail = f"{exc}: " if str(exc) else ""
        raise CommandError(f"{detail}usage: {found.usage}") from None


class _Usage(Exception):
    pass


def _none(rest: str) -> dict[str, Any]:
    if rest:
        raise _Usage("takes no arguments")
    return {}


def _split(rest: str) -> list[str]:
    try:
        return shlex.split(rest)
    except ValueError as exc:  # unbalanced quotes
        raise _Usage(str(exc).lower()) from None


def _positive_int(text: str, what: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise _Usage(f"{what} must be a whole number, got {text!r}") from None
    if value < 1:
        raise _Usage(f"{what} must be 1 or more")
    return value


def _summary(rest: str) -> dict[str, Any]:
    if not rest:
        return {"tags": None}
    tags = [t.strip().lower() for t in rest.replace(",", " ").split() if t.strip()]
    return {"tags": tags}


def _search(rest: str) -> dict[str, Any]:
    """`/search words`; `/search client:claude-code words` finds only the rows that
    client's turns wrote (its own name or an origin; the server checks the name)."""
    first, _, after = rest.partition(" ")
    if first.lower().startswith("client:"):
        name = first[len("client:"):].lower()
        if not name:
            raise _Usage("give the client's name after client: (claude-code, my-script, tui)")
        return {"query": after.strip() or None, "client": name}
    return {"query": rest or None}


def _transcript(rest: str) -> dict[str, Any]:
    parts = rest.split()
    if not 1 <= len(parts) <= 2:
        raise _Usage("give a start id" if not parts else "too many arguments")
    start = _positive_int(parts[0], "id")
    end = _positive_int(parts[1], "end_id") if len(parts) == 2 else None
    if end is not None and end < start:
        raise _Usage(f"end_id {end} is before id {start}")
    return {"start": start, "end": end}


def _interval(rest: str) -> dict[str, Any]:
    if not rest:
        return {"n": None}
    if len(rest.split()) > 1:
        raise _Usage("too many arguments")
    return {"n": _positive_int(rest, "n")}


def _recall(rest: str) -> dict[str, Any]:
    value = rest.lower()
    if not value:
        return {"on": None}
    if value in ("on", "true", "yes", "1"):
        return {"on": True}
    if value in ("off", "false", "no", "0"):
        return {"on": False}
    raise _Usage(f"expected on or off, got {rest!r}")


def _intent(rest: str) -> dict[str, Any]:
    if not rest:
        return {"action": "show"}
    if rest == "--clear":
        return {"action": "clear"}
    if rest == "--derive":
        return {"action": "derive"}
    if rest.startswith("--"):
        raise _Usage(f"unknown option {rest.split()[0]}")
    return {"action": "set", "text": rest}


def _source(rest: str) -> dict[str, Any]:
    parts = _split(rest)
    if not parts or not parts[0].strip():
        raise _Usage("give the source a name")
    if len(parts) not in (1, 3):
        raise _Usage("give both start and end ids, or neither")
    args: dict[str, Any] = {"name": parts[0].strip(), "start": None, "end": None}
    if len(parts) == 3:
        args["start"] = _positive_int(parts[1], "start")
        args["end"] = _positive_int(parts[2], "end")
        if args["end"] < args["start"]:
            raise _Usage(f"end {args['end']} is before start {args['start']}")
    return args


def _ingest(rest: str) -> dict[str, Any]:
    parts = _split(rest)
    if len(parts) != 1:
        raise _Usage("give one file or URL" if not parts else "one file or URL at a time")
    return {"target": parts[0]}


_REF = re.compile(r"^(buffer|summary|source|memory):([1-9][0-9]*)$")


def _forget(rest: str) -> dict[str, Any]:
    """`/forget words...` searches; `/forget buffer:12 summary:3` names items."""
    words = rest.split()
    if not words:
        raise _Usage("say what to forget")
    if all(_REF.match(w.lower()) for w in words):
        return {"query": None, "ids": [w.lower() for w in words]}
    if any(_REF.match(w.lower()) for w in words):
        raise _Usage("give either words to search for or item ids, not both")
    return {"query": rest, "ids": None}


def _approvals(rest: str) -> dict[str, Any]:
    if rest not in ("", "--all"):
        raise _Usage(f"unknown option {rest.split()[0]}")
    return {"all": rest == "--all"}


def _decision(rest: str) -> dict[str, Any]:
    """`/approve a-… [note]` (the note is the rest of the line, quotes not needed)."""
    approval, _, note = rest.partition(" ")
    if not approval:
        raise _Usage("give the approval id (/approvals lists them)")
    return {"approval": approval, "note": note.strip()}


_PARSERS = {
    "help": _none,
    "context": _none,
    "summary": _summary,
    "search": _search,
    "transcript": _transcript,
    "clear": _none,
    "interval": _interval,
    "recall": _recall,
    "intent": _intent,
    "source": _source,
    "ingest": _ingest,
    "forget": _forget,
    "approvals": _approvals,
    "approve": _decision,
    "deny": _decision,
    "quit": _none,
}
