"""`nixx forget` and `nixx db vacuum` as real subprocesses on a real SQLite store, with the
FakeLLM as chat and embedding backend: list, ask, delete; --yes, --json, --id, --log;
the re-summary runs before the command returns; `nixx export` afterwards holds no trace."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from nixx.config import load_settings
from nixx.memory.prompts import SUMMARY_PROMPT
from nixx.store import open_store
from nixx.testing.fake_llm import FakeLLM, Reply

SECRET = "hunter2xyz"


def nixx(*args: str, env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nixx.cli.nixx", *args],
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=240,
    )


@pytest.fixture
def env(nixx_home: Path, llm: FakeLLM) -> dict[str, str]:
    def respond(body: dict[str, Any]) -> Reply:
        if body["messages"][0]["content"] == SUMMARY_PROMPT:
            text = body["messages"][1]["content"]
            return Reply(content=json.dumps({"summary": f"Summary of: {text}"}))
        return Reply(content="ok")

    llm.responder = respond
    return {
        **os.environ,
        "NIXX_CHAT_BASE_URL": llm.base_url,
        "NIXX_EMBED_PROVIDER": "openai",
        "NIXX_EMBED_BASE_URL": llm.base_url,
        "NIXX_EMBED_MODEL": "fake-embed",
    }


def fill() -> dict[str, int]:
    store = open_store(load_settings().database_url)
    try:
        store.bind_embedder("fake-embed", 384)
        a = store.append_buffer("user", "we talked about the garden", "tui")
        b = store.append_buffer("user", f"the wifi password is {SECRET}", "tui")
        c = store.append_buffer("assistant", "noted", "tui")
        s = store.add_summary(
            f"Garden, and the wifi password {SECRET}.",
            FakeLLM.embedding_of("garden"),
            tags=[],
            entities={},
            start_buffer_id=a.id,
            end_buffer_id=c.id,
        )
        return {"a": a.id, "b": b.id, "c": c.id, "summary": s.id}
    finally:
        store.close()


def test_forget_lists_asks_and_deletes_then_summarises_again(
    env: dict[str, str], llm: FakeLLM, tmp_path: Path
) -> None:
    ids = fill()
    declined = nixx("forget", f"wifi {SECRET}", env=env, stdin="n\n")
    assert declined.returncode == 0, declined.stderr
    assert (
        f"buffer:{ids['b']}" in declined.stdout and f"summary:{ids['summary']}" in declined.stdout
    )
    assert "forget these 2 items? [y/N]" in declined.stdout
    assert "nothing deleted" in declined.stdout
    dry = nixx("forget", SECRET, "--json", env=env)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["ids"] == [f"buffer:{ids['b']}", f"summary:{ids['summary']}"]

    done = nixx("forget", f"wifi {SECRET}", env=env, stdin="y\n")
    assert done.returncode == 0, done.stderr
    assert "forgot 1 buffer rows, 1 summaries, 0 sources, 0 memories" in done.stdout
    assert "summarised again: 1 window" in done.stdout
    # the re-summary ran before the command returned, from the rows that remain
    [request] = [b for b in llm.chat_requests if b["messages"][0]["content"] == SUMMARY_PROMPT]
    assert request["messages"][1]["content"] == "USER: we talked about the garden\nASSISTANT: noted"

    out = tmp_path / "after.jsonl"
    export = nixx("export", str(out), env=env)
    assert export.returncode == 0, export.stderr
    text = out.read_text()
    assert SECRET not in text
    [log] = [json.loads(line) for line in text.splitlines() if '"type":"forget"' in line]
    assert log["kind"] == "query" and log["ids"]["buffer"] == [ids["b"]]
    assert nixx("forget", SECRET, env=env).stdout.strip() == f"nothing in memory matches {SECRET!r}"


def test_forget_by_id_json_log_and_errors(env: dict[str, str]) -> None:
    ids = fill()
    r = nixx("forget", "--id", f"summary:{ids['summary']}", "--id", f"buffer:{ids['a']}",
             "--yes", "--json", env=env)  # fmt: skip
    assert r.returncode == 0, r.stderr
    body = json.loads(r.stdout)
    assert body["forgotten"]["summary_ids"] == [ids["summary"]]
    assert body["forgotten"]["buffer_ids"] == [ids["a"]]
    assert body["repairs"] is None
    log = json.loads(nixx("forget", "--log", "--json", env=env).stdout)["log"]
    assert [e["kind"] for e in log] == ["query"] and SECRET not in json.dumps(log)
    human = nixx("forget", "--log", env=env)
    assert "query" in human.stdout and "1 buffer" in human.stdout
    missing = nixx("forget", "--id", "buffer:999", "--yes", env=env)
    assert missing.returncode == 1 and missing.stderr == "error: buffer row 999 does not exist\n"
    bad = nixx("forget", "--id", "row:1", "--yes", "--json", env=env)
    assert bad.returncode == 1 and "buffer:ID" in json.loads(bad.stdout)["error"]["msg"]
    neither = nixx("forget", env=env)
    assert neither.returncode == 1 and "QUERY" in neither.stderr
    vacuum = nixx("--json", "db", "vacuum", env=env)
    assert vacuum.returncode == 0, vacuum.stderr
    assert json.loads(vacuum.stdout)["backend"] == "sqlite"
    db = Path(load_settings().database_url.removeprefix("sqlite://"))
    assert SECRET.encode() in db.read_bytes()  # the other row still holds it
    nixx("forget", "--id", f"buffer:{ids['b']}", "--yes", env=env)
    assert SECRET.encode() not in db.read_bytes()
