"""`build_server(memory=..., chat=...)`: the `MCPServer` with nixx's tools (docs/mcp.md).

Memory tools (`memory_*`, `sources_search`, `ingest`, `intent_*`, `transcript_view`) are
registered when a `MemoryAPI` is given; agent-chat tools (`nxc_*`) when `ChatTools` are.
Every tool takes JSON-schema'd arguments and returns one JSON object, sent as text and as
structured content. A refused call (bad arguments, a nixx error, a server that refuses)
is a tool error whose text says what to do; nothing raised in a tool crashes the server.
A memory result from a server `nixx mcp` started itself names the store it read
(`MemoryAPI.annotate`), and an empty search says "no results in <store>".
"""

from __future__ import annotations

import functools
import json
import os
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from pydantic import Field

from nixx import __version__
from nixx.errors import NixxError, ValidationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from nixx.mcp.chat import ChatTools
    from nixx.mcp.memory import MemoryAPI

INSTRUCTIONS = """\
nixx is the user's local memory and agent chat. memory_search answers "what did we say \
about X" from past conversations; sources_search searches curated notes and ingested \
documents; memory_remember keeps a note for later sessions. nxc_* tools talk to the other \
agents of this workspace: nxc_prime first (who you are, what you owe), nxc_reply to answer \
a thread, nxc_send to open one."""

Json = dict[str, Any]
MAX_WAIT = 600.0  # seconds one nxc_wait call may block (call again to keep waiting)
Kind = Literal["task", "question", "report", "decision", "info"]
Priority = Literal["urgent", "normal", "background"]
TaskId = Annotated[str, Field(min_length=1, max_length=200, description="A task id (nxc_tasks).")]
Thread = Annotated[str, Field(min_length=1, max_length=200, description="A thread id (t-…).")]
ApprovalId = Annotated[str, Field(min_length=1, max_length=200,
                                  description="An approval id (nxc_approvals).")]
Note = Annotated[str, Field(max_length=2000, description="Why, for the record.")]  # approvals.MAX_NOTE


def _guard(fn: Callable[..., Awaitable[Json]]) -> Callable[..., Awaitable[Any]]:
    """The tool's JSON object as text and as structured content; a nixx error becomes a
    tool error with its kind and message, never a crash."""
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.types import CallToolResult, TextContent

    @functools.wraps(fn)
    async def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            data = await fn(*args, **kwargs)
        except NixxError as err:
            raise ToolError(f"{err.kind}: {err.message}") from err
        text = json.dumps(data, ensure_ascii=False, indent=2, default=str)
        return CallToolResult(content=[TextContent(type="text", text=text)],
                              structured_content=json.loads(text))

    return wrapper


READ_ONLY = frozenset({"memory_search", "sources_search", "intent_get", "transcript_view",
                       "nxc_prime", "nxc_list", "nxc_threads_show", "nxc_threads_list",
                       "nxc_status", "nxc_wait", "nxc_search", "nxc_tasks", "nxc_leases"})


def _add(server: MCPServer, fn: Callable[..., Awaitable[Json]]) -> None:
    import inspect

    from mcp.types import ToolAnnotations

    # structured_output=False: the wrapper builds the result itself, and the SDK skips
    # deriving an output schema (an open object here) for each tool at start-up
    name = fn.__name__
    server.add_tool(_guard(fn), name=name, description=inspect.cleandoc(fn.__doc__ or ""),
                    structured_output=False,
                    annotations=ToolAnnotations(read_only_hint=name in READ_ONLY))


def build_server(*, memory: MemoryAPI | None = None, chat: ChatTools | None = None,
                 path_base: str | None = None) -> MCPServer:
    """`path_base`: where a relative `ingest` path starts (the stdio server's folder); None
    leaves paths to the server (relative to its NIXX_WORKSPACE)."""
    from mcp.server.mcpserver import MCPServer

    server: MCPServer = MCPServer(
        "nixx", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
    )
    if memory is not None:
        _memory_tools(server, memory, path_base)
    if chat is not None:
        _chat_tools(server, chat)
    return server


def _memory_tools(server: MCPServer, api: MemoryAPI, path_base: str | None) -> None:
    """The episodic tools (what was said, what the user is on now); `_semantic_tools` the
    kept knowledge."""
    async def memory_search(
        query: Annotated[str, Field(min_length=1, max_length=4000,
                                    description="A question or keywords, in plain words.")],
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many hits per list.")] = 10,
        client: Annotated[str | None, Field(
            max_length=40, description="Only turns this client sent: its name (claude-code, "
            "codex-cli, ...) or an origin (tui, api, anthropic, responses)."
        )] = None,
    ) -> Json:
        """Search past conversations (the episodic memory: every turn, and the summaries of
        earlier sessions). Returns the server's answer to POST /v1/episodic/search: the hits
        with their buffer ids (open the turns around one with transcript_view)."""
        body: Json = {"query": query, "limit": limit}
        if client:
            body["client"] = client
        found = await api.request("POST", "/v1/episodic/search", json=body)
        hits = sum(len(found.get(k) or []) for k in ("results", "buffer", "summaries"))
        return api.annotate(found, hits=hits)

    async def intent_get() -> Json:
        """The user's current intent (what they are working on), with where it came from
        (`manual` when set, else derived from the conversation) and when it changed."""
        return api.annotate(await api.request("GET", "/v1/intent"))

    async def intent_set(
        # 1000: what the server takes (nixx.memory.intent.MAX_CHARS), said in the schema
        intent: Annotated[str, Field(min_length=1, max_length=1000,
                                     description="One or two sentences on what the user is working on.")],
    ) -> Json:
        """Set the current intent; nixx adds it, framed as data, to every chat turn."""
        return api.annotate(await api.request("POST", "/v1/intent", json={"intent": intent}))

    async def transcript_view(
        start: Annotated[int, Field(ge=1, description="First buffer id (from a memory_search hit).")],
        end: Annotated[int | None, Field(ge=1, description="Last buffer id (default: start + limit - 1).")] = None,
        limit: Annotated[int, Field(ge=1, le=1000, description="At most this many rows.")] = 50,
    ) -> Json:
        """The conversation rows with start <= id <= end, in order (session markers included)."""
        params: Json = {"start": start, "limit": limit}
        if end is not None:
            params["end"] = end
        rows = await api.request("GET", "/v1/episodic/transcript", params=params)
        return api.annotate(rows, hits=len(rows.get("rows") or []))

    for fn in (memory_search, intent_get, intent_set, transcript_view):
        _add(server, fn)
    _semantic_tools(server, api, path_base)


def _semantic_tools(server: MCPServer, api: MemoryAPI, path_base: str | None) -> None:
    """Notes the agent keeps, documents it reads in, and search over both."""
    async def memory_remember(
        text: Annotated[str, Field(min_length=1, description="The note, in Markdown.")],
        name: Annotated[str | None, Field(
            min_length=1, max_length=200,
            description="Name of the note (default: `note: ` and its first words). "
            "Remembering under an existing name replaces that note.")] = None,
        tags: Annotated[list[str] | None, Field(max_length=20, description="Tags.")] = None,
    ) -> Json:
        """Keep a note you chose as semantic memory (a source, chunked and embedded), so that
        later sessions find it with sources_search and recall."""
        if not text.strip():
            raise ValidationError("the note is empty", param="text")
        if name is None:
            words = " ".join(text.split())
            name = "note: " + (words[:60].rsplit(" ", 1)[0] + "…" if len(words) > 60 else words)
        body: Json = {"text": text, "name": name}
        if tags:
            body["tags"] = tags
        return api.annotate(await api.request("POST", "/v1/ingest", json=body))

    async def sources_search(
        query: Annotated[str, Field(min_length=1, max_length=4000, description="What to look for.")],
        limit: Annotated[int, Field(ge=1, le=100, description="At most this many chunks.")] = 5,
    ) -> Json:
        """Search semantic memory (notes, ingested files and pages) by meaning; the best
        chunks first, each with its source."""
        found = await api.request("POST", "/v1/sources/search", json={"query": query, "limit": limit})
        return api.annotate(found, hits=len(found.get("results") or []))

    async def ingest(
        path: Annotated[str | None, Field(
            min_length=1, max_length=4096,
            description="A file or folder inside the nixx workspace (relative paths start at "
            "this project's folder).")] = None,
        url: Annotated[str | None, Field(min_length=1, max_length=8192,
                                         description="An http(s) web page.")] = None,
        name: Annotated[str | None, Field(min_length=1, max_length=200,
                                          description="Name of the source.")] = None,
        tags: Annotated[list[str] | None, Field(max_length=20, description="Tags.")] = None,
    ) -> Json:
        """Read a file, a folder or a web page into semantic memory (exactly one of `path`
        and `url`). Unchanged content is found as is; changed content replaces its source."""
        if (path is None) == (url is None):
            raise ValidationError('give exactly one of "path" or "url"', param="path")
        body: Json = {"name": name, "tags": tags}
        if path is not None:
            if path_base is not None and not os.path.isabs(path):
                path = os.path.join(path_base, path)
            body["path"] = path
        else:
            body["url"] = url
        return api.annotate(await api.request(
            "POST", "/v1/ingest", json={k: v for k, v in body.items() if v is not None}))

    for fn in (memory_remember, sources_search, ingest):
        _add(server, fn)


def _chat_tools(server: MCPServer, chat: ChatTools) -> None:
    """The agent-chat tools that read; `_chat_post_tools` the two that post."""
    async def nxc_prime() -> Json:
        """Call first in a session: who you are in this workspace, how many messages are
        unread, and the threads that await your reply (no bodies)."""
        return await chat.call(lambda e: e.prime())

    async def nxc_list() -> Json:
        """The personas and channels declared in this workspace (whom nxc_send can reach)."""
        return await chat.call(lambda e: e.list())

    async def nxc_threads_show(thread: Thread) -> Json:
        """One thread: who opened it, who must reply, who has, and its messages."""
        return await chat.call(lambda e: e.thread(thread))

    async def nxc_threads_list(
        channel: Annotated[str | None, Field(description="Only this channel id.")] = None,
        open_only: Annotated[bool, Field(description="Only threads somebody still owes.")] = False,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
    ) -> Json:
        """Threads you may read, newest first (no messages)."""
        found = await chat.call(lambda e: e.threads(channel=channel, open_only=open_only,
                                                    limit=limit))
        return {"threads": found}

    async def nxc_status(
        thread: Annotated[str | None, Field(description="The operation containing this thread.")] = None,
        channel: Annotated[str | None, Field(description="Operations rooted in this channel id.")] = None,
        include_finished: Annotated[bool, Field(description="Also finished operations.")] = False,
    ) -> Json:
        """Operations (trees of threads) and the state of each thread: open, answered, stale."""
        if thread is not None and channel is not None:
            raise ValidationError("give thread or channel, not both", param="thread")
        return await chat.call(lambda e: e.status(thread=thread, channel=channel,
                                                  include_finished=include_finished))

    async def nxc_wait(
        thread: Thread,
        timeout: Annotated[float, Field(gt=0, le=MAX_WAIT, description="Seconds to wait at most.")] = 60.0,
    ) -> Json:
        """Block until the thread's expected replies are all in (`complete`), its deadline
        passed (`stale`), or `timeout` seconds passed (`timeout`: call again to keep waiting)."""
        outcome, summary = await chat.call(lambda e: e.wait(thread, timeout=timeout))
        return {"outcome": outcome, **summary}

    async def nxc_search(
        query: Annotated[str, Field(min_length=1, max_length=1000, description="Words to find.")],
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
    ) -> Json:
        """Full-text search over the messages you may read."""
        return {"results": await chat.call(lambda e: e.search(query, limit=limit))}

    for fn in (nxc_prime, nxc_list, nxc_threads_show, nxc_threads_list, nxc_status, nxc_wait,
               nxc_search):
        _add(server, fn)
    _chat_post_tools(server, chat)


def _chat_post_tools(server: MCPServer, chat: ChatTools) -> None:
    """Opening a thread and answering one."""
    async def nxc_send(
        to: Annotated[str, Field(min_length=1, description="A declared persona handle or channel name.")],
        body: Annotated[str, Field(min_length=1, description="The message, in Markdown.")],
        expect: Annotated[str | None, Field(
            description="Who must reply, comma-separated handles (default: the persona, or the "
            "channel's `expects`).")] = None,
        deadline: Annotated[str | None, Field(
            description="A duration (30s, 10m, 2h, 1d, 1w) or an RFC3339 instant.")] = None,
        kind: Kind = "task",
        priority: Priority = "normal",
    ) -> Json:
        """Open a thread to a persona or a channel. Returns the receipt (thread_id, who is
        expected to answer, whether a session was started); wait with nxc_wait or read
        with nxc_threads_show."""
        return await chat.call(lambda e: e.send(to, body, expect=expect, deadline=deadline,
                                                kind=kind, priority=priority))

    async def nxc_reply(
        body: Annotated[str, Field(min_length=1, description="The answer, in Markdown.")],
        thread: Annotated[str | None, Field(
            description="The thread (default: your one open conversation).")] = None,
        escalate: Annotated[bool, Field(description="Ask the opener for a decision or help "
                                        "instead of answering.")] = False,
        kind: Kind = "report",
        priority: Priority = "normal",
    ) -> Json:
        """Post into a thread: the only way to answer one. Your answer is delivered to the
        opener; text you only print is not seen."""
        return await chat.call(lambda e: e.reply(body, thread=thread, kind=kind,
                                                 priority=priority, escalate=escalate))

    for fn in (nxc_send, nxc_reply):
        _add(server, fn)
    _work_tools(server, chat)


def _work_tools(server: MCPServer, chat: ChatTools) -> None:
    """Claimable tasks and leased files (`nixx.nxc.work`), as `nxc task` and `nxc lease`;
    a person's approvals (`nixx.nxc.approvals`), as `nxc approvals|approve|deny`."""
    from nixx.nxc import work

    async def nxc_tasks() -> Json:
        """Every task: state (open, claimed, done), holder, what it waits on, lost claims."""
        return {"tasks": await chat.call(work.task_list)}

    async def nxc_task_add(
        title: Annotated[str, Field(min_length=1, max_length=500)],  # work.MAX_TITLE
        after: Annotated[list[str] | None, Field(
            description="Task ids that must be done before this one is claimable.")] = None,
        thread: Annotated[str | None, Field(description="The thread it belongs to.")] = None,
    ) -> Json:
        """Add an open task for someone (or you) to claim."""
        return await chat.call(lambda e: work.add_task(e, title, after or [], thread))

    async def nxc_task_claim(task: TaskId) -> Json:
        """Claim an open task whose dependencies are done, before working on it: two agents
        never hold one task (claims made apart are settled the same on every clone)."""
        return await chat.call(lambda e: work.claim(e, task))

    async def nxc_task_release(task: TaskId) -> Json:
        """Give back a task you hold (open again)."""
        return await chat.call(lambda e: work.release_task(e, task))

    async def nxc_task_done(task: TaskId) -> Json:
        """Mark a task you hold done (tasks waiting on it become claimable)."""
        return await chat.call(lambda e: work.finish_task(e, task))

    async def nxc_lease(
        paths: Annotated[list[str], Field(min_length=1, max_length=100, description=(
            "Repository-relative paths or globs (a folder covers what is under it)."))],
        minutes: Annotated[int, Field(ge=1, le=7 * 24 * 60)] = 30,
        thread: Annotated[str | None, Field(description="The thread the work is for.")] = None,
        shared: Annotated[bool, Field(description="Announce without refusing others.")] = False,
    ) -> Json:
        """Lease files before changing them: other handles' leases over them and their
        commits touching them are refused until it ends (it expires by itself)."""
        return await chat.call(lambda e: work.lease(e, paths, for_ms=minutes * 60_000,
                                                    thread=thread, shared=shared))

    async def nxc_leases() -> Json:
        """The active leases (holder, paths, thread, until in epoch ms, shared) and the
        leases that lost to an earlier one over the same paths (`lost`, with the reason)."""
        live, lost = await chat.call(lambda e: work.lease_state(e.conn, e.now_ms()))
        return {"leases": live, "lost": lost}

    async def nxc_release(
        lease: Annotated[str, Field(min_length=1, max_length=200, description="A lease id.")],
    ) -> Json:
        """End a lease you took (in this clone) once the change is committed."""
        return await chat.call(lambda e: work.release_lease(e, lease))

    async def nxc_approvals(
        all: Annotated[bool, Field(description="Decided approvals too.")] = False,
    ) -> Json:
        """The steps held for a person's approval (a persona's start, a round's start or
        hand-back): id, step, what is asked, state, and who decided, when, from where."""
        return {"approvals": await chat.call(lambda e: e.approvals(include_decided=all))}

    async def nxc_approve(approval: ApprovalId, note: Note = "") -> Json:
        """Approve a held step, as the person this server runs for (an agent's session is
        refused): the clone that holds it takes it now or when the decision syncs there."""
        return await chat.call(lambda e: e.decide(approval, "approved", note))

    async def nxc_deny(approval: ApprovalId, note: Note = "") -> Json:
        """Deny a held step, as the person this server runs for: the thread is told why."""
        return await chat.call(lambda e: e.decide(approval, "denied", note))

    for fn in (nxc_tasks, nxc_task_add, nxc_task_claim, nxc_task_release, nxc_task_done,
               nxc_lease, nxc_leases, nxc_release, nxc_approvals, nxc_approve, nxc_deny):
        _add(server, fn)


MEMORY_TOOLS = ("memory_search", "memory_remember", "sources_search", "ingest", "intent_get",
                "intent_set", "transcript_view")
CHAT_TOOLS = ("nxc_prime", "nxc_list", "nxc_send", "nxc_reply", "nxc_threads_show",
              "nxc_threads_list", "nxc_status", "nxc_wait", "nxc_search",
              "nxc_tasks", "nxc_task_add", "nxc_task_claim", "nxc_task_release", "nxc_task_done",
              "nxc_lease", "nxc_leases", "nxc_release", "nxc_approvals", "nxc_approve",
              "nxc_deny")
