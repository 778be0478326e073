"""A view's SQL sits beside the reducer that owns it (docs/architecture.md).

The chat views (`nxc_*`, folded by `nixx.nxc.reducer.ChatReducer`) are queried only by
the reducer module and the read modules built on them; the delivery outcomes
(`nxd_outcomes`) only by `nixx.nxc.delivery.outcomes`. The engine, the delivery wing and
the shells ask those modules' functions instead. Read from the source with `ast`: every
string constant in code (docstrings left out) that names one of the tables.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import nixx

SRC = Path(nixx.__file__).parent

CHAT_VIEWS = re.compile(r"\bnxc_(channel_fields|members|channels|threads|thread_regs|"
                        r"thread_state|expected|messages|messages_fts|cursors)\b")
OUTCOMES = re.compile(r"\bnxd_outcomes\b")
CHAT_READERS = {"nixx.nxc.reducer", "nixx.nxc.threads", "nixx.nxc.access", "nixx.nxc.cursor",
                "nixx.nxc.status", "nixx.nxc.search"}
OUTCOME_READERS = {"nixx.nxc.delivery.outcomes"}


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _code_strings(tree: ast.AST) -> list[ast.Constant]:
    docstrings = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                docstrings.add(id(body[0].value))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str) and id(n) not in docstrings]


def _offenders(pattern: re.Pattern[str], allowed: set[str]) -> list[str]:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        module = _module(path)
        if module in allowed:
            continue
        for node in _code_strings(ast.parse(path.read_text(encoding="utf-8"))):
            if pattern.search(node.value):
                found.append(f"{module}:{node.lineno}: {node.value.strip()[:60]!r}")
    return found


def test_chat_views_are_queried_only_beside_their_reducer():
    assert _offenders(CHAT_VIEWS, CHAT_READERS) == []


def test_delivery_outcomes_are_queried_only_beside_their_reducer():
    assert _offenders(OUTCOMES, OUTCOME_READERS) == []


def test_the_rule_sees_a_query_where_it_is_not_allowed():
    # the reader is real: a query in code is caught, a docstring naming a table is not
    tree = ast.parse('"""nxc_messages in a docstring"""\nx = "SELECT pos FROM nxc_messages"')
    hits = [n.value for n in _code_strings(tree) if CHAT_VIEWS.search(n.value)]
    assert hits == ["SELECT pos FROM nxc_messages"]
