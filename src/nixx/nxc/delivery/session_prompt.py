"""The session prompt a persona is started (or resumed) with.

    prime block      identity, whom it may address, the commands, how to answer
                     (left out when the persona says `prime: false`)
    system_prompt    the persona's own instructions (job title, description and the
                     expected output are added under it when declared)
    the task         the message body, who sent it, in which thread
    obligation       always: the real thread id and exactly how to answer
                     (finished, or `--escalate` for help / a decision)

`SessionPrompt.system` (prime + persona) and `.user` (task + obligation) are what the
built-in runtime sends as its system and first user message; `render()` joins them
into the one text an external CLI receives as ``{prompt}``.
"""

from __future__ import annotations

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from typing import Any

    from nixx.nxc.declarations import Declarations, Persona
    from nixx.nxc.delivery.shapes import Said, Wake


COMMANDS = """\
Commands (run them in a shell; every verb takes --json):
  nxc reply --thread <id> "<answer>"              answer in a thread (the only way to post into one)
  nxc reply --thread <id> --escalate "<question>" ask the opener for a decision or help
  nxc send --to <persona|channel> "<task>"        start a new thread (the answer comes back to you)
  nxc threads show <id>                           read a thread and its messages
  nxc list                                        who and what you may address"""

TOOLS = """\
Tools for the conversation:
  nxc_reply(thread, body, escalate=false)   answer in a thread (the only way to post into one)
  nxc_send(to, body)                        start a new thread to a persona or channel; the
                                            answer is delivered to you when it is complete
  nxc_thread(thread)                        read a thread and its messages"""


def _prime_wanted(prime: Any) -> bool:
    if isinstance(prime, dict):
        return bool(prime.get("nxc", prime.get("chat", True)))
    return bool(prime)


class SessionPrompt:
    def __init__(self, system: str, user: str) -> None:
        self.system = system
        self.user = user

    def render(self) -> str:
        return self.system.rstrip() + "\n\n" + self.user.strip() + "\n"


def _whom(decls: Declarations, persona: Persona) -> str:
    others = sorted(h for h in decls.personas if h != persona.handle
                    and decls.personas[h].addressable.mode != "none")
    channels = sorted(decls.channels)
    lines = []
    if others:
        lines.append("personas: " + ", ".join(others))
    if channels:
        lines.append("channels: " + ", ".join(channels))
    return "\n".join("  " + line for line in lines) or "  (nobody else is declared)"


def session_prompt(
    *, persona: Persona, decls: Declarations, thread: dict[str, Any], task: str, sender: str, builtin: bool,
    earlier: list[Said] | None = None, channel: str | None = None,
) -> SessionPrompt:
    """The prompt of a fresh session for `persona`, answering `thread`."""
    parts = []
    if _prime_wanted(persona.prime):
        parts.append(
            f"You are {persona.handle}, an agent in an nxc workspace (agent chat over a shared "
            "log). Messages reach you in threads; you answer in the thread you were given.\n"
            f"You may address:\n{_whom(decls, persona)}\n\n" + (TOOLS if builtin else COMMANDS)
        )
    own = [persona.system_prompt.strip()]
    if persona.job_title:
        own.append(f"Job title: {persona.job_title}")
    if persona.job_description:
        own.append(f"Job description: {persona.job_description}")
    if persona.expected_output:
        own.append(f"Expected output: {persona.expected_output}")
    parts.append("\n".join(own))
    tid = thread["thread_id"]
    where = f"channel {channel}, thread {tid}" if channel else f"thread {tid}"
    user = [f"Task from {sender} ({where}):\n\n{task.strip()}"]
    if earlier:
        user.append("Earlier answers in this round:\n\n" + blocks(earlier))
    user.append(obligation(tid, builtin))
    return SessionPrompt("\n\n".join(parts), "\n\n".join(user))


def obligation(thread_id: str, builtin: bool) -> str:
    if builtin:
        how = (f'call the nxc_reply tool with thread "{thread_id}" and your answer as body '
               "(escalate: true if you need a decision or help instead)")
    else:
        how = (f'run `nxc reply --thread {thread_id} "<your answer>"` when you are finished, '
               f'or `nxc reply --thread {thread_id} --escalate "<question>"` if you need a '
               "decision or help")
    return (f"Thread {thread_id} awaits your answer. To answer, {how}. Answering is how your "
            "work is delivered: text you only print is not seen by the sender.")


def resume_prompt(wakes: list[Wake], *, own_thread: str | None, builtin: bool) -> str:
    """What a resumed session receives: every answer queued for it, together."""
    lines = ["New messages for you:"]
    for w in wakes:
        lines.append(f"\n--- from {w['sender']} in thread {w['thread_id']}:\n{w['body'].strip()}")
    if own_thread:
        lines.append("\n" + obligation(own_thread, builtin))
    return "\n".join(lines)


def blocks(answers: list[Said]) -> str:
    """Answers as ``<message from="...">`` blocks, with a tag no answer contains."""
    tag = "message"
    n = 0
    while any(f"</{tag}" in a["body"] or f"<{tag} " in a["body"] for a in answers):
        n += 1
        tag = f"message-{n}"
    return "\n\n".join(f'<{tag} from="{a["sender"]}">\n{a["body"].strip()}\n</{tag}>'
                       for a in answers)
