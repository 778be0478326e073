"""The named shapes nxc hands across its seams: what a delivery hook returns to the
engine (`nixx.nxc.delivery.hooks`), the receipts `Engine.send` / `Engine.reply`
return to their shells (the `nxc` CLI reads ``out["await"]["command"]``, the MCP chat
tools and the web's agents page return them as JSON), and the answers of the read verbs:
`Engine.list` (`Listing`), `prime` (`PrimeBlock`), `unread` (`UnreadMessage`), `status`
(`StatusReport`), `search` (`SearchHit`) and `thread` (`ThreadSummary`, its messages
`ThreadMessage`); `DeliveryOutcome` is a delivery outcome as `nixx.nxc.delivery.outcomes`
reads it back (a thread's and an operation's `failures`, `deliveries`, `refusals`).

Annotations only: every importer imports this module under ``TYPE_CHECKING`` (``typing``
costs a one-shot `nxc` process milliseconds: `tests/nxc/test_startup_imports.py`); at
run time these are plain dicts.
"""

from __future__ import annotations

from typing import Any, NotRequired, TypedDict

TYPE_CHECKING = False
if TYPE_CHECKING:
    from nixx.nxc.delivery.shapes import Taken


class ThreadSummary(TypedDict):
    """A thread and its derived quorum (`nixx.nxc.threads`): what `threads show`,
    `threads list`, `wait` and a reply's delivery read."""

    thread_id: str
    channel_id: str
    opener: str
    parent: str | None
    origin: str
    created: str | None
    expects: list[str]
    replied: list[str]
    outstanding: list[str]
    complete: bool
    stale: bool
    deadline: str | None
    escalated: bool
    message_count: int
    state: str  # "open" | "answered" | "stale"
    messages: NotRequired[list[ThreadMessage]]  # `Engine.thread(with_messages=True)`
    failures: NotRequired[list[DeliveryOutcome]]  # `Delivery.annotate_thread`


class ThreadMessage(TypedDict):
    """A message of a thread (`nixx.nxc.threads.messages`), in order."""

    message_id: str
    sender: str
    kind: str
    priority: str
    disposition: str  # "in_turn" | "next_session"
    escalate: bool
    body: str
    refs: dict[str, Any]  # as posted (a round's report: ``{"round": <channel>}``)
    created: str | None
    channel_id: str
    origin: str  # the replica that wrote it
    remote: NotRequired[bool]  # `Engine.thread`: written in another clone


class DeliveryOutcome(TypedDict):
    """A delivery outcome as read back (`nixx.nxc.delivery.outcomes`): the op's recorded
    fields, over its payload (which keys depends on `outcome`: the table in that module's
    docstring). Payloads are read from the synced log: only what nxc writes is named."""

    outcome: str  # "spawned" | "queued" | "exited" | "failed" | "refused" | "round"
    target: str  # a thread id, a session id, or a persona's handle (`refused` before a thread)
    actor: str
    at: str | None
    origin: str  # the replica that recorded it
    remote: NotRequired[bool]  # `outcomes.mark_remote`: recorded by another clone
    # the payload
    thread: NotRequired[str | None]
    session: NotRequired[str]
    persona: NotRequired[str]
    mode: NotRequired[str]  # spawned: "start" | "resume"
    hop: NotRequired[int]
    argv0: NotRequired[str]
    messages: NotRequired[list[str | None]]  # queued: the message ids
    code: NotRequired[int]  # exited, failed: the exit code
    reason: NotRequired[str]  # failed: the cause in words; refused: why (``hop_limit`` ...)
    scope: NotRequired[str]  # refused (resume_limit): "thread" | "chain"
    count: NotRequired[int]
    limit: NotRequired[int]
    msg: NotRequired[str]  # refused: the refusal in words
    to: NotRequired[str]  # refused (addressable): whom the send was to
    channel: NotRequired[str]  # round
    event: NotRequired[str]  # round: "posted"
    answered: NotRequired[list[str]]  # round: the members who answered
    silent: NotRequired[list[str]]


class Delivered(TypedDict):
    """`Delivery.on_send`: who the send started."""

    session: str | None  # the session started (a round: its first)
    spawned: bool
    warnings: list[str]
    sessions: NotRequired[list[str]]  # a channel round: every session it started
    refused: NotRequired[str]  # why nothing was started (``hop_limit``)
    failed: NotRequired[str]  # why the start failed (executable missing, no supervisor)
    approval: NotRequired[str]  # held for a person: the approval that starts it


class Resumed(TypedDict):
    """`Delivery.on_reply` (and `Deliverer.wake`): who the reply woke."""

    resumed: str | None  # the session resumed (or queued for)
    warnings: list[str]
    refused: NotRequired[str]  # ``resume_limit``
    dropped: NotRequired[bool]  # every message was handed over already
    queued: NotRequired[bool]  # the session runs: the answer waits for its next wake
    settled: NotRequired[bool]  # a round's last slot answered
    approval: NotRequired[str]  # the round's hand-back is held for a person


class Await(TypedDict):
    """How the sender waits for the answers."""

    command: str  # ``nxc wait --thread <id>``
    until: str


# `await` is a keyword: the functional form
SendReceipt = TypedDict("SendReceipt", {
    "thread_id": str,
    "message_id": str,
    "to": str,  # the persona's handle, or the channel's name
    "target": str,  # "persona" | "channel"
    "channel": str,
    "parent": str | None,
    "session": str | None,
    "sessions": NotRequired[list[str]],
    "expects": list[str],
    "members": NotRequired[list[str]],
    "approval": NotRequired[str],  # held for a person: `nxc approve` it
    "deadline": str | None,
    "spawned": bool,
    "warnings": list[str],
    "await": Await | None,  # None for an agent caller (its answers wake it)
})


class ReplyReceipt(TypedDict):
    posted: bool
    message_id: str
    thread_id: str
    channel_id: str
    escalate: bool
    complete: bool
    follow_up: bool
    expects: list[str] | None
    resumed: str | None
    warnings: list[str]


# -- the read verbs ----------------------------------------------------------------------


class AddressableList(TypedDict):
    """`Addressable.to_dict` of ``addressable: {personas: [...], humans: ...}``; the other
    modes are their name (``"general"``, ``"none"``)."""

    personas: list[str]
    humans: bool


class BuiltinRuntime(TypedDict):
    """`Runtime.to_dict` of a built-in runtime."""

    builtin: str


class CommandRuntime(TypedDict):
    """`Runtime.to_dict` of argv templates (a preset's or the persona's own)."""

    start: list[str]
    resume: list[str]
    transcript: str  # the transcript format; "stream-json" when none is declared
    preset: NotRequired[str]


class ListedPersona(TypedDict):
    handle: str
    job_title: str | None
    job_description: str | None
    direct: str  # the id of the direct channel between the caller and this persona
    addressable: str | AddressableList
    runtime: BuiltinRuntime | CommandRuntime | None
    file: str


class ListedChannel(TypedDict):
    """A channel channels.yaml declares."""

    name: str
    channel_id: str  # ``decl:<name>``
    kind: str
    members: list[str]
    expects: list[str]
    flow: str
    timeout: str | None  # as written
    description: str | None


class PublicChannel(TypedDict):
    """A public channel in the log (declared or not)."""

    channel_id: str
    name: str | None
    members: list[str]
    description: str | None
    declared: bool


class DeclarationsFolder(TypedDict):
    folder: str
    files: int  # how many declaration files were read


class Listing(TypedDict):
    """`Engine.list` (`nxc list`): the declared personas and channels, by name."""

    actor: str
    personas: list[ListedPersona]
    channels: list[ListedChannel]
    public_channels: NotRequired[list[PublicChannel]]  # only when the log has any
    declarations: DeclarationsFolder


class UnreadHeader(TypedDict):
    """An unread message without its body (`nixx.nxc.cursor`): what the prime block lists."""

    message_id: str
    thread_id: str
    channel_id: str
    sender: str
    kind: str
    priority: str
    disposition: str  # "in_turn" | "next_session"
    created: str | None


class UnreadMessage(UnreadHeader):
    """`Engine.unread`: an unread message, with its position in the channel."""

    pos: str


class UnreadCounts(TypedDict):
    """`cursor.prime`: what is unread, split by disposition."""

    actor: str
    count: int
    in_turn: list[UnreadHeader]
    next_session: list[UnreadHeader]


class OwedThread(TypedDict):
    """A thread that awaits the caller's reply."""

    thread_id: str
    channel_id: str
    opener: str
    deadline: str | None
    escalated: bool


class PrimeBlock(UnreadCounts):
    """`Engine.prime` (`nixx.nxc.prime`): the session-start block's data."""

    workspace: str
    owes: list[OwedThread]
    waiting_on_others: int  # threads the caller opened that still wait on others
    tasks_held: list[str]  # ids of the tasks the caller holds (`nixx.nxc.work`)
    leases_held: list[str]  # "paths (lease id, until)" of the caller's active leases
    leased_to_others: list[str]  # "paths (holder, lease id, thread, until)": others' exclusive
    lost: list[str]  # the caller's claims and leases that lost to an earlier one
    approvals_waiting: list[str]  # a person's: ids of the steps held for a decision


class OperationThread(TypedDict):
    """One thread of an operation's tree (`nixx.nxc.status`): states, never bodies."""

    thread_id: str
    channel_id: str
    parent: str | None
    depth: int
    state: str  # "open" | "answered" | "stale"
    awaiting_human: bool  # the root of a finished operation, or a step held for a person
    escalated: bool  # an escalation not yet answered
    opener: str
    expects: list[str]
    outstanding: list[str]
    stale: bool
    deadline: str | None
    readable: bool  # whether the caller may open it
    # `LiveDelivery.annotate_status`:
    deliveries: NotRequired[list[DeliveryOutcome]]  # its delivery outcomes
    failures: NotRequired[list[DeliveryOutcome]]
    session: NotRequired[str]  # its latest session on this machine
    session_state: NotRequired[str]


class Operation(TypedDict):
    """A tree of threads a first message started, shown whole."""

    root: str
    channel_id: str
    opener: str
    live: bool  # some thread is still open
    open: int
    stale: int
    needs_decision: bool
    awaiting_human: bool
    threads: list[OperationThread]  # depth first, the root first
    approvals: NotRequired[list[ApprovalRecord]]  # pending in its tree (`Engine.status`)
    refusals: NotRequired[list[DeliveryOutcome]]  # `LiveDelivery.annotate_status`


class LostStep(TypedDict):
    """A claim (or a release or done by a non-holder) that counted for nothing
    (`nixx.nxc.work.tasks`): who, from which clone, why; `session`: the agent session it
    was made in (told when it lost a race)."""

    kind: str  # claim | release | done
    by: str
    origin: str
    reason: str
    session: NotRequired[str]


class TaskRecord(TypedDict):
    """A task as `nxc task` shows it (`nixx.nxc.work.Task.as_json`)."""

    id: str
    title: str
    state: str  # open | claimed | done
    holder: str | None
    depends_on: list[str]
    blocked_by: list[str]  # the dependencies not done yet
    thread: str | None
    author: str
    conflicts: list[LostStep]


class LeaseRecord(TypedDict):
    """A lease (`nixx.nxc.work.lease_state`): active, or lost to an earlier one."""

    id: str
    holder: str
    origin: str
    paths: list[str]
    thread: str | None
    until: int  # epoch ms
    shared: bool
    session: str | None  # the agent session it was taken in: it ends with it
    lost_to: NotRequired[str]  # a lost lease: the lease that won
    reason: NotRequired[str]
    touched: NotRequired[list[str]]  # `blocking_leases`: the paths of a commit it covers


class ApprovalRecord(TypedDict):
    """A step held for a person (`nixx.nxc.approvals.Approval.as_json`)."""

    id: str
    step: str  # start | run | hand_back
    subject: str  # the persona, or the channel's supervisor
    thread: str
    what: str
    asked_by: str
    origin: str  # the clone that holds the step
    asked: int  # epoch ms
    state: str  # pending | approved | denied
    decided_by: str | None
    decided_origin: str | None
    decided: int | None
    note: str
    conflicts: list[dict[str, str]]  # decisions that did not count, with the reason
    taken: NotRequired[list[Taken]]  # `Engine.decide`: what this clone did with the step


class HeldTask(TypedDict):
    """A claimed task as `nxc status` shows it (`nixx.nxc.work`): who holds what."""

    id: str
    title: str
    holder: str
    thread: str | None


class StatusReport(TypedDict):
    """`Engine.status` (`nxc status`)."""

    actor: str
    operations: list[Operation]
    held: list[HeldTask]  # the claimed tasks, workspace-wide
    leases: list[LeaseRecord]  # the active leases (`nixx.nxc.work.leases`)
    lost_claims: list[dict[str, str]]  # claims that lost a race (`nixx.nxc.work.lost_claims`)
    lost_leases: list[LeaseRecord]  # leases that lost to an earlier one, not yet expired
    approvals: list[ApprovalRecord]  # steps held for a person (`nixx.nxc.approvals`)


class ReadMark(TypedDict):
    """`Engine.mark_read`: where the caller's read cursor in a channel stands."""

    channel_id: str
    reader: str
    pos: str | None  # the cursor (a message's position in the log); None: nothing read yet
    moved: bool  # False: it stood there or further already (a cursor never moves back)


class SearchHit(TypedDict):
    """`Engine.search`: a message the caller may read that matches, best first."""

    message_id: str
    channel_id: str
    thread_id: str
    sender: str
    body: str
    created: str | None


class ConflictItem(TypedDict):
    """A claim on a message or thread id that is not the one shown, or a register write
    on a thread from another origin than its owner (`reducer.conflicts`)."""

    kind: str  # "message" | "thread" | "thread_expects" | "thread_deadline"
    id: str
    op: str  # the claiming op's id
    origin: str
    clock: str
    reason: str  # refused (minted by another origin) or not shown (an earlier claim is)
    kept: str | None  # the op id of the claim shown, if any


class Conflicts(TypedDict):
    """`reducer.conflicts`: how many claims are not shown, the first items by id
    (`nxs sync status`)."""

    count: int
    items: list[ConflictItem]
