"""docs/memory.md quotes every prompt nixx sends, exactly as the code has it."""

from __future__ import annotations

from pathlib import Path

from nixx.memory import prompts

DOC = Path(__file__).parents[2] / "docs" / "memory.md"


def test_every_prompt_is_quoted_verbatim() -> None:
    text = DOC.read_text()
    for name in (
        "SYSTEM_PROMPT",
        "TOOLS_PROMPT",
        "INTENT_FRAMING",
        "RECALL_FRAMING",
        "SUMMARY_PROMPT",
        "SUMMARY_RETRY",
        "MEMORY_NOTE",
        "INTENT_PROMPT",
        "SOURCE_SUMMARY_PROMPT",
    ):
        assert f"### `{name}`\n\n```text\n{getattr(prompts, name)}\n```" in text, name



def test_the_note_before_an_own_call_continuing_a_conversation_is_quoted() -> None:
    from nixx.llm.slot import TASK_NOTE

    assert f"```text\n{TASK_NOTE}\n```" in DOC.read_text()
