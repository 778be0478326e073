"""Messages as clients send them: text of content, the new message, trimming."""

from __future__ import annotations

from nixx.memory.history import (
    new_user_text,
    normalise,
    split_leading_system,
    text_of,
    trim_history,
)


def test_text_of_every_content_form() -> None:
    assert text_of("plain") == "plain"
    assert text_of(None) == ""
    assert (
        text_of(
            [
                {"type": "text", "text": "a"},
                {"type": "image_url", "image_url": {}},
                {"type": "text", "text": "b"},
            ]
        )
        == "a\nb"
    )


def test_normalise_joins_text_only_parts_and_keeps_images() -> None:
    assert normalise({"role": "user", "content": [{"type": "text", "text": "a"}]}) == {
        "role": "user",
        "content": "a",
    }
    image = [{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {"url": "x"}}]
    assert normalise({"role": "user", "content": image})["content"] == image
    assert normalise({"role": "assistant", "content": None, "name": None}) == {
        "role": "assistant",
        "content": None,
    }


def test_new_user_text() -> None:
    assert new_user_text([{"role": "user", "content": "q"}]) == "q"
    assert (
        new_user_text([{"role": "user", "content": "q"}, {"role": "tool", "content": "r"}]) is None
    )
    assert new_user_text([]) is None


def test_split_leading_system() -> None:
    msgs = [{"role": "system"}, {"role": "developer"}, {"role": "user"}, {"role": "system"}]
    lead, rest = split_leading_system(msgs)
    assert [m["role"] for m in lead] == ["system", "developer"]
    assert [m["role"] for m in rest] == ["user", "system"]


def test_trim_keeps_newest_and_never_orphans_tool_results() -> None:
    history = [
        {"role": "user", "content": "x" * 400},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1", "arguments": "z" * 400}]},
        {"role": "tool", "content": "y" * 400},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "last"},
    ]
    kept, dropped = trim_history(history, 120)
    assert kept == history[3:] and dropped == 3
    kept, dropped = trim_history(history, 0)
    assert kept == [history[-1]] and dropped == 4
    kept, dropped = trim_history(history, 10_000)
    assert kept == history and dropped == 0
