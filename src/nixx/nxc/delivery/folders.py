"""Every path of a session and of a round, spelled once.

Device-local files beside the log (``.nxs/``, the workspace's state folder), readable by
this user only (folders 0700, files 0600: a backend file holds the backend's key):

    sessions/<session>/             `SessionFolder`: one session's runs
        backend.json                the built-in runtime's backend (`shapes.Backend`),
                                    written at the start, read by every run and down
                                    the chain (a child's environment holds no NIXX_*)
        prompt-<n>.json             the prompt of run n ({system?, user})
        run-<n>.json                run n (`shapes.RunSpec`): what its supervisor runs;
                                    the supervisor's command line names it, which is how
                                    the process tree says which session a process is in
                                    (`spawn.enclosing_sessions`: `session_of_run_file`)
        supervisor.log              the detached supervisor's stderr
        stderr.log                  the runtime's stderr (every run appends)
        history.json                the built-in runtime's conversation
    rounds/<thread>.backend.json    a round's backend, captured in the sender's process
                                    (whoever settles the round may be a member's, with no
                                    NIXX_* settings): its members' and its summary's

The files are written by `runs.write_private`; nothing here opens the device-local
store (`localstore`, ``local.sqlite``) or the log.
"""

from __future__ import annotations

import os

SESSIONS_DIR = "sessions"
ROUNDS_DIR = "rounds"
BACKEND_FILE = "backend.json"
HISTORY_FILE = "history.json"
SUPERVISOR_LOG = "supervisor.log"
STDERR_LOG = "stderr.log"


class SessionFolder:
    """``<state>/sessions/<session>/``: the files of one session (see the module)."""

    __slots__ = ("path", "backend_file", "history_file", "supervisor_log", "stderr_log")

    def __init__(self, state_dir: str, session: str) -> None:
        self._at(os.path.join(state_dir, SESSIONS_DIR, session))

    @classmethod
    def of_file(cls, path: str) -> SessionFolder:
        """The folder holding one of a session's files (a prompt or run file)."""
        folder = cls.__new__(cls)
        folder._at(os.path.dirname(os.path.abspath(path)))
        return folder

    def _at(self, path: str) -> None:
        self.path = path
        self.backend_file = os.path.join(path, BACKEND_FILE)
        self.history_file = os.path.join(path, HISTORY_FILE)
        self.supervisor_log = os.path.join(path, SUPERVISOR_LOG)
        self.stderr_log = os.path.join(path, STDERR_LOG)

    def __repr__(self) -> str:
        return f"SessionFolder({self.path!r})"

    def make(self) -> str:
        os.makedirs(self.path, mode=0o700, exist_ok=True)
        return self.path

    def next_run(self) -> int:
        """The number of the session's next run (its prompts so far + 1; the folder is
        made when missing)."""
        return len([f for f in os.listdir(self.make()) if f.startswith("prompt-")]) + 1

    def prompt_file(self, run: int) -> str:
        return os.path.join(self.path, f"prompt-{run}.json")

    def run_file(self, run: int) -> str:
        return os.path.join(self.path, f"run-{run}.json")


def session_of_run_file(run_file: str, state_dir: str) -> str | None:
    """The session whose run file `run_file` is (both paths resolved), or None when it is
    not a file of a session folder of `state_dir`."""
    folder = os.path.dirname(os.path.realpath(run_file))
    if os.path.dirname(folder) != os.path.join(os.path.realpath(state_dir), SESSIONS_DIR):
        return None
    return os.path.basename(folder)


def round_backend_file(state_dir: str, round_thread: str, *, make: bool = False) -> str:
    """``<state>/rounds/<thread>.backend.json`` (`make`: the folder is created)."""
    folder = os.path.join(state_dir, ROUNDS_DIR)
    if make:
        os.makedirs(folder, mode=0o700, exist_ok=True)
    return os.path.join(folder, f"{round_thread}.{BACKEND_FILE}")
