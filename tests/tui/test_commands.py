"""Slash-command parsing: every command, and a one-line hint for every mistake."""

from __future__ import annotations

import pytest

from nixx.tui.commands import COMMANDS, Command, CommandError, parse, unescape_message


@pytest.mark.parametrize("line", ["hello", "what is /etc?", "", "  ", "//not a command"])
def test_messages_are_not_commands(line):
    assert parse(line) is None


def test_double_slash_sends_a_message_starting_with_slash():
    assert unescape_message("//help me") == "/help me"
    assert unescape_message("plain") == "plain"


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/help", Command("help")),
        ("  /HELP  ", Command("help")),
        ("/context", Command("context")),
        ("/summary", Command("summary", {"tags": None})),
        ("/summary Design, sqlite  fts", Command("summary", {"tags": ["design", "sqlite", "fts"]})),
        ("/search", Command("search", {"query": None})),
        ("/search what did we decide", Command("search", {"query": "what did we decide"})),
        ("/transcript 5", Command("transcript", {"start": 5, "end": None})),
        ("/transcript 5 9", Command("transcript", {"start": 5, "end": 9})),
        ("/clear", Command("clear")),
        ("/interval", Command("interval", {"n": None})),
        ("/interval 500", Command("interval", {"n": 500})),
        ("/recall", Command("recall", {"on": None})),
        ("/recall off", Command("recall", {"on": False})),
        ("/recall ON", Command("recall", {"on": True})),
        ("/intent", Command("intent", {"action": "show"})),
        (
            "/intent ship the TUI [today]",
            Command("intent", {"action": "set", "text": "ship the TUI [today]"}),
        ),
        ("/intent --clear", Command("intent", {"action": "clear"})),
        ("/intent --derive", Command("intent", {"action": "derive"})),
        (
            '/source "design notes"',
            Command("source", {"name": "design notes", "start": None, "end": None}),
        ),
        ("/source notes 3 8", Command("source", {"name": "notes", "start": 3, "end": 8})),
        ('/ingest "my notes.md"', Command("ingest", {"target": "my notes.md"})),
        ("/ingest https://example.org/a", Command("ingest", {"target": "https://example.org/a"})),
        ("/quit", Command("quit")),
        ("/exit", Command("quit")),
        ("/q", Command("quit")),
    ],
)
def test_parses(line, expected):
    assert parse(line) == expected


@pytest.mark.parametrize(
    ("line", "hint"),
    [
        ("/", "type a command after /"),
        ("/frobnicate", "unknown command /frobnicate (/help lists them)"),
        ("/serach x", "unknown command /serach; did you mean /search?"),
        ("/help me", "takes no arguments: usage: /help"),
        ("/transcript", "give a start id: usage: /transcript <id> [end_id]"),
        ("/transcript abc", "id must be a whole number, got 'abc'"),
        ("/transcript 0", "id must be 1 or more"),
        ("/transcript 9 5", "end_id 5 is before id 9"),
        ("/transcript 1 2 3", "too many arguments"),
        ("/interval -3", "n must be a whole number|n must be 1 or more"),
        ("/interval ten", "n must be a whole number, got 'ten'"),
        ("/recall maybe", "expected on or off"),
        ("/intent --bogus", "unknown option --bogus"),
        ("/source", "give the source a name"),
        ("/source notes 3", "give both start and end ids, or neither"),
        ('/source "unclosed', "no closing quotation"),
        ("/source notes 8 3", "end 3 is before start 8"),
        ("/ingest", "give one file or URL"),
        ("/ingest a b", "one file or URL at a time"),
        ("/clear now", "takes no arguments"),
    ],
)
def test_bad_commands_give_one_line_usage(line, hint):
    with pytest.raises(CommandError) as info:
        parse(line)
    message = str(info.value)
    assert "\n" not in message
    assert any(h in message for h in hint.split("|")), message


def test_every_command_has_usage_and_help():
    names = [c.name for c in COMMANDS]
    assert len(names) == len(set(names))
    for spec in COMMANDS:
        assert spec.usage.startswith("/" + spec.name)
        assert spec.help


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("/search client:claude-code what did we decide",
         Command("search", {"query": "what did we decide", "client": "claude-code"})),
        ("/search CLIENT:My-Script", Command("search", {"query": None, "client": "my-script"})),
        ("/search clients are happy", Command("search", {"query": "clients are happy"})),
    ],
)
def test_search_may_name_the_client_whose_rows_it_finds(line, expected):
    assert parse(line) == expected


def test_search_client_without_a_name_gives_usage():
    with pytest.raises(CommandError) as info:
        parse("/search client: kettle")
    assert "give the client's name after client:" in str(info.value)
    assert "/search [client:NAME] [query]" in str(info.value)
