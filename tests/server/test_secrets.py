"""API keys are `pydantic.SecretStr` in `Settings`: set in the environment they never show
in a repr, in printed settings, in `/v1/debug/*` or in an error, yet they reach the
backends and the server's own check (revealed only where a header is built or a
presented key compared: `nixx.secret`)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from nixx.config import Settings, load_settings
from nixx.secret import reveal
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LOCAL

from .conftest import Nixx

KEYS = {
    "NIXX_API_KEY": "server-sekrit-3141",
    "NIXX_CHAT_API_KEY": "chat-sekrit-2718",
    "NIXX_EMBED_API_KEY": "embed-sekrit-1618",
}


def _assert_hidden(text: str) -> None:
    for name, key in KEYS.items():
        assert key not in text, f"{name}'s value shows"


def test_every_key_field_is_a_secret() -> None:
    keys = {name for name in Settings.model_fields if name.endswith(("api_key", "token"))}
    assert keys == {"api_key", "chat_api_key", "embed_api_key"}
    for name in keys:
        assert "SecretStr" in str(Settings.model_fields[name].annotation), name


def test_keys_from_env_and_file_stay_out_of_repr_and_dumps(
    nixx_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NIXX_API_KEY", KEYS["NIXX_API_KEY"])
    monkeypatch.setenv("NIXX_CHAT_API_KEY", KEYS["NIXX_CHAT_API_KEY"])
    (nixx_home / "config.toml").write_text(f'embed_api_key = "{KEYS["NIXX_EMBED_API_KEY"]}"\n')
    settings = load_settings()
    for text in (repr(settings), str(settings), settings.model_dump_json(),
                 json.dumps(settings.model_dump(mode="json"))):
        _assert_hidden(text)
    assert reveal(settings.api_key) == KEYS["NIXX_API_KEY"]
    assert reveal(settings.chat_api_key) == KEYS["NIXX_CHAT_API_KEY"]
    assert reveal(settings.embed_api_key) == KEYS["NIXX_EMBED_API_KEY"]
    assert reveal(None) is None and reveal("plain") == "plain"


def test_the_keys_reach_the_backends_and_the_server_check(
    make_settings: Any, llm: FakeLLM
) -> None:
    settings = make_settings(api_key=KEYS["NIXX_API_KEY"], chat_api_key=KEYS["NIXX_CHAT_API_KEY"],
                             embed_api_key=KEYS["NIXX_EMBED_API_KEY"])
    good = {"Authorization": f"Bearer {KEYS['NIXX_API_KEY']}"}
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        r = client.post("/v1/chat/completions", headers=good, json={
            "model": "fake-model", "messages": [{"role": "user", "content": "hello there"}]})
        assert r.status_code == 200, r.text
        _assert_hidden(r.text)
        # the row-vector queue embeds the turn's rows at a quiet moment: now, with the key
        Nixx(client).idle()
        wrong = client.post("/v1/chat/completions", headers={"Authorization": "Bearer nope"},
                            json={"model": "m", "messages": []})
        assert wrong.status_code == 401
        _assert_hidden(wrong.text)
        debug = client.get("/v1/debug/context", headers=good, params={"query": "hello"})
        assert debug.status_code == 200, debug.text
        _assert_hidden(debug.text)
    chat = [r for r in llm.requests if r.path.endswith("/chat/completions")]
    embed = [r for r in llm.requests if r.path.endswith("/embeddings")]
    assert chat and embed
    headers = [{k.lower(): v for k, v in r.headers.items()} for r in chat + embed]
    assert {h["authorization"] for h in headers[: len(chat)]} == {
        f"Bearer {KEYS['NIXX_CHAT_API_KEY']}"}
    assert {h["authorization"] for h in headers[len(chat):]} == {
        f"Bearer {KEYS['NIXX_EMBED_API_KEY']}"}


def _nixx(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "nixx.cli.nixx", *args], env=env,
                          capture_output=True, text=True, timeout=240)


def test_cli_verbs_that_print_settings_show_no_key(nixx_home: Path, tmp_path: Path) -> None:
    folder = tmp_path / "notes"
    folder.mkdir()
    (folder / "a.md").write_text("# a note\n\nsomething to embed\n")
    env = {**os.environ, **KEYS, "NIXX_EMBED_PROVIDER": "openai",
           "NIXX_EMBED_BASE_URL": "http://127.0.0.1:9/v1", "NIXX_EMBED_MODEL": "fake-embed"}
    runs = [
        _nixx("db", "init", env=env),
        _nixx("db", "status", env=env),
        _nixx("db", "status", "--json", env=env),
        _nixx("db", "migrate", "--json", env=env),
        # an error that names the embeddings endpoint and its settings (nothing answers)
        _nixx("ingest", str(folder), "--json", env=env),
        # a refused bind names NIXX_API_KEY, never its value
        _nixx("serve", "--host", "0.0.0.0", "--port", "1", env={**env, "NIXX_API_KEY": ""}),
    ]
    assert [r.returncode for r in runs[:4]] == [0, 0, 0, 0], [r.stderr for r in runs]
    assert runs[4].returncode != 0 and runs[5].returncode != 0
    for run in runs:
        _assert_hidden(run.stdout + run.stderr)
