"""`POST /v1/ingest` on the real app (in process, lifespan and all), then
`POST /v1/sources/search` finding what was ingested by meaning."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from nixx.ingest.summary import DOCUMENT_SUMMARY_PROMPT
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LOCAL

from .conftest import Page, Web


@pytest.fixture
def client(settings) -> Iterator[TestClient]:
    with TestClient(base_url=LOCAL, app=create_app(settings)) as c:
        yield c


@pytest.fixture
def notes(workspace: Path) -> Path:
    folder = workspace / "notes"
    folder.mkdir()
    (folder / "garden.md").write_text(
        "# Garden\n\nTomatoes need six hours of direct sun and deep watering twice a week.\n"
    )
    (folder / "car.md").write_text(
        "# Car\n\nThe hatchback is due for new brake pads and an oil change in March.\n"
    )
    (folder / "tax.txt").write_text("Quarterly VAT returns are filed by the accountant.\n")
    return folder


def test_ingest_folder_then_search_by_meaning(
    client: TestClient, llm: FakeLLM, notes: Path
) -> None:
    llm.queue(Reply(content="Household notes: garden, car maintenance and taxes."))
    r = client.post("/v1/ingest", json={"path": "notes", "tags": ["home"]})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "created" and body["files"] == 3 and body["chunks"] == 3
    source = body["sources"][0]
    assert source["type"] == "document" and source["name"] == "notes"
    assert source["summary"] == "Household notes: garden, car maintenance and taxes."
    assert source["meta"]["tags"] == ["home"]
    assert source["meta"]["path"] == str(notes.resolve())
    assert body["summary_error"] is None
    # the LLM was asked for a display summary with the document summary prompt
    sent = llm.chat_requests[-1]["messages"]
    assert sent[0]["content"] == DOCUMENT_SUMMARY_PROMPT
    assert "Tomatoes need six hours" in sent[1]["content"]

    r = client.post("/v1/sources/search", json={"query": "when should the vehicle be serviced"})
    assert r.status_code == 200, r.text
    best = r.json()["results"][0]
    assert "brake pads" in best["content"]
    assert best["metadata"]["path"] == "car.md"
    assert best["source_name"] == "notes"

    # listed with the other sources, chunks readable
    listed = client.get("/v1/sources").json()["sources"]
    assert [s["id"] for s in listed] == [source["id"]]
    chunks = client.get(f"/v1/sources/{source['id']}/chunks").json()["chunks"]
    assert {c["metadata"]["path"] for c in chunks} == {"garden.md", "car.md", "tax.txt"}


def test_reingest_is_idempotent(client: TestClient, llm: FakeLLM, notes: Path) -> None:
    first = client.post("/v1/ingest", json={"path": "notes"}).json()
    asked = len(llm.chat_requests)
    again = client.post("/v1/ingest", json={"path": str(notes)}).json()
    assert again["status"] == "unchanged"
    assert again["sources"][0]["id"] == first["sources"][0]["id"]
    assert again["embedded"] == 0
    assert len(llm.chat_requests) == asked  # no new summary for unchanged content
    assert len(client.get("/v1/sources").json()["sources"]) == 1


def test_text_ingest_and_summary_failure_keeps_the_source(client: TestClient, llm: FakeLLM) -> None:
    llm.queue(Reply(status=500, error="model crashed"))
    r = client.post(
        "/v1/ingest",
        json={"text": "The wifi password rotates on the first of each month.", "name": "wifi"},
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["sources"][0]["summary"] is None
    assert "model crashed" in body["summary_error"]
    hits = client.post("/v1/sources/search", json={"query": "network credentials"}).json()
    assert "wifi password" in hits["results"][0]["content"]


def test_paths_outside_the_workspace_are_refused(
    client: TestClient, workspace: Path, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("private key material")
    os.symlink(secret, workspace / "escape.txt")
    os.symlink(tmp_path, workspace / "escape-dir")
    for path in (
        "../secret.txt",
        str(secret),
        "escape.txt",
        "escape-dir",
        "/etc/hostname",
        "../no-such-file.txt",  # outside and missing: still 403, existence is not revealed
        "/nonexistent/dir",
    ):
        r = client.post("/v1/ingest", json={"path": path})
        assert r.status_code == 403, (path, r.text)
        error = r.json()["error"]
        assert "outside the workspace" in error["message"] and error["param"] == "path"
    assert client.get("/v1/sources").json()["sources"] == []


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({}, 400, "exactly one of"),
        ({"path": "a", "url": "http://x"}, 400, "exactly one of"),
        ({"text": "hello"}, 400, 'needs a "name"'),
        ({"path": "missing.md"}, 404, "no such file or folder"),
        ({"url": "file:///etc/passwd"}, 400, "only http"),
        ({"path": "a", "bogus": 1}, 400, None),
    ],
)
def test_bad_requests(client: TestClient, body: dict, status: int, message: str | None) -> None:
    r = client.post("/v1/ingest", json=body)
    assert r.status_code == status, r.text
    if message:
        assert message in r.json()["error"]["message"]
    assert client.get("/v1/sources").json()["sources"] == []


def test_url_ingest_loopback_refused_by_default_allowed_when_set(
    make_settings, web: Web, llm: FakeLLM
) -> None:
    web.pages["/p"] = Page(
        b"<html><body><article><h1>Kilns</h1><p>A kiln fires clay at about twelve hundred "
        b"degrees until the glaze melts into glass.</p></article></body></html>"
    )
    url = web.base_url + "/p"
    with TestClient(base_url=LOCAL, app=create_app(make_settings())) as c:
        r = c.post("/v1/ingest", json={"url": url})
        assert r.status_code == 403
        assert "NIXX_INGEST_ALLOW_PRIVATE_URLS" in r.json()["error"]["message"]
    assert web.hits == []
    with TestClient(base_url=LOCAL, app=create_app(make_settings(ingest_allow_private_urls=True))) as c:
        r = c.post("/v1/ingest", json={"url": url, "tags": "pottery, craft"})
        assert r.status_code == 200, r.text
        source = r.json()["sources"][0]
        assert source["type"] == "web" and source["meta"]["tags"] == ["pottery", "craft"]
        hits = c.post("/v1/sources/search", json={"query": "ceramics oven temperature"}).json()
        assert "kiln fires clay" in hits["results"][0]["content"]


def test_an_unchanged_reingest_fills_a_missing_summary(
    client: TestClient, llm: FakeLLM, workspace: Path
) -> None:
    """The server route: the first summary failed (backend error), the re-ingest of the
    same, unchanged file makes it."""
    path = workspace / "owed.md"
    path.write_text("# Owed\n\nA summary is owed for this note.\n")
    llm.queue(Reply(status=500, error="backend hiccup"))
    first = client.post("/v1/ingest", json={"path": str(path)}).json()
    assert first["status"] == "created" and "backend hiccup" in first["summary_error"]
    assert first["sources"][0]["summary"] is None
    llm.queue(Reply(content="A note that owed a summary."))
    again = client.post("/v1/ingest", json={"path": str(path)}).json()
    assert again["status"] == "unchanged" and again["summary_error"] is None
    assert again["sources"][0]["summary"] == "A note that owed a summary."
