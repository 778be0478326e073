"""SSE parsing, incremental and whole."""

from __future__ import annotations

import asyncio

from nixx.sse import SSEEvent, aparse_lines, parse_lines


def test_events_split_on_blank_lines_with_comments_and_names():
    lines = [
        ": keep-alive",
        'data: {"a": 1}',
        "",
        "event: error",
        'data: {"error": {"message": "x"}}',
        "",
        "data: line one",
        "data: line two",
        "",
        "data: [DONE]",
        "",
    ]
    events = list(parse_lines(lines))
    assert events == [
        SSEEvent('{"a": 1}'),
        SSEEvent('{"error": {"message": "x"}}', "error"),
        SSEEvent("line one\nline two"),
        SSEEvent("[DONE]"),
    ]
    assert events[-1].done and not events[0].done


def test_crlf_no_space_and_unterminated_last_event():
    events = list(parse_lines(["data:x\r", "\r", "id: 7", "data: tail"]))
    assert events == [SSEEvent("x"), SSEEvent("tail")]


def test_async_parser_matches():
    async def lines():
        for line in ["data: a", "", "data: b", ""]:
            yield line

    async def collect():
        return [e async for e in aparse_lines(lines())]

    assert asyncio.run(collect()) == [SSEEvent("a"), SSEEvent("b")]
