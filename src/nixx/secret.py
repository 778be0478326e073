"""API keys as `pydantic.SecretStr`: `Settings` holds every key as one, so a key never
shows in a repr, a log line, a debug route or printed settings (``**********``).

`reveal(key)` gives the text back, and is called only where a key must be used as
text: where an ``Authorization`` header is built (`nixx.llm.client`,
`nixx.embed.openai`, and the clients of `nixx serve`: `nixx.tui.client`,
`nixx.mcp.memory`), where the server compares a presented key (`nixx.server.auth`,
`nixx.web`), and where the built-in agent's backend file is written for it. Plain
strings pass through, so a library caller may hand a key either way.

Duck-typed (no pydantic import): the built-in agent and `nxc` start-up stay light.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pydantic import SecretStr


def reveal(key: SecretStr | str | None) -> str | None:
    """The key's text (None for no key)."""
    if key is None or isinstance(key, str):
        return key
    return key.get_secret_value()
