"""The SQLite memory store: one file, WAL mode, FTS5 on the buffer, vectors as BLOBs.

`SQLiteStore` is the backend-neutral `MemoryStore` over `SQLiteDatabase`, which holds the
connections and what SQLite does its own way: full-text search (FTS5's bm25 with the
term weights of `nixx.store.term_stats`), vector search (the in-memory indexes of
`nixx.store.sqlite_vectors`), and the file-level chores (`scrub`, `vacuum`). Its
queries are `nixx.store.sqlite_queries`.

Concurrency: every thread gets its own connection (WAL lets readers run beside the
one writer); every write is one ``BEGIN IMMEDIATE`` transaction, so a writer takes the
write lock up front and waits (busy timeout) instead of failing half-way; the server's
worker threads and any number of CLI processes can write at once without losing a
row or surfacing "database is locked".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import apsw

from nixx.errors import ConfigError, StoreError, ValidationError
from nixx.sqlite_tx import Immediate, immediate
from nixx.store import sqlite_migrations
from nixx.store.base import MemoryStore
from nixx.store.database import Database, Event, VectorQuery
from nixx.store.fts_query import fts5_match_terms
from nixx.store.records import BufferHit, Memory, SummaryHit
from nixx.store.reports import Checkpoint, ScrubReport, VacuumReport
from nixx.store.sqlite_queries import ROWS, SQLiteTx, one
from nixx.store.sqlite_vectors import SQLiteVectors
from nixx.store.term_stats import TermStats
from nixx.store.vector_index import DEFAULT_ANN_THRESHOLD, VectorIndex

BUSY_TIMEOUT_MS = 60_000
CHECKPOINT_WAIT_MS = 5_000  # how long a forget's checkpoint waits for old readers
# The first GiB of the file is read through a memory map (beyond it, read() as before);
# mapped pages are the OS page cache's, shared, not the process's own memory.
MMAP_BYTES = 1 << 30
#: fsync on every commit (FULL) or only at WAL checkpoints (NORMAL, the default: a
#: commit survives a crash of the process, not of the machine): docs/storage.md.
SYNCHRONOUS = "NORMAL"
#: Options a sqlite:/// URL may carry (``sqlite:///PATH?synchronous=full``).
SQLITE_OPTIONS = ("synchronous",)


@dataclass(frozen=True)
class SQLiteOptions:
    """The levers of a `SQLiteStore` (docs/storage.md)."""

    ann_threshold: int  # rows from which a table's index is an HNSW graph
    busy_timeout_ms: int  # how long a writer waits for the lock
    synchronous: str  # "FULL" or "NORMAL"


class SQLiteStore(MemoryStore):
    """The embedded memory store in one SQLite file (see module docstring)."""

    def __init__(
        self,
        path: str | Path,
        *,
        ann_threshold: int = DEFAULT_ANN_THRESHOLD,
        busy_timeout_ms: int = BUSY_TIMEOUT_MS,
        synchronous: str = SYNCHRONOUS,
    ) -> None:
        self.engine = SQLiteDatabase(path, SQLiteOptions(ann_threshold, busy_timeout_ms, synchronous))
        super().__init__(self.engine)
        self.path = self.engine.path

    # the engine's own levers, for tests, benchmarks and `nixx reindex`
    @property
    def vectors(self) -> SQLiteVectors:
        return self.engine.vectors

    @property
    def _indexes(self) -> dict[str, VectorIndex]:
        return self.engine.vectors.indexes

    @property
    def ann_max_candidates(self) -> int:
        return self.engine.vectors.ann_max_candidates

    @ann_max_candidates.setter
    def ann_max_candidates(self, value: int) -> None:
        self.engine.vectors.ann_max_candidates = value

    @property
    def checkpoint_wait_ms(self) -> int:
        return self.engine.checkpoint_wait_ms

    @checkpoint_wait_ms.setter
    def checkpoint_wait_ms(self, value: int) -> None:
        self.engine.checkpoint_wait_ms = value

    def _conn(self) -> apsw.Connection:
        return self.engine._conn()

    def _write(self) -> Immediate:
        return self.engine._write()

    def warm_vector_indexes(self) -> threading.Thread | None:
        """`MemoryStore.warm_vector_indexes`, answering the thread (tests join it)."""
        return self.engine.warm_vector_indexes()

    def build_vector_indexes(self) -> dict[str, int]:
        """Bring every table's vector index up to date now rather than on the first
        search, writing the HNSW sidecars (so a server started later, or already
        running, loads them instead of building). Returns vectors indexed per table."""
        return self.engine.vectors.build()

    def save_vector_indexes(self) -> list[str]:
        """Write the HNSW sidecar files of the indexes that have one (the bench and
        `nixx reindex` call this; `close()` does it when enough changed)."""
        return self.engine.vectors.save()


class SQLiteDatabase(Database):
    """SQLite under `MemoryStore` (see the module docstring)."""

    backend = "sqlite"

    def __init__(self, path: str | Path, options: SQLiteOptions) -> None:
        ann_threshold, busy_timeout_ms, synchronous = (
            options.ann_threshold, options.busy_timeout_ms, options.synchronous
        )
        if str(path) in ("", ":memory:"):
            raise ValidationError("the SQLite store needs a file path (sqlite:///PATH)")
        self.path = sqlite_path(str(path))
        self.where = str(self.path)
        self.busy_timeout_ms = busy_timeout_ms
        self.checkpoint_wait_ms = CHECKPOINT_WAIT_MS
        if synchronous.upper() not in ("FULL", "NORMAL"):
            raise ConfigError(
                f"synchronous must be full or normal, not {synchronous!r} "
                "(NIXX_DB_URL=sqlite:///PATH?synchronous=full)"
            )
        self.synchronous = synchronous.upper()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreError(
                f"cannot create the folder for {self.path}: {exc}; set NIXX_HOME or NIXX_DB_URL "
                "to a writable place"
            ) from None
        self._local = threading.local()
        self._conns: list[apsw.Connection] = []
        self._conns_lock = threading.Lock()
        self._closed = False
        self.vectors = SQLiteVectors(self.path, self._read, ann_threshold=ann_threshold)
        self._term_stats = TermStats()

    # ---- transactions ----------------------------------------------------------------
    def read(self) -> _Reading:
        return _Reading(self._conn())

    @contextmanager
    def snapshot(self) -> Iterator[SQLiteTx]:
        with self._read() as conn:
            yield SQLiteTx(conn)

    @contextmanager
    def write(self) -> Iterator[SQLiteTx]:
        with self._write() as conn:
            yield SQLiteTx(conn)

    @contextmanager
    def export(self) -> Iterator[SQLiteTx]:
        # A connection of its own: the snapshot stays consistent while the caller
        # consumes the records, whatever else this thread does meanwhile.
        conn = self._connect()
        try:
            conn.execute("BEGIN")
            yield SQLiteTx(conn)
        finally:
            conn.close()

    def after_write(self, event: Event) -> None:
        if event == "buffer_vectors":
            self.vectors.refresh("buffer_vectors")
        elif event == "forget":
            self._term_stats.forget()  # fewer rows: frequencies read before may be too high

    # ---- connections & transactions ------------------------------------------------
    def _connect(self) -> apsw.Connection:
        try:
            conn = apsw.Connection(str(self.path))
        except apsw.Error as exc:
            raise self._open_error(exc) from None
        try:
            conn.setbusytimeout(self.busy_timeout_ms)
            deadline = time.monotonic() + self.busy_timeout_ms / 1000
            while True:  # switching to WAL needs a moment of exclusive access on a new file
                try:
                    conn.execute("PRAGMA journal_mode = WAL")
                    break
                except apsw.BusyError:
                    if time.monotonic() > deadline:
                        raise StoreError(
                            f"the SQLite store {self.path} stayed busy; is another program "
                            "holding it open in exclusive mode?"
                        ) from None
                    time.sleep(0.01)
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute(f"PRAGMA synchronous = {self.synchronous}")
            # Deleted rows are overwritten with zeros, not just unlinked: on every
            # connection from the start, or b-tree pages keep stale copies of moved cells
            # (docs/storage.md "What a deletion leaves on disk").
            conn.execute("PRAGMA secure_delete = ON")
            # Reads map the file instead of copying pages in with a read() each: a search
            # touches hundreds of pages (full text, the candidates' vectors), and every
            # connection (one per thread) shares the one mapping, where each would fill a
            # page cache of its own (docs/storage.md, "Binding, file, concurrency").
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        except apsw.Error as exc:
            conn.close()
            raise self._open_error(exc) from None
        return conn

    def _open_error(self, exc: apsw.Error) -> StoreError:
        """A one-line error naming the file and what to do, for a store that cannot be
        opened: not a database, or not writable."""
        if isinstance(exc, (apsw.NotADBError, apsw.CorruptError)):
            return StoreError(
                f"{self.path} is not a usable SQLite database ({exc}): move it aside and run "
                "`nixx db init` (or `nixx import` an export), or point NIXX_DB_URL elsewhere"
            )
        if isinstance(exc, (apsw.CantOpenError, apsw.ReadOnlyError, apsw.PermissionsError)):
            return StoreError(
                f"cannot open the SQLite store {self.path} for writing ({exc}): make "
                f"{self.path.parent} and the file writable, or set NIXX_HOME or NIXX_DB_URL "
                "to a writable place"
            )
        return StoreError(f"cannot open the SQLite store {self.path}: {exc}")

    def _conn(self) -> apsw.Connection:
        if self._closed:
            raise StoreError("the memory store is closed")
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._conns_lock:
                self._conns.append(conn)
        return conn

    def _write(self) -> Immediate:
        """One write transaction (``BEGIN IMMEDIATE``, `nixx.sqlite_tx`); nested uses
        become savepoints."""
        return immediate(self._conn(), error=self._write_error)

    def _write_error(self, exc: apsw.Error, phase: str) -> BaseException | None:
        if isinstance(exc, apsw.BusyError) and phase == "begin":
            return StoreError(
                f"the SQLite store {self.path} was busy for {self.busy_timeout_ms / 1000:g} s; "
                "another process holds a long write; try again"
            )
        if isinstance(exc, apsw.ConstraintError):
            return ValidationError(f"rejected by the store: {exc}")
        return None

    @contextmanager
    def _read(self) -> Iterator[apsw.Connection]:
        """A consistent snapshot for several statements (a deferred transaction)."""
        conn = self._conn()
        if not conn.getautocommit():
            yield conn
            return
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            if not conn.getautocommit():
                conn.execute("COMMIT")

    def close(self) -> None:
        if self._closed:
            return
        self.vectors.close()
        self._closed = True
        with self._conns_lock:
            for conn in self._conns:
                conn.close()
            self._conns.clear()

    def schema_version(self) -> int:
        return sqlite_migrations.current_version(self._conn())

    def migrate(self) -> list[int]:
        try:
            return sqlite_migrations.apply_pending(self._conn(), where=str(self.path))
        except apsw.BusyError:
            raise StoreError(f"the SQLite store {self.path} stayed busy while migrating") from None
        except (apsw.NotADBError, apsw.CorruptError, apsw.ReadOnlyError, apsw.CantOpenError) as exc:
            raise self._open_error(exc) from None


    # ---- search ---------------------------------------------------------------------
    def search_text(self, query: str, limit: int) -> list[BufferHit]:
        conn = self._conn()
        # words in half the rows or more cannot change bm25's order, only its cost; the
        # question's whole term weight makes a score the share of it a row carries
        terms, weight = self._term_stats.weigh(conn, query)
        match = fts5_match_terms(terms)
        if match is None or weight <= 0:
            return []
        # The best `limit` are found in the full-text index alone, then joined: joining
        # first read the buffer row of every match before the sort (1.5x the time warm,
        # 1.7x after another connection's write emptied this one's page cache).
        cur = conn.execute(
            "SELECT b.id, b.role, b.content, b.origin, b.created_at, b.meta, f.rank "
            "FROM (SELECT rowid, bm25(buffer_fts) AS rank FROM buffer_fts "
            "      WHERE buffer_fts MATCH ? ORDER BY rank, rowid DESC LIMIT ?) f "
            "JOIN buffer b ON b.id = f.rowid ORDER BY f.rank, b.id DESC",
            (match, limit),
        )
        return [BufferHit(row=ROWS.buffer_row(r[:6]), score=-float(r[6]) / weight) for r in cur]

    def common_words(self, query: str) -> list[str]:
        return self._term_stats.common(self._conn(), query)

    def nearest_buffer(self, query: VectorQuery) -> list[BufferHit]:
        found = self.vectors.search("buffer_vectors", query)
        return [BufferHit(row=ROWS.buffer_row(row), score=s) for row, s in found]

    def nearest_summaries(self, query: VectorQuery) -> list[SummaryHit]:
        found = self.vectors.search("summaries", query)
        return [SummaryHit(summary=ROWS.summary(row), score=s) for row, s in found]

    def nearest_memories(self, query: VectorQuery) -> list[tuple[Memory, float]]:
        return [(ROWS.memory(row), s) for row, s in self.vectors.search("memories", query)]

    def warm_vector_indexes(self) -> threading.Thread | None:
        """Load or build every vector index in a background thread (the server calls
        this at start), instead of in the first search after a restart; see
        `SQLiteVectors.warm`. Returns the thread (tests join it)."""
        return None if self._closed else self.vectors.warm()

    def vector_indexes_warming(self) -> bool:
        return self.vectors.warming()

    # ---- files --------------------------------------------------------------------------
    def scrub(self) -> ScrubReport:
        """Merge the full-text index (its segments then hold no deleted term), checkpoint
        the WAL into the file and truncate it, and drop the HNSW sidecar files (a cache of
        vectors, rebuilt when needed). Deleted cells were zeroed (`secure_delete`)."""
        conn = self._conn()
        with self._write() as w:
            w.execute("INSERT INTO buffer_fts (buffer_fts) VALUES ('optimize')")
        removed = self.vectors.scrub()
        return {"checkpoint": self._checkpoint(conn), "sidecars_removed": removed}

    def _checkpoint(self, conn: apsw.Connection) -> Checkpoint:
        """`wal_checkpoint(TRUNCATE)`: it waits (busy handler) for readers of older
        snapshots, here at most `checkpoint_wait_ms`, so a long reader elsewhere cannot
        hold a deletion up; ``busy`` = 1 then says the WAL was not truncated yet (the next
        checkpoint finishes it)."""
        conn.setbusytimeout(self.checkpoint_wait_ms)
        try:
            busy, log, done = one(conn, "PRAGMA wal_checkpoint(TRUNCATE)")
        finally:
            conn.setbusytimeout(self.busy_timeout_ms)
        return {"busy": int(busy), "wal_frames": int(log), "checkpointed": int(done)}

    def vacuum(self) -> VacuumReport:
        conn = self._conn()
        before = self.path.stat().st_size
        conn.execute("INSERT INTO buffer_fts (buffer_fts) VALUES ('optimize')")
        conn.execute("VACUUM")
        checkpoint = self._checkpoint(conn)
        return {
            "backend": "sqlite",
            "bytes_before": before,
            "bytes_after": self.path.stat().st_size,
            "checkpoint": checkpoint,
        }


def sqlite_path(url_or_path: str) -> Path:
    """The file of ``sqlite:///PATH`` (or a plain path); ``sqlite:////abs`` and
    ``sqlite:///abs`` both name ``/abs``; ``sqlite:///~/x`` is in the home folder."""
    text = url_or_path.removeprefix("sqlite://").partition("?")[0]  # options: open_store
    while text.startswith("//"):
        text = text[1:]
    if text.startswith("/~"):  # sqlite:///~/nixx.db
        text = text[1:]
    return Path(text).expanduser()


class _Reading:
    """`SQLiteDatabase.read()`: the thread's connection as it is, no transaction opened (a
    class, not a generator: the hot reads of a search come through here)."""

    __slots__ = ("conn",)

    def __init__(self, conn: apsw.Connection) -> None:
        self.conn = conn

    def __enter__(self) -> SQLiteTx:
        return SQLiteTx(self.conn)

    def __exit__(self, *exc: object) -> None:
        return None
