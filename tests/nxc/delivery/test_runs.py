"""A session's run has one home (`nixx.nxc.delivery.runs`): what a run is made of, its
files (`folders`), and the NXC_* environment read once (`chain.NxcEnv`). The launches
themselves are exercised end to end by the other delivery tests; these check the pieces
in a real workspace, without starting a runtime."""

from __future__ import annotations

import json
import os

from nixx.log.workspace import init_workspace
from nixx.nxc.delivery import chain, runs, sessions
from nixx.nxc.delivery.chain import NxcEnv
from nixx.nxc.delivery.folders import SessionFolder, round_backend_file, session_of_run_file
from nixx.nxc.delivery.launcher import Deliverer


def _deliverer(tmp_path, **env: str) -> Deliverer:
    ws, _ = init_workspace(tmp_path / "proj", replica="ab12")
    return Deliverer.open(ws.db_path, {"PATH": "/usr/bin", "HOME": "/home/x", **env})


def test_the_environment_is_parsed_once_with_empty_and_bad_values_unset():
    env = NxcEnv.parse({"NXC_SESSION": "", "NXC_HOP": " 3 ", "NXC_MAX_HOPS": "-1",
                        "NXC_MAX_THREAD_RESUMES": "x", "NXC_MAX_CHAIN_RESUMES": "7",
                        "NXC_TRANSCRIPT_KEEP_DAYS": "0", "PATH": "/bin", "HOME": ""})
    assert (env.session, env.hop, env.max_hops, env.max_thread_resumes,
            env.max_chain_resumes, env.transcript_keep_days, env.path, env.home) == (
        None, 3, None, None, 7, 0, "/bin", None)
    assert NxcEnv.parse({"NXC_TRANSCRIPT_KEEP_DAYS": "soon"}).transcript_keep_days is None


def test_a_round_member_is_placed_below_the_rounds_opener_not_the_process_it_starts_in():
    env = NxcEnv.parse({"NXC_HOP": "5", "NXC_MAX_HOPS": "2", "NXC_MAX_CHAIN_RESUMES": "4"})
    assert chain.place(env, None) == (6, 2, {"chain": None, "max_thread_resumes": None,
                                             "max_chain_resumes": 4})
    # a person opened the round: neither NXC_HOP nor NXC_MAX_HOPS of this process counts,
    # the resume bounds of its shell still do
    assert chain.place(env, None, round_member=True) == (
        1, chain.DEFAULT_MAX_HOPS, {"chain": None, "max_thread_resumes": None,
                                    "max_chain_resumes": 4})


def test_a_run_is_written_with_its_hop_and_read_back_whole(tmp_path):
    d = _deliverer(tmp_path, NXC_TRANSCRIPT_KEEP_DAYS="9")
    runtime = {"start": ["agent", "{prompt}", "--session", "{session}"], "resume": [],
               "format": "none"}
    sid = sessions.create(d.local, persona="ab12/coder", thread_id="t-1", runtime=runtime,
                          hop=2, max_hops=8, parent_session=None)
    run = runs.prepare(d, session=sid, persona="ab12/coder", thread="t-1", runtime=runtime,
                       hop=2, mode="start", prompt="do it", backend=None)
    folder = SessionFolder(d.workspace.state_dir, sid)
    assert run.folder.path == folder.path and run.number == 1
    assert run.argv == ["agent", "do it", "--session", sid]
    assert run.env == {"NXC_ORIGIN": "ab12", "NXC_DB": d.workspace.db_path, "NXC_SESSION": sid,
                       "NXC_ACTOR": "ab12/coder", "NXC_HOP": "2", "PATH": "/usr/bin",
                       "HOME": "/home/x"}
    assert run.keep_days == 9 and run.backend_file is None
    with open(folder.prompt_file(1), encoding="utf-8") as fh:
        assert json.load(fh) == {"user": "do it"}
    assert os.stat(folder.prompt_file(1)).st_mode & 0o777 == 0o600

    runs.record_in_place(d, run, actor="ab12/alice")
    back = runs.Run.read(folder.run_file(1))
    assert back.to_json() == run.to_json() and back.hop == 2
    assert back.folder.stderr_log == os.path.join(folder.path, "stderr.log")
    assert session_of_run_file(run.run_file, d.workspace.state_dir) == sid
    assert session_of_run_file(str(tmp_path / "run-1.json"), d.workspace.state_dir) is None
    d.store.close()


def test_a_resume_is_the_next_run_with_the_backend_file_of_its_start(tmp_path):
    d = _deliverer(tmp_path)
    runtime = {"builtin": "nixx", "format": "nixx"}
    sid = sessions.create(d.local, persona="ab12/coder", thread_id="t-1", runtime=runtime,
                          hop=1, max_hops=8, parent_session=None)
    start = runs.prepare(d, session=sid, persona="ab12/coder", thread="t-1", runtime=runtime,
                         hop=1, mode="start", prompt="first",
                         backend={"base_url": "http://127.0.0.1:1/v1"})
    folder = SessionFolder(d.workspace.state_dir, sid)
    assert start.backend_file == folder.backend_file
    assert os.stat(folder.backend_file).st_mode & 0o777 == 0o600
    wake = {"thread_id": "t-2", "message_id": "m-1", "sender": "ab12/reviewer", "body": "ok"}
    resumed = runs.resume_run(d, sessions.require(d.local, sid), [wake])
    assert (resumed.mode, resumed.number, resumed.hop) == ("resume", 2, 1)
    assert resumed.backend_file == folder.backend_file and "--resume" in resumed.argv
    with open(folder.prompt_file(2), encoding="utf-8") as fh:
        assert "--- from ab12/reviewer in thread t-2:" in json.load(fh)["user"]
    assert round_backend_file(d.workspace.state_dir, "t-9") == os.path.join(
        d.workspace.state_dir, "rounds", "t-9.backend.json")
    d.store.close()
