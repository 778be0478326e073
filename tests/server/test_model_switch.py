"""A store of all-MiniLM-L6-v2 vectors opened with NIXX_EMBED_MODEL=mpnet moves to
all-mpnet-base-v2 in the background (nixx.memory.model_switch): searches answer all along
with the old model's vectors, the new model's are kept apart, one transaction switches,
and afterwards the store records the new model and dimension. On SQLite and on embedded
PostgreSQL, with the real models (mpnet: `nixx embedder install mpnet`, run by `make test`)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import numpy as np
import pytest
from starlette.testclient import TestClient

from nixx.embed import models
from nixx.embed.local import LocalEmbedder
from nixx.errors import EmbedderMismatch, ModelMissing
from nixx.memory.model_switch import SwitchingEmbedder
from nixx.memory.row_vectors import embed_per_row, row_texts_for
from nixx.memory.service import open_service
from nixx.server.app import create_app
from nixx.store import open_store
from nixx.testing.live_server import LOCAL

try:
    models.model_dir(models.MPNET)
except ModelMissing:  # pragma: no cover - CI installs it (make test)
    pytest.skip("all-mpnet-base-v2 is not installed: nixx embedder install mpnet",
                allow_module_level=True)

MINI, MPNET = models.MINILM.name, models.MPNET.name
ROWS = [
    "Hey! How was your week?",
    "Busy. Oh, the spare key to the boathouse is hidden under the blue flowerpot.",
    "Good to know. My sister's new puppy is called Luna, she already learned to sit.",
    "We booked the dentist for Tuesday at four. Then we go for pizza after.",
    "Night! Talk tomorrow.",
]


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest) -> str:
    return "" if request.param == "sqlite" else str(request.getfixturevalue("pg_url"))


def _settings(make_settings: Any, db_url: str, model: str) -> Any:
    return make_settings(db_url=db_url, embed_provider="local", embed_model=model,
                         recall_threshold=None)


def _seed_minilm(url: str) -> list[int]:
    """A store as a MiniLM server leaves it: rows with vectors and pieces, a summary."""
    store = open_store(url)
    try:
        mini = LocalEmbedder(model="minilm")
        store.bind_embedder(mini.model, mini.dim)
        rows = [store.append_buffer("user", text, "api") for text in ROWS]
        per_row = embed_per_row(mini.embed, row_texts_for(store, rows))
        store.add_buffer_vectors([(r.id, v[0]) for r, v in zip(rows, per_row, strict=True)],
                                 {r.id: v[1:] for r, v in zip(rows, per_row, strict=True)})
        text = "They talked about the boathouse key and a puppy."
        store.add_summary(text, mini.embed([text])[0], tags=[], entities={},
                          start_buffer_id=rows[0].id, end_buffer_id=rows[-1].id)
        return [r.id for r in rows]
    finally:
        store.close()


def test_search_answers_during_the_move_and_the_store_is_switched_after(
    make_settings: Any, db_url: str
) -> None:
    settings = _settings(make_settings, db_url, "mpnet")
    ids = _seed_minilm(settings.database_url)
    key_row = ids[1]
    mpnet = LocalEmbedder(model="mpnet")

    async def scenario() -> None:
        async with open_service(settings) as service:
            store, switch = service._store, service._switch
            assert switch is not None and isinstance(service._embedder, SwitchingEmbedder)
            assert service._embedder.model == MINI and switch.target.model == MPNET
            # the move begins: a few vectors of the new model staged, the rest not yet
            assert store.begin_switch(MPNET, 768)
            pending = store.switch_pending()
            assert len(pending) == len(ROWS) + 1
            assert switch.stage(pending[:2]) == 2
            status = (await service.status())["embedder_switch"]
            assert status is not None
            assert (status["staged"], status["total"], status["done"]) == (2, 6, False)
            # searching meanwhile: the old model's vectors answer, and only they are live
            answer = await service.search("where is the boathouse key hidden?", 3)
            assert answer.results[0].row is not None and answer.results[0].row.id == key_row
            assert answer.results[0].cosine is not None  # by vectors, not only words
            assert store.embedding_info().model == MINI
            with pytest.raises(EmbedderMismatch):  # no 768-d vector is live yet
                store.search_buffer_vectors(mpnet.embed(["boathouse key"])[0], limit=1)
            # a turn's row arrives meanwhile and gets its (old-model) vector
            late = store.append_buffer("user", "Luna chewed my left shoe this morning.", "api")
            service._row_vectors.notify()
            await service._row_vectors.flush()
            assert store.buffer_vector_stats()["pending"] == 0
            # the move ends: everything is the new model's, in one transaction
            assert await service.run(switch.run)
            info = store.embedding_info()
            assert (info.model, info.dim) == (MPNET, 768)
            assert service._embedder.model == MPNET and service._recall.model == MPNET
            assert store.switch_target() is None
            assert store.buffer_vector_stats() == {"embedded": len(ROWS) + 1, "pending": 0}
            status = (await service.status())["embedder_switch"]
            assert status is not None and status["done"]
            # every live vector is mpnet's: each row is nearest to its own mpnet vector
            for row_id, text in [*zip(ids, ROWS, strict=True), (late.id, late.content)]:
                hit = store.search_buffer_vectors(mpnet.embed([text])[0], limit=1)[0]
                assert hit.row.id == row_id and hit.score == pytest.approx(1.0, abs=1e-5)
            summary = store.search_summaries(
                mpnet.embed(["They talked about the boathouse key and a puppy."])[0], limit=1)
            assert summary[0].score == pytest.approx(1.0, abs=1e-5)
            with pytest.raises(EmbedderMismatch):  # a MiniLM vector is refused now
                store.add_buffer_vectors([(late.id, np.ones(384, np.float32) / 384**0.5)])
            answer = await service.search("where is the boathouse key hidden?", 3)
            assert answer.results[0].row is not None and answer.results[0].row.id == key_row

    asyncio.run(scenario())


def test_the_server_moves_the_store_in_its_own_thread(make_settings: Any, db_url: str) -> None:
    settings = _settings(make_settings, db_url, "mpnet")
    ids = _seed_minilm(settings.database_url)
    with TestClient(base_url=LOCAL, app=create_app(settings)) as client:
        deadline = time.monotonic() + 300  # a bound on the wait, not a speed claim
        searches = 0
        while True:
            r = client.post("/v1/episodic/search",
                            json={"query": "where is the boathouse key hidden?", "limit": 3})
            assert r.status_code == 200, r.text  # answers before, during and after
            assert r.json()["results"][0]["id"] == ids[1]
            searches += 1
            status = client.get("/v1/episodic/status").json()["embedder_switch"]
            assert status["target"] == MPNET and status["error"] is None
            if status["done"]:
                break
            assert time.monotonic() < deadline, status
            time.sleep(0.05)
    assert searches >= 1
    store = open_store(settings.database_url)
    try:
        info = store.embedding_info()
        assert (info.model, info.dim) == (MPNET, 768)
        assert store.buffer_vector_stats() == {"embedded": len(ROWS), "pending": 0}
    finally:
        store.close()


def test_setting_the_stores_model_again_abandons_the_move(
    make_settings: Any, db_url: str
) -> None:
    settings = _settings(make_settings, db_url, "minilm")
    _seed_minilm(settings.database_url)
    store = open_store(settings.database_url)
    try:
        store.begin_switch(MPNET, 768)
        assert store.switch_progress() == (0, len(ROWS) + 1)
    finally:
        store.close()

    async def scenario() -> None:
        async with open_service(settings) as service:
            assert service._switch is None and service._embedder.model == MINI
            assert service._store.switch_target() is None  # dropped, with what it staged
            assert (await service.status())["embedder_switch"] is None

    asyncio.run(scenario())


def test_a_new_model_not_installed_stops_the_move_and_the_old_one_serves(
    make_settings: Any, db_url: str, tmp_path: Any
) -> None:
    from nixx.embed.models import LocalModel
    from nixx.memory.model_switch import ModelSwitch

    settings = _settings(make_settings, db_url, "minilm")
    ids = _seed_minilm(settings.database_url)
    # a model like mpnet, split into parts, whose files were never assembled
    absent = LocalModel(key="absent", name="absent-model", dim=8, max_seq_length=8,
                        parts=models.MPNET.parts, zip_folder="x", files={"model.safetensors": ""})
    target = LocalEmbedder(model=absent)

    async def scenario() -> None:
        async with open_service(settings) as service:
            switch = ModelSwitch(service._store, MINI, target, foreground=service._foreground)
            switch.start()
            switch.join(60)  # the thread ends: nothing to retry
            status = switch.status()
            assert not status["done"] and not status["running"]
            assert status["error"] is not None and "nixx embedder install absent" in status["error"]
            assert service._store.embedding_info().model == MINI
            answer = await service.search("where is the boathouse key hidden?", 3)
            assert answer.results[0].row is not None and answer.results[0].row.id == ids[1]

    asyncio.run(scenario())
