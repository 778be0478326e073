"""`nixx mcp install` and `nxs init`'s hook, run twice as real processes on a project whose
config files already hold other entries: theirs are kept, exactly one of ours is added."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from .conftest import source_path

EXISTING = {
    ".mcp.json": {"mcpServers": {"github": {"command": "gh-mcp", "args": []}},
                  "other": {"kept": True}},
    ".cursor/mcp.json": {"mcpServers": {"db": {"url": "http://127.0.0.1:9/mcp"}}},
    ".gemini/settings.json": {"theme": "Dracula", "mcpServers": {"git": {"command": "uvx",
                                                                          "args": ["mcp-git"]}}},
}
# what is written: the executables beside the interpreter that runs the CLI (the venv's)
NIXX = str(Path(sys.executable).parent / "nixx")
NXS = str(Path(sys.executable).parent / "nxs")
CODEX = '# my codex settings\nmodel = "o4"\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'


URL = "http://127.0.0.1:8420"  # the default settings' server


def store(cwd: Path) -> Path:
    """The test's NIXX_HOME: beside the project, in the test's tmp_path (whichever folder
    below it the command runs in)."""
    return next(p for p in (cwd, *cwd.parents) if p.name.startswith("test_")) / "nixx-home"


def run(tool: str, *args: str, cwd: Path,
        env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd), "NIXX_HOME": str(store(cwd)),
           **source_path(), **(env or {})}
    return subprocess.run([sys.executable, "-m", f"nixx.cli.{tool}", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=60)


def reach(cwd: Path) -> dict[str, str]:
    """The env every entry carries: the home and the server's URL."""
    return {"NIXX_HOME": str(store(cwd).resolve()), "NIXX_MCP_URL": URL}


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    for rel, data in EXISTING.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(json.dumps(data, indent=4))
    (root / ".codex").mkdir()
    (root / ".codex" / "config.toml").write_text(CODEX)
    (root / "src").mkdir()
    return root


def test_mcp_install_twice_keeps_other_entries_and_adds_one_nixx(repo: Path) -> None:
    first = run("nixx", "mcp", "install", "--json", cwd=repo / "src")  # finds the git top
    assert first.returncode == 0, first.stderr
    out = json.loads(first.stdout)
    assert out["root"] == str(repo)
    assert [(c["client"], c["action"]) for c in out["changes"]] == [
        ("claude-code", "added"), ("cursor", "added"), ("codex", "added"), ("gemini", "added")]
    after_first = {p: (repo / p).read_text() for p in [*EXISTING, ".codex/config.toml"]}

    second = run("nixx", "mcp", "install", cwd=repo)
    assert second.returncode == 0, second.stderr
    assert second.stdout.count("already set up") == 4
    assert {p: (repo / p).read_text() for p in after_first} == after_first  # nothing rewritten

    claude = json.loads((repo / ".mcp.json").read_text())
    assert claude["other"] == {"kept": True}
    assert claude["mcpServers"] == {
        "github": {"command": "gh-mcp", "args": []},
        "nixx": {"type": "stdio", "command": NIXX, "args": ["mcp"], "env": reach(repo)},
    }
    cursor = json.loads((repo / ".cursor/mcp.json").read_text())["mcpServers"]
    assert cursor == {"db": {"url": "http://127.0.0.1:9/mcp"},
                      "nixx": {"command": NIXX, "args": ["mcp"], "env": reach(repo)}}
    gemini = json.loads((repo / ".gemini/settings.json").read_text())
    assert gemini["theme"] == "Dracula" and set(gemini["mcpServers"]) == {"git", "nixx"}
    codex_text = (repo / ".codex/config.toml").read_text()
    assert codex_text.startswith(CODEX) and codex_text.count("[mcp_servers.nixx]") == 1
    codex = tomllib.loads(codex_text)
    assert codex["model"] == "o4"
    assert codex["mcp_servers"] == {"docs": {"command": "docs-mcp"},
                                    "nixx": {"command": NIXX, "args": ["mcp"], "env": reach(repo)}}


def test_mcp_install_dry_run_one_client_and_refusals(repo: Path, tmp_path: Path) -> None:
    dry = run("nixx", "mcp", "install", "--client", "claude-code", "--dry-run", cwd=repo)
    assert dry.returncode == 0 and dry.stdout.splitlines()[0] == \
        "claude-code: would add the nixx entry to .mcp.json"
    assert dry.stdout.splitlines()[1] == (f"the entries reach {URL} with NIXX_HOME="
                                          f"{store(repo).resolve()}; the API key: none is set")
    assert json.loads((repo / ".mcp.json").read_text()) == EXISTING[".mcp.json"]

    empty = tmp_path / "empty"
    empty.mkdir()
    made = run("nixx", "mcp", "install", "--client", "cursor", "--client", "codex", cwd=empty)
    assert made.returncode == 0, made.stderr
    assert made.stdout.splitlines()[:2] == ["cursor: created .cursor/mcp.json",
                                            "codex: created .codex/config.toml"]
    assert not (empty / ".mcp.json").exists()

    theirs = {"mcpServers": {"nixx": {"command": "/opt/nixx/bin/nixx", "args": ["mcp"]}}}
    (repo / ".mcp.json").write_text(json.dumps(theirs))
    kept = run("nixx", "mcp", "install", "--client", "claude-code", cwd=repo)
    assert "kept the existing nixx entry" in kept.stdout
    assert json.loads((repo / ".mcp.json").read_text()) == theirs
    forced = run("nixx", "mcp", "install", "--client", "claude-code", "--force", cwd=repo)
    assert "replaced" in forced.stdout
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["nixx"]["command"] == NIXX

    (repo / ".cursor/mcp.json").write_text("{not json")
    broken = run("nixx", "mcp", "install", "--client", "cursor", cwd=repo)
    assert broken.returncode == 1
    assert ".cursor/mcp.json is not valid JSON" in broken.stderr
    assert (repo / ".cursor/mcp.json").read_text() == "{not json"
    usage = run("nixx", "mcp", "install", "--client", "vim", cwd=repo)
    assert usage.returncode == 2 and "invalid choice" in usage.stderr


def test_nxs_init_twice_keeps_other_hooks_and_adds_one_prime_hook(repo: Path) -> None:
    settings = repo / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {
        "permissions": {"allow": ["Bash(make test)"]},
        "hooks": {
            "SessionStart": [{"matcher": "startup", "hooks": [{"type": "command",
                                                                "command": "echo hello"}]}],
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "lint"}]}],
        },
    }
    settings.write_text(json.dumps(theirs))
    gemini = repo / ".gemini" / "settings.json"  # the repo fixture's: a theme and a server
    first = run("nxs", "init", "--json", cwd=repo / "src")
    assert first.returncode == 0, first.stderr
    hooks = json.loads(first.stdout)["hooks"]
    assert [(h["file"], h["command"], h["action"]) for h in hooks] == [
        (str(settings), f"{NXS} prime", "added"), (str(gemini), f"{NXS} prime --hook gemini",
                                                  "added")]
    second = run("nxs", "init", cwd=repo)
    assert second.returncode == 0
    assert second.stdout.count(f"SessionStart already runs `{NXS} prime") == 2

    data = json.loads(settings.read_text())
    assert data["permissions"] == theirs["permissions"]
    assert data["hooks"]["PreToolUse"] == theirs["hooks"]["PreToolUse"]
    assert data["hooks"]["SessionStart"] == [
        *theirs["hooks"]["SessionStart"],
        {"hooks": [{"type": "command", "command": f"{NXS} prime"}]},
    ]
    gdata = json.loads(gemini.read_text())
    assert gdata["theme"] == "Dracula" and set(gdata["mcpServers"]) == {"git"}
    assert gdata["hooks"] == {"SessionStart": [{"hooks": [
        {"name": "nxs-prime", "type": "command", "command": f"{NXS} prime --hook gemini"}]}]}

    # what the hooks print: the prime block of this workspace (text; JSON for Gemini CLI)
    primed = run("nxs", "prime", cwd=repo / "src")
    assert primed.returncode == 0 and primed.stdout.startswith("nxc: you are ")
    assert "Unread: none." in primed.stdout and "You owe no replies." in primed.stdout
    as_gemini = run("nxs", "prime", "--hook", "gemini", cwd=repo / "src")
    assert json.loads(as_gemini.stdout) == {"hookSpecificOutput": {
        "hookEventName": "SessionStart", "additionalContext": primed.stdout.rstrip("\n")}}


def test_nxs_init_no_hooks_writes_no_client_file(tmp_path: Path) -> None:
    out = run("nxs", "init", "--no-hooks", "--json", cwd=tmp_path)
    assert out.returncode == 0 and json.loads(out.stdout)["hooks"] == []
    assert not (tmp_path / ".claude").exists() and not (tmp_path / ".gemini").exists()


def test_entries_nixx_wrote_with_the_bare_name_become_absolute(repo: Path) -> None:
    (repo / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"nixx": {"type": "stdio", "command": "nixx", "args": ["mcp"]}}}))
    claude = repo / ".claude" / "settings.json"
    claude.parent.mkdir()
    claude.write_text(json.dumps({"hooks": {"SessionStart": [
        {"hooks": [{"type": "command", "command": "nxs prime"}]}]}}))
    out = run("nixx", "mcp", "install", "--client", "claude-code", "--json", cwd=repo)
    assert json.loads(out.stdout)["changes"][0]["action"] == "replaced"
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["nixx"]["command"] == NIXX
    init = run("nxs", "init", "--json", cwd=repo)
    assert init.returncode == 0, init.stderr
    assert json.loads(init.stdout)["hooks"][0]["action"] == "replaced"
    assert json.loads(claude.read_text())["hooks"]["SessionStart"] == [
        {"hooks": [{"type": "command", "command": f"{NXS} prime"}]}]  # replaced, not doubled


def test_no_runnable_executable_is_a_warning_and_the_bare_name(tmp_path: Path) -> None:
    """A Python with no nixx beside it and none on PATH (a venv of its own that imports
    nixx from the source tree): the installer says so. Then a `nixx` that does not run."""
    import site
    import venv

    other = tmp_path / "other-venv"
    venv.create(other, with_pip=False)
    python = other / "bin" / "python"
    source = Path(__file__).resolve().parents[2] / "src"
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
           "PYTHONPATH": os.pathsep.join([str(source), *site.getsitepackages()])}
    project = tmp_path / "p"
    project.mkdir()

    def install() -> subprocess.CompletedProcess[str]:
        return subprocess.run([str(python), "-m", "nixx.cli.nixx", "mcp", "install", "--client",
                               "cursor", "--force"], cwd=project, env=env,
                              capture_output=True, text=True, timeout=60)

    missing = install()
    assert missing.returncode == 0, missing.stderr
    assert missing.stderr.startswith("warning: no nixx executable was found beside")
    assert json.loads((project / ".cursor/mcp.json").read_text())["mcpServers"]["nixx"][
        "command"] == "nixx"

    broken = other / "bin" / "nixx"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    failing = install()
    assert failing.returncode == 0
    assert failing.stderr == f"warning: {broken} did not run (exited 3): the client will fail " \
                             "to start it\n"
    assert json.loads((project / ".cursor/mcp.json").read_text())["mcpServers"]["nixx"][
        "command"] == str(broken)


def test_each_client_entry_carries_the_home_the_url_and_the_key_by_name(tmp_path: Path) -> None:
    """The key set in the environment only: Codex forwards it by name (`env_vars`), the JSON
    clients get their own reference syntax; its value is in no file."""
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    key = "only-in-my-shell-0123456789"
    env = {"NIXX_API_KEY": key, "NIXX_PORT": "9123"}
    done = run("nixx", "mcp", "install", "--json", cwd=project, env=env)
    assert done.returncode == 0, done.stderr
    assert {c["key"] for c in json.loads(done.stdout)["changes"]} == {"environment"}
    base = {"NIXX_HOME": str(store(project).resolve()), "NIXX_MCP_URL": "http://127.0.0.1:9123"}
    servers = {rel: json.loads((project / rel).read_text())["mcpServers"]["nixx"]["env"]
               for rel in (".mcp.json", ".cursor/mcp.json", ".gemini/settings.json")}
    assert servers == {".mcp.json": {**base, "NIXX_API_KEY": "${NIXX_API_KEY:-}"},
                       ".cursor/mcp.json": {**base, "NIXX_API_KEY": "${env:NIXX_API_KEY}"},
                       ".gemini/settings.json": {**base, "NIXX_API_KEY": "${NIXX_API_KEY}"}}
    codex = tomllib.loads((project / ".codex/config.toml").read_text())["mcp_servers"]["nixx"]
    assert codex == {"command": NIXX, "args": ["mcp"], "env": base, "env_vars": ["NIXX_API_KEY"]}
    assert not any(key in (project / rel).read_text() for rel in FILES_WRITTEN)

    # the key in the home's config.toml: nothing about it is written (nixx mcp reads it there)
    store(project).mkdir(exist_ok=True)
    (store(project) / "config.toml").write_text(f'api_key = "{key}"\n')
    again = run("nixx", "mcp", "install", "--json", "--client", "codex", "--client", "cursor",
                cwd=project, env={"NIXX_PORT": "9123"})
    assert [(c["action"], c["key"]) for c in json.loads(again.stdout)["changes"]] == [
        ("replaced", "config"), ("replaced", "config")]
    assert json.loads((project / ".cursor/mcp.json").read_text())["mcpServers"]["nixx"][
        "env"] == base
    codex_text = (project / ".codex/config.toml").read_text()
    assert tomllib.loads(codex_text)["mcp_servers"]["nixx"] == {
        "command": NIXX, "args": ["mcp"], "env": base}
    assert codex_text.count("[mcp_servers.nixx]") == 1


FILES_WRITTEN = (".mcp.json", ".cursor/mcp.json", ".gemini/settings.json", ".codex/config.toml")


def test_with_key_writes_the_value_and_says_so(tmp_path: Path) -> None:
    project = tmp_path / "p"
    (project / ".git").mkdir(parents=True)
    key = "written-on-purpose-0123456789"
    done = run("nixx", "mcp", "install", "--with-key", "--client", "gemini", "--client", "codex",
               cwd=project, env={"NIXX_API_KEY": key})
    assert done.returncode == 0, done.stderr
    assert "now holds the API key in plain text (--with-key)" in done.stderr
    assert "the API key: written in plain text (--with-key)" in done.stdout
    assert json.loads((project / ".gemini/settings.json").read_text())["mcpServers"]["nixx"][
        "env"]["NIXX_API_KEY"] == key
    codex = tomllib.loads((project / ".codex/config.toml").read_text())["mcp_servers"]["nixx"]
    assert codex["env"]["NIXX_API_KEY"] == key and "env_vars" not in codex
    listed = run("nixx", "mcp", "install", "--json", "--with-key", "--client", "gemini",
                 cwd=project, env={"NIXX_API_KEY": key})
    assert json.loads(listed.stdout)["changes"][0]["env"]["NIXX_API_KEY"] == "***"


def test_entries_earlier_versions_wrote_gain_their_env(repo: Path) -> None:
    """The entry without `env` that nixx wrote before (JSON and the Codex table) is
    brought up to date in place; another program's table stays as it is."""
    (repo / ".mcp.json").write_text(json.dumps(
        {"mcpServers": {"nixx": {"type": "stdio", "command": NIXX, "args": ["mcp"]}}}))
    old = f'[mcp_servers.nixx]\ncommand = "{NIXX}"\nargs = ["mcp"]\n'
    (repo / ".codex/config.toml").write_text(CODEX + "\n" + old + "\n[tools]\nweb = true\n")
    out = run("nixx", "mcp", "install", "--client", "claude-code", "--client", "codex",
              "--json", cwd=repo)
    assert [c["action"] for c in json.loads(out.stdout)["changes"]] == ["replaced", "replaced"]
    assert json.loads((repo / ".mcp.json").read_text())["mcpServers"]["nixx"]["env"] == reach(repo)
    codex = tomllib.loads((repo / ".codex/config.toml").read_text())
    assert codex["mcp_servers"]["nixx"]["env"] == reach(repo)
    assert codex["tools"] == {"web": True} and codex["model"] == "o4"
    assert codex["mcp_servers"]["docs"] == {"command": "docs-mcp"}

    theirs = CODEX + '\n[mcp_servers.nixx]\ncommand = "/opt/nixx"\nargs = ["mcp"]\n'
    (repo / ".codex/config.toml").write_text(theirs)
    kept = run("nixx", "mcp", "install", "--client", "codex", cwd=repo)
    assert "kept the existing nixx entry" in kept.stdout
    assert (repo / ".codex/config.toml").read_text() == theirs
