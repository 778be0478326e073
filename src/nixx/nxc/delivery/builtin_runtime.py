"""The built-in runtime ``nixx``: ``python -m nixx.nxc.delivery.builtin_runtime --session S --prompt-file F``.

It runs a persona on the LLM nixx is configured with, so nxc works with no third-party
agent installed. Its settings are nixx's `Settings` (environment over
`$NIXX_HOME/config.toml`) as resolved by the process that started the chain, handed over
in a 0600 file (`--backend-file`), never through the environment, which holds only the
allowlist. The model: the persona's `model`, else `NIXX_CHAT_MODEL`, else the backend's
first listed model (`resolve_model`). HTTP goes through `nixx.llm.SyncChatClient`, so
failures are nixx errors naming the URL and the setting; a failed run prints the cause
(an `error` entry and a line on stderr) and exits 1.

Route: when `nixx serve` answers where the settings place it (and the persona did not
say `shared_memory: false`), turns go through its `/v1/chat/completions` with
`X-Nixx-Agent: <persona>` — recall, intent and the buffer are shared with the workspace
owner's memory; else straight to the backend.

Tools offered to the model:

- the persona's `tools` (absent: `read_file` and `list_dir`; `[]`: none; a list: exactly
  those, out of read_file, list_dir, write_file, delete_file), confined to the workspace;
- always `nxc_reply(thread, body, escalate)`, `nxc_send(to, body)`, `nxc_thread(thread)`,
  which act as the persona (`NXC_ACTOR`) through the nxc engine, like `nxc` would.

The conversation is kept in `.nxs/sessions/<session>/history.json` (`folders`); `--resume` appends
the new prompt to it. Every step is printed on stdout as a normalised transcript entry
(JSON lines: session_init, assistant, tool_use, tool_result, result, error), which the
supervisor stores. When the model finishes without having called `nxc_reply` while its
thread still awaits it — and without having called `nxc_send` (then it is waiting for
answers, and is resumed with them) — its final text is posted as the reply, so a model
that forgets the tool still delivers; the `result` entry says which happened.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING, Any

from nixx.nxc.delivery.folders import SessionFolder
from nixx.nxc.delivery.llm_backend import open_client as _client
from nixx.nxc.delivery.llm_backend import open_server_client as _server_client
from nixx.nxc.delivery.llm_backend import resolve_model, server_answers
from nixx.tools.schema import ToolSpec, function_spec, object_schema

if TYPE_CHECKING:
    from nixx.llm.stream import AnswerMessage
    from nixx.nxc.delivery.shapes import Backend

DEFAULT_TOOLS = ("read_file", "list_dir")
FILE_TOOLS = ("read_file", "list_dir", "write_file", "delete_file")


def emit(kind: str, data: dict[str, Any], **extra: Any) -> None:
    entry = {"kind": kind, "at": time.time_ns() // 1_000_000, **extra, "data": data}
    sys.stdout.write(json.dumps(entry, ensure_ascii=False) + "\n")
    sys.stdout.flush()


NXC_TOOLS: list[ToolSpec] = [
    function_spec(
        "nxc_reply",
        "Answer in an nxc thread (the only way to post into one).",
        object_schema(
            {
                "thread": {"type": "string", "description": "the thread id"},
                "body": {"type": "string", "description": "your answer (Markdown)"},
                "escalate": {
                    "type": "boolean",
                    "description": "ask the opener for a decision or help",
                },
            },
            ["thread", "body"],
            closed=False,
        ),
    ),
    function_spec(
        "nxc_send",
        "Start a new thread to a persona or a channel; the answer is delivered to you when "
        "it is complete.",
        object_schema(
            {
                "to": {"type": "string", "description": "a persona handle or a channel name"},
                "body": {"type": "string", "description": "the task (Markdown)"},
            },
            ["to", "body"],
            closed=False,
        ),
    ),
    function_spec(
        "nxc_thread",
        "Read a thread: its quorum and messages.",
        object_schema(
            {"thread": {"type": "string", "description": "the thread id"}}, ["thread"], closed=False
        ),
    ),
]


def file_tool_spec(name: str) -> ToolSpec:
    """A file tool as offered to the model: the server's own definition (`nixx.tools.files`)."""
    from nixx.tools.files import tool_spec

    return tool_spec(name)


class Agent:
    def __init__(self, session: str, backend: Backend) -> None:
        from nixx.nxc.delivery.dispatch import LiveDelivery
        from nixx.nxc.engine import Engine

        self.session = session
        self.backend = backend
        self.engine = Engine.open(delivery=LiveDelivery())
        self.replied = False
        self.sent = False
        wanted = backend.get("tools")
        names = DEFAULT_TOOLS if wanted is None else tuple(wanted)
        self.file_tools = [n for n in names if n in FILE_TOOLS]
        if not backend.get("tools_write", True) and "write_file" in self.file_tools:
            self.file_tools.remove("write_file")
        if not backend.get("tools_delete", True) and "delete_file" in self.file_tools:
            self.file_tools.remove("delete_file")
        self.unknown_tools = [n for n in names if n not in FILE_TOOLS]
        self.via_server = server_answers(backend)

    def tools(self) -> list[ToolSpec]:
        return [file_tool_spec(n) for n in self.file_tools] + NXC_TOOLS

    def call(self, name: str, raw: str) -> tuple[str, bool]:
        from nixx.errors import NixxError

        try:
            args = json.loads(raw) if raw and raw.strip() else {}
            if not isinstance(args, dict):
                raise ValueError("arguments must be a JSON object")
        except ValueError as exc:
            return f"error: the arguments of {name} are not a JSON object ({exc})", True
        try:
            if name == "nxc_reply":
                out = self.engine.reply(str(args.get("body", "")), thread=args.get("thread"),
                                        escalate=bool(args.get("escalate", False)))
                self.replied = True
                return json.dumps(out), False
            if name == "nxc_send":
                sent = self.engine.send(str(args.get("to", "")), str(args.get("body", "")))
                self.sent = True
                return json.dumps(sent), False
            if name == "nxc_thread":
                return json.dumps(self.engine.thread(str(args.get("thread", "")))), False
            if name in self.file_tools:
                from pathlib import Path

                from nixx.tools import files

                root = Path(self.backend["workspace"])
                if name == "read_file":
                    return files.read_file(
                        root, str(args.get("path", "")),
                        allow_hard_links=bool(self.backend.get("allow_hard_links"))), False
                if name == "list_dir":
                    return files.list_dir(root, str(args.get("path") or ".")), False
                if name == "write_file":
                    return files.write_file(root, str(args.get("path", "")),
                                            str(args.get("content", ""))), False
                return files.delete_file(root, str(args.get("path", ""))), False
        except NixxError as exc:
            return f"error: {exc.message}", True
        return f"error: unknown tool {name!r}", True

    def run(self, messages: list[dict[str, Any]]) -> tuple[int, list[dict[str, Any]]]:
        from nixx.errors import NixxError

        max_rounds = int(self.backend.get("max_rounds") or 8)
        final = ""
        via_server = self.via_server
        client = _server_client(self.backend) if via_server else _client(self.backend)
        try:
            for _ in range(max_rounds + 1):
                try:
                    body: dict[str, Any] = {"messages": messages, "tools": self.tools()}
                    if via_server:  # the server resolves the model as for any client
                        if self.backend.get("persona_model"):
                            body["model"] = self.backend["persona_model"]
                    else:
                        body["model"] = resolve_model(self.backend, client)
                    message = client.create(body)["choices"][0]["message"]
                    if not isinstance(message, dict):
                        raise ValueError("the completion's message is not an object")
                except NixxError as exc:
                    return self._failed(exc.message, exc.kind), messages
                except (KeyError, IndexError, TypeError, ValueError) as exc:
                    return self._failed(f"the LLM backend at {self.backend['base_url']} sent a "
                                        f"malformed completion ({exc})", "backend"), messages
                final, done = self._step(message, messages)
                if done:
                    break
        finally:
            client.close()
        auto = False
        if not self.replied and not self.sent and final.strip():
            auto = self._auto_reply(final)
        emit("result", {"text": final, "replied": self.replied or auto, "auto_reply": auto})
        return 0, messages

    def _failed(self, msg: str, kind: str) -> int:
        """The run failed: an `error` entry (the supervisor records it as the cause) and the
        same line on stderr (its tail is kept with the session)."""
        emit("error", {"msg": msg, "kind": kind})
        print(f"error: {msg}", file=sys.stderr, flush=True)
        return 1

    def _step(self, message: AnswerMessage, messages: list[dict[str, Any]]) -> tuple[str, bool]:
        """Record one assistant message and run its tool calls. → (its text, finished)."""
        content = message.get("content") or ""
        calls = message.get("tool_calls") or []
        entry: dict[str, Any] = {"role": "assistant", "content": content}
        if calls:
            entry["tool_calls"] = calls
        messages.append(entry)
        if content:
            emit("assistant", {"text": content})
        if not calls:
            return content, True
        for call in calls:
            fn = call.get("function") or {}
            name, raw = fn.get("name", ""), fn.get("arguments") or "{}"
            try:
                shown = json.loads(raw)
            except ValueError:
                shown = raw
            emit("tool_use", {"name": name, "input": shown}, toolUseId=call.get("id"))
            result, is_error = self.call(name, raw)
            emit("tool_result", {"content": result, "is_error": is_error},
                 toolUseId=call.get("id"))
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": result})
        return "", False

    def _auto_reply(self, text: str) -> bool:
        from nixx.nxc.delivery import sessions
        from nixx.nxc.delivery.localstore import LocalStore

        local = LocalStore.for_workspace(self.engine.workspace)
        row = sessions.get(local, self.session)
        tid = row["thread_id"] if row else None
        if not tid:
            return False
        try:
            summary = self.engine.thread(tid, with_messages=False)
        except Exception:  # noqa: BLE001
            return False
        if self.engine.handle not in summary["outstanding"]:
            return False
        self.engine.reply(text, thread=tid)
        return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m nixx.nxc.delivery.builtin_runtime",
                                     description="nxc's built-in runtime")
    parser.add_argument("--session", required=True)
    parser.add_argument("--prompt-file", required=True)
    parser.add_argument("--backend-file", required=True)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args(argv)
    with open(args.prompt_file, encoding="utf-8") as fh:
        prompt = json.load(fh)
    with open(args.backend_file, encoding="utf-8") as fh:
        backend = json.load(fh)
    history_path = SessionFolder.of_file(args.prompt_file).history_file
    messages: list[dict[str, Any]] = []
    if args.resume:
        try:
            with open(history_path, encoding="utf-8") as fh:
                messages = json.load(fh)
        except (OSError, ValueError):
            messages = []
    if not messages and prompt.get("system"):
        messages.append({"role": "system", "content": prompt["system"]})
    messages.append({"role": "user", "content": prompt["user"]})
    agent = Agent(args.session, backend)
    emit("session_init", {"session_id": args.session,
                          "model": backend.get("persona_model") or backend.get("model") or None,
                          "route": "nixx serve" if agent.via_server else "backend",
                          "url": (backend["server_url"] if agent.via_server
                                  else backend["base_url"]),
                          "tools": [t["function"]["name"] for t in agent.tools()],
                          "resume": args.resume})
    if agent.unknown_tools:
        emit("error", {"msg": "the persona names tools the built-in runtime does not have: "
                              + ", ".join(agent.unknown_tools)})
    code, messages = agent.run(messages)
    from nixx.nxc.delivery.runs import write_private

    write_private(history_path, messages)
    agent.engine.close()
    return code


if __name__ == "__main__":
    sys.exit(main())
