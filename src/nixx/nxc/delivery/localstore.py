"""The device-local store: `.nxs/local.sqlite`, beside the workspace log, never synced.

Sessions (which process runs for which persona, bound to which runtime session id),
the wake queue, channel rounds in progress and transcripts are facts about THIS
machine's processes. They live in their own SQLite file, not in the log's `ops` table,
so nothing that syncs the log (which reads `ops` only) can ever carry them: there is no
flag to forget and no filter to get wrong. Deleting the file loses only device state
(transcripts, session bookkeeping); every message and delivery outcome is in the log.

    meta(key, value)
    nixx_migrations(version, name, applied_at)          the schema steps run (`nixx.migrations`)
    sessions(session_id, persona, thread_id, runtime, runtime_session, hop, max_hops,
             parent_session, state, pid, runs, exit_code, detail, created, updated,
             stderr_tail, chain, max_thread_resumes, max_chain_resumes)
                                                        stderr_tail: the last failed run's;
                                                        chain: its chain's first session
    resume_counts(scope, key, n)                        agent-caused resumes per thread /
                                                        per chain (the loop bound)
    thread_sessions(thread_id, role, session_id)       opener | member
    wake_queue(id, session_id, thread_id, message_id, sender, body, queued, taken)
                                                        unique (session_id, message_id):
                                                        every message handed over once
    rounds(thread_id, channel, flow, members, next_index, opener_session, timeout_ms,
           settled, config, created)
    gates(approval_id, action, args, created, done)   steps held for a person's approval
                                                        (`gates`): what to do once decided
    transcript(session_id, seq, kind, at, tool_use_id, parent_tool_use_id,
               subagent_type, data, text)              + transcript_fts (FTS5 over text)
    transcript_sessions(session_id, first_at, last_at, entries)

Opened with apsw like the workspace log (`nixx.log.store`): WAL mode, writes in
`BEGIN IMMEDIATE` (writers queue on the busy timeout), no checkpoint + fsync when the
connection closes (the stdlib sqlite3 paid ~25 ms for it in every one-shot CLI process);
instead a closing connection truncates the WAL once it is past `WAL_TRUNCATE_BYTES`.
"""

from __future__ import annotations

import os

import apsw

from nixx.errors import StoreError
from nixx.log import connection
from nixx.migrations import Migrations, apply_sqlite, sqlite_version
from nixx.sqlite_tx import Immediate, immediate

TYPE_CHECKING = False  # `typing` costs a CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.sqlite_tx import ErrorMap

TYPE_CHECKING = False  # `typing` costs ~2 ms of every CLI start; only annotations use it
if TYPE_CHECKING:
    from nixx.log.workspace import Workspace

LOCAL_DB = "local.sqlite"
#: The device-local store's schema steps (`nixx.migrations`, recorded in
#: `nixx_migrations`). Append a step to change the schema.
MIGRATIONS = Migrations("the device-local store")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS sessions(
    session_id TEXT PRIMARY KEY, persona TEXT NOT NULL, thread_id TEXT, runtime TEXT NOT NULL,
    runtime_session TEXT, hop INTEGER NOT NULL, max_hops INTEGER NOT NULL,
    parent_session TEXT, state TEXT NOT NULL, pid INTEGER, runs INTEGER NOT NULL DEFAULT 0,
    exit_code INTEGER, detail TEXT, created INTEGER NOT NULL, updated INTEGER NOT NULL,
    stderr_tail TEXT, chain TEXT, max_thread_resumes INTEGER, max_chain_resumes INTEGER
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS resume_counts(
    scope TEXT NOT NULL, key TEXT NOT NULL, n INTEGER NOT NULL,
    PRIMARY KEY(scope, key)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS sessions_thread ON sessions(thread_id);
CREATE TABLE IF NOT EXISTS thread_sessions(
    thread_id TEXT NOT NULL, role TEXT NOT NULL, session_id TEXT NOT NULL,
    PRIMARY KEY(thread_id, role, session_id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS thread_sessions_session ON thread_sessions(session_id);
CREATE TABLE IF NOT EXISTS wake_queue(
    id INTEGER PRIMARY KEY, session_id TEXT NOT NULL, thread_id TEXT NOT NULL,
    message_id TEXT, sender TEXT NOT NULL, body TEXT NOT NULL, queued INTEGER NOT NULL,
    taken INTEGER);
CREATE INDEX IF NOT EXISTS wake_queue_session ON wake_queue(session_id, taken);
DELETE FROM wake_queue WHERE message_id IS NOT NULL AND id NOT IN (
    SELECT min(id) FROM wake_queue WHERE message_id IS NOT NULL
    GROUP BY session_id, message_id);
CREATE UNIQUE INDEX IF NOT EXISTS wake_queue_message ON wake_queue(session_id, message_id);
CREATE TABLE IF NOT EXISTS rounds(
    thread_id TEXT PRIMARY KEY, channel TEXT NOT NULL, flow TEXT NOT NULL,
    members TEXT NOT NULL, next_index INTEGER NOT NULL, opener_session TEXT,
    timeout_ms INTEGER, settled INTEGER NOT NULL DEFAULT 0, config TEXT NOT NULL,
    created INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS transcript(
    tid INTEGER PRIMARY KEY, session_id TEXT NOT NULL, seq INTEGER NOT NULL,
    kind TEXT NOT NULL, at INTEGER NOT NULL, tool_use_id TEXT, parent_tool_use_id TEXT,
    subagent_type TEXT, data TEXT NOT NULL, text TEXT NOT NULL,
    UNIQUE(session_id, seq));
CREATE VIRTUAL TABLE IF NOT EXISTS transcript_fts USING fts5(
    text, content='transcript', content_rowid='tid', tokenize='unicode61 remove_diacritics 2');
CREATE TRIGGER IF NOT EXISTS transcript_ai AFTER INSERT ON transcript BEGIN
    INSERT INTO transcript_fts(rowid, text) VALUES (new.tid, new.text);
END;
CREATE TRIGGER IF NOT EXISTS transcript_ad AFTER DELETE ON transcript BEGIN
    INSERT INTO transcript_fts(transcript_fts, rowid, text) VALUES ('delete', old.tid, old.text);
END;
CREATE TABLE IF NOT EXISTS transcript_sessions(
    session_id TEXT PRIMARY KEY, first_at INTEGER NOT NULL, last_at INTEGER NOT NULL,
    entries INTEGER NOT NULL) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS transcript_sessions_last ON transcript_sessions(last_at);
"""


# columns added after schema 2 (CREATE TABLE IF NOT EXISTS leaves an older table alone)
_ADDED_COLUMNS = (("sessions", "stderr_tail", "TEXT"), ("sessions", "chain", "TEXT"),
                  ("sessions", "max_thread_resumes", "INTEGER"),
                  ("sessions", "max_chain_resumes", "INTEGER"))


def _statements(script: str) -> list[str]:
    out, buf = [], []
    for line in script.strip().splitlines():
        buf.append(line)
        text = "\n".join(buf).strip()
        trigger = text.upper().startswith("CREATE TRIGGER")
        if (trigger and text.upper().endswith("END;")) or (not trigger and text.endswith(";")):
            out.append(text)
            buf = []
    return out


@MIGRATIONS.register
def m001_device_state(conn: apsw.Connection) -> None:
    """Every table of the module docstring. Idempotent, so it also brings a file of the
    schemas 1-4 that were kept in meta('schema') before `nixx_migrations` up to date."""
    for statement in _statements(_SCHEMA):
        conn.execute(statement)
    for table, column, decl in _ADDED_COLUMNS:  # files made by an older schema
        have = {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}
        if column not in have:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {decl}")


@MIGRATIONS.register
def m002_gates(conn: apsw.Connection) -> None:
    """The steps held here for a person's approval (`nixx.nxc.delivery.gates`)."""
    conn.execute("CREATE TABLE IF NOT EXISTS gates(approval_id TEXT PRIMARY KEY, "
                 "action TEXT NOT NULL, args TEXT NOT NULL, created INTEGER NOT NULL, "
                 "done INTEGER NOT NULL DEFAULT 0) WITHOUT ROWID")


def _legacy_version(conn: apsw.Connection) -> int:
    """A file made before `nixx_migrations` kept meta('schema') (1-4): drop it; step 1,
    idempotent, brings any of them up to date."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
        conn.execute("DELETE FROM meta WHERE key = 'schema'")
    return 0


def local_db_path(state_dir: str) -> str:
    return os.path.join(state_dir, LOCAL_DB)


def _error_for(path: str) -> ErrorMap:
    """The device-local store's mapping for `nixx.sqlite_tx.immediate`: a lock it could
    not take and a commit that failed name the file; other apsw errors pass through."""

    def error(exc: apsw.Error, phase: str) -> StoreError | None:
        if phase == "begin":
            return StoreError(f"the device-local store {path} stayed locked "
                              f"for {connection.BUSY_TIMEOUT_S:.0f}s: {exc}")
        if phase == "commit":
            return StoreError(f"could not commit to the device-local store {path}: {exc}")
        return None

    return error


class LocalStore:
    """An open `.nxs/local.sqlite` (created on first use)."""

    def __init__(self, path: str) -> None:
        self.path = path
        try:
            self.conn = connection.connect(path)
        except apsw.Error as exc:
            raise StoreError(f"cannot open the device-local store {path}: {exc}") from exc
        try:
            self._ensure_schema()
        except apsw.Error as exc:
            self.conn.close()
            raise StoreError(f"cannot open the device-local store {path}: {exc}") from exc

    @classmethod
    def for_workspace(cls, workspace: Workspace) -> LocalStore:
        return cls(local_db_path(workspace.state_dir))

    def _ensure_schema(self) -> None:
        if sqlite_version(self.conn) == MIGRATIONS.head:  # the common case: one read
            return
        self.conn.execute("PRAGMA journal_mode=WAL")
        apply_sqlite(self.conn, MIGRATIONS, self.path, error=_error_for(self.path),
                     legacy=_legacy_version)

    def transaction(self) -> Immediate:
        """`with local.transaction() as conn:` — `BEGIN IMMEDIATE` … `COMMIT` (rolled back
        on any exception; `nixx.sqlite_tx`). Yields the apsw connection: `conn.changes()` /
        `conn.last_insert_rowid()` say what a write did."""
        error = _error_for(self.path)
        return immediate(self.conn, error=error)

    def close(self) -> None:
        """Close (truncating an oversized WAL first: `nixx.log.connection.close`)."""
        connection.close(self.conn, self.path)

    def __enter__(self) -> LocalStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
