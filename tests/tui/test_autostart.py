"""`nixx chat` starts a server when none answers, and stops it on exit (real processes)."""

from __future__ import annotations

import socket

import pytest

from nixx.config import load_settings
from nixx.errors import BackendUnavailable
from nixx.local_server import ensure_server, server_answers, start_server
from nixx.store import open_store
from nixx.testing.fake_llm import Reply
from nixx.tui.launch import run_chat

from .drive import SIZE


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server_env(monkeypatch, fake_llm, tmp_path):
    """The environment the autostarted server inherits: the scripted LLM as backend."""
    monkeypatch.setenv("NIXX_CHAT_BASE_URL", fake_llm.base_url)
    monkeypatch.setenv("NIXX_WORKSPACE", str(tmp_path))
    monkeypatch.setenv("NIXX_LOG_LEVEL", "warning")
    return fake_llm


def test_run_chat_autostarts_a_server_and_stops_it_on_exit(server_env, nixx_home, capsys):
    server_env.queue(Reply(content="hello from the autostarted server"))
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    assert not server_answers(url)
    seen: dict[str, object] = {}

    async def script(pilot):
        app = pilot.app
        for _ in range(5):
            await app.workers.wait_for_complete()
            await pilot.pause()
        seen["answering_during_chat"] = server_answers(url)
        app.prompt.load_text("hi there")
        await pilot.press("enter")
        for _ in range(5):
            await app.workers.wait_for_complete()
            await pilot.pause()
        seen["answer"] = app.query("AssistantMessage").last().body_text
        await pilot.press("ctrl+c", "ctrl+c")

    report = run_chat(
        load_settings(),
        url=url,
        runner=lambda app: app.run(headless=True, size=SIZE, auto_pilot=script),
    )
    assert seen == {"answering_during_chat": True, "answer": "hello from the autostarted server"}
    assert report["autostarted"] is True and report["turns"] == 1
    # the seconds before the chat draws are explained, not a blank screen
    assert f"no server answers at {url}; starting one" in capsys.readouterr().err
    assert report["server_exit_code"] is not None
    assert not server_answers(url)  # stopped on exit
    store = open_store(f"sqlite:///{nixx_home / 'nixx.db'}")  # the embedded default store
    try:
        rows = store.get_buffer(1)
        assert [(r.role, r.content, r.origin) for r in rows] == [
            ("user", "hi there", "tui"),
            ("assistant", "hello from the autostarted server", "tui"),
        ]
    finally:
        store.close()


def test_ensure_server_reuses_a_server_that_answers(server_env):
    url = f"http://127.0.0.1:{_free_port()}"
    first = ensure_server(url, load_settings())
    assert first is not None and first.running()
    try:
        assert ensure_server(url, load_settings()) is None
    finally:
        first.stop()
    assert not first.running()


def test_a_server_that_cannot_start_is_reported_with_its_log(server_env):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))  # bound, not listening: nothing answers, bind fails
        url = f"http://127.0.0.1:{taken.getsockname()[1]}"
        with pytest.raises(BackendUnavailable, match="exited with code"):
            start_server(url, load_settings(), timeout=60)


def test_no_autostart_for_a_remote_url():
    with pytest.raises(BackendUnavailable, match="only starts one on this machine"):
        ensure_server("http://192.0.2.1:9", load_settings())
