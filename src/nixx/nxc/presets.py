"""Runtime presets: `runtime: claude-code | codex | gemini` in a persona file.

Each preset is the argv templates one would declare by hand (`runtime: {start, resume,
transcript}`), written once from each tool's own documentation of its non-interactive
mode, and the transcript format its machine-readable output is parsed with:

- ``claude-code`` — Claude Code's print mode, `claude -p PROMPT --output-format
  stream-json --verbose`; resumed with `--resume SESSION`. Tools: `Bash(nxc:*)` is allowed
  so the agent can answer with `nxc reply` without an approval prompt nobody sees.
- ``codex`` — OpenAI Codex CLI's `codex exec --json PROMPT` (JSON lines: `thread.started`,
  `item.*`, `turn.*`); resumed with `codex exec --json resume THREAD PROMPT`. Runs with
  `--full-auto` (writes confined to the workspace, which `nxc reply` needs: the log is
  `.nxs/db.sqlite`) and `--skip-git-repo-check` (a workspace need not be a git checkout).
- ``gemini`` — Gemini CLI's headless mode, `gemini --output-format=stream-json -p PROMPT`
  (JSON lines: `init`, `message`, `tool_use`, `tool_result`, `error`, `result`); resumed
  with `--resume SESSION`. `run_shell_command(nxc)` is allowed for the same reason.

The runtime's own session id is read from the first line of its output (`init` / the
`system` init line / `thread.started`) and bound to the nxc session, so a resume names it.
A preset is only argv: the tool itself must be installed and logged in (docs/personas.md
says how); a persona that needs other flags declares the argv itself.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs a CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import TypedDict

    class Preset(TypedDict):
        start: tuple[str, ...]
        resume: tuple[str, ...]
        format: str
        needs: str


PRESETS: dict[str, Preset] = {
    "claude-code": {
        "start": ("claude", "-p", "{prompt}", "--output-format", "stream-json", "--verbose",
                  "--allowedTools", "Bash(nxc:*)"),
        "resume": ("claude", "-p", "{prompt}", "--resume", "{runtime_session}",
                   "--output-format", "stream-json", "--verbose",
                   "--allowedTools", "Bash(nxc:*)"),
        "format": "stream-json",
        "needs": "Claude Code: `npm install -g @anthropic-ai/claude-code`, then `claude` once "
                 "to log in",
    },
    "codex": {
        "start": ("codex", "exec", "--json", "--full-auto", "--skip-git-repo-check",
                  "{prompt}"),
        "resume": ("codex", "exec", "--json", "--full-auto", "--skip-git-repo-check",
                   "resume", "{runtime_session}", "{prompt}"),
        "format": "codex-json",
        "needs": "Codex CLI: `npm install -g @openai/codex`, then `codex login` (or "
                 "OPENAI_API_KEY in the environment the tool reads its login from)",
    },
    "gemini": {
        "start": ("gemini", "--output-format=stream-json",
                  "--allowed-tools=run_shell_command(nxc)", "-p", "{prompt}"),
        "resume": ("gemini", "--resume", "{runtime_session}", "--output-format=stream-json",
                   "--allowed-tools=run_shell_command(nxc)", "-p", "{prompt}"),
        "format": "gemini-json",
        "needs": "Gemini CLI: `npm install -g @google/gemini-cli`, then `gemini` once to log "
                 "in",
    },
}
