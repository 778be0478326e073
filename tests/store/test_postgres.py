"""The PostgreSQL + pgvector backend against a real embedded PostgreSQL 18 / pgvector 0.8.

The shared contract suite (tests/store/contract.py) runs here on PostgreSQL; the tests
below cover what only PostgreSQL has: connection errors, concurrent migration, the
vector column typing that follows the embedder, the indexes the planner uses, and
export/import across backends.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import psycopg
import pytest

from nixx.errors import Conflict, EmbedderMismatch, SchemaError, StoreError, ValidationError
from nixx.store import open_store
from nixx.store.export_file import read_export, write_export
from nixx.store.fts_query import tsquery_text
from nixx.store.postgres import (
    SEARCH_BUFFER_SQL,
    PostgresStore,
    redact_url,
    search_buffer_vectors_sql,
    search_memories_sql,
    search_summaries_sql,
)
from nixx.store.postgres_schema import LATEST, MIGRATIONS
from nixx.store.records import NewChunk
from nixx.testing.pg_fixtures import *  # noqa: F403 - the pg_server / pg_url fixtures
from nixx.testing.postgres import EmbeddedPostgres

from .contract import StoreContract

pytestmark = pytest.mark.postgres

DIM = 16


def unit(rng: np.random.Generator, n: int, dim: int = DIM) -> np.ndarray:
    m = rng.standard_normal((n, dim)).astype(np.float32)
    return m / np.linalg.norm(m, axis=1, keepdims=True)


@pytest.fixture
def store(pg_url: str) -> Iterator[PostgresStore]:
    s = open_store(pg_url)
    assert isinstance(s, PostgresStore)
    yield s
    s.close()


@pytest.fixture
def second_store(pg_server: EmbeddedPostgres) -> Iterator[PostgresStore]:
    url = pg_server.create_database()
    s = open_store(url)
    assert isinstance(s, PostgresStore)
    yield s
    s.close()
    pg_server.drop_database(url)


class TestPostgresContract(StoreContract):
    """The whole shared contract suite, on PostgreSQL."""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# ---- connecting & migrating ---------------------------------------------------------------
def test_unreachable_server_names_url_without_password() -> None:
    url = f"postgresql://nixx:s3cret-pw@127.0.0.1:{_free_port()}/nixx"
    with pytest.raises(StoreError) as err:
        open_store(url)
    msg = str(err.value)
    assert "s3cret-pw" not in msg
    assert f"postgresql://nixx:***@127.0.0.1:{url.split(':')[3].split('/')[0]}/nixx" in msg
    assert "running" in msg and "NIXX_DB_URL" in msg


def test_missing_database_is_a_store_error(pg_server) -> None:
    with pytest.raises(StoreError, match="does not exist"):
        open_store(pg_server.url("no_such_db"))


def test_redact_url_forms() -> None:
    assert redact_url("postgresql://u:p@h:5/d") == "postgresql://u:***@h:5/d"
    assert redact_url("postgresql://u@h/d?password=x&sslmode=require") == (
        "postgresql://u@h/d?password=***&sslmode=require"
    )
    assert redact_url("postgresql://h/d") == "postgresql://h/d"


def test_migrate_from_empty_database_and_again(pg_url: str) -> None:
    s = open_store(pg_url, migrate=False)
    try:
        assert s.schema_version() == 0
        with pytest.raises(SchemaError, match="nixx db migrate"):
            s.append_buffer("user", "too early")
        assert s.migrate() == [m.version for m in MIGRATIONS]
        assert s.schema_version() == LATEST
        assert s.migrate() == []
    finally:
        s.close()


def test_migration_2_types_and_indexes_buffer_vectors_of_a_bound_store(pg_server) -> None:
    from nixx.store.postgres_schema import MIGRATIONS, MIGRATIONS_TABLE

    url = pg_server.create_database()
    try:
        with psycopg.connect(url) as conn:  # a store as nixx with schema version 1 left it
            conn.execute(MIGRATIONS_TABLE)
            MIGRATIONS[0].apply(conn)
            conn.execute("INSERT INTO nixx_migrations (version, name) VALUES (1, 'initial schema')")
            conn.execute("INSERT INTO embedder (model, dim) VALUES ('m', %s)", (DIM,))
            conn.execute("INSERT INTO buffer (role, content) VALUES ('user', 'from version one')")
        s = open_store(url)
        try:
            assert s.schema_version() == LATEST
            assert _column_type(url, "buffer_vectors") == f"vector({DIM})"
            assert "buffer_vectors_embedding_hnsw" in _indexes(url)
            [row] = s.buffer_rows_without_vector(5)
            vec = unit(np.random.default_rng(9), 1)[0]
            assert s.add_buffer_vectors([(row.id, vec)]) == 1
            assert s.search_buffer_vectors(vec, limit=1)[0].row.content == "from version one"
        finally:
            s.close()
    finally:
        pg_server.drop_database(url)


def test_migration_creates_the_vector_extension(pg_server) -> None:
    url = pg_server.create_database(extension=False)
    try:
        s = open_store(url)
        s.close()
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    finally:
        pg_server.drop_database(url)


def test_concurrent_processes_migrate_once(pg_url: str) -> None:
    errors: list[BaseException] = []
    applied: list[list[int]] = []

    def open_one() -> None:
        try:
            s = open_store(pg_url, migrate=False)
            applied.append(s.migrate())
            s.close()
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=open_one) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    # each version applied exactly once, by whichever process got to it first
    assert sorted(v for done in applied for v in done) == [m.version for m in MIGRATIONS]
    with psycopg.connect(pg_url) as conn:
        rows = conn.execute("SELECT version FROM nixx_migrations ORDER BY 1").fetchall()
        assert rows == [(m.version,) for m in MIGRATIONS]


def test_schema_matches_the_seed(store: PostgresStore, pg_url: str) -> None:
    with psycopg.connect(pg_url) as conn:
        cols = dict(
            conn.execute(
                "SELECT table_name || '.' || column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = 'public'"
            ).fetchall()
        )
        generated = conn.execute(
            "SELECT generation_expression FROM information_schema.columns "
            "WHERE table_name = 'buffer' AND column_name = 'tsv'"
        ).fetchone()[0]
        fks = {
            r[0]: r[1]
            for r in conn.execute(
                "SELECT conname, pg_get_constraintdef(oid) FROM pg_constraint WHERE contype = 'f'"
            )
        }
    assert cols["buffer.tsv"] == "tsvector"
    assert "to_tsvector('english'::regconfig, content)" in generated
    assert cols["summaries.tags"] == "ARRAY"
    assert cols["summaries.entities"] == "jsonb"
    assert cols["buffer.created_at"] == "timestamp with time zone"
    assert cols["memories.metadata"] == "jsonb"
    defs = " | ".join(fks.values())
    assert "FOREIGN KEY (source_id) REFERENCES sources(id) ON DELETE CASCADE" in defs
    assert "FOREIGN KEY (start_buffer_id) REFERENCES buffer(id)" in defs
    assert "FOREIGN KEY (end_id) REFERENCES buffer(id)" in defs


# ---- the vector dimension follows the embedder ------------------------------------------
def _column_type(url: str, table: str) -> str:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = %s::regclass AND attname = 'embedding'",
            (table,),
        ).fetchone()[0]


def _indexes(url: str) -> set[str]:
    with psycopg.connect(url) as conn:
        return {
            r[0]
            for r in conn.execute("SELECT indexname FROM pg_indexes WHERE schemaname = 'public'")
        }


def test_bind_types_vector_columns_and_builds_hnsw(store: PostgresStore, pg_url: str) -> None:
    assert _column_type(pg_url, "summaries") == "vector"
    assert "summaries_embedding_hnsw" not in _indexes(pg_url)
    store.bind_embedder("model-a", DIM)
    assert _column_type(pg_url, "summaries") == f"vector({DIM})"
    assert _column_type(pg_url, "memories") == f"vector({DIM})"
    assert _column_type(pg_url, "buffer_vectors") == f"vector({DIM})"
    assert {
        "summaries_embedding_hnsw",
        "memories_embedding_hnsw",
        "buffer_vectors_embedding_hnsw",
        "buffer_tsv_gin",
    } <= _indexes(pg_url)
    with psycopg.connect(pg_url) as conn:
        indexdef = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'memories_embedding_hnsw'"
        ).fetchone()[0]
    assert "USING hnsw (embedding vector_cosine_ops)" in indexdef


def test_reindex_to_another_dimension_retypes_and_rebuilds(
    store: PostgresStore, pg_url: str
) -> None:
    rng = np.random.default_rng(1)
    store.bind_embedder("model-a", DIM)
    row = store.append_buffer("user", "hello there")
    store.add_summary(
        "greeting",
        unit(rng, 1)[0],
        tags=[],
        entities={},
        start_buffer_id=row.id,
        end_buffer_id=row.id,
    )
    store.add_source("doc", "document", [NewChunk("a chunk", unit(rng, 1)[0])])

    def embed(texts):
        return np.ones((len(texts), 8), np.float32) / np.sqrt(8)

    assert store.reindex(embed, "model-b", 8) == 2
    assert _column_type(pg_url, "summaries") == "vector(8)"
    assert {"summaries_embedding_hnsw", "memories_embedding_hnsw"} <= _indexes(pg_url)
    hits = store.search_memories(np.ones(8, np.float32), limit=3)
    assert [h.memory.content for h in hits] == ["a chunk"]
    assert hits[0].score == pytest.approx(1.0, abs=1e-6)
    with pytest.raises(EmbedderMismatch, match="nixx reindex"):
        store.bind_embedder("model-a", DIM)


def test_failed_reindex_keeps_old_vectors_and_indexes(store: PostgresStore, pg_url: str) -> None:
    rng = np.random.default_rng(2)
    store.bind_embedder("model-a", DIM)
    vecs = unit(rng, 3)
    store.add_source("doc", "document", [NewChunk(f"c{i}", v) for i, v in enumerate(vecs)])
    calls = 0

    def flaky(texts):
        nonlocal calls
        calls += 1
        if calls == 2:
            raise RuntimeError("embedding backend fell over")
        return np.ones((len(texts), 8), np.float32)

    with pytest.raises(RuntimeError):
        store.reindex(flaky, "model-b", 8, batch_size=1)
    assert store.embedding_info().model == "model-a"
    assert _column_type(pg_url, "memories") == f"vector({DIM})"
    assert "memories_embedding_hnsw" in _indexes(pg_url)
    assert store.search_memories(vecs[1], limit=1)[0].memory.content == "c1"


def test_dimension_above_hnsw_limit_falls_back_to_exact_search(
    store: PostgresStore, pg_url: str
) -> None:
    rng = np.random.default_rng(3)
    store.bind_embedder("huge", 2048)
    vecs = unit(rng, 5, 2048)
    store.add_source("doc", "document", [NewChunk(f"c{i}", v) for i, v in enumerate(vecs)])
    assert "memories_embedding_hnsw" not in _indexes(pg_url)
    assert store.search_memories(vecs[3], limit=1)[0].memory.content == "c3"


# ---- the planner uses the indexes -----------------------------------------------------
def _plan(url: str, sql: str, params, *, settings: tuple[str, ...] = ()) -> str:
    with psycopg.connect(url) as conn:
        for setting in settings:
            conn.execute(setting)
        rows = conn.execute("EXPLAIN " + sql, params).fetchall()
    return "\n".join(r[0] for r in rows)


def test_full_text_search_uses_the_gin_index(store: PostgresStore, pg_url: str) -> None:
    words = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
    with psycopg.connect(pg_url) as conn:  # bulk rows, so the planner has a choice
        conn.execute(
            "INSERT INTO buffer (role, content) SELECT 'user', 'message ' || g || ' about ' || "
            "(%s::text[])[1 + g %% 8] FROM generate_series(1, 100000) g",
            (words,),
        )
        conn.execute("ANALYZE buffer")
    store.append_buffer("user", "we decided the schema keeps a GIN index")
    terms = tsquery_text("what did we decide about the schema?")
    assert terms == "decide | schema"
    plan = _plan(pg_url, SEARCH_BUFFER_SQL, ([1.0, 1.0], terms.split(" | "), 3.0, terms, 10))
    assert "buffer_tsv_gin" in plan, plan
    assert "Seq Scan on buffer" not in plan
    hits = store.search_buffer("what did we decide about the schema?")
    assert hits[0].row.content == "we decided the schema keeps a GIN index"


def test_vector_search_uses_the_hnsw_index(store: PostgresStore, pg_url: str) -> None:
    rng = np.random.default_rng(4)
    store.bind_embedder("m", DIM)
    vecs = unit(rng, 3000)
    first = store.append_buffer("user", "x")
    store.add_source("doc", "document", [NewChunk(f"c{i}", v) for i, v in enumerate(vecs)])
    with psycopg.connect(pg_url) as conn:
        conn.execute(
            "INSERT INTO summaries (content, embedding, start_buffer_id, end_buffer_id) "
            "SELECT 's' || g, e.embedding, %s, %s FROM generate_series(1, 1) g, memories e",
            (first.id, first.id),
        )
        conn.execute(
            "INSERT INTO buffer (role, content) SELECT 'user', 'row ' || g "
            "FROM generate_series(1, 3000) g"
        )
        conn.execute(
            "INSERT INTO buffer_vectors (buffer_id, embedding) SELECT b.id, m.embedding "
            "FROM buffer b JOIN memories m ON m.id - (SELECT min(id) FROM memories) = b.id - %s",
            (first.id + 1,),
        )
        conn.execute("ANALYZE")
    q = "[" + ",".join(map(str, vecs[7].tolist())) + "]"
    for sql, params in [
        (search_buffer_vectors_sql(before=False), {"q": q, "limit": 10}),
        (search_buffer_vectors_sql(before=True), {"q": q, "limit": 10, "before": 10**6}),
        (search_memories_sql(threshold=False), {"q": q, "limit": 10, "max_dist": None}),
        (search_memories_sql(threshold=True), {"q": q, "limit": 10, "max_dist": 0.5}),
        (
            search_summaries_sql(before=True, threshold=True),
            {"q": q, "limit": 10, "max_dist": 0.5, "before": 10},
        ),
    ]:
        plan = _plan(pg_url, sql, params)
        assert "_embedding_hnsw" in plan, plan
    assert store.search_memories(vecs[7], limit=1)[0].memory.content == "c7"
    assert store.search_buffer_vectors(vecs[7], limit=1)[0].row.content == "row 8"


# ---- threads --------------------------------------------------------------------------
def test_binding_while_searches_run_does_not_deadlock(store: PostgresStore) -> None:
    """Binding retypes every vector table; searches reading several of them at once in
    other connections must make it wait, never deadlock (each side is one transaction)."""
    [row] = [store.append_buffer("user", "a row").id]
    errors: list[BaseException] = []
    stop = threading.Event()

    def search() -> None:
        rng = np.random.default_rng(1)
        while not stop.is_set():
            try:
                store.has_episodic_vectors()
                info = store.embedding_info()
                if info is not None:
                    q = unit(rng, 1, info.dim)[0]
                    store.search_buffer_vectors(q, limit=3)
                    store.search_summaries(q, limit=3)
                    store.buffer_vector_stats()
            except EmbedderMismatch:
                pass  # rebound between reading the dimension and searching
            except BaseException as exc:
                errors.append(exc)
                return

    threads = [threading.Thread(target=search) for _ in range(3)]
    for t in threads:
        t.start()
    try:
        for i in range(6):
            dim = DIM if i % 2 == 0 else 2 * DIM
            store.bind_embedder(f"model-{i}", dim)
            store.add_buffer_vectors([(row, unit(np.random.default_rng(i), 1, dim)[0])])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors, errors[0]
    assert store.embedding_info().model == "model-5"


def test_threads_share_one_store_without_losing_rows(store: PostgresStore) -> None:
    def writer(n: int) -> None:
        for i in range(100):
            store.append_buffer("user", f"thread {n} message {i}")

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    rows = store.get_buffer(1)
    assert len(rows) == 800
    assert len({r.id for r in rows}) == 800
    assert {r.content for r in rows} == {
        f"thread {n} message {i}" for n in range(8) for i in range(100)
    }


def test_text_with_nul_is_a_validation_error(store: PostgresStore) -> None:
    with pytest.raises(ValidationError):
        store.append_buffer("user", "nul \x00 byte")
    assert store.buffer_stats()["rows"] == 0


# ---- export / import across backends --------------------------------------------------------
def _fill(store, rng: np.random.Generator) -> None:
    store.bind_embedder("all-MiniLM-L6-v2", DIM)
    rows = [
        store.append_buffer("user", "What did we decide about the schema? ünïcödé ✓", "tui"),
        store.append_buffer(
            "assistant", "Postgres with pgvector.\nLine two", "api", {"incomplete": True}
        ),
        store.append_buffer("marker", "--- session ---", "vscode"),
        store.append_buffer("user", 'quotes " and \\ backslash', "api", {"z": 1, "a": [1, 2.5]}),
    ]
    # a row vector with its pieces (the other rows have none)
    store.add_buffer_vectors([(rows[1].id, unit(rng, 1)[0])], {rows[1].id: unit(rng, 2)})
    store.add_summary(
        "They chose PostgreSQL.",
        unit(rng, 1)[0],
        tags=["db", "decision"],
        entities={"tools": ["pgvector"], "people": [], "concepts": ["schema"]},
        start_buffer_id=rows[0].id,
        end_buffer_id=rows[1].id,
    )
    store.add_source(
        "session notes",
        "buffer",
        [
            NewChunk(f"chunk {i}", v, {"chunk": i, "total_chunks": 3})
            for i, v in enumerate(unit(rng, 3))
        ],
        summary="notes",
        start_id=rows[0].id,
        end_id=rows[1].id,
        meta={"tags": ["x"], "nested": {"b": 1, "a": None}},
    )
    doomed = store.add_source("gone", "web", [NewChunk("bye", unit(rng, 1)[0])], meta={"url": "u"})
    store.add_source(
        "doc", "document", [NewChunk("doc chunk", unit(rng, 1)[0])], meta={"path": "/p"}
    )
    store.forget("source", source_ids=[doomed.id])  # ids with a gap must survive the trip
    store.set_state("intent", "ship the postgres backend")
    store.set_state("recall_enabled", False)
    store.set_state("counters", {"turns": 3, "ratio": 0.25, "list": [None, True, "s"]})


def _sqlite_store(tmp_path: Path, name: str):
    return open_store(f"sqlite:///{tmp_path / name}")


@pytest.mark.parametrize("origin", ["sqlite", "postgres"])
def test_export_import_round_trip_across_backends_is_identical(
    origin: str,
    pg_url: str,
    tmp_path: Path,
) -> None:
    rng = np.random.default_rng(5)
    first = _sqlite_store(tmp_path, "a.db") if origin == "sqlite" else open_store(pg_url)
    _fill(first, rng)
    write_export(first, tmp_path / "one.jsonl")
    first.close()

    second = open_store(pg_url) if origin == "sqlite" else _sqlite_store(tmp_path, "b.db")
    counts = read_export(second, tmp_path / "one.jsonl")
    assert counts == {
        "embedder": 1,
        "state": 3,
        "buffer": 4,
        "summary": 1,
        "source": 2,
        "memory": 4,
        "forget": 1,
    }
    write_export(second, tmp_path / "two.jsonl")
    assert (tmp_path / "one.jsonl").read_bytes() == (tmp_path / "two.jsonl").read_bytes()

    # the imported store works: new ids continue after the imported ones
    assert second.append_buffer("user", "after import").id == 5
    assert second.add_source("new", "document", []).id == 4
    hits = second.search_buffer("what was decided about the schema")
    assert hits and hits[0].row.id == 1
    with pytest.raises(Conflict, match="not empty"):
        read_export(second, tmp_path / "one.jsonl")
    second.close()


def test_export_lines_are_canonical_and_typed(store: PostgresStore, tmp_path: Path) -> None:
    _fill(store, np.random.default_rng(6))
    write_export(store, tmp_path / "x.jsonl")
    lines = [json.loads(line) for line in (tmp_path / "x.jsonl").read_text().splitlines()]
    assert lines[0] == {"type": "header", "format": "nixx-export", "version": 1}
    assert lines[1] == {"type": "embedder", "model": "all-MiniLM-L6-v2", "dim": DIM}
    assert [r["type"] for r in lines] == (
        ["header", "embedder"]
        + ["state"] * 3
        + ["buffer"] * 4
        + ["summary"]
        + ["source"] * 2
        + ["memory"] * 4
        + ["forget"]
    )
    buf = lines[5]
    assert list(buf) == ["type", "id", "role", "content", "origin", "created_at", "meta"]
    assert buf["created_at"].endswith("Z") and len(buf["created_at"]) == 27
    mem = lines[-2]
    assert all(float(np.float32(x)) == x for x in mem["embedding"])
    assert list(lines[-1]) == ["type", "id", "at", "kind", "ids", "counts"]


def test_import_is_all_or_nothing(pg_url: str, tmp_path: Path) -> None:
    source = _sqlite_store(tmp_path, "a.db")
    _fill(source, np.random.default_rng(7))
    records = list(source.export_records())
    source.close()
    broken = records[:-2] + [{**records[-2], "source_id": 999}]  # memory of no source
    target = open_store(pg_url)
    with pytest.raises(ValidationError):
        target.import_records(broken)
    assert target.buffer_stats()["rows"] == 0
    assert target.embedding_info() is None
    assert target.get_state("intent") is None
    # and a good import still works afterwards
    assert target.import_records(records)["memory"] == 4
    target.close()


def test_import_refuses_records_out_of_order(store: PostgresStore) -> None:
    header = {"type": "header", "format": "nixx-export", "version": 1}
    buf = {
        "type": "buffer",
        "id": 1,
        "role": "user",
        "content": "x",
        "origin": "api",
        "created_at": "2026-01-01T00:00:00.000000Z",
        "meta": {},
    }
    state = {"type": "state", "key": "k", "value": 1}
    with pytest.raises(ValidationError, match="out of order"):
        store.import_records([header, buf, state])
    with pytest.raises(ValidationError, match="not ascending"):
        store.import_records([header, buf, buf])
    with pytest.raises(ValidationError, match="nixx-export header"):
        store.import_records([buf])
    assert store.buffer_stats()["rows"] == 0


def test_cli_moves_a_store_from_sqlite_to_postgres_and_back(pg_url: str, tmp_path: Path) -> None:
    sqlite_url = f"sqlite:///{tmp_path / 'home.db'}"
    s = open_store(sqlite_url)
    _fill(s, np.random.default_rng(8))
    s.close()
    env = {**os.environ, "NIXX_HOME": str(tmp_path), "NIXX_DB_URL": sqlite_url}

    def nixx(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "nixx.cli.nixx", *args],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    out = nixx("--json", "export", str(tmp_path / "a.jsonl"))
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["counts"]["buffer"] == 4
    out = nixx("import", str(tmp_path / "a.jsonl"), "--db-url", pg_url)
    assert out.returncode == 0, out.stderr
    assert "imported" in out.stdout and "4 buffer" in out.stdout
    out = nixx("import", str(tmp_path / "a.jsonl"), "--db-url", pg_url)
    assert out.returncode == 1 and "not empty" in out.stderr
    out = nixx("export", "-", "--db-url", pg_url)
    assert out.returncode == 0, out.stderr
    assert out.stdout.encode() == (tmp_path / "a.jsonl").read_bytes()
    out = nixx("--json", "import", str(tmp_path / "missing.jsonl"), "--db-url", pg_url)
    assert out.returncode == 1 and json.loads(out.stdout)["error"]["kind"] == "validation"


def test_cli_db_init_migrate_status_on_postgres(pg_url: str, tmp_path: Path) -> None:
    env = {**os.environ, "NIXX_HOME": str(tmp_path), "NIXX_DB_URL": pg_url}

    def db(action: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "nixx.cli.nixx", "--json", "db", action],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr + out.stdout
        return json.loads(out.stdout)

    before = db("status")
    assert before["backend"] == "postgres"
    assert before["schema_version"] == 0 and before["pending"] == [m.version for m in MIGRATIONS]
    assert db("init")["applied"] == [m.version for m in MIGRATIONS]
    assert db("migrate")["applied"] == []
    s = open_store(pg_url)
    s.bind_embedder("m", DIM)
    s.append_buffer("user", "one row")
    s.close()
    after = db("status")
    assert after["schema_version"] == after["latest_version"] == LATEST
    assert after["embedder"] == {"model": "m", "dim": DIM}
    assert after["counts"] == {"buffer": 1, "summaries": 0, "sources": 0, "memories": 0}


def test_server_of_a_killed_test_run_is_reaped() -> None:
    from nixx.testing.postgres import reap_orphans

    # not pytest's tmp_path: another pytest run starting meanwhile resets
    # /tmp/pytest-of-<user> to 0700, and the server's own OS user must reach the folder
    tmp_path = Path(tempfile.mkdtemp(prefix="nixx-reap-"))
    tmp_path.chmod(0o755)

    code = (
        "import sys, time\n"
        "from nixx.testing.postgres import EmbeddedPostgres\n"
        f"pg = EmbeddedPostgres(root=__import__('pathlib').Path({str(tmp_path)!r})).start()\n"
        "print(pg.root, flush=True)\n"
        "time.sleep(600)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        root = Path(proc.stdout.readline().strip())
    finally:
        proc.kill()  # SIGKILL: no atexit, the server is orphaned
        proc.wait()
    postmaster = int((root / "data" / "postmaster.pid").read_text().split()[0])
    os.kill(postmaster, 0)  # still running
    assert reap_orphans(tmp_path) == [root]
    assert not root.exists()
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(postmaster, 0)
            threading.Event().wait(0.1)
    tmp_path.rmdir()  # empty once the orphan is reaped


@pytest.mark.slow
def test_hnsw_recall_at_10_against_exact_search(store: PostgresStore, pg_url: str) -> None:
    """Recall of the store's HNSW path (ef_search 100) on clustered, embedding-like data;
    the 100k x 384-d figure is in bench/bench_postgres.py and docs/performance.md."""
    rng = np.random.default_rng(11)
    dim, n = 64, 20_000
    centres = rng.standard_normal((200, 16)).astype(np.float32)
    proj = (rng.standard_normal((16, dim)) / 4).astype(np.float32)

    def draw(k: int) -> np.ndarray:
        z = centres[rng.integers(0, 200, k)] + 0.35 * rng.standard_normal((k, 16))
        x = np.tanh(z @ proj) + 0.05 * rng.standard_normal((k, dim))
        return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)

    data, queries = draw(n), draw(100)
    header = {"type": "header", "format": "nixx-export", "version": 1}
    stamp = "2026-01-01T00:00:00.000000Z"
    records = [
        header,
        {"type": "embedder", "model": "m", "dim": dim},
        {"type": "source", "id": 1, "name": "s", "source_type": "document", "created_at": stamp},
    ] + [
        {
            "type": "memory",
            "id": i + 1,
            "source_id": 1,
            "content": f"c{i}",
            "embedding": v.tolist(),
            "created_at": stamp,
        }
        for i, v in enumerate(data)
    ]
    store.import_records(records)  # loads, then builds the HNSW index
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("ANALYZE memories")
    q0 = "[" + ",".join(map(str, queries[0].tolist())) + "]"
    plan = _plan(pg_url, search_memories_sql(threshold=False), {"q": q0, "limit": 10})
    assert "memories_embedding_hnsw" in plan, plan
    exact = np.argsort(-(queries @ data.T), axis=1)[:, :10] + 1
    recalls = []
    for q, truth in zip(queries, exact, strict=True):
        got = {h.memory.id for h in store.search_memories(q, limit=10)}
        recalls.append(len(got & set(truth.tolist())) / 10)
    assert float(np.mean(recalls)) >= 0.95


def test_store_survives_a_server_restart() -> None:
    with EmbeddedPostgres() as server:
        s = open_store(server.create_database())
        try:
            s.append_buffer("user", "before the restart")
            server.restart()
            s.append_buffer("user", "after the restart")  # pooled connection was dropped
            assert [r.content for r in s.get_buffer(1)] == [
                "before the restart",
                "after the restart",
            ]
        finally:
            s.close()


def test_user_who_may_not_create_the_extension_is_told_what_to_do(pg_server) -> None:
    admin = pg_server.create_database(extension=False)
    name = admin.rsplit("/", 1)[1]
    with psycopg.connect(pg_server.url(), autocommit=True) as conn:
        conn.execute("DROP ROLE IF EXISTS nixx_plain")
        conn.execute("CREATE ROLE nixx_plain LOGIN")
        conn.execute(f'ALTER DATABASE "{name}" OWNER TO nixx_plain')
    url = admin.replace("postgresql://postgres@", "postgresql://nixx_plain:pw@")
    try:
        with pytest.raises(StoreError) as err:
            open_store(url)
        msg = str(err.value)
        assert "CREATE EXTENSION vector" in msg and "superuser" in msg
        assert "pw@" not in msg
        with psycopg.connect(admin, autocommit=True) as conn:  # as the superuser, once
            conn.execute("CREATE EXTENSION vector")
        s = open_store(url)  # now the plain user can migrate and work
        s.append_buffer("user", "works without superuser rights")
        s.close()
    finally:
        pg_server.drop_database(admin)
        with psycopg.connect(pg_server.url(), autocommit=True) as conn:
            conn.execute("DROP ROLE IF EXISTS nixx_plain")


def test_vacuum_rewrites_the_tables_after_a_forget(store: PostgresStore) -> None:
    """`nixx db vacuum` on PostgreSQL: VACUUM FULL of nixx's tables; the store keeps working."""
    rows = [store.append_buffer("user", f"row {i} " + "padding " * 200, "api") for i in range(200)]
    store.forget("buffer", buffer_ids=[r.id for r in rows[:190]])
    # nothing is done to the files automatically, and the answer says so (docs/storage.md)
    assert set(store.scrub()) == {"backend", "note"}
    result = store.vacuum()
    assert result["backend"] == "postgres"
    assert result["bytes_after"] < result["bytes_before"]
    assert [r.id for r in store.get_buffer(1)] == [r.id for r in rows[190:]]
    assert store.append_buffer("user", "after vacuum", "api").id > rows[-1].id


def test_scrub_says_that_pg_wal_keeps_deleted_text(store: PostgresStore) -> None:
    """PostgreSQL cannot scrub its write-ahead log from a client: the forget answer says so."""
    note = store.scrub()["note"]
    assert "pg_wal" in note and "nixx db vacuum" in note
