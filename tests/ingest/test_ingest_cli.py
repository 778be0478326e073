"""`nixx ingest` as a real subprocess: output, errors, and the kill-half-way case."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from nixx.config import load_settings
from nixx.store import open_store
from nixx.testing.fake_llm import FakeLLM, Reply

from .conftest import Page, Web


def nixx(*args: str, env: dict[str, str], **kw) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "nixx.cli.nixx", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        **kw,
    )


@pytest.fixture
def env(llm: FakeLLM) -> dict[str, str]:
    return {**os.environ, "NIXX_CHAT_BASE_URL": llm.base_url}


def stored():
    store = open_store(load_settings().database_url)
    try:
        return store.list_sources(), store.count_memories()
    finally:
        store.close()


def test_ingest_file_folder_and_url_with_json(
    env: dict[str, str], llm: FakeLLM, web: Web, tmp_path: Path
) -> None:
    folder = tmp_path / "recipes"
    folder.mkdir()
    (folder / "soup.md").write_text("# Soup\n\nSimmer lentils with cumin for forty minutes.\n")
    (folder / "bread.txt").write_text("Knead the dough for ten minutes, then let it rise.\n")
    single = tmp_path / "todo.md"
    single.write_text("# Todo\n\n- renew the passport before the trip in May\n")
    web.pages["/page"] = Page(
        b"<html><body><article><h1>Tea</h1><p>Green tea is brewed at eighty degrees "
        b"for two minutes.</p></article></body></html>"
    )
    llm.responder = lambda body: Reply(content="A short display summary.")
    env = {**env, "NIXX_INGEST_ALLOW_PRIVATE_URLS": "true"}
    r = nixx(
        "ingest",
        str(folder),
        str(single),
        web.base_url + "/page",
        "--tags",
        "x,y",
        "--json",
        env=env,
    )
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    kinds = [(s["status"], s["source"]["type"]) for s in out["sources"]]
    assert kinds == [("created", "document"), ("created", "document"), ("created", "web")]
    assert all(s["source"]["summary"] == "A short display summary." for s in out["sources"])
    assert all(s["source"]["meta"]["tags"] == ["x", "y"] for s in out["sources"])
    assert out["chunks"] == sum(s["chunks"] for s in out["sources"]) == 4
    # progress went to stderr: files, chunks, embeddings
    assert re.search(r"embedded \d+/\d+", r.stderr)

    # again, human output: nothing changes, and the summary line says so
    r = nixx("ingest", str(folder), str(single), env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("unchanged source") == 2
    assert "ingested 2 source(s) (0 changed): 3 chunks, 0 embedded" in r.stdout
    sources, memories = stored()
    assert len(sources) == 3 and memories == 4


def test_errors_exit_1_and_store_nothing(env: dict[str, str], tmp_path: Path) -> None:
    r = nixx("ingest", str(tmp_path / "missing"), env=env)
    assert r.returncode == 1
    assert "error: no such file or folder" in r.stderr
    r = nixx("--json", "ingest", str(tmp_path / "missing"), env=env)
    assert r.returncode == 1
    assert json.loads(r.stdout)["error"]["kind"] == "not_found"
    fake = tmp_path / "paper.pdf"
    fake.write_text("not really a pdf")
    r = nixx("ingest", str(fake), "--json", env=env)
    assert r.returncode == 1
    assert "not a PDF" in json.loads(r.stdout)["error"]["msg"]
    r = nixx("ingest", "a", "b", "--name", "both", env=env)
    assert r.returncode == 1 and "--name names one source" in r.stderr
    assert stored() == ([], 0)


def test_no_llm_still_stores_the_source(tmp_path: Path) -> None:
    env = {**os.environ, "NIXX_CHAT_BASE_URL": "http://127.0.0.1:9/v1"}
    path = tmp_path / "n.txt"
    path.write_text("Some note worth keeping.\n")
    r = nixx("ingest", str(path), env=env)
    assert r.returncode == 0, r.stderr
    assert "stored without a summary" in r.stderr and "NIXX_CHAT_BASE_URL" in r.stderr
    sources, memories = stored()
    assert len(sources) == 1 and sources[0].summary is None and memories == 1


def test_killed_half_way_leaves_no_half_written_source(env: dict[str, str], tmp_path: Path) -> None:
    big = tmp_path / "big"
    big.mkdir()
    for i in range(300):
        paragraphs = [
            f"Note {i}, part {p}: "
            + " ".join(f"word{(i * 7 + p * 13 + k) % 997}" for k in range(60))
            for p in range(4)
        ]
        (big / f"note{i:03d}.md").write_text(f"# Note {i}\n\n" + "\n\n".join(paragraphs) + "\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nixx.cli.nixx", "ingest", str(big), "--no-summary"],
        env={**env, "NIXX_EMBED_BATCH_SIZE": "4"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    seen = None
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            m = re.search(r"embedded (\d+)/(\d+)", line)
            if m and 0 < int(m.group(1)) < int(m.group(2)):
                seen = (int(m.group(1)), int(m.group(2)))
                proc.send_signal(signal.SIGKILL)
                break
    finally:
        proc.kill()
        proc.wait(timeout=60)
    assert seen is not None, "the ingest never reported embedding progress"
    assert proc.returncode == -signal.SIGKILL  # it was killed, not finished
    assert stored() == ([], 0)  # no source, no orphan memories

    # the store is intact and usable: a later ingest of the same folder completes
    small = tmp_path / "small"
    small.mkdir()
    (small / "a.md").write_text("# A\n\nStill works after the crash.\n")
    r = nixx("ingest", str(small), "--no-summary", env=env)
    assert r.returncode == 0, r.stderr
    sources, memories = stored()
    assert [s.name for s in sources] == ["small"] and memories == 1


def test_killed_during_the_display_summary_the_next_ingest_fills_it(
    env: dict[str, str], llm: FakeLLM, tmp_path: Path
) -> None:
    import threading

    from nixx.ingest.summary import DOCUMENT_SUMMARY_PROMPT

    asked, release = threading.Event(), threading.Event()
    calls = {"n": 0}

    def responder(body: dict) -> Reply:
        if body["messages"][0]["content"] == DOCUMENT_SUMMARY_PROMPT:
            calls["n"] += 1
            if calls["n"] == 1:  # the first summary request hangs until the process is dead
                asked.set()
                release.wait(120)
                return Reply(content="too late")
            return Reply(content="A note about the garden: tomatoes and peppers.")
        return Reply(content="?")

    llm.responder = responder
    path = tmp_path / "garden.md"
    path.write_text("# Garden\n\nTomatoes and peppers, planted in May.\n")
    proc = subprocess.Popen(
        [sys.executable, "-m", "nixx.cli.nixx", "ingest", str(path)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        assert asked.wait(120), "the ingest never asked for its summary"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        release.set()
        proc.kill()
    assert proc.returncode == -signal.SIGKILL
    sources, _ = stored()
    assert len(sources) == 1 and sources[0].summary is None  # stored, summary pending

    r = nixx("ingest", str(path), "--json", env=env)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["sources"][0]["status"] == "unchanged" and out["summary_error"] is None
    sources, _ = stored()
    assert sources[0].summary == "A note about the garden: tomatoes and peppers."
    # and once it has one, an unchanged re-ingest asks nothing
    asked_before = calls["n"]
    assert nixx("ingest", str(path), env=env).returncode == 0
    assert calls["n"] == asked_before
