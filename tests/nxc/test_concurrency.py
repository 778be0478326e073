"""8 processes sending at once on one workspace: nothing lost, no lock error surfaced."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time

import pytest

from .conftest import cli_env, run

WORKER = r"""
import contextlib, io, json, os, sys, time
from nixx.cli.nxc import main
worker, count, go = sys.argv[1], int(sys.argv[2]), sys.argv[3]
while not os.path.exists(go):
    time.sleep(0.005)
failures = []
for i in range(count):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        rc = main(["send", "--to", "coder", f"worker {worker} message {i}", "--json"])
    if rc != 0:
        failures.append(out.getvalue())
print(json.dumps({"worker": worker, "failures": failures}))
"""


@pytest.mark.slow
def test_8_processes_x_500_sends_lose_nothing(ws, tmp_path):
    go = tmp_path / "go"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(n), "500", str(go)],
            cwd=ws.root, env=cli_env(NXC_ACTOR=f"w{n}"), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for n in range(8)
    ]
    time.sleep(0.5)  # let every worker import and wait at the gate (not needed for correctness)
    go.write_text("go")
    results = []
    for p in procs:
        out, err = p.communicate(timeout=900)
        assert p.returncode == 0, err
        assert "locked" not in err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["failures"] == [] for r in results), results
    conn = sqlite3.connect(ws.db_path)
    bodies = [r[0] for r in conn.execute("SELECT body FROM nxc_messages")]
    assert len(bodies) == 4000
    assert set(bodies) == {f"worker {w} message {i}" for w in range(8) for i in range(500)}
    assert conn.execute("SELECT count(*) FROM nxc_threads").fetchone()[0] == 4000
    assert conn.execute("SELECT count(*) FROM ops WHERE kind = 'post'").fetchone()[0] == 4000
    # one channel op per direct channel, however many processes raced to create it
    assert conn.execute("SELECT count(*) FROM ops WHERE kind = 'channel'").fetchone()[0] == 8
    clocks = [r[0] for r in conn.execute("SELECT clock FROM ops")]
    assert len(set(clocks)) == len(clocks)  # one replica never mints a clock twice


def test_separate_nxc_processes_at_once(ws):
    """The real executable, 8 at a time: every send is stored."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "nixx.cli.nxc", "send", "--to", "reviewer", f"p{n}", "--json"],
            cwd=ws.root, env=cli_env(NXC_ACTOR=f"p{n % 4}"), stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )
        for n in range(24)
    ]
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert json.loads(out)["thread_id"].startswith("t-")
    listing = run("nxc", "search", "p0 p1 p2 p3 p4 p5 p6 p7 p8 p9", "--json", "--limit", "100",
                  cwd=ws.root, env=cli_env(NXC_ACTOR="reviewer"))
    assert listing.returncode == 0
    conn = sqlite3.connect(ws.db_path)
    assert {r[0] for r in conn.execute("SELECT body FROM nxc_messages")} == {
        f"p{n}" for n in range(24)}
