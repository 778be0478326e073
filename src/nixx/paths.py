"""Where nixx keeps files by default (XDG base directories); which workspace paths hold
secrets (ingest never reads them) or code that runs later (the file tools never write or
delete either by default): one list of each, used by `nixx.ingest` and `nixx.tools.files`;
the write policy of the model's `write_file` / `delete_file` (`write_refusal`: hidden
names, build and tool files, executables, compared as `normalise_name` reads a name); and
opening a file beneath a folder without following symlinks (`open_beneath`)."""

from __future__ import annotations

import fnmatch
import os
import re
import stat
import unicodedata
from collections.abc import Sequence
from pathlib import Path


def xdg_data_home() -> Path:
    value = os.environ.get("XDG_DATA_HOME")
    return Path(value) if value else Path.home() / ".local" / "share"


def default_home() -> Path:
    """`$NIXX_HOME`, else `$XDG_DATA_HOME/nixx`, else `~/.local/share/nixx`."""
    value = os.environ.get("NIXX_HOME")
    return Path(value).expanduser() if value else xdg_data_home() / "nixx"


#: Secrets: never read by ingest (a folder walk skips them, a file named is refused),
#: never read by the file tools (what they read goes to the LLM backend) and, unless
#: NIXX_TOOLS_PROTECTED says otherwise, never written or deleted by them. `.nxs*` holds nixx's own state (a
#: session's `backend.json` with the backend's key, the workspace log).
SECRET_PATHS: tuple[str, ...] = (
    ".env",
    ".env.*",
    ".envrc",
    ".nxs*",
    ".ssh",
    ".gnupg",
    ".aws",
    ".netrc",
    ".npmrc",
    ".pypirc",
    ".git-credentials",
    ".htpasswd",
    "*.pem",
    "*.key",
    "*.p12",
    "*.pfx",
    "id_rsa*",
    "id_ecdsa*",
    "id_ed25519*",
    "id_dsa*",
)

#: Code that runs later on the user's machine: git hooks and config, the virtualenv,
#: agent and editor configuration (which name commands an agent or an editor runs), CI
#: workflows, pre-commit hooks, direnv files, Python start-up hooks. The file tools
#: never write or delete these by default (reading them is fine).
CODE_PATHS: tuple[str, ...] = (
    ".git",
    ".venv",
    ".claude",
    ".mcp.json",
    ".cursor",
    ".vscode",
    ".idea",
    ".devcontainer",
    ".github/workflows",
    ".gitlab-ci.yml",
    ".husky",
    ".pre-commit-config.yaml",
    "sitecustomize.py",
    "usercustomize.py",
)

# Workspace paths `write_file` / `delete_file` refuse unless NIXX_TOOLS_PROTECTED says
# otherwise: code that runs later and secrets. Patterns are globs matched without regard
# to case (`.GIT/hooks` is `.git/hooks` on a case-insensitive file system); see
# `matches`.
DEFAULT_PROTECTED: tuple[str, ...] = CODE_PATHS + tuple(
    p for p in SECRET_PATHS if p not in CODE_PATHS)


#: Code points a file system may drop from a name (HFS+ ignores them when it compares
#: names: ``.git\u200c`` is ``.git`` there, git's CVE-2014-9390).
_IGNORABLE = dict.fromkeys(
    [*range(0x200B, 0x2010), *range(0x202A, 0x202F), *range(0x2060, 0x2070), 0xFEFF]
)


def normalise_name(name: str) -> str:
    """One path component as every platform nixx's workspace may be shared with would
    resolve it, for comparing against protected names: Unicode NFC (macOS stores NFD),
    code points HFS+ ignores dropped, an NTFS stream suffix cut (``Makefile::$DATA`` is
    ``Makefile``), trailing dots and spaces stripped (Windows drops them: ``.git.`` and
    ``.git `` are ``.git``), and case folded (``.GIT`` is ``.git`` on a case-insensitive
    file system). The result is what the checks compare, never a name that is opened."""
    name = unicodedata.normalize("NFC", name).translate(_IGNORABLE)
    head = name.split(":", 1)[0]
    if head:
        name = head
    return name.rstrip(". ").casefold()


_SHORT_NAME = re.compile(r"[^~]{1,6}~[0-9]+(\.[^.]{0,3})?")
_DEVICES = frozenset({"con", "prn", "aux", "nul", "conin$", "conout$",
                      *(f"{kind}{n}" for kind in ("com", "lpt") for n in "0123456789¹²³")})


def windows_alias(name: str) -> str | None:
    """Why Windows would read the path component `name` as another file, or None: an
    8.3 short name (``GIT~1`` may be ``.git``, ``MAKEFI~1`` ``Makefile``: which one is
    decided by the file system, so no name check can vouch for it), an NTFS stream
    (``notes.txt:x`` writes into ``notes.txt``), or a device (``CON``, ``NUL.txt``). On
    Linux these are plain names; a workspace shared with Windows (a mounted drive, WSL, a
    synced folder) makes them the other file."""
    if ":" in name:
        return (f"stream name {name!r} — on Windows a name with ':' is a stream of another "
                "file")
    bare = name.rstrip(". ")
    if _SHORT_NAME.fullmatch(bare):
        return (f"short name {name!r} — on Windows '~' and a number make an 8.3 alias of "
                "another file, such as GIT~1 for .git")
    if bare.split(".", 1)[0].casefold() in _DEVICES:
        return f"device name {name!r} — on Windows it names a device, not a file"
    return None


def matches(parts: Sequence[str], patterns: Sequence[str]) -> str | None:
    """The first pattern that matches the relative path `parts`, or None. A pattern
    without `/` matches any one component (``.git`` matches ``sub/.git/config``); one
    with `/` matches the path from the start, or a leading part of it. Each component
    is compared as `normalise_name` reads it (case, NFC, trailing dots and spaces)."""
    folded = [normalise_name(part) for part in parts]
    for pattern in patterns:
        pattern = pattern.strip().strip("/")
        if not pattern:
            continue
        want = unicodedata.normalize("NFC", pattern).casefold()
        if "/" in want:
            for i in range(1, len(folded) + 1):
                if fnmatch.fnmatchcase("/".join(folded[:i]), want):
                    return pattern
        elif any(fnmatch.fnmatchcase(part, want) for part in folded):
            return pattern
    return None


#: Files a build, a test runner, a package manager, CI or a coding agent reads or runs
#: on its own, matched (as `normalise_name` reads it) against the last component of a
#: path at any depth. The model's `write_file` and `delete_file` refuse them unless
#: NIXX_TOOLS_WRITE_ALLOW re-opens them (docs/tools.md#the-write-policy). Hidden names
#: (``.github``, ``.vscode``, ``.gemini``, ...) are refused by their own rule and need no
#: entry here.
BUILD_FILES: tuple[str, ...] = (
    # make, cmake, autotools, meson, bazel, scons, zig, ninja
    "makefile", "makefile.*", "gnumakefile", "gnumakefile.*", "*.mk", "cmakelists.txt", "*.cmake", "configure",
    "configure.ac", "meson.build", "meson.options", "meson_options.txt", "build",
    "build.bazel", "workspace", "workspace.bazel", "module.bazel", "*.bzl", "sconstruct",
    "sconscript", "build.zig", "build.zig.zon", "build.ninja",
    # Python
    "setup.py", "setup.cfg", "pyproject.toml", "conftest.py", "tox.ini", "noxfile.py",
    "pytest.ini", "pipfile", "requirements*.txt", "constraints*.txt", "environment.yml",
    "pixi.toml", "sitecustomize.py", "usercustomize.py", "*.pth",
    # JavaScript / TypeScript
    "package.json", "package-lock.json", "npm-shrinkwrap.json", "pnpm-lock.yaml",
    "pnpm-workspace.yaml", "bunfig.toml", "deno.json", "deno.jsonc", "lerna.json",
    "nx.json", "turbo.json", "gulpfile.*", "gruntfile.*", "*.config.js", "*.config.cjs",
    "*.config.mjs", "*.config.ts", "*.config.cts", "*.config.mts",
    # lock files of any package manager (Cargo.lock, poetry.lock, uv.lock, yarn.lock, ...)
    "*.lock", "*.lockb", "go.sum",
    # Rust, Go, Ruby, JVM, .NET, PHP, Elixir, Haskell, Swift, Nix
    "cargo.toml", "build.rs", "rust-toolchain", "rust-toolchain.toml", "go.mod", "go.work",
    "gemfile", "rakefile", "*.rake", "*.gemspec", "build.gradle", "build.gradle.kts", "settings.gradle",
    "settings.gradle.kts",
    "gradlew", "gradlew.bat", "mvnw", "mvnw.cmd", "pom.xml", "build.xml", "build.sbt",
    "directory.build.props", "directory.build.targets", "*.csproj", "*.fsproj", "*.vbproj",
    "composer.json", "mix.exs", "*.cabal", "cabal.project", "stack.yaml", "package.swift",
    "flake.nix", "shell.nix", "default.nix", "devbox.json",
    # containers, task runners, process files
    "dockerfile", "dockerfile.*", "*.dockerfile", "containerfile", "containerfile.*", "docker-compose*.yml",
    "docker-compose*.yaml", "compose.yml", "compose.yaml", "docker-bake.hcl", "justfile",
    "taskfile", "taskfile.*", "procfile", "vagrantfile", "tiltfile", "earthfile",
    # CI and git-hook managers outside hidden folders
    "jenkinsfile", "azure-pipelines.yml", "bitbucket-pipelines.yml", "appveyor.yml",
    "cloudbuild.yaml", "buildspec.yml", "lefthook*.yml", "lefthook*.yaml",
    # coding agents: instruction files and MCP server configuration (which names commands)
    "agents.md", "agent.md", "claude.md", "claude.local.md", "gemini.md", "mcp.json",
    "*.mcp.json", "mcp_config.json", "mcp_settings.json",
)

#: The settings a user changes to widen the policy, named in every refusal.
ALLOW_SETTING = "NIXX_TOOLS_WRITE_ALLOW"
PROTECTED_SETTING = "NIXX_TOOLS_PROTECTED"


def write_refusal(parts: Sequence[str], *, protected: Sequence[str] = (),
                  allow: Sequence[str] = (), mode: int | None = None) -> str | None:
    """Why the model's `write_file` / `delete_file` may not touch the workspace-relative
    path `parts` (as the walk reached it), or None. `mode` is the existing file's
    ``st_mode`` (None when there is none). In order:

    1. `protected` (NIXX_TOOLS_PROTECTED), the user's own deny list: always refused;
    2. `allow` (NIXX_TOOLS_WRITE_ALLOW) re-opens what the rules below refuse;
    3. a name Windows reads as another file (`windows_alias`: an 8.3 short name such as
       ``GIT~1``, a stream ``name:stream``, a device such as ``NUL.txt``);
    4. a hidden component: a name starting with ``.`` as `normalise_name` reads it
       (``.git.``, ``.git ``, ``.GIT`` are ``.git``), or a name of only dots and spaces;
    5. a build, test, package, CI or agent file: the last component matches `BUILD_FILES`;
    6. an existing regular file with an execute bit.

    The reason names the rule and the setting that widens it."""
    shown = "/".join(parts)
    hit = matches(parts, protected)
    if hit is not None:
        return (f"{shown} is protected (pattern {hit!r} of {PROTECTED_SETTING}): the file "
                f"tools do not write or delete it; {PROTECTED_SETTING} lists the protected "
                "paths (take the pattern out of it to allow them)")
    if matches(parts, allow) is not None:
        return None
    widen = (f"the file tools do not write or delete it unless the server's {ALLOW_SETTING} "
             "names it (comma-separated glob patterns)")
    for part in parts:
        alias = windows_alias(part)
        if alias is not None:
            return f"{shown} is protected (rule: {alias}): " + widen
        norm = normalise_name(part)
        if not norm or norm.startswith(".") or part.startswith("."):
            return (f"{shown} is protected (rule: hidden name {part!r} — a name starting "
                    "with '.' once trailing dots and spaces, case and Unicode form are "
                    "set aside — holds git, editor, agent or CI configuration): " + widen)
    last = parts[-1] if parts else ""
    hit = matches([last], BUILD_FILES) if last else None
    if hit is not None:
        return (f"{shown} is protected (rule: build and tool file, pattern {hit!r} — a "
                "build, test runner, package manager, CI or coding agent reads or runs "
                "it): " + widen)
    if mode is not None and stat.S_ISREG(mode) and mode & 0o111:
        return (f"{shown} is protected (rule: executable file, mode "
                f"{stat.S_IMODE(mode):04o}): " + widen)
    return None


def is_secret(parts: Sequence[str]) -> str | None:
    """The `SECRET_PATHS` pattern that `parts` matches, or None (ingest reads none)."""
    return matches(parts, SECRET_PATHS)


def hard_link_refusal(st: os.stat_result, shown: str) -> str | None:
    """Why a file opened by ingest or the file tools is not read, or None: a regular file
    with more than one link (``st_nlink > 1``, from ``fstat`` on the open descriptor).
    The secret rules match names and symlinks; a hard link to ``.env`` has another name
    and is the same file, and nothing cheap and complete says which names it has (another
    link may be outside the workspace). So any multiply linked file is refused unless the
    user allows them (`NIXX_ALLOW_HARD_LINKS`; docs/limits-and-safety.md)."""
    if not stat.S_ISREG(st.st_mode) or st.st_nlink <= 1:
        return None
    return (f"{shown} is a hard link ({st.st_nlink} names for one file, which may be a "
            "secret such as .env under another name): not read; set NIXX_ALLOW_HARD_LINKS"
            "=true to read multiply linked files")


def open_beneath(base: str | os.PathLike[str], parts: Sequence[str], flags: int = os.O_RDONLY
                 ) -> int:
    """Open `base`/`parts` without following any symlink below `base`: each folder is
    opened with ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor and the
    file with ``O_NOFOLLOW``, so a folder swapped for a symlink mid-way fails (OSError:
    ELOOP or ENOTDIR) instead of leading outside. ``..`` and empty parts are refused."""
    dir_flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
    if not parts or any(p in ("", ".", "..") or "/" in p for p in parts):
        raise OSError(22, f"not a plain relative path: {'/'.join(parts)!r}")
    fd = os.open(base, dir_flags)
    try:
        for part in parts[:-1]:
            nxt = os.open(part, dir_flags, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return os.open(parts[-1], flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK,
                       dir_fd=fd)
    finally:
        os.close(fd)
