"""docs/commands.md matches the code: every verb and long option of the `nxc` and `nxs`
argument parsers (read from the parsers themselves, so a new verb or flag must be
documented), every exit code, and every `NXC_*` variable read anywhere in src/."""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
DOC = ROOT / "docs" / "commands.md"
SRC = ROOT / "src" / "nixx"
COMMON = {"--json", "--db", "--help"}


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _parsers():
    from nixx.cli import nxc, nxs

    return {"nxc": nxc.build_parser(), "nxs": nxs.build_parser()}


def _walk(parser: argparse.ArgumentParser, path: str):
    """Yield (verb path, parser, has sub-verbs) for every verb under `parser`."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                child = f"{path} {name}"
                nested = any(isinstance(a, argparse._SubParsersAction) for a in sub._actions)
                yield child, sub, nested
                yield from _walk(sub, child)


def _long_options(parser: argparse.ArgumentParser) -> set[str]:
    return {o for a in parser._actions for o in a.option_strings if o.startswith("--")}


def _rows(doc: str, path: str) -> list[str]:
    """Table rows whose first cell is `path ...` (the verb, then its arguments)."""
    pattern = re.compile(r"^\| `" + re.escape(path) + r"(?:[ `])")
    return [line for line in doc.splitlines() if pattern.match(line)]


def _verbs() -> list[tuple[str, argparse.ArgumentParser, bool]]:
    out = []
    for prog, parser in _parsers().items():
        out.extend(_walk(parser, prog))
    return out


def test_the_parsers_have_the_verbs_we_expect_to_walk():
    paths = {p for p, _, _ in _verbs()}
    # a sanity floor, so that a broken walk cannot pass the tests below vacuously
    assert {"nxc send", "nxc reply", "nxc threads show", "nxc session bind",
            "nxc transcript prune", "nxs init", "nxs log"} <= paths


@pytest.mark.parametrize("path", [p for p, _, nested in _verbs() if not nested])
def test_every_verb_and_long_option_is_in_its_row(path):
    parser = next(p for v, p, _ in _verbs() if v == path)
    rows = _rows(_doc(), path)
    assert rows, f"docs/commands.md has no table row for `{path}`"
    row = " ".join(rows)
    missing = sorted(o for o in _long_options(parser) - COMMON if o not in row)
    assert not missing, f"`{path}`: options {missing} are not in its row of docs/commands.md"


def test_common_options_are_documented_once_for_every_verb():
    doc = _doc()
    common = doc[doc.index("## Common to every verb"):doc.index("| exit code |")]
    for option in ("--json", "--db PATH"):
        assert f"`{option}`" in common
    for path, parser, _ in _verbs():
        assert {"--json", "--db"} <= _long_options(parser), f"`{path}` lacks --json/--db"


def test_every_exit_code_is_in_the_exit_code_table():
    import importlib
    import pkgutil

    import nixx.cli

    # done, NixxError, usage (argparse), interrupted, closed pipe (nixx.cli.output)
    codes = {0, 1, 2, 130, 141}
    shells = [m.name for m in pkgutil.iter_modules(nixx.cli.__path__)
              if m.name.startswith(("nxc", "nxs"))]
    assert {"nxc", "nxs", "nxc_delivery"} <= set(shells)
    for name in shells:
        module = importlib.import_module(f"nixx.cli.{name}")
        codes |= {v for k, v in vars(module).items() if k.startswith("EXIT_")}
    doc = _doc()
    table = doc[doc.index("| exit code |"):]
    table = table[:table.index("\n\n")]
    documented = {int(m) for m in re.findall(r"^\| (\d+) \|", table, re.M)}
    assert codes == documented


def test_help_lists_every_top_level_verb():
    for prog, parser in _parsers().items():
        out = subprocess.run([sys.executable, "-m", f"nixx.cli.{prog}", "--help"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        top = [p.split()[1] for p, _, _ in _walk(parser, prog) if len(p.split()) == 2]
        for verb in top:
            assert re.search(rf"^\s+{re.escape(verb)}\s", out.stdout, re.M), (prog, verb)
            assert f"`{prog} {verb}" in _doc(), f"`{prog} {verb}` is not in docs/commands.md"


def test_every_error_kind_the_shells_can_raise_is_listed():
    import nixx.errors as errors

    classes = {name: cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.NixxError)}
    raised = set()
    for folder in ("log", "nxc", "sync"):
        for path in (SRC / folder).rglob("*.py"):
            raised |= set(re.findall(r"raise (\w+)\(", path.read_text("utf-8")))
    for path in (SRC / "cli").glob("nx*.py"):
        raised |= set(re.findall(r"raise (\w+)\(", path.read_text("utf-8")))
    kinds = {classes[n].kind for n in raised if n in classes}
    assert {"validation", "not_found", "forbidden"} <= kinds  # the scan works
    doc = _doc()
    listed = doc[doc.index("Kinds:"):doc.index("| exit code |")]
    missing = sorted(k for k in kinds if f"`{k}`" not in listed)
    assert not missing, f"error kinds raised by nxs/nxc but not listed in docs/commands.md: {missing}"


def _env_table(doc: str) -> set[str]:
    section = doc[doc.index("### Environment variables"):]
    section = section[:section.index("\n## ")]
    return set(re.findall(r"^\| `(NXC_[A-Z0-9_]+)` \|", section, re.M))


def _read_in_src() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(SRC.rglob("*.py")):
        for name in re.findall(r"""["'](NXC_[A-Z0-9_]+)["']""", path.read_text("utf-8")):
            found.setdefault(name, []).append(str(path.relative_to(ROOT)))
    return found


def test_every_nxc_variable_in_src_is_in_the_environment_table():
    in_src = _read_in_src()
    assert {"NXC_DB", "NXC_ACTOR", "NXC_SESSION"} <= set(in_src)  # the grep works
    table = _env_table(_doc())
    missing = {n: files for n, files in in_src.items() if n not in table}
    assert not missing, f"NXC_ variables read in src/ but not in docs/commands.md: {missing}"
    stale = table - set(in_src)
    assert not stale, f"docs/commands.md documents variables nothing reads: {sorted(stale)}"
