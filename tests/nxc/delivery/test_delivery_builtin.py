"""The built-in `nixx` runtime (`python -m nixx.nxc.delivery.builtin_runtime`) in real subprocesses, against
the scripted OpenAI-compatible backend: tools from the persona file plus nxc send/reply,
resume with the conversation kept, the transcript it writes."""

from __future__ import annotations

import json
import re

from nixx.testing.fake_llm import FakeLLM, Reply, ToolCall

from .harness import all_idle, make_workspace, poll

_THREAD = re.compile(r"Thread (t-[0-9a-z-]+) awaits")


def _text(messages, role):
    return "\n".join(str(m.get("content") or "") for m in messages if m["role"] == role)


def test_builtin_runtime_uses_persona_tools_and_replies_by_tool(tmp_path):
    with FakeLLM() as llm:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        (ws.root / "notes.txt").write_text("the launch code is blue")
        ws.persona("helper", runtime="nixx", tools=["read_file"], model="helper-model",
                   system_prompt="You are a careful helper.", job_title="Reader")

        def respond(body):
            msgs = body["messages"]
            tools_done = [m for m in msgs if m["role"] == "tool"]
            thread = _THREAD.search(_text(msgs, "user")).group(1)
            if not tools_done:
                return Reply(tool_calls=[ToolCall("read_file", {"path": "notes.txt"}, id="c1")])
            if len(tools_done) == 1:
                return Reply(tool_calls=[ToolCall("nxc_reply", {
                    "thread": thread, "body": "notes say: " + tools_done[0]["content"]}, id="c2")])
            return Reply(content="all done")

        llm.responder = respond
        receipt = ws.nxc_json("send", "--to", "helper", "what do the notes say?")
        waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                        check=False)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        thread = ws.nxc_json("threads", "show", receipt["thread_id"])
        assert thread["messages"][-1]["sender"] == "ab12/helper"
        assert thread["messages"][-1]["body"] == "notes say: the launch code is blue"

        first = llm.chat_requests[0]
        assert first["model"] == "helper-model"
        assert [t["function"]["name"] for t in first["tools"]] == [
            "read_file", "nxc_reply", "nxc_send", "nxc_thread"]
        system = first["messages"][0]
        assert system["role"] == "system"
        assert "You are ab12/helper" in system["content"]  # the prime block
        assert "You are a careful helper." in system["content"]
        assert "Job title: Reader" in system["content"]
        user = first["messages"][1]["content"]
        assert "what do the notes say?" in user
        assert f'thread "{receipt["thread_id"]}"' in user  # the obligation, real id

        poll(lambda: all_idle(ws), what="the session to end")
        entries = ws.nxc_json("transcript", "show", receipt["session"])["entries"]
        kinds = [e["kind"] for e in entries]
        assert kinds == ["session_init", "tool_use", "tool_result", "tool_use", "tool_result",
                         "assistant", "result"]
        assert entries[1]["data"] == {"name": "read_file", "input": {"path": "notes.txt"}}
        assert entries[1]["toolUseId"] == "c1"
        assert entries[-1]["data"]["replied"] is True and entries[-1]["data"]["auto_reply"] is False


def test_builtin_personas_delegate_and_resume_with_history(tmp_path):
    with FakeLLM() as llm:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        ws.persona("boss", runtime="nixx", tools=[])
        ws.persona("worker", runtime="nixx", tools=[])

        def respond(body):
            msgs = body["messages"]
            system = msgs[0]["content"]
            users = _text(msgs, "user")
            thread = _THREAD.search(users).group(1)  # the first obligation: own thread
            if "You are ab12/worker" in system:
                if not any(m["role"] == "tool" for m in msgs):
                    return Reply(tool_calls=[ToolCall("nxc_reply", {
                        "thread": thread, "body": "worker computed 42"}, id="w1")])
                return Reply(content="reported")
            if "New messages for you" not in users:
                if not any(m["role"] == "tool" for m in msgs):
                    return Reply(tool_calls=[ToolCall("nxc_send", {
                        "to": "worker", "body": "compute 6*7"}, id="b1")])
                return Reply(content="waiting for the worker")
            if msgs[-1]["role"] == "user":
                return Reply(tool_calls=[ToolCall("nxc_reply", {
                    "thread": thread, "body": "boss relays: worker computed 42"}, id="b2")])
            return Reply(content="finished")

        llm.responder = respond
        receipt = ws.nxc_json("send", "--to", "boss", "get 6*7 from the worker")
        waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                        check=False)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        thread = ws.nxc_json("threads", "show", receipt["thread_id"])
        bodies = [m["body"] for m in thread["messages"]]
        assert bodies == ["get 6*7 from the worker", "boss relays: worker computed 42"]
        # the resumed boss saw its whole first run (history kept) plus the worker's answer
        resumed = [b for b in llm.chat_requests if "New messages for you" in
                   _text(b["messages"], "user") and "You are ab12/boss" in b["messages"][0]["content"]]
        assert resumed
        roles = [m["role"] for m in resumed[0]["messages"]]
        assert roles[:5] == ["system", "user", "assistant", "tool", "assistant"]
        assert "worker computed 42" in resumed[0]["messages"][-1]["content"]
        poll(lambda: all_idle(ws), what="every session to end")
        sessions = {s["persona"]: s for s in ws.sessions()}
        assert sessions["ab12/boss"]["runs"] == 2 and sessions["ab12/worker"]["hop"] == 2


def test_builtin_final_text_is_posted_when_the_model_forgets_the_tool(tmp_path):
    with FakeLLM() as llm:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        ws.persona("plain", runtime="nixx")
        llm.queue(Reply(content="the plain answer"))
        receipt = ws.nxc_json("send", "--to", "plain", "say something")
        assert ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                      check=False).returncode == 0
        thread = ws.nxc_json("threads", "show", receipt["thread_id"])
        assert thread["messages"][-1]["body"] == "the plain answer"
        # absent `tools`: the default set
        assert [t["function"]["name"] for t in llm.chat_requests[0]["tools"]][:2] == [
            "read_file", "list_dir"]
        poll(lambda: all_idle(ws), what="the session to end")
        entries = ws.nxc_json("transcript", "show", receipt["session"])["entries"]
        assert entries[-1]["data"]["auto_reply"] is True


def test_builtin_backend_down_is_recorded_as_a_failed_run(tmp_path):
    with FakeLLM() as llm:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        ws.persona("fragile", runtime="nixx")
        llm.queue(Reply(status=500, error="model exploded"))
        receipt = ws.nxc_json("send", "--to", "fragile", "try")
        exited = poll(lambda: [o for o in ws.outcomes() if o["kind"] == "exited"],
                      what="the run's exit")
        assert exited[0]["payload"]["code"] == 1
        entries = ws.nxc_json("transcript", "show", receipt["session"])["entries"]
        errors = [e for e in entries if e["kind"] == "error"]
        assert any("model exploded" in json.dumps(e["data"]) for e in errors)
        assert ws.nxc_json("threads", "show", receipt["thread_id"])["outstanding"] == ["ab12/fragile"]


def test_builtin_runtime_is_configured_from_config_toml_in_a_bare_terminal(tmp_path):
    """A terminal with no NIXX_CHAT_* at all: the settings come from $NIXX_HOME/config.toml
    like `nixx serve`'s, and the model is the backend's first listed one (never "default")."""
    with FakeLLM(model="served-model") as llm:
        home = tmp_path / "operator-home"
        home.mkdir()
        (home / "config.toml").write_text(f'chat_base_url = "{llm.base_url}"\n'
                                          'chat_timeout = 30\n')
        ws = make_workspace(tmp_path, NIXX_HOME=str(home))
        for name in [k for k in ws.env if k.startswith("NIXX_CHAT_")]:
            del ws.env[name]
        ws.persona("reviewer", runtime="nixx",
                   system_prompt="You review changes and answer in three short bullet points.")
        llm.queue(Reply(content="- fine\n- fine\n- fine"))
        receipt = ws.nxc_json("send", "--to", "reviewer", "please review the storage layer")
        waited = ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                        check=False)
        assert waited.returncode == 0, waited.stdout + waited.stderr
        assert llm.chat_requests[0]["model"] == "served-model"
        thread = ws.nxc_json("threads", "show", receipt["thread_id"])
        assert thread["messages"][-1]["body"] == "- fine\n- fine\n- fine"


def test_builtin_runtime_with_a_backend_that_lists_no_model_says_what_to_set(tmp_path):
    with FakeLLM() as llm:
        llm.models = []
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url)
        ws.persona("reviewer", runtime="nixx")
        receipt = ws.nxc_json("send", "--to", "reviewer", "review")
        waited = ws.nxc_json("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                             check=False)
        assert waited["outcome"] == "failed"
        reason = waited["failures"][0]["reason"]
        assert "lists no models" in reason and "NIXX_CHAT_MODEL" in reason
        assert llm.chat_requests == []


def _server(llm, tmp_path):
    from nixx.config import load_settings
    from nixx.server.app import create_app
    from nixx.testing.live_server import LiveServer

    settings = load_settings(chat_base_url=llm.base_url, embed_provider="openai",
                             embed_base_url=llm.base_url, embed_model="fake-embed",
                             workspace=tmp_path, intent_interval=10_000)
    return LiveServer(create_app(settings))


def test_builtin_turns_go_through_a_reachable_nixx_server(tmp_path):
    """With `nixx serve` reachable where the settings place it, the persona's turns run
    through it: its memory prompt, the buffer rows tagged with the persona, none of the
    server's own tools (the persona brings its own)."""
    with FakeLLM() as llm, _server(llm, tmp_path) as server:
        ws = make_workspace(tmp_path, NIXX_CHAT_BASE_URL=llm.base_url,
                            NIXX_PORT=str(server.port))
        ws.persona("reviewer", runtime="nixx", tools=["read_file"],
                   system_prompt="You review changes.")
        ws.persona("loner", runtime="nixx", tools=[], shared_memory=False,
                   system_prompt="You keep to yourself.")

        def respond(body):
            msgs = body["messages"]
            if msgs[-1]["role"] == "tool":
                return Reply(content="done")
            tid = _THREAD.search(_text(msgs, "user")).group(1)
            return Reply(tool_calls=[ToolCall("nxc_reply", {"thread": tid, "body": "reviewed"},
                                              id="r1")])

        llm.responder = respond
        receipt = ws.nxc_json("send", "--to", "reviewer", "please review the storage layer")
        assert ws.nxc("wait", "--thread", receipt["thread_id"], "--timeout", "120",
                      check=False).returncode == 0
        first = llm.chat_requests[0]
        system = first["messages"][0]["content"]
        assert "You review changes." in system and system.count("You review changes.") == 1
        assert system.startswith("You are nixx, a personal AI assistant with long-term memory")
        names = [t["function"]["name"] for t in first["tools"]]
        assert names == ["read_file", "nxc_reply", "nxc_send", "nxc_thread"]
        rows = server.service._store.last_buffer_rows(10)
        mine = [r for r in rows if r.meta.get("agent") == "ab12/reviewer"]
        assert mine == rows  # every row of the turn carries the persona
        assert mine[0].role == "user" and "please review the storage layer" in mine[0].content
        poll(lambda: all_idle(ws), what="the session to end")
        init = ws.nxc_json("transcript", "show", receipt["session"])["entries"][0]
        assert init["data"]["route"] == "nixx serve"
        assert init["data"]["url"] == server.base_url

        before = len(server.service._store.last_buffer_rows(100))
        other = ws.nxc_json("send", "--to", "loner", "anything to add?")
        assert ws.nxc("wait", "--thread", other["thread_id"], "--timeout", "120",
                      check=False).returncode == 0
        poll(lambda: all_idle(ws), what="the loner's session to end")
        assert len(server.service._store.last_buffer_rows(100)) == before  # not through it
        init = ws.nxc_json("transcript", "show", other["session"])["entries"][0]
        assert init["data"]["route"] == "backend"
