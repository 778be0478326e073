"""Delivery outcomes read from a log whose views may not exist: the apsw errors the
reader meets are the ones it handles (it once caught the stdlib sqlite3's, which apsw
never raises)."""

from __future__ import annotations

import apsw
import pytest

from nixx.log.store import LogStore
from nixx.nxc.delivery import outcomes
from nixx.nxc.delivery.outcomes import DeliveryReducer
from nixx.nxc.reducer import ChatReducer


def test_outcomes_of_a_log_without_the_delivery_views_are_empty(ws):
    # a store opened by a product that does not register the delivery reducer: no
    # nxd_outcomes table; the reader reports nothing instead of failing
    with LogStore.open(ws.db_path, [ChatReducer()]) as store:
        assert store.conn.execute(
            "SELECT count(*) FROM sqlite_master WHERE name = 'nxd_outcomes'").fetchone()[0] == 0
        assert outcomes.for_threads(store.conn, ["t-1"]) == {}


def test_outcomes_are_read_once_the_reducer_is_registered(ws):
    with LogStore.open(ws.db_path, [ChatReducer(), DeliveryReducer()]) as store:
        outcomes.record(store, "failed", "t-1", "ab12/alice",
                        {"thread": "t-1", "persona": "ab12/coder", "reason": "no such file"})
        found = outcomes.for_threads(store.conn, ["t-1"])
    assert [o["outcome"] for o in found["t-1"]] == ["failed"]
    assert found["t-1"][0]["reason"] == "no such file"


def test_other_sql_errors_are_not_swallowed(ws):
    # views of another shape (not "no such table"): the error is real and propagates
    with LogStore.open(ws.db_path, [ChatReducer()]) as store:
        store.conn.execute("CREATE TABLE nxd_outcomes(op_id TEXT PRIMARY KEY)")
        with pytest.raises(apsw.SQLError, match="no such column"):
            outcomes.for_threads(store.conn, ["t-1"])
