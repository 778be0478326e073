"""Buffer row vectors end to end, on each store backend: the background queue embeds the
rows a turn writes, backfills a store after a restart once the embedder is back,
reports progress in `/v1/episodic/status`; `nixx reindex` re-embeds the rows and
export/import carry their vectors."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from fastapi.testclient import TestClient

from nixx.embed import make_embedder
from nixx.memory.row_text import embedding_text
from nixx.server.app import create_app
from nixx.store import open_store
from nixx.store.export_file import read_export, write_export
from nixx.store.maintenance import reindex_store
from nixx.testing.fake_llm import FakeLLM
from nixx.testing.live_server import LOCAL
from nixx.testing.pg_fixtures import *  # noqa: F403 - pg_server / pg_url fixtures

from .conftest import Nixx

TEXTS = [
    "the spare key to the boathouse is hidden under the blue flowerpot",
    "my daughter started violin lessons on tuesday",
    "we moved the standup to ten thirty",
]


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path}/rows.db"
    else:
        yield request.getfixturevalue("pg_url")


def vector_status(nixx: Nixx) -> dict[str, Any]:
    return nixx.client.get("/v1/episodic/status").json()["buffer_vectors"]


def flush(nixx: Nixx) -> dict[str, Any]:
    return nixx.client.portal.call(nixx.service._row_vectors.flush)  # type: ignore[union-attr]


def talk(nixx: Nixx, texts: list[str]) -> None:
    for text in texts:
        assert nixx.chat(text).status_code == 200


def row_texts(url: str) -> dict[int, str]:
    """What each non-marker row's vector must be made of: `embedding_text` of the row
    and its neighbours in the same session."""
    store = open_store(url)
    try:
        rows = store.get_buffer(1)
    finally:
        store.close()
    out = {}
    for i, row in enumerate(rows):
        if row.role == "marker":
            continue
        before = []
        for r in reversed(rows[max(0, i - 2) : i]):
            if r.role == "marker":
                break
            before.insert(0, r)
        after = []
        for r in rows[i + 1 : i + 3]:
            if r.role == "marker":
                break
            after.append(r)
        out[row.id] = embedding_text(row, [*before, *after])
    return out


def assert_vectors_match(url: str) -> None:
    """Every row has the vector of its text: searching with that vector finds the row."""
    store = open_store(url)
    try:
        for text in row_texts(url).values():
            [hit] = store.search_buffer_vectors(FakeLLM.embedding_of(text), limit=1)
            assert hit.score == pytest.approx(1.0, abs=1e-5)
            assert hit.row.content in text
    finally:
        store.close()


def test_turns_rows_get_vectors_in_the_background(
    make_settings: Any, llm: FakeLLM, db_url: str
) -> None:
    settings = make_settings(db_url=db_url)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        talk(nixx, TEXTS)
        status = flush(nixx)
        assert status["embedded"] == 6 and status["pending"] == 0
        assert status["error"] is None and isinstance(status["running"], bool)
        shown = vector_status(nixx)
        assert {k: shown[k] for k in ("embedded", "pending", "error")} == {
            k: status[k] for k in ("embedded", "pending", "error")
        }
        assert isinstance(shown["index_warming"], bool)
        client.post("/v1/buffer/clear")  # a marker: not embedded, and a session boundary
        talk(nixx, ["after the clear"])
        assert flush(nixx)["embedded"] == 8
        embedded = {t for body in llm.embed_requests for t in body["input"]}
        assert set(row_texts(db_url).values()) <= embedded
    assert_vectors_match(db_url)


def test_backfill_after_a_restart_with_the_embedder_down_then_up(
    make_settings: Any, llm: FakeLLM, db_url: str
) -> None:
    settings = make_settings(db_url=db_url)
    llm.fail_embeddings = True
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        talk(nixx, TEXTS[:2])  # turns work without the embedder
        status = flush(nixx)
        assert status["embedded"] == 0 and status["pending"] == 4
        assert "embeddings failing" in status["error"]
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:  # restarted, embedder still down
        nixx = Nixx(client)
        assert flush(nixx)["pending"] == 4
        assert vector_status(nixx)["error"] is not None
    llm.fail_embeddings = False
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:  # restarted, embedder up: backfill
        nixx = Nixx(client)
        deadline = time.monotonic() + 60
        while (status := vector_status(nixx))["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status["embedded"] == 4 and status["pending"] == 0
        assert status["error"] is None
    assert_vectors_match(db_url)


def test_the_queue_retries_after_a_failure_without_a_new_turn(
    make_settings: Any, llm: FakeLLM, db_url: str
) -> None:
    settings = make_settings(db_url=db_url)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        queue = nixx.service._row_vectors
        queue.retry_min = 0.01  # back-off from 10 ms
        llm.fail_next_embeddings = 3  # the first embedding calls fail, then it is back
        talk(nixx, TEXTS[:1])
        deadline = time.monotonic() + 60
        while (status := vector_status(nixx))["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status["embedded"] == 2 and status["error"] is None


def test_the_queue_waits_for_a_quiet_moment_and_not_forever(
    make_settings: Any, llm: FakeLLM
) -> None:
    """While a request is busy (a search, a turn's recall) the queue does not embed;
    once it ends, the queue goes on; and a foreground that is never quiet delays a
    batch by `max_wait` at most."""
    with TestClient(base_url=LOCAL, app=create_app(make_settings())) as client:
        nixx = Nixx(client)
        queue = nixx.service._row_vectors
        assert queue.foreground is nixx.service._foreground
        queue.max_wait = 60.0
        busy = nixx.service._foreground.busy()
        busy.__enter__()
        try:
            talk(nixx, TEXTS[:1])
            time.sleep(0.3)
            assert vector_status(nixx)["pending"] == 2  # held back
        finally:
            busy.__exit__(None, None, None)
        deadline = time.monotonic() + 60
        while (status := vector_status(nixx))["pending"] and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status["embedded"] == 2
        queue.max_wait = 0.1
        with nixx.service._foreground.busy():  # never quiet
            talk(nixx, TEXTS[1:2])
            deadline = time.monotonic() + 60
            while (status := vector_status(nixx))["pending"] and time.monotonic() < deadline:
                time.sleep(0.05)
            assert status["embedded"] == 4 and status["pending"] == 0


def test_reindex_re_embeds_buffer_rows(make_settings: Any, llm: FakeLLM, db_url: str) -> None:
    settings = make_settings(db_url=db_url)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        talk(nixx, TEXTS)
        assert flush(nixx)["embedded"] == 6
    before = len(llm.embed_requests)
    other = make_embedder(make_settings(db_url=db_url, embed_model="other-embed"))
    try:
        result = reindex_store(db_url, other, batch_size=4)
    finally:
        other.close()
    assert result["vectors"] == 6 and result["to"]["model"] == "other-embed"
    texts = [t for body in llm.embed_requests[before:] for t in body["input"]]
    texts.remove("dimension probe")  # the remote embedder learning its dimension
    assert sorted(texts) == sorted(row_texts(db_url).values())
    assert {body["model"] for body in llm.embed_requests[before:]} == {"other-embed"}
    store = open_store(db_url)
    try:
        assert store.buffer_vector_stats() == {"embedded": 6, "pending": 0}
        info = store.embedding_info()
        assert info is not None and info.model == "other-embed"
    finally:
        store.close()
    assert_vectors_match(db_url)


def test_export_import_carries_row_vectors(
    make_settings: Any, llm: FakeLLM, db_url: str, tmp_path: Any
) -> None:
    settings = make_settings(db_url=db_url)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        talk(nixx, TEXTS)
        assert flush(nixx)["embedded"] == 6
    source = open_store(db_url)
    target_url = f"sqlite:///{tmp_path}/imported.db"
    target = open_store(target_url)
    try:
        write_export(source, tmp_path / "export.jsonl")
        counts = read_export(target, tmp_path / "export.jsonl")
        assert counts["buffer"] == 6
        assert target.buffer_vector_stats() == {"embedded": 6, "pending": 0}
        q = FakeLLM.embedding_of(row_texts(db_url)[3])
        assert target.search_buffer_vectors(q, limit=1)[0].row.id == 3
        [a], [b] = (s.search_buffer_vectors(q, limit=1) for s in (source, target))
        assert a.row == b.row and a.score == pytest.approx(b.score, abs=1e-6)
    finally:
        source.close()
        target.close()
    # a server on the imported store has nothing to embed
    before = len(llm.embed_requests)
    with TestClient(base_url=LOCAL, app=create_app(make_settings(db_url=target_url))) as client:
        nixx = Nixx(client)
        assert flush(nixx)["pending"] == 0
    assert len(llm.embed_requests) == before


MIXED = "Doing well, thanks! We got back from hiking in the Dolomites last week. How about you?"


def test_a_row_of_several_sentences_gets_its_pieces_through_queue_reindex_and_export(
    make_settings: Any, llm: FakeLLM, db_url: str, tmp_path: Any
) -> None:
    from nixx.memory import pieces, search

    expected = pieces.split(MIXED)
    assert len(expected) == 3
    settings = make_settings(db_url=db_url)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        nixx = Nixx(client)
        talk(nixx, [MIXED])
        flush(nixx)
    embedded = [t for body in llm.embed_requests for t in body["input"]]
    assert set(expected) <= set(embedded)

    def check(url: str) -> None:
        store = open_store(url)
        try:
            [user] = [r for r in store.get_buffer(1) if r.content == MIXED]
            found = store.buffer_pieces([user.id])[user.id]
            want = np.stack([FakeLLM.embedding_of(t) for t in expected])
            assert np.allclose(found, want, atol=2e-3)  # float16 as stored
            # the row is found by its second sentence, which it carries beside its own cosine
            trip = FakeLLM.embedding_of(expected[1])
            [hit] = search.row_vector_hits(store, trip, 1, piece_floor=0.4)
            assert hit.row.id == user.id and hit.sentence == pytest.approx(1.0, abs=1e-2)
            assert hit.score < 0.99  # the whole row's own cosine
        finally:
            store.close()

    check(db_url)
    other = make_embedder(make_settings(db_url=db_url, embed_model="other-embed"))
    try:
        before = len(llm.embed_requests)
        reindex_store(db_url, other, batch_size=4)
    finally:
        other.close()
    assert set(expected) <= {t for body in llm.embed_requests[before:] for t in body["input"]}
    check(db_url)
    source, target_url = open_store(db_url), f"sqlite:///{tmp_path}/imported.db"
    target = open_store(target_url)
    try:
        write_export(source, tmp_path / "export.jsonl")
        read_export(target, tmp_path / "export.jsonl")
    finally:
        source.close()
        target.close()
    check(target_url)


def test_rows_from_before_pieces_get_theirs_when_the_server_starts(
    make_settings: Any, llm: FakeLLM, db_url: str
) -> None:
    """A store whose rows have vectors but were never split (written before pieces, or
    imported from an export without them): the queue splits them in the background, embeds
    only the sentences, marks a row of one sentence as having none, and does it once."""
    from nixx.memory import pieces

    store = open_store(db_url)
    try:
        store.bind_embedder("fake-embed", 384)
        mixed = store.append_buffer("user", MIXED, "api")
        short = store.append_buffer("assistant", TEXTS[0], "api")
        store.add_buffer_vectors(
            [(r.id, FakeLLM.embedding_of(r.content)) for r in (mixed, short)]
        )
        assert len(store.buffer_rows_without_pieces(10)) == 2
    finally:
        store.close()
    llm.fail_next_embeddings = 1  # the first try fails: retried, nothing lost
    with TestClient(base_url=LOCAL, app=create_app(make_settings(db_url=db_url))) as client:
        nixx = Nixx(client)
        queue = nixx.service._row_vectors
        queue.retry_min = 0.01
        deadline = time.monotonic() + 60
        while queue.store.buffer_rows_without_pieces(10) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert queue.store.buffer_rows_without_pieces(10) == []
        assert vector_status(nixx)["error"] is None
        # the sentences were embedded (twice: the failed try and its retry), the rows'
        # vectors were not (they had them)
        assert [body["input"] for body in llm.embed_requests] == [pieces.split(MIXED)] * 2
        found = queue.store.buffer_pieces([mixed.id, short.id])
        assert list(found) == [mixed.id] and found[mixed.id].shape == (3, 384)
        before = len(llm.embed_requests)
        flush(nixx)  # a flush looks again: nothing is left to split
        assert len(llm.embed_requests) == before
