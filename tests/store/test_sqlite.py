"""The SQLite store: the shared contract, plus what only SQLite has (migrations of a
file, WAL, the in-memory vector index and its HNSW sidecar)."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from pathlib import Path

import apsw
import numpy as np
import pytest

from nixx.errors import ConfigError, SchemaError, ValidationError
from nixx.store import open_store, sqlite_migrations
from nixx.store.records import NewChunk
from nixx.store.sqlite import SQLiteStore
from nixx.store.vector_index import SIDECAR_VERSION

from .contract import DIM, MODEL, StoreContract, chunks, fill_buffer, random_units, unit


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = open_store(f"sqlite:///{tmp_path / 'a.db'}")
    assert isinstance(s, SQLiteStore)
    yield s
    s.close()


@pytest.fixture
def second_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = open_store(f"sqlite:///{tmp_path / 'b.db'}")
    assert isinstance(s, SQLiteStore)
    yield s
    s.close()


class TestSQLiteContract(StoreContract):
    pass


# ---- opening & migrations --------------------------------------------------------------


def test_open_store_creates_the_file_and_folders(tmp_path: Path):
    path = tmp_path / "deep" / "er" / "nixx.db"
    s = open_store(f"sqlite:///{path}")
    try:
        assert path.exists()
        assert s.backend == "sqlite"
        assert s.schema_version() == sqlite_migrations.head_version()
        mode = apsw.Connection(str(path)).execute("PRAGMA journal_mode").fetchone()[0]
        assert mode == "wal"
    finally:
        s.close()


def test_open_store_without_migrating_leaves_an_empty_file(tmp_path: Path):
    s = open_store(f"sqlite:///{tmp_path / 'x.db'}", migrate=False)
    try:
        assert s.schema_version() == 0
        assert s.migrate() == list(range(1, sqlite_migrations.head_version() + 1))
        assert s.schema_version() == sqlite_migrations.head_version()
    finally:
        s.close()


def test_unknown_url_scheme_is_a_config_error():
    with pytest.raises(ConfigError):
        open_store("mysql://x")


def test_memory_path_is_refused():
    with pytest.raises(ValidationError):
        SQLiteStore(":memory:")


@pytest.mark.parametrize("from_version", range(1, sqlite_migrations.head_version() + 1))
def test_migrates_from_every_earlier_version_keeping_data(tmp_path: Path, from_version: int):
    """Build a database at `from_version` with data in it, then migrate to head."""
    path = tmp_path / "old.db"
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA foreign_keys = ON")
    assert sqlite_migrations.apply_pending(conn, target=from_version) == list(
        range(1, from_version + 1)
    )
    # rows written with the v1 columns, as a v1 nixx would have
    conn.execute(
        "INSERT INTO buffer (role, content, origin, meta, created_at) VALUES "
        "('user', 'the schema of version one', 'tui', '{}', '2026-01-01T00:00:00.000000Z')"
    )
    conn.execute(
        "INSERT INTO embedder (id, model, dim, bound_at) "
        "VALUES (1, 'old-model', 16, '2026-01-01T00:00:00.000000Z')"
    )
    conn.execute(
        "INSERT INTO sources (name, type, meta, created_at) "
        "VALUES ('doc', 'document', '{}', '2026-01-01T00:00:00.000000Z')"
    )
    conn.execute(
        "INSERT INTO memories (source_id, content, embedding, metadata, created_at) "
        "VALUES (1, 'chunk', ?, '{}', '2026-01-01T00:00:00.000000Z')",
        (unit(1, 2).tobytes(),),
    )
    conn.close()

    s = SQLiteStore(path)
    try:
        assert s.schema_version() == from_version
        applied = s.migrate()
        assert applied == list(range(from_version + 1, sqlite_migrations.head_version() + 1))
        assert s.schema_version() == sqlite_migrations.head_version()
        assert s.search_buffer("schema")[0].row.content == "the schema of version one"
        assert s.search_memories(unit(1, 2), limit=1)[0].memory.content == "chunk"
        info = s.embedding_info()
        assert info is not None and info.model == "old-model"
        # version 2: buffer rows get vectors; the change counters still work
        [row] = s.buffer_rows_without_vector(5)
        assert s.add_buffer_vectors([(row.id, unit(1, 2))]) == 1
        assert s.search_buffer_vectors(unit(1, 2), limit=1)[0].row.id == row.id
        s.delete_source(1)
        assert s.search_memories(unit(1, 2), limit=1) == []
        # version 4: the dialect routes' origins are accepted, others still refused
        conn = s._conn()
        for origin in ("responses", "anthropic"):
            conn.execute("INSERT INTO buffer (role, content, origin, meta, created_at) VALUES "
                         "('user', ?, ?, '{}', '2026-01-02T00:00:00.000000Z')",
                         (f"a turn from {origin}", origin))
        assert s.search_buffer("turn")[0].row.origin in ("responses", "anthropic")
        with pytest.raises(apsw.ConstraintError):
            conn.execute("INSERT INTO buffer (role, content, origin, meta, created_at) VALUES "
                         "('user', 'x', 'bogus', '{}', '2026-01-02T00:00:00.000000Z')")
        assert list(conn.execute("PRAGMA integrity_check")) == [("ok",)]
    finally:
        s.close()


def test_each_migration_is_recorded_with_its_name(store: SQLiteStore):
    rows = list(store._conn().execute("SELECT version, name FROM nixx_migrations ORDER BY 1"))
    assert rows == [(m.version, m.name) for m in sqlite_migrations.MIGRATIONS]


def test_a_database_newer_than_this_nixx_is_refused(tmp_path: Path):
    path = tmp_path / "future.db"
    s = open_store(f"sqlite:///{path}")
    s._conn().execute(
        "INSERT INTO nixx_migrations VALUES (?, 'm999_future', '2030-01-01T00:00:00.000000Z')",
        (sqlite_migrations.head_version() + 1,),
    )
    s.close()
    with pytest.raises(SchemaError, match="upgrade nixx"):
        open_store(f"sqlite:///{path}")


def test_data_survives_reopening(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'p.db'}"
    s = open_store(url)
    s.bind_embedder(MODEL, DIM)
    row = s.append_buffer("user", "persist me please", "tui")
    s.add_source("doc", "document", chunks(random_units(2, 1)))
    s.set_state("intent", "persist")
    s.close()
    s = open_store(url)
    try:
        assert s.get_buffer(row.id, row.id)[0].content == "persist me please"
        assert s.count_memories() == 2
        assert s.get_state("intent") == "persist"
        assert s.search_buffer("persist")[0].row.id == row.id
    finally:
        s.close()


# ---- full-text ---------------------------------------------------------------------------


def test_bm25_ranks_a_rare_term_above_a_common_one(store: SQLiteStore):
    for _ in range(6):
        store.append_buffer("user", "we talked about the weather today", "api")
    rare = store.append_buffer("assistant", "the deploy fails on postgres", "api")
    common = store.append_buffer("user", "the build failed on the weather widget", "api")
    hits = store.search_buffer("postgres weather")
    assert hits[0].row.id == rare.id
    assert common.id in [h.row.id for h in hits]


def test_diacritics_are_folded(store: SQLiteStore):
    row = store.append_buffer("user", "un café crème à Zürich", "api")
    assert [h.row.id for h in store.search_buffer("cafe creme zurich")] == [row.id]


# ---- the vector index: other writers, deletions, the approximate path ------------------------


def test_search_sees_rows_written_through_another_connection(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    reader, writer = open_store(url), open_store(url)
    try:
        writer.bind_embedder(MODEL, DIM)
        a = writer.add_source("a", "document", chunks(np.stack([unit(1, 0)]), "a"))
        assert reader.search_memories(unit(1, 0), limit=1)[0].memory.source_id == a.id
        b = writer.add_source("b", "document", chunks(np.stack([unit(0, 1)]), "b"))
        assert reader.search_memories(unit(0, 1), limit=1)[0].memory.source_id == b.id
        writer.delete_source(a.id)
        hits = reader.search_memories(unit(1, 0), limit=5)
        assert [h.memory.source_id for h in hits] == [b.id]
        writer.reindex(lambda t: np.ones((len(t), 4), np.float32), "m4", 4)
        [hit] = reader.search_memories(np.ones(4, np.float32), limit=5)
        assert hit.score == pytest.approx(1.0)
    finally:
        reader.close()
        writer.close()


def _clustered(n: int, dim: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.standard_normal((20, 8)).astype(np.float32)
    z = centres[rng.integers(0, 20, n)] + 0.3 * rng.standard_normal((n, 8)).astype(np.float32)
    w = rng.standard_normal((8, dim)).astype(np.float32)
    x = np.tanh(z @ w) + 0.05 * rng.standard_normal((n, dim)).astype(np.float32)
    return (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


@pytest.fixture
def ann_store(tmp_path: Path) -> Iterator[SQLiteStore]:
    s = SQLiteStore(tmp_path / "ann.db", ann_threshold=200)
    s.migrate()
    yield s
    s.close()


def test_approximate_search_agrees_with_exact(ann_store: SQLiteStore, tmp_path: Path):
    dim = 32
    vectors = _clustered(1200, dim, seed=3)
    ann_store.bind_embedder(MODEL, dim)
    ann_store.add_source("big", "document", chunks(vectors))
    queries = _clustered(20, dim, seed=4)
    found = [ann_store.search_memories(q, limit=10) for q in queries]
    assert ann_store._indexes["memories"].approximate
    exact = SQLiteStore(tmp_path / "ann.db", ann_threshold=10**9)  # same file, exact index
    try:
        agree = 0
        for q, hits in zip(queries, found, strict=True):
            truth = exact.search_memories(q, limit=10)
            assert not exact._indexes["memories"].approximate
            agree += len({h.memory.id for h in hits} & {h.memory.id for h in truth})
            # scores are exact cosines of the stored vectors, best first
            stored = {h.memory.id: h.score for h in truth}
            for h in hits:
                expected = float(vectors[h.memory.id - 1] @ q / np.linalg.norm(q))
                assert h.score == pytest.approx(expected, abs=1e-5)
                if h.memory.id in stored:
                    assert h.score == pytest.approx(stored[h.memory.id], abs=1e-6)
            assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        assert agree / (10 * len(queries)) >= 0.95
    finally:
        exact.close()


def _one_summary_per_row(store: SQLiteStore, n: int, seed: int) -> tuple[list[int], np.ndarray]:
    """`n` buffer rows, and summary `s{i}` of row i with the i-th of `n` clustered
    32-d vectors; returns the rows' ids and the vectors."""
    store.bind_embedder(MODEL, 32)
    ids = [store.append_buffer("user", f"m{i}", "api").id for i in range(n)]
    vectors = _clustered(n, 32, seed=seed)
    for i in range(n):
        store.add_summary(
            f"s{i}", vectors[i], tags=[], entities={}, start_buffer_id=ids[i], end_buffer_id=ids[i]
        )
    return ids, vectors


def test_approximate_search_applies_threshold_and_range_filters(ann_store: SQLiteStore):
    n = 600
    ids, vectors = _one_summary_per_row(ann_store, n, seed=5)
    q = vectors[-1]
    # only the first 5 summaries are eligible: the HNSW candidates near q are almost all
    # filtered out, so the store must widen the search / fall back to an exact scan
    hits = ann_store.search_summaries(q, limit=3, before_buffer_id=ids[5])
    assert ann_store._indexes["summaries"].approximate
    expected = sorted(range(5), key=lambda i: -float(vectors[i] @ q))[:3]
    assert [h.summary.content for h in hits] == [f"s{i}" for i in expected]
    above = ann_store.search_summaries(q, limit=50, threshold=0.9)
    truth = [i for i in range(n) if float(vectors[i] @ q) >= 0.9]
    assert sorted(h.summary.content for h in above) == sorted(
        f"s{i}" for i in sorted(truth, key=lambda i: -float(vectors[i] @ q))[:50]
    )
    assert all(h.score >= 0.9 for h in above)
    # the same with the candidate widening capped: the exact scan gives the same answer
    ann_store.ann_max_candidates = 64
    assert ann_store.search_summaries(q, limit=3, before_buffer_id=ids[5]) == hits


def test_every_vector_in_an_hnsw_graph_is_found_by_a_search_for_itself(ann_store: SQLiteStore):
    # usearch inserting on two threads left some points unreachable (none found them
    # again) in most builds of this size: a memory vector recall could never return
    n = 600
    _, vectors = _one_summary_per_row(ann_store, n, seed=11)
    lost = [
        i
        for i in range(n)
        if [h.summary.content for h in ann_store.search_summaries(vectors[i], limit=1)]
        != [f"s{i}"]
    ]
    assert ann_store._indexes["summaries"].approximate
    assert lost == []


def test_approximate_buffer_vector_search_follows_out_of_order_and_replaced_vectors(
    ann_store: SQLiteStore,
):
    dim = 32
    ann_store.bind_embedder(MODEL, dim)
    n = 500
    ids = [ann_store.append_buffer("user", f"m{i}", "api").id for i in range(n)]
    vectors = _clustered(n, dim, seed=6)
    # the newest rows first, then the backfill of the old ones: seq order != id order
    ann_store.add_buffer_vectors([(ids[i], vectors[i]) for i in range(250, n)])
    ann_store.add_buffer_vectors([(ids[i], vectors[i]) for i in range(250)])
    hits = ann_store.search_buffer_vectors(vectors[7], limit=5)
    assert ann_store._indexes["buffer_vectors"].approximate
    assert hits[0].row.id == ids[7] and hits[0].score == pytest.approx(1.0, abs=1e-5)
    expected = sorted(range(5), key=lambda i: -float(vectors[i] @ vectors[-1]))[:3]
    before = ann_store.search_buffer_vectors(vectors[-1], limit=3, before_id=ids[5])
    assert [h.row.id for h in before] == [ids[i] for i in expected]
    # a replaced vector moves the row: found by its new vector, not by the old one
    ann_store.add_buffer_vectors([(ids[7], vectors[300])])
    assert ids[7] not in [h.row.id for h in ann_store.search_buffer_vectors(vectors[7], limit=1)]
    top2 = {h.row.id for h in ann_store.search_buffer_vectors(vectors[300], limit=2)}
    assert top2 == {ids[7], ids[300]}


def test_a_write_of_row_vectors_brings_the_loaded_index_up_to_date(ann_store: SQLiteStore):
    """The writer (the background queue) adds new vectors to a loaded index itself, so the
    next search does not; a search still finds them."""
    dim = 32
    ann_store.bind_embedder(MODEL, dim)
    vectors = _clustered(400, dim, seed=8)
    ids = [ann_store.append_buffer("user", f"m{i}", "api").id for i in range(400)]
    ann_store.add_buffer_vectors([(ids[i], vectors[i]) for i in range(300)])
    ann_store.search_buffer_vectors(vectors[0], limit=1)  # loads the index
    index = ann_store._indexes["buffer_vectors"]
    held = len(index)
    ann_store.add_buffer_vectors([(ids[i], vectors[i]) for i in range(300, 400)])
    assert len(index) == held + 100  # synced by the write, before any search
    [hit] = ann_store.search_buffer_vectors(vectors[350], limit=1)
    assert hit.row.id == ids[350]


def test_reads_go_through_a_memory_map(store: SQLiteStore):
    from nixx.store.sqlite import MMAP_BYTES

    assert store._conn().execute("PRAGMA mmap_size").fetchone()[0] == MMAP_BYTES


def test_full_text_ties_rank_the_newest_first_and_limit_counts_after_the_join(
    store: SQLiteStore,
):
    ids = [store.append_buffer("user", "the same words exactly", "api").id for _ in range(5)]
    hits = store.search_buffer("same words", 3)
    assert [h.row.id for h in hits] == ids[::-1][:3]
    assert all(h.row.content == "the same words exactly" for h in hits)


def test_hnsw_sidecar_is_reused_and_kept_current(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    dim = 32
    path = tmp_path / "side.db"
    first = SQLiteStore(path, ann_threshold=100)
    first.migrate()
    first.bind_embedder(MODEL, dim)
    vectors = _clustered(400, dim, seed=6)
    first.add_source("a", "document", chunks(vectors[:300]))
    first.search_memories(vectors[0], limit=1)
    sidecar = path.with_name(path.name + ".memories.hnsw")
    assert sidecar.exists()
    first.close()

    second = SQLiteStore(path, ann_threshold=100)
    try:
        extra = second.add_source("b", "document", chunks(vectors[300:], "late"))
        hit = second.search_memories(vectors[350], limit=1)[0]
        assert hit.memory.source_id == extra.id and hit.memory.content == "late 50"
        index = second._indexes["memories"]
        assert index.approximate and len(index) == 400
        assert index.synced is not None and index.synced.watermark == 400
    finally:
        second.close()

    # reindex moves the epoch: the old sidecar no longer matches; building writes a new one
    fourth = SQLiteStore(path, ann_threshold=100)
    try:
        fourth.reindex(lambda t: _clustered(len(t), 16, seed=len(t)), "m16", 16)
        assert fourth.build_vector_indexes() == {
            "summaries": 0,
            "memories": 400,
            "buffer_vectors": 0,
        }
        meta = json.loads(sidecar.with_name(sidecar.name + ".json").read_text())
        epoch = (
            fourth._conn()
            .execute("SELECT epoch FROM vector_state WHERE name = 'memories'")
            .fetchone()[0]
        )
        assert meta["epoch"] == epoch and meta["dim"] == 16 and meta["watermark"] == 400
    finally:
        fourth.close()

    # one written by another version is rebuilt, and the log says why
    meta_path = sidecar.with_name(sidecar.name + ".json")
    meta_path.write_text(json.dumps({**json.loads(meta_path.read_text()), "version": 1}))
    older = SQLiteStore(path, ann_threshold=100)
    try:
        with caplog.at_level(logging.INFO, logger="nixx.store.vector_index"):
            stored = older.source_chunks(1)[10].embedding
            assert older.search_memories(stored, limit=1)[0].memory.content == "chunk 10"
        assert json.loads(meta_path.read_text())["version"] == SIDECAR_VERSION  # rebuilt
        assert [r.getMessage() for r in caplog.records] == [
            "not using the saved vector graph side.db.memories.hnsw: written by another nixx "
            f"(version 1, now {SIDECAR_VERSION}); building it again"
        ]
    finally:
        older.close()

    # a stale or corrupt sidecar is ignored, never trusted
    caplog.clear()
    sidecar.write_bytes(b"garbage")
    third = SQLiteStore(path, ann_threshold=100)
    try:
        with caplog.at_level(logging.INFO, logger="nixx.store.vector_index"):
            stored = third.source_chunks(1)[10].embedding
            assert third.search_memories(stored, limit=1)[0].memory.content == "chunk 10"
        (record,) = caplog.records
        assert record.getMessage().startswith(
            "not using the saved vector graph side.db.memories.hnsw: unreadable ("
        )
    finally:
        third.close()


def test_index_switches_to_hnsw_as_it_grows(ann_store: SQLiteStore):
    dim = 32
    ann_store.bind_embedder(MODEL, dim)
    vectors = _clustered(300, dim, seed=8)
    ann_store.add_source("a", "document", chunks(vectors[:150]))
    assert ann_store.search_memories(vectors[5], limit=1)[0].memory.content == "chunk 5"
    assert not ann_store._indexes["memories"].approximate
    ann_store.add_source("b", "document", chunks(vectors[150:], "b"))
    assert ann_store.search_memories(vectors[200], limit=1)[0].memory.content == "b 50"
    assert ann_store._indexes["memories"].approximate
    assert ann_store.search_memories(vectors[5], limit=1)[0].memory.content == "chunk 5"


def test_vectors_before_binding_fix_the_dimension(store: SQLiteStore):
    store.add_source("a", "document", [NewChunk("x", unit(1, 0), {})])
    info = store.embedding_info()
    assert info is not None and (info.model, info.dim) == ("", DIM)
    store.bind_embedder(MODEL, DIM)  # names the unnamed embedder
    info = store.embedding_info()
    assert info is not None and info.model == MODEL


def test_writes_from_many_threads(store: SQLiteStore):
    import threading

    store.bind_embedder(MODEL, DIM)
    errors: list[BaseException] = []

    def work(t: int) -> None:
        try:
            for i in range(50):
                store.append_buffer("user", f"thread {t} row {i}", "api")
                if i % 10 == 0:
                    store.add_source(f"t{t}-{i}", "document", chunks(random_units(2, t * 100 + i)))
                    store.search_memories(unit(1), limit=3)
                    store.search_buffer(f"thread {t}")
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert store.buffer_stats()["rows"] == 300
    assert store.count_memories() == 6 * 5 * 2
    assert len(fill_buffer(store, 1)) == 1


def test_reindex_also_embeds_rows_written_while_it_ran(tmp_path: Path):
    url = f"sqlite:///{tmp_path / 'busy.db'}"
    store, other = open_store(url), open_store(url)
    try:
        store.bind_embedder(MODEL, DIM)
        store.add_source("first", "document", chunks(random_units(3, 1)))
        wrote_meanwhile = []

        def embed(texts):
            if not wrote_meanwhile:  # another process adds a source mid-reindex
                wrote_meanwhile.append(
                    other.add_source("late", "document", chunks(random_units(2, 2), "late"))
                )
            return np.ones((len(texts), 4), np.float32)

        assert store.reindex(embed, "m4", 4, batch_size=2) == 5
        assert all(
            m.embedding.tolist() == [1.0] * 4
            for source in store.list_sources()
            for m in store.source_chunks(source.id)
        )
    finally:
        store.close()
        other.close()


@pytest.mark.parametrize(
    ("url", "path"),
    [
        ("sqlite:////srv/nixx/a.db", "/srv/nixx/a.db"),
        ("sqlite:///srv/nixx/a.db", "/srv/nixx/a.db"),
        ("sqlite:///~/a.db", str(Path.home() / "a.db")),
        ("sqlite://~/a.db", str(Path.home() / "a.db")),
        ("/plain/a.db", "/plain/a.db"),
    ],
)
def test_sqlite_urls_name_files(url: str, path: str):
    from nixx.store.sqlite import sqlite_path

    assert str(sqlite_path(url)) == path


def test_scrub_does_not_wait_long_for_an_old_reader(store: SQLiteStore):
    """A reader holding an older snapshot keeps the WAL from being truncated: the forget
    still returns (after `checkpoint_wait_ms`) and says so; the next scrub finishes."""
    import apsw

    store.checkpoint_wait_ms = 100
    ids = fill_buffer(store, 3)
    reader = apsw.Connection(str(store.path))
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM buffer").fetchall()
    store.forget("buffer", buffer_ids=[ids[0]])
    assert store.scrub()["checkpoint"]["busy"] == 1
    wal = store.path.with_name(store.path.name + "-wal")
    assert wal.stat().st_size > 0
    reader.execute("COMMIT")
    reader.close()
    assert store.scrub()["checkpoint"]["busy"] == 0
    assert wal.stat().st_size == 0
    assert b"message number 0" not in store.path.read_bytes()


def test_vector_indexes_are_prepared_in_the_background_after_a_restart(tmp_path: Path):
    path = tmp_path / "warm.db"
    dim = 32
    first = SQLiteStore(path, ann_threshold=100)
    first.migrate()
    first.bind_embedder(MODEL, dim)
    ids = [first.append_buffer("user", f"m{i}", "api").id for i in range(300)]
    vectors = _clustered(300, dim, seed=8)
    first.add_buffer_vectors(list(zip(ids, vectors, strict=True)))
    truth = [h.row.id for h in first.search_buffer_vectors(vectors[3], limit=5)]
    first.close()
    for sidecar in tmp_path.glob("warm.db.*.hnsw*"):
        sidecar.unlink()  # no saved index: it must be built

    second = SQLiteStore(path, ann_threshold=100)
    try:
        thread = second.warm_vector_indexes()
        assert thread is not None
        # whatever the thread has done so far, a search answers (exact scan, exact
        # index or the graph) without waiting for it
        assert [h.row.id for h in second.search_buffer_vectors(vectors[3], limit=5)] == truth
        thread.join(60)
        assert not thread.is_alive()
        assert second._indexes["buffer_vectors"].approximate
        assert (tmp_path / "warm.db.buffer_vectors.hnsw").exists()  # saved for the next start
        assert [h.row.id for h in second.search_buffer_vectors(vectors[3], limit=5)] == truth
        new = second.append_buffer("user", "new", "api").id
        second.add_buffer_vectors([(new, vectors[3])])
        assert new in [h.row.id for h in second.search_buffer_vectors(vectors[3], limit=2)]
        assert second.warm_vector_indexes() is thread  # once per store
    finally:
        second.close()


def test_commits_are_synchronous_normal_unless_the_url_asks_for_full(tmp_path: Path):
    default = open_store(f"sqlite:///{tmp_path / 'n.db'}")
    full = open_store(f"sqlite:///{tmp_path / 'f.db'}?synchronous=full")
    try:
        assert default._conn().execute("PRAGMA synchronous").fetchone()[0] == 1  # NORMAL
        assert full._conn().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert full.path == tmp_path / "f.db"
        full.append_buffer("user", "kept")
        assert full.get_buffer(1)[0].content == "kept"
    finally:
        default.close()
        full.close()
    with pytest.raises(ConfigError, match="synchronous"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?synchronous=sometimes")
    with pytest.raises(ConfigError, match="unknown option 'cache'"):
        open_store(f"sqlite:///{tmp_path / 'x.db'}?cache=shared")


# ---- full text: words in half the rows or more ---------------------------------------------


def _chat_rows(store: SQLiteStore, n: int) -> None:
    with store._write() as conn:  # one transaction: 1,200 rows in well under a second
        conn.executemany(
            "INSERT INTO buffer (role, content, origin, created_at, meta) "
            "VALUES ('user', ?, 'tui', '2026-01-01T00:00:00Z', '{}')",
            [(f"status report {i} from the deploy bot" + (" boathouse" if i % 7 == 0 else ""),)
             for i in range(n)],
        )


def test_words_in_half_the_rows_do_not_rank_and_are_left_out(store: SQLiteStore):
    _chat_rows(store, 1200)  # "status report deploy bot" in every row, "boathouse" in 1 of 7
    hits = store.search_buffer("status report about the boathouse", 50)
    # bm25 gives the common words no weight: the same rows come first as for the rare word
    alone = store.search_buffer("boathouse", 50)
    assert [h.row.id for h in hits] == [h.row.id for h in alone]
    assert all("boathouse" in h.row.content for h in hits) and len(hits) == 50
    # only words every other row says: full text cannot tell rows apart, so it says nothing
    assert store.search_buffer("deploy bot status", 50) == []


def test_a_small_store_keeps_every_word(store: SQLiteStore):
    _chat_rows(store, 20)
    hits = store.search_buffer("deploy bot status", 5)
    assert len(hits) == 5  # under 1,000 rows nothing is left out


def test_forgetting_rows_rereads_the_frequencies(store: SQLiteStore):
    with store._write() as conn:
        conn.executemany(
            "INSERT INTO buffer (role, content, origin, created_at, meta) "
            "VALUES ('user', ?, 'tui', '2026-01-01T00:00:00Z', '{}')",
            [(("alpha " if i < 1200 else "") + f"row {i}",) for i in range(2400)],
        )
    assert store.search_buffer("alpha", 5) == []  # in 1,200 of 2,400 rows: no weight
    store.forget("buffer", buffer_ids=list(range(1, 201)))  # now in 1,000 of 2,200
    assert len(store.search_buffer("alpha", 5)) == 5
