"""The named shapes of starting a session: the built-in runtime's backend file
(`Backend`), the run file a supervisor is started with (`RunSpec`: a `runs.Run` as
JSON, written by `runs.record_in_place`, read back by the supervisor), what a launch
answers (`Launched`), the chain it joins (`ChainBounds`), a session as read back
(`SessionRecord`), what one run of its runtime ended with (`RunOutcome`), its wakes and
loop bounds (`Wake`, `ResumeBound`, `Refusal`), a round's answers (`Said`), a step
held for a person (`HeldArgs`), and its
transcript (`Entry` in; `StoredEntry`, `TranscriptView`, `TranscriptHit`, `Appended`,
`Pruned` out).

Annotations only: imported under ``TYPE_CHECKING`` (``typing`` costs start-up); at run
time these are plain dicts, read from and written to JSON.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict


class Backend(TypedDict, total=False):
    """The built-in runtime's backend (`nixx.nxc.delivery.llm_backend`): nixx's settings
    as the start of the chain resolved them (`from_settings`), then the persona's."""

    base_url: str
    api_key: str | None
    model: str | None
    timeout: float
    background_timeout: float
    max_rounds: int
    tools_write: bool
    tools_delete: bool
    allow_hard_links: bool  # `read_file` reads a multiply linked file (NIXX_ALLOW_HARD_LINKS)
    config_file: str
    server_url: str  # where `nixx serve` is reached (`nixx.local_server.server_url`)
    server_api_key: str | None
    persona: str
    shared_memory: bool
    persona_model: str | None
    tools: list[str] | None
    workspace: str
    resolved_model: str


class StoredRuntime(TypedDict, total=False):
    """A persona's runtime as a session stores it (`sessions.stored_runtime`): the built-in
    one, or the argv templates of an agent CLI."""

    builtin: str  # "nixx": the built-in runtime (then no templates)
    start: list[str]  # argv templates (`runs.fill`)
    resume: list[str]  # [] when the runtime cannot resume a session
    format: str  # how its stdout is read (`stream_formats.FORMATS`)


class RunSpec(TypedDict):
    """One run of a session's runtime (``run-<n>.json``, 0600)."""

    session: str
    persona: str
    thread: str | None
    mode: str  # "start" | "resume"
    hop: int  # its depth in the spawn chain
    argv: list[str]
    env: dict[str, str]  # the cleared child environment (`chain.child_env`)
    cwd: str
    format: str  # the runtime's transcript format (`stream_formats`)
    db: str
    timeout_ms: int | None
    kill_at_ms: int | None
    round: str | None
    run: int
    backend_file: str | None
    keep_days: int | None  # NXC_TRANSCRIPT_KEEP_DAYS of the process that started it


class Taken(TypedDict):
    """A held step a person decided, taken (`dispatch.take_decided`)."""

    approval: str
    action: str  # start | resume | round | hand_back (`gates`)
    state: str  # approved | denied
    thread: str
    warnings: list[str]


class Launched(TypedDict):
    spawned: bool
    warnings: list[str]
    failed: NotRequired[str]


class SessionRecord(TypedDict):
    """A session as `nixx.nxc.delivery.sessions` reads it back (device-local): what
    `nxc session state` prints, and what a delivery decides on."""

    session: str  # the internal id (``s-`` + ULID)
    persona: str
    thread_id: str | None
    runtime: StoredRuntime  # the runtime it was started with
    runtime_session: str | None  # the runtime's own id (`bind`)
    hop: int
    max_hops: int
    parent_session: str | None
    state: str  # "running" | "exited" | "failed" | "lost"
    pid: int | None  # its supervisor's
    runs: int
    exit_code: int | None
    detail: str | None  # why it failed
    stderr_tail: str | None
    chain: str  # the first session of its spawn chain
    max_thread_resumes: int | None
    max_chain_resumes: int | None
    created: str | None
    updated: str | None
    queued: NotRequired[int]  # `nxc session state --session`: answers waiting for its next wake


class EntryFields(TypedDict, total=False):
    """The optional fields of an `Entry` (Claude Code's parser spreads a sub-agent's two
    into each of its entries)."""

    at: Any  # when (ms or ISO; `normalise` makes it ms); default: now
    toolUseId: str | None
    parentToolUseId: str | None  # a sub-agent's entries: the call that started it
    subagentType: str | None


class Entry(EntryFields):
    """One transcript entry as a format's parser makes it (`stream_parser.LineParser`)
    or a caller hands it to `TranscriptStore.append` (then checked: `normalise`)."""

    kind: str  # session_init, assistant, thinking, tool_use, tool_result, result, error, …
    data: Any  # the entry's JSON: its text, a tool's name and input, a result's usage


class StoredEntry(TypedDict):
    """A stored entry read back (`TranscriptStore.entries`; `nest` adds `children`)."""

    seq: int
    kind: str
    at: str | None
    toolUseId: NotRequired[str]
    parentToolUseId: NotRequired[str]
    subagentType: NotRequired[str]
    data: Any
    children: NotRequired[list[StoredEntry]]  # a sub-agent's entries under its call


class TranscriptView(TypedDict):
    """`nxc transcript show` (`TranscriptStore.show`)."""

    session: str
    entries: list[StoredEntry]
    count: int


class WakeFrom(TypedDict):
    """Who a wake carries a message from (all the loop bounds read: `sessions._count_resume`)."""

    thread_id: str
    sender: str


class Wake(WakeFrom):
    """A message a session is woken with (`Deliverer.turn_answers`, the wake queue:
    `sessions.deliver`, `finish_or_take`; `session_prompt.resume_prompt` writes them)."""

    message_id: str | None  # None: not a log message (the queue cannot skip it as seen)
    body: str


class ResumeBound(TypedDict):
    """The loop bound a resume would pass (`sessions._count_resume`)."""

    scope: str  # "thread" | "chain"
    count: int  # resumes by agents so far
    limit: int
    thread: str
    variable: str  # the setting that raises it: NXC_MAX_THREAD_RESUMES / _CHAIN_


class Refusal(TypedDict):
    """A resume refused by a loop bound (`ResumeRefused.info`; a `refused` outcome)."""

    thread: str
    session: str
    persona: str
    reason: str  # "resume_limit"
    scope: str
    count: int
    limit: int
    msg: str


class ExpiredSession(TypedDict):
    """A session's transcript a prune removes (or would: a dry run)."""

    session: str
    last_entry: str | None
    entries: int


class Pruned(TypedDict):
    """`nxc transcript prune` (`TranscriptStore.prune`; a session's first flush too)."""

    keep_days: int
    cutoff: str | None
    dry_run: bool
    sessions: list[ExpiredSession]
    entries: int


class Appended(TypedDict):
    """What `TranscriptStore.append` stored (a supervisor's flush, `nxc transcript append`)."""

    session: str
    stored: int
    first_seq: int | None  # None: nothing stored
    last_seq: int | None
    pruned: NotRequired[Pruned]  # the session's first flush pruned expired sessions


class TranscriptHit(TypedDict):
    """One `nxc transcript search` hit (`TranscriptStore.search`)."""

    session: str
    seq: int
    kind: str
    at: str | None
    persona: str | None  # None: the session is not on this machine's list
    snippet: str  # the matching text, the words in [brackets]


class ChainBounds(TypedDict):
    """The chain a session started from here joins, and its resume bounds
    (`chain.chain_bounds`; recorded with the session: `SessionRecord`)."""

    chain: str | None  # None: it starts a chain
    max_thread_resumes: int | None  # None: the default applies
    max_chain_resumes: int | None


class RunOutcome(TypedDict):
    """One run of a runtime (`supervisor.run_once`)."""

    code: int | None  # None: it did not start
    why: str | None  # it failed to start, or was killed (the round timeout)
    failure: str | None  # the cause in words when it exited non-zero
    stderr: str  # the tail of its stderr


class Said(TypedDict):
    """A member's answer in a round (`rounds._answers`, in member order): what
    `session_prompt.blocks` writes as a ``<message from="...">`` block."""

    sender: str
    body: str


class HeldArgs(TypedDict, total=False):
    """What a step held for a person runs once decided (`gates`), by its action:
    ``start``: `Deliverer.start`'s arguments (`persona` … `spawned_by`); ``round`` and
    ``hand_back``: `thread_id`; ``resume``: `session` and `actor`."""

    persona: str
    thread_id: str
    task: str
    sender: str
    channel: str | None
    earlier: list[Said] | None
    timeout_ms: int | None
    round_thread: str | None
    round_opener: str | None
    kill_at_ms: int | None
    spawned_by: str | None
    session: str
    actor: str
