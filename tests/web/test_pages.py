"""The memory browser in a real headless Chromium against a live server: every page a
person uses, the forms that change memory, escaping, cross-site posts and the key."""

from __future__ import annotations

import http.server
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer

from .conftest import make_server

pytestmark = pytest.mark.slow


def chat(server: LiveServer, text: str, answer: str) -> None:
    server_llm: FakeLLM = server.app.state.service._llm  # type: ignore[assignment]
    del server_llm  # the backend is the test's FakeLLM; replies are queued by the caller
    r = httpx.post(f"{server.base_url}/v1/chat/completions", timeout=30,
                   json={"messages": [{"role": "user", "content": text}]})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["message"]["content"] == answer


def test_root_redirects_to_ui_and_search_finds_a_row(
    server: LiveServer, llm: FakeLLM, page: Any
) -> None:
    llm.queue(Reply(content="Noted."))
    chat(server, "The spare key to the boathouse is under the blue flowerpot.", "Noted.")
    page.goto(server.base_url + "/")
    assert page.url == server.base_url + "/ui"
    page.fill("input[name=q]", "boathouse key flowerpot")
    page.click("form.search button")
    first = page.locator("ol.results li").first
    assert "blue flowerpot" in first.inner_text()
    assert "buffer" in first.locator(".badge").inner_text()
    first.locator("a", has_text="in its transcript").click()
    hit = page.locator("article.row.hit")
    assert "blue flowerpot" in hit.inner_text()
    assert "Noted." in page.locator("main").inner_text()  # the rows around it


def test_a_message_holding_script_renders_as_text(
    server: LiveServer, llm: FakeLLM, page: Any
) -> None:
    evil = '<script>window.__pwned = 1</script><img src=x onerror="window.__pwned=2"><b>bold</b>'
    llm.queue(Reply(content="<i>tilted</i>"))
    chat(server, evil, "<i>tilted</i>")
    page.goto(server.base_url + "/ui/conversations")
    main = page.locator("main")
    assert evil in main.inner_text()
    assert "<i>tilted</i>" in main.inner_text()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("main .content b").count() == 0
    assert page.locator("main .content i").count() == 0
    assert page.locator("main img").count() == 0


def test_conversations_page_back_through_sessions(server: LiveServer, llm: FakeLLM, page: Any) -> None:
    service = server.service
    for i in range(60):
        server.call(lambda i=i: service.run(service._store.append_buffer, "user", f"message {i}"))
    page.goto(server.base_url + "/ui/conversations")
    text = page.locator("main").inner_text()
    assert "message 59" in text and "message 9" not in text.replace("message 59", "")
    page.locator("a", has_text="older").first.click()
    text = page.locator("main").inner_text()
    assert "message 9" in text and "message 59" not in text


def test_intent_is_set_and_cleared(server: LiveServer, page: Any) -> None:
    page.goto(server.base_url + "/ui/settings")
    page.fill("textarea[name=intent]", "building the storage layer")
    page.click("button[value=set]")
    assert "intent set" in page.locator(".notice").inner_text()
    r = httpx.get(server.base_url + "/v1/intent").json()
    assert r["intent"] == "building the storage layer"
    assert "building the storage layer" in page.locator(".intent").inner_text()
    page.click("button[value=clear]")
    assert httpx.get(server.base_url + "/v1/intent").json()["intent"] is None


def test_settings_switch_recall_and_interval(server: LiveServer, page: Any) -> None:
    page.goto(server.base_url + "/ui/settings")
    page.uncheck("input[name=recall]")
    page.fill("input[name=interval]", "250")
    page.click("form[action='/ui/settings'] button")
    status = httpx.get(server.base_url + "/v1/episodic/status").json()
    assert status["recall"] is False and status["interval"] == 250


def test_a_source_is_ingested_with_progress(
    server: LiveServer, llm: FakeLLM, workspace: Path, page: Any
) -> None:
    (workspace / "notes.md").write_text(
        "# Replicas\n\nReplicas agree on the read cursor because it is a max register.\n"
    )
    llm.queue(Reply(content="How replicas agree on the read cursor."))
    page.goto(server.base_url + "/ui/sources")
    page.fill("input[name=target]", "notes.md")
    page.click("form.search button")
    page.wait_for_selector("p.notice", timeout=30_000)  # the page refreshes until done
    assert "created" in page.locator("p.notice").inner_text()
    page.locator("p.notice a").click()
    assert "max register" in page.locator("main").inner_text()
    sources = httpx.get(server.base_url + "/v1/sources").json()["sources"]
    assert [s["name"] for s in sources] == ["notes.md"]


def test_an_ingest_that_fails_says_why(server: LiveServer, page: Any) -> None:
    page.goto(server.base_url + "/ui/sources")
    page.fill("input[name=target]", "../outside.md")
    page.click("form.search button")
    page.wait_for_selector("p.error", timeout=30_000)
    assert "workspace" in page.locator("p.error").inner_text()


def test_context_page_shows_the_next_system_prompt(server: LiveServer, page: Any) -> None:
    httpx.post(server.base_url + "/v1/intent", json={"intent": "writing the web page"})
    page.goto(server.base_url + "/ui/context")
    assert page.locator("pre.prompt").inner_text().startswith("You are nixx")
    assert "## Current Intent" in page.locator("pre.memory").inner_text()
    assert "writing the web page" in page.locator("pre.memory").inner_text()


@pytest.fixture
def attacker() -> Iterator[tuple[str, list[str]]]:
    """Another origin (another loopback port) serving a page that posts a form to nixx."""
    target: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            body = (
                f'<form id="f" method="post" action="{target[0]}/ui/intent">'
                '<input name="intent" value="pwned by another site"><input name="action" value="set">'
                '<input name="csrf" value="guess"></form>'
                '<script>document.getElementById("f").submit()</script>'
            ).encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{httpd.server_address[1]}", target
    httpd.shutdown()


def test_a_cross_site_form_post_is_refused(
    server: LiveServer, page: Any, attacker: tuple[str, list[str]]
) -> None:
    url, target = attacker
    target.append(server.base_url)
    with page.expect_response(lambda r: r.url.endswith("/ui/intent")) as answer:
        page.goto(url)
    assert answer.value.status == 403
    assert "refused" in page.locator("p.error").inner_text()
    assert httpx.get(server.base_url + "/v1/intent").json()["intent"] is None


def test_the_key_is_required_when_the_server_has_one(
    llm: FakeLLM, workspace: Path, page: Any
) -> None:
    with make_server(llm, workspace, api_key="sekrit-key-123456") as server:
        page.goto(server.base_url + "/ui/settings")
        assert page.url.endswith("/ui/login")
        page.fill("input[name=key]", "wrong")
        page.click("main form button")
        assert "wrong key" in page.locator("p.error").inner_text()
        page.fill("input[name=key]", "sekrit-key-123456")
        page.click("main form button")
        assert page.url.endswith("/ui")
        cookies = page.context.cookies()
        assert [(c["httpOnly"], c["sameSite"]) for c in cookies] == [(True, "Strict")]
        assert "sekrit" not in cookies[0]["value"]
        assert page.evaluate("document.cookie") == ""
        page.goto(server.base_url + "/ui/settings")
        assert page.url.endswith("/ui/settings")
        # the cookie opens the page, not the JSON API
        cookie = {cookies[0]["name"]: cookies[0]["value"]}
        assert httpx.get(server.base_url + "/v1/intent", cookies=cookie).status_code == 401
        assert httpx.get(server.base_url + "/ui/settings", cookies=cookie).status_code == 200
        assert httpx.get(server.base_url + "/ui/settings").status_code == 303


def test_agents_page_without_a_workspace_log_says_how(server: LiveServer, page: Any) -> None:
    page.goto(server.base_url + "/ui/agents")
    assert "nxs init" in page.locator("main").inner_text()


def test_agents_page_shows_the_operation_tree_and_a_thread(
    server: LiveServer, workspace: Path, page: Any
) -> None:
    from nixx.log.workspace import init_workspace

    init_workspace(workspace, replica="ab12")
    (workspace / ".nxs-personas").mkdir()
    (workspace / ".nxs-personas" / "coder.yaml").write_text(
        "handle: coder\nsystem_prompt: You write code.\n"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}
    proc = subprocess.run(
        [sys.executable, "-m", "nixx.cli.nxc", "send", "--to", "coder", "--json",
         "please write the <b>parser</b>"],
        cwd=workspace, env=env, capture_output=True, text=True,  # as the server's user
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    thread = json.loads(proc.stdout)["thread_id"]
    page.goto(server.base_url + "/ui/agents")
    tree = page.locator("ul.tree").inner_text()
    assert thread in tree and "open" in tree.lower()
    page.locator("a", has_text=thread).click()
    main = page.locator("main")
    assert "please write the <b>parser</b>" in main.inner_text()
    assert page.locator("main .content b").count() == 0


def test_agents_page_claims_finishes_and_releases_from_the_browser(
    server: LiveServer, workspace: Path, page: Any
) -> None:
    """Tasks and leases on the agents page (issue 43): a task added with `nxc task` is
    claimed and finished from the page by the person who runs the server; another task
    waits on it until then; a lease taken with `nxc lease` by that person is released
    from the page, one another handle holds is shown without a button."""
    from nixx.log.workspace import init_workspace

    init_workspace(workspace, replica="ab12")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}

    def nxc(*args: str, actor: str | None = None) -> Any:
        proc = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", *args, "--json"],
                              cwd=workspace, capture_output=True, text=True, timeout=60,
                              env={**env, **({"NXC_ACTOR": actor} if actor else {})})
        assert proc.returncode == 0, proc.stderr
        return json.loads(proc.stdout)

    first = nxc("task", "add", "write the <b>parser</b>")
    second = nxc("task", "add", "ship it", "--after", first["id"])
    mine = nxc("lease", "src/parser.py", "--for", "1h")
    nxc("lease", "docs/", "--for", "1h", actor="reviewer")
    page.goto(server.base_url + "/ui/agents")
    tasks = page.locator("ul.tasks")
    assert "write the <b>parser</b>" in tasks.inner_text()  # escaped, never markup
    assert page.locator("ul.tasks b").count() == 0
    assert f"waits on {first['id']}" in tasks.inner_text()
    assert tasks.locator("li", has_text="ship it").locator("button").count() == 0
    tasks.locator("li", has_text="parser").get_by_role("button", name="Claim").click()
    assert "task claimed" in page.locator("main").inner_text()
    assert "held by" in page.locator("ul.tasks li", has_text="parser").inner_text()
    page.locator("ul.tasks li", has_text="parser").get_by_role("button", name="Done").click()
    assert "task done" in page.locator("main").inner_text()
    assert page.locator("ul.tasks li", has_text="ship it").get_by_role(
        "button", name="Claim").count() == 1  # its dependency is done
    leases = page.locator("ul.leases")
    assert "src/parser.py" in leases.inner_text() and "ab12/reviewer" in leases.inner_text()
    assert leases.locator("li", has_text="docs").locator("button").count() == 0
    leases.locator("li", has_text="src/parser.py").get_by_role("button", name="Release").click()
    assert "lease released" in page.locator("main").inner_text()
    assert mine["id"] not in page.locator("main").inner_text()
    held = nxc("task", "list")["tasks"]
    assert {t["id"]: t["state"] for t in held} == {first["id"]: "done", second["id"]: "open"}


def test_agents_page_approves_a_held_start_and_replies_in_a_thread(
    server: LiveServer, workspace: Path, page: Any, tmp_path: Path
) -> None:
    """Approvals on the agents page (issue 43): a persona declaring `approve: [start]` is
    held when someone sends to it; the page lists what waits for the person who runs the
    server, who approves with a note — the held start is taken at once (its runtime
    runs) — and a denied one tells the thread why; a reply is posted from a thread's page."""
    import time

    import yaml

    from nixx.log.workspace import init_workspace

    init_workspace(workspace, replica="ab12")
    started = tmp_path / "started"
    folder = workspace / ".nxs-personas"
    folder.mkdir()
    for name in ("deployer", "migrator"):
        (folder / f"{name}.yaml").write_text(yaml.safe_dump({
            "handle": name, "system_prompt": "You act.", "approve": ["start"],
            "runtime": {"start": [sys.executable, "-c",
                                  f"open({str(started)!r} + {name!r}, 'w').close()",
                                  "{prompt}"]}}))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("NXC_", "NIXX_"))}

    def nxc(*args: str, actor: str | None = None) -> Any:
        proc = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", *args, "--json"],
                              cwd=workspace, capture_output=True, text=True, timeout=60,
                              env={**env, **({"NXC_ACTOR": actor} if actor else {})})
        assert proc.returncode == 0, proc.stdout + proc.stderr
        return json.loads(proc.stdout)

    deploy = nxc("send", "--to", "deployer", "deploy <b>now</b>")  # as the server's user
    migrate = nxc("send", "--to", "migrator", "migrate the schema", actor="lead")
    page.goto(server.base_url + "/ui/agents")
    waiting = page.locator("ul.approvals")
    assert deploy["approval"] in waiting.inner_text()
    assert "start ab12/deployer" in waiting.inner_text()
    assert "awaiting approval" in page.locator("section.op", has_text=deploy["thread_id"]).inner_text()
    row = waiting.locator("li", has_text="ab12/deployer")
    row.locator("input[name=note]").first.fill("ship <i>it</i>")
    row.get_by_role("button", name="Approve").click()
    assert "approved: the step goes on" in page.locator("main").inner_text()
    for _ in range(600):  # the runtime runs detached, under its supervisor
        if (tmp_path / "starteddeployer").exists():
            break
        time.sleep(0.1)
    assert (tmp_path / "starteddeployer").exists()
    row = page.locator("ul.approvals li", has_text="ab12/migrator")
    row.locator("input[name=note]").nth(1).fill("not during the freeze")
    row.get_by_role("button", name="Deny").click()
    assert "denied: the thread is told why" in page.locator("main").inner_text()
    assert page.locator("ul.approvals").count() == 0
    decided = {a["id"]: a for a in nxc("approvals", "--all")["approvals"]}
    assert decided[deploy["approval"]]["note"] == "ship <i>it</i>"
    assert decided[migrate["approval"]]["state"] == "denied"
    assert not (tmp_path / "startedmigrator").exists()
    shown = nxc("threads", "show", migrate["thread_id"], actor="lead")
    assert "not during the freeze" in json.dumps(nxc("status", "--thread", migrate["thread_id"],
                                                     actor="lead"))
    assert shown["messages"][0]["body"] == "migrate the schema"
    # a reply from the thread's page, as the person who runs the server (its opener: a
    # follow-up to the deployer)
    page.goto(server.base_url + f"/ui/agents/threads/{deploy['thread_id']}")
    page.fill("textarea[name=body]", "the <b>release</b> branch")
    page.get_by_role("button", name="Reply").click()
    assert "reply posted" in page.locator("main").inner_text()
    assert "the <b>release</b> branch" in page.locator("main").inner_text()
    assert page.locator("main .content b").count() == 0


SUMMARY_REPLY = (
    '{"summary": "The boathouse key is under the red flowerpot.", '
    '"entities": {"concepts": ["boathouse"]}, "tags": ["home"]}'
)


def test_a_summary_is_edited_and_deleted(server: LiveServer, llm: FakeLLM, page: Any) -> None:
    llm.queue(Reply(content="Noted."))
    chat(server, "The spare key to the boathouse is under the blue flowerpot.", "Noted.")
    llm.queue(Reply(content=SUMMARY_REPLY))
    made = httpx.post(server.base_url + "/v1/episodic/summary", json={}, timeout=30).json()
    sid = made["summary"]["id"]
    page.goto(server.base_url + "/ui/summaries")
    assert "red flowerpot" in page.locator("main").inner_text()
    page.locator("a", has_text=f"summary {sid}").first.click()
    page.fill("textarea[name=content]", "The boathouse key is under the blue flowerpot.")
    page.fill("input[name=tags]", "home, keys")
    embeds_before = len(llm.embed_requests)
    page.click("form.stack button")
    assert "re-embedded" in page.locator(".notice").inner_text()
    listed = httpx.get(server.base_url + "/v1/episodic/summaries").json()["summaries"]
    assert [(s["content"], s["tags"]) for s in listed] == [
        ("The boathouse key is under the blue flowerpot.", ["home", "keys"])
    ]
    assert any("blue flowerpot" in str(r) for r in llm.embed_requests[embeds_before:])
    page.click("button.danger")
    assert f"summary {sid} deleted" in page.locator(".notice").inner_text()
    assert httpx.get(server.base_url + "/v1/episodic/summaries").json()["summaries"] == []


def test_a_source_is_deleted_with_its_memories(
    server: LiveServer, llm: FakeLLM, workspace: Path, page: Any
) -> None:
    (workspace / "secret.md").write_text("The vault code is 4711.\n")
    llm.queue(Reply(content="A vault code."))
    r = httpx.post(server.base_url + "/v1/ingest", json={"path": "secret.md"}, timeout=60)
    source_id = r.json()["sources"][0]["id"]
    page.goto(server.base_url + f"/ui/sources/{source_id}")
    assert "4711" in page.locator("main").inner_text()
    page.click("button.danger")
    assert "deleted" in page.locator(".notice").inner_text()
    assert httpx.get(server.base_url + "/v1/sources").json()["sources"] == []
    assert httpx.get(server.base_url + f"/v1/sources/{source_id}").status_code == 404


def test_a_bad_id_is_a_400_page_not_a_500(server: LiveServer) -> None:
    r = httpx.get(server.base_url + "/ui/conversations?before=abc")
    assert r.status_code == 400 and "whole number" in r.text
    r = httpx.get(server.base_url + f"/ui/conversations?around={2**63}")
    assert r.status_code == 400
    for largest in (f"around={2**63 - 1}", f"around={2**63 - 5}", f"before={2**63 - 1}"):
        r = httpx.get(server.base_url + f"/ui/conversations?{largest}")  # in range: no overflow
        assert r.status_code == 200, (largest, r.text)
    r = httpx.get(server.base_url + f"/ui/context?answer={2**63 - 1}")
    assert r.status_code < 500, r.text


def test_context_page_lists_a_recalled_excerpt(server: LiveServer, llm: FakeLLM, page: Any) -> None:
    llm.queue(Reply(content="Noted."))
    chat(server, "The spare key to the boathouse is under the blue flowerpot.", "Noted.")
    httpx.post(server.base_url + "/v1/buffer/clear")
    server.call(server.service._row_vectors.flush)
    page.goto(server.base_url + "/ui/context?query=The+spare+key+to+the+boathouse+is+where%3F")
    rows = page.locator("table.grid tbody tr")
    assert rows.count() >= 1
    assert "buffer" in rows.first.inner_text() and "blue flowerpot" in rows.first.inner_text()
