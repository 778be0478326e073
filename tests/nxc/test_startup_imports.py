"""What a one-shot `nxc` process imports (start-up is the goal of `bench/bench_nxc.py`):
modules that cost milliseconds and that the common verbs do not need stay unimported.
Checked in a real process, by module name, never by timing."""

from __future__ import annotations

import argparse
import gettext
import json
import subprocess
import sys

import pytest

from nixx.cli import nxc

from .conftest import cli_env, run

#: stdlib sqlite3 (the log is on apsw), typing / contextlib / locale (argparse's gettext),
#: pathlib, dataclasses, hashlib (OpenSSL), shutil, yaml (the declarations cache is JSON)
HEAVY = ("sqlite3", "typing", "contextlib", "locale", "pathlib", "dataclasses", "hashlib",
         "shutil", "yaml")

_PROBE = """
import json, sys
from nixx.cli.nxc import main
code = main(sys.argv[1:])
sys.stderr.write("\\nMODULES " + json.dumps(sorted(sys.modules)) + "\\n")
sys.exit(code)
"""


def _modules(ws, *argv: str) -> set[str]:
    # the first run parses the YAML declarations and caches them (.nxs/declarations.json)
    run("nxc", "list", cwd=ws.root, env=cli_env(NXC_ACTOR="alice"))
    proc = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=ws.root,
                          env=cli_env(NXC_ACTOR="alice"), capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr
    line = [x for x in proc.stderr.splitlines() if x.startswith("MODULES ")][-1]
    return set(json.loads(line[len("MODULES "):]))


@pytest.mark.parametrize("argv", [
    ("list", "--json"),
    ("send", "--to", "coder", "hello", "--json"),
    ("threads", "list", "--json"),
    ("prime", "--json"),
])
def test_common_verbs_import_nothing_heavy(ws, argv):
    loaded = _modules(ws, *argv)
    assert "nixx.nxc.engine" in loaded  # the probe really ran the verb
    assert sorted(m for m in HEAVY if m in loaded) == []


def test_list_does_not_import_what_only_other_verbs_use(ws):
    loaded = _modules(ws, "list", "--json")
    for module in ("nixx.nxc.threads", "nixx.nxc.cursor", "nixx.nxc.delivery.rounds",
                   "nixx.nxc.delivery.localstore", "nixx.nxc.status", "nixx.nxc.search"):
        assert module not in loaded, module


def test_argparse_translation_is_restored_after_parsing_also_on_a_usage_error(capsys):
    with pytest.raises(SystemExit) as exc:
        nxc.main(["list", "--no-such-flag"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
    assert argparse._ is gettext.gettext  # type: ignore[attr-defined]
    assert argparse.ngettext is gettext.ngettext  # type: ignore[attr-defined]


def test_the_steps_a_declaration_may_hold_are_the_steps_an_approval_names():
    from nixx.nxc import approvals, declarations

    assert set(approvals.STEPS) == set(declarations.PERSONA_STEPS) | set(
        declarations.CHANNEL_STEPS)
