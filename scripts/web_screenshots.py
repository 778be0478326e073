"""Screenshots of every page of the memory browser, for docs/web.md (looked at by a
person before they are committed). Starts a live server with the scripted backend,
seeds a few turns, a summary, a source, an intent and an agent workspace, and saves
PNGs at phone size (390x844) in dark and light mode.

    .venv/bin/python scripts/web_screenshots.py [--out docs/web]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from nixx.config import load_settings
from nixx.log.workspace import init_workspace
from nixx.server.app import create_app
from nixx.testing.fake_llm import FakeLLM, Reply
from nixx.testing.live_server import LiveServer

TURNS = [
    ("We chose apsw over sqlite3 because it can load extensions.",
     "Good call: apsw bundles a current SQLite with FTS5."),
    ("The spare key to the boathouse is under the blue flowerpot.", "Noted, I'll remember that."),
    ("My daughter started violin lessons on Tuesday.", "Lovely! How is she finding it?"),
    ("Can you show <script>alert(1)</script> as text?", "It shows as text: <script> is escaped."),
]
SUMMARY = json.dumps({
    "summary": "apsw was chosen over sqlite3 for extension loading; the boathouse key is under "
               "the blue flowerpot; the user's daughter takes violin lessons.",
    "entities": {"tools": ["apsw", "sqlite3"], "people": ["daughter"]},
    "tags": ["storage", "family"],
})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", default="docs/web")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, FakeLLM() as llm:
        os.environ["NIXX_HOME"] = tmp
        ws = Path(tmp) / "project"
        ws.mkdir()
        (ws / "notes.md").write_text(
            "# Read cursor\n\nReplicas agree on the read cursor because it is a max register: "
            "a late operation with an older watermark cannot move it back.\n"
        )
        settings = load_settings(chat_base_url=llm.base_url, embed_provider="openai",
                                 embed_base_url=llm.base_url, embed_model="fake-embed",
                                 workspace=ws, recall_threshold=0.3, intent_interval=10_000)
        init_workspace(ws, replica="ab12")
        (ws / ".nxs-personas").mkdir()
        (ws / ".nxs-personas" / "reviewer.yaml").write_text(
            "handle: reviewer\nsystem_prompt: You review changes.\n"
        )
        (ws / ".nxs-personas" / "deployer.yaml").write_text(
            "handle: deployer\nsystem_prompt: You deploy.\napprove: [start]\nruntime:\n"
            f"  start: [{json.dumps(sys.executable)}, -c, pass, '{{prompt}}']\n"
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith("NXC_")}
        review = json.loads(subprocess.run(
            [sys.executable, "-m", "nixx.cli.nxc", "send", "--to", "reviewer", "--json",
             "please review the storage layer"], cwd=ws, env=env, check=True,
            capture_output=True, text=True).stdout)

        def nxc(*args: str, **extra: str) -> dict:
            done = subprocess.run([sys.executable, "-m", "nixx.cli.nxc", *args, "--json"],
                                  cwd=ws, env={**env, **extra}, check=True, capture_output=True,
                                  text=True)
            return json.loads(done.stdout)

        schema = nxc("task", "add", "migrate the schema to v7")
        nxc("task", "add", "release 0.9", "--after", schema["id"])
        nxc("task", "claim", nxc("task", "add", "fix the flaky sync test")["id"],
            NXC_ACTOR="reviewer")
        nxc("lease", "src/nixx/store/*.py", "--for", "2h", "--thread", "t-storage")
        nxc("lease", "docs/", "--for", "1h", "--shared", NXC_ACTOR="reviewer")
        nxc("send", "--to", "deployer", "deploy 0.9 to staging")  # held for a person
        with LiveServer(create_app(settings)) as server:
            base = server.base_url
            for text, answer in TURNS:
                llm.queue(Reply(content=answer))
                httpx.post(base + "/v1/chat/completions", timeout=30,
                           json={"messages": [{"role": "user", "content": text}]})
            llm.queue(Reply(content=SUMMARY))
            httpx.post(base + "/v1/episodic/summary", json={}, timeout=30)
            llm.queue(Reply(content="Why replicas agree on the read cursor."))
            httpx.post(base + "/v1/ingest", json={"path": "notes.md"}, timeout=60)
            httpx.post(base + "/v1/intent", json={"intent": "building the storage layer"})
            pages = {
                "search": "/ui?q=where+is+the+boathouse+key",
                "conversations": "/ui/conversations",
                "summary": "/ui/summaries/1",
                "sources": "/ui/sources",
                "context": "/ui/context?answer=4",
                "settings": "/ui/settings",
                "agents": "/ui/agents",
                "agent-thread": f"/ui/agents/threads/{review['thread_id']}",
            }
            from playwright.sync_api import sync_playwright

            with sync_playwright() as pw:
                browser = pw.chromium.launch(
                    executable_path=os.environ.get("NIXXTEST_CHROMIUM", "/usr/bin/chromium"),
                    args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                          "--disable-component-update", "--disable-sync", "--no-first-run"],
                )
                for scheme in ("dark", "light"):
                    context = browser.new_context(viewport={"width": 390, "height": 844},
                                                  color_scheme=scheme, device_scale_factor=1)
                    page = context.new_page()
                    for name, path in pages.items():
                        page.goto(base + path)
                        page.screenshot(path=str(out / f"{name}-{scheme}.png"), full_page=False)
                    context.close()
                browser.close()
    print(f"screenshots in {out}/")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
