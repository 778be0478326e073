"""docs/cli.md documents every `nixx` verb and every option of each, read from the real
argparse parser (so a new verb or flag without docs fails here)."""

from __future__ import annotations

import argparse
import re
from pathlib import Path

from nixx.cli.nixx import build_parser

DOC = (Path(__file__).resolve().parents[1] / "docs" / "cli.md").read_text()


def _verbs(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    raise AssertionError("nixx has no sub-commands")


def _section(verb: str) -> str:
    match = re.search(rf"^## nixx {verb}\b(.*?)(?=^## |\Z)", DOC, re.S | re.M)
    assert match, f"docs/cli.md has no section '## nixx {verb}'"
    return match.group(1)


def test_every_verb_and_option_is_documented() -> None:
    verbs = _verbs(build_parser())
    assert {"serve", "chat", "ingest", "export", "import", "db", "reindex", "version"} <= set(verbs)
    for verb, sub in verbs.items():
        section = _section(verb)
        for action in sub._actions:
            for option in action.option_strings:
                if option.startswith("--") and option not in ("--help", "--json"):
                    assert option in section, f"`nixx {verb} {option}` is not in docs/cli.md"


def test_global_json_flag_and_exit_codes_are_documented() -> None:
    # every verb takes --json (checked in tests/server/test_startup_errors.py); the
    # page says so once, at the top
    assert "before or after the verb" in DOC.split("## nixx")[0]
    for code in ("0", "1", "2", "130"):
        assert re.search(rf"\b{code}\b", DOC.split("## nixx")[0]), f"exit code {code}"
