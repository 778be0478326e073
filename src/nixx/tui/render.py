"""Renderables for what the server answers to slash commands.

Pure functions from API JSON to Rich renderables. Every foreign string goes into a
`Text` (never markup), so stored text like `[/]` is displayed, not interpreted.
Shapes are read tolerantly (`row` nested or flat, `id` or `buffer_id`) because they are
JSON from another process.
"""

from __future__ import annotations

import json
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

SNIPPET = 300


def clip(text: str, limit: int = SNIPPET) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _nested(body: dict[str, Any], key: str) -> dict[str, Any]:
    """`body[key]` when it is an object (`{"row": {...}}`), else `body` itself (flat)."""
    inner = body.get(key)
    return inner if isinstance(inner, dict) else body


def _row(hit: dict[str, Any]) -> dict[str, Any]:
    return _nested(hit, "row")


def _score(hit: dict[str, Any]) -> str:
    score = hit.get("score")
    if not isinstance(score, int | float):
        return ""
    return f"{score:.2f}" if abs(score) >= 0.01 or score == 0 else f"{score:.1e}"


def _count(n: int, one: str, many: str | None = None) -> str:
    return f"{n} {one if n == 1 else (many or one + 's')}"


def search_results(query: str, body: dict[str, Any], client: str | None = None) -> RenderableType:
    if isinstance(body.get("results"), list):
        return fused_results(query, body["results"], client)
    return _search_lists(query, body)


def fused_results(query: str, results: list[Any], client: str | None = None) -> RenderableType:
    """The fused list of `/v1/episodic/search`, best first: transcript rows (a short row
    with the row before it, dim; the client that wrote it, when it named itself) and
    summaries in one table; `client`: the search was of that client's rows only."""
    items = [r for r in results if isinstance(r, dict)]
    rows = sum(1 for r in items if r.get("kind") == "buffer")
    parts: list[RenderableType] = [
        Text.assemble(
            ("search ", "bold"),
            (query, "italic"),
            f" from {client}" if client else "",
            f" — {_count(rows, 'transcript row')}, "
            f"{_count(len(items) - rows, 'summary', 'summaries')}, best first",
        )
    ]
    if not items:
        parts.append(Text("nothing found", style="dim"))
        return Group(*parts)
    table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1, 0, 0))
    table.add_column("what", no_wrap=True)
    table.add_column("date", no_wrap=True, style="dim")
    table.add_column("text", ratio=1)
    for item in items:
        date = str(item.get("created_at", ""))[:10]
        if item.get("kind") == "summary":
            text = Text(clip(item.get("content", "")))
            tags = item.get("tags") or []
            if tags:
                text.append("  " + " ".join(f"#{t}" for t in tags), style="cyan")
            what = (
                f"summary:{item.get('id', '?')} "
                f"({item.get('start_buffer_id', '?')}-{item.get('end_buffer_id', '?')})"
            )
            table.add_row(Text(what), Text(date), text)
            continue
        text = Text()
        content = str(item.get("content", ""))
        context = [c for c in item.get("context") or [] if isinstance(c, dict)]
        before = [c for c in context if int(c.get("id", 0)) < int(item.get("id", 0))]
        after = [c for c in context if int(c.get("id", 0)) > int(item.get("id", 0))]
        # a short answer with its question, a question with its short answer (as recall)
        if before and len(content) < 80 and str(before[-1].get("content", "")).endswith("?"):
            prev = before[-1]
            text.append(f"{prev.get('role', '')}: {clip(prev.get('content', ''))}\n", style="dim")
        text.append(f"{item.get('role', '')}: ", style="bold")
        text.append(clip(content))
        if after and content.rstrip().endswith("?") and len(after[0].get("content", "")) < 80:
            nxt = after[0]
            text.append(f"\n{nxt.get('role', '')}: {clip(nxt.get('content', ''))}", style="dim")
        label = Text(f"buffer:{item.get('id', '?')}")
        meta = item.get("meta")
        named = meta.get("client") if isinstance(meta, dict) else None
        if named:
            label.append(f" {named}", style="dim")
        table.add_row(label, Text(date), text)
    parts.append(table)
    parts.append(Text("delete a hit with /forget buffer:ID or /forget summary:ID", style="dim"))
    return Group(*parts)


def _search_lists(query: str, body: dict[str, Any]) -> RenderableType:
    buffer_hits = [h for h in body.get("buffer") or [] if isinstance(h, dict)]
    summary_hits = [h for h in body.get("summaries") or [] if isinstance(h, dict)]
    parts: list[RenderableType] = [
        Text.assemble(
            ("search ", "bold"),
            (query, "italic"),
            f" — {_count(len(buffer_hits), 'transcript row')}, "
            f"{_count(len(summary_hits), 'summary', 'summaries')}",
        )
    ]
    if buffer_hits:
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1, 0, 0))
        table.add_column("id", justify="right", no_wrap=True)
        table.add_column("role", no_wrap=True)
        table.add_column("text", ratio=1)
        for hit in buffer_hits:
            row = _row(hit)
            table.add_row(
                Text(str(row.get("id", "?"))),
                Text(str(row.get("role", ""))),
                Text(clip(row.get("content", ""))),
            )
        parts += [Text("Transcript (words, best first)", style="bold underline"), table]
    if summary_hits:
        table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1, 0, 0))
        table.add_column("id", no_wrap=True)
        table.add_column("rows", no_wrap=True)
        table.add_column("score", justify="right", no_wrap=True)
        table.add_column("summary", ratio=1)
        for hit in summary_hits:
            summ = _nested(hit, "summary")
            start = summ.get("start_buffer_id", "?")
            end = summ.get("end_buffer_id", "?")
            tags = summ.get("tags") or []
            text = Text(clip(summ.get("content", "")))
            if tags:
                text.append("  " + " ".join(f"#{t}" for t in tags), style="cyan")
            table.add_row(
                Text(f"summary:{summ.get('id', '?')}"),
                Text(f"{start}-{end}"),
                Text(_score(hit)),
                text,
            )
        parts += [Text("Summaries (meaning, cosine)", style="bold underline"), table]
    if not buffer_hits and not summary_hits:
        parts.append(Text("nothing found", style="dim"))
    else:
        parts.append(Text("delete a hit with /forget buffer:ID or /forget summary:ID", style="dim"))
    return Group(*parts)


def forget_matches(found: dict[str, Any]) -> RenderableType:
    """A forget dry run: every item that would be deleted, with its id and a snippet."""
    table = Table(box=None, show_header=True, header_style="dim", padding=(0, 1, 0, 0))
    table.add_column("id", no_wrap=True)
    table.add_column("what", no_wrap=True)
    table.add_column("text", ratio=1)
    for item in found.get("buffer") or []:
        table.add_row(Text(str(item.get("id"))), Text(str(item.get("role", ""))),
                      Text(clip(item.get("snippet", ""))))  # fmt: skip
    for item in found.get("summaries") or []:
        span = f"rows {item.get('start_buffer_id')}-{item.get('end_buffer_id')}"
        table.add_row(Text(str(item.get("id"))), Text("summary"),
                      Text(clip(item.get("snippet", ""))).append(f"  {span}", style="dim"))  # fmt: skip
    for item in found.get("memories") or []:
        table.add_row(Text(str(item.get("id"))), Text(f"memory of {item.get('source_name', '')!s}"),
                      Text(clip(item.get("snippet", ""))))  # fmt: skip
    head = Text.assemble(("forget ", "bold"), (str(found.get("query", "")), "italic"))
    parts: list[RenderableType] = [head, table]
    if found.get("truncated"):
        parts.append(Text("more match: run /forget again after these are gone", style="dim"))
    return Group(*parts)


def forget_refs(ids: list[str]) -> RenderableType:
    return Group(Text("forget", style="bold"), *(Text(f"  {i}") for i in ids))


def forget_done(body: dict[str, Any]) -> RenderableType:
    done = _nested(body, "forgotten")
    text = Text(
        f"forgot {_count(len(done.get('buffer_ids') or []), 'transcript row')}, "
        f"{_count(len(done.get('summary_ids') or []), 'summary', 'summaries')}, "
        f"{_count(len(done.get('source_ids') or []), 'source')}, "
        f"{_count(int(done.get('memories_removed') or 0), 'memory', 'memories')}"
    )
    if done.get("resummarise"):
        text.append("\nsummarising again what remains of their windows", style="dim")
    if done.get("rebuild_source_ids"):
        text.append("\nrebuilding the sources that held them", style="dim")
    if body.get("intent_cleared"):
        text.append("\nthe intent came from a forgotten message: deriving it again", style="dim")
    return text


def transcript_rows(rows: list[dict[str, Any]]) -> RenderableType:
    if not rows:
        return Text("no rows in that range", style="dim")
    table = Table(box=None, show_header=False, padding=(0, 1, 0, 0))
    table.add_column(justify="right", no_wrap=True, style="dim")
    table.add_column(no_wrap=True, style="bold")
    table.add_column(ratio=1)
    for row in rows:
        content = str(row.get("content", ""))
        role = str(row.get("role", ""))
        if role == "marker":
            table.add_row(Text(str(row.get("id", ""))), Text("—"), Text("session ended", "dim"))
            continue
        table.add_row(Text(str(row.get("id", ""))), Text(role), Text(content))
    return table


def context_view(body: dict[str, Any]) -> RenderableType:
    """`GET /v1/debug/context`: the intent, recall settings, the recalled summaries and
    the system prompt the next turn would send."""
    parts: list[RenderableType] = []
    intent = body.get("intent")
    parts.append(Text.assemble(("intent: ", "bold"), (str(intent) if intent else "(none)")))
    if "recall_enabled" in body:
        line = Text.assemble(("recall: ", "bold"), "on" if body.get("recall_enabled") else "off")
        if isinstance(body.get("threshold"), int | float):
            line.append(f" (threshold {body['threshold']:.2f})", style="dim")
        parts.append(line)
    if body.get("query"):
        parts.append(Text.assemble(("recalled for: ", "bold"), clip(str(body["query"]), 200)))
    recalled = body.get("recalled") or []
    if isinstance(recalled, list):
        parts.append(Text(f"recalled: {len(recalled)}", style="bold"))
        for hit in recalled:
            if isinstance(hit, dict):
                what = f"{hit.get('kind', 'summary')} {hit.get('id', '')}".strip()
                cosine = hit.get("cosine")
                why = f"cosine {cosine:.2f} " if isinstance(cosine, int | float) else ""
                sentence = hit.get("sentence_cosine")
                if isinstance(sentence, int | float):
                    why += f"(sentence {sentence:.2f}) "
                parts.append(
                    Text.assemble(
                        "  • ",
                        (f"{what} {why}", "dim"),
                        clip(str(hit.get("text") or _nested(hit, "summary").get("content", ""))),
                    )
                )
    prompt = body.get("system_prompt")
    if isinstance(prompt, str):
        parts += [Text("system prompt:", style="bold"), Text(prompt)]
    memory = body.get("memory_block")
    if isinstance(memory, str) and memory:
        # the `cache` prompt layout: this follows the text of your latest message
        parts += [Text("added to your latest message:", style="bold"), Text(memory)]
    return Group(*parts)


def status_view(status: dict[str, Any]) -> RenderableType:
    table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    for key, value in status.items():
        shown = value if isinstance(value, str) else json.dumps(value, default=str)
        table.add_row(Text(str(key)), Text(shown))
    return table


def source_view(body: dict[str, Any]) -> RenderableType:
    src = _nested(body, "source")
    line = Text.assemble(
        ("source ", "bold"),
        (str(src.get("name", "?")), "italic"),
        f" (id {src.get('id', '?')})",
    )
    extra = []
    if src.get("start_id") is not None:
        extra.append(f"rows {src.get('start_id')}-{src.get('end_id')}")
    chunks = src.get("chunk_count", src.get("chunks"))
    if isinstance(chunks, int):
        extra.append(f"{chunks} chunks")
    if extra:
        line.append(" — " + ", ".join(extra))
    if src.get("summary"):
        return Group(line, Text(clip(str(src["summary"]), 600), style="dim"))
    return line


def ingest_view(target: str, body: Any) -> RenderableType:
    sources: list[Any] = []
    if isinstance(body, dict):
        sources = body.get("sources") or ([body["source"]] if "source" in body else [])
    elif isinstance(body, list):
        sources = body
    head = Text.assemble(("ingested ", "bold"), (target, "italic"))
    if isinstance(body, dict):
        counts = [
            f"{body[k]} {k}"
            for k in ("files", "chunks", "embedded", "reused", "skipped")
            if isinstance(body.get(k), int) and body[k]
        ]
        status = body.get("status")
        head.append(f" — {status}" if status else "")
        if counts:
            head.append(" (" + ", ".join(counts) + ")", style="dim")
    parts: list[RenderableType] = [head]
    parts += [source_view(s) for s in sources if isinstance(s, dict)]
    if isinstance(body, dict) and body.get("summary_error"):
        parts.append(Text(f"no summary: {body['summary_error']}", style="yellow"))
    return Group(*parts)


def _approval_lines(a: dict[str, Any]) -> Text:
    text = Text()
    text.append(f"{a.get('id')}  ", style="bold")
    text.append(f"{a.get('state')} ", style="yellow" if a.get("state") == "pending" else "dim")
    text.append(str(a.get("what", "")))
    if a.get("state") != "pending":
        note = f": {a['note']}" if a.get("note") else ""
        text.append(f"\n  {a.get('state')} by {a.get('decided_by')} "
                    f"(clone {a.get('decided_origin')}){note}", style="dim")
    return text


def approvals_view(rows: list[dict[str, Any]], include_decided: bool) -> RenderableType:
    """`/approvals`: what waits for the person (each with its id for `/approve`)."""
    if not rows:
        return Text("nothing waits for your approval"
                    + ("" if include_decided else " (/approvals --all shows decided ones)"),
                    style="dim")
    hint = Text("/approve <id> [note] or /deny <id> [note]", style="dim")
    return Group(*(_approval_lines(a) for a in rows), hint)


def decision_view(body: dict[str, Any]) -> RenderableType:
    """`/approve` and `/deny`: the decision, and what this clone did with the step."""
    parts: list[RenderableType] = [_approval_lines(body)]
    taken = body.get("taken") or []
    if not taken:
        parts.append(Text(f"the step waits on clone {body.get('origin')}: it is taken there "
                          "when this decision reaches it (nxs sync)", style="dim"))
    for t in taken:
        parts.append(Text(f"{t.get('action')} {t.get('state')} in thread {t.get('thread')}"))
    return Group(*parts)
