"""The conversation model through the library: threads, quorum, read state, access,
operations, search."""

from __future__ import annotations

import pytest

from nixx.errors import Forbidden, NotFound, ValidationError
from nixx.log.op import Op
from nixx.log.store import LogStore
from nixx.nxc.channels import dm_id
from nixx.nxc.engine import Engine
from nixx.nxc.reducer import DOMAIN, ChatReducer


class Clock:
    def __init__(self, ms: int = 1_800_000_000_000) -> None:
        self.ms = ms

    def __call__(self) -> int:
        return self.ms


@pytest.fixture
def clock():
    return Clock()


@pytest.fixture
def as_(ws, clock):
    engines = []

    def make(actor: str) -> Engine:
        engine = Engine(ws, env={"NXC_ACTOR": actor}, now_ms=clock)
        engines.append(engine)
        return engine

    yield make
    for e in engines:
        e.close()


def test_dm_id_is_symmetric_and_derived():
    a, b = "ab12/alice", "ab12/coder"
    assert dm_id(a, b) == dm_id(b, a)
    assert dm_id(a, b).startswith("dm:") and len(dm_id(a, b)) == 27
    import hashlib

    assert dm_id(a, b)[3:] == hashlib.sha256(b"ab12/alice\x00ab12/coder").hexdigest()[:24]


def test_send_to_a_persona_opens_a_direct_thread(as_):
    alice = as_("alice")
    r = alice.send("coder", "fix the flaky test")
    assert r["target"] == "persona" and r["to"] == "ab12/coder"
    assert r["channel"] == dm_id("ab12/alice", "ab12/coder")
    assert r["expects"] == ["ab12/coder"] and r["session"] is None and r["spawned"] is False
    assert r["await"]["command"] == f"nxc wait --thread {r['thread_id']}"
    t = alice.thread(r["thread_id"])
    assert t["opener"] == "ab12/alice" and t["outstanding"] == ["ab12/coder"]
    assert not t["complete"] and t["state"] == "open"
    assert [m["body"] for m in t["messages"]] == ["fix the flaky test"]


def test_the_quorum_is_derived_per_turn(as_):
    alice, coder, rev = as_("alice"), as_("coder"), as_("reviewer")
    r = alice.send("coder", "ship it?")
    tid = r["thread_id"]
    alice.expect(tid, "coder,reviewer")  # a quorum of two
    coder.reply("yes", thread=tid)
    t = alice.thread(tid)
    assert t["replied"] == ["ab12/coder"] and t["outstanding"] == ["ab12/reviewer"]
    alice.reply("any news?", thread=tid)  # the opener's own post never counts
    assert not alice.thread(tid)["complete"]
    rev.reply("lgtm", thread=tid)
    assert alice.thread(tid)["complete"]
    # a new declaration starts a new turn: earlier answers do not discharge it
    again = alice.expect(tid, "coder")
    assert again["expects"] == ["ab12/coder"] and again["outstanding"] == ["ab12/coder"]
    assert not again["complete"]
    coder.reply("round two", thread=tid)
    assert alice.thread(tid)["complete"]


def test_only_the_opener_may_redeclare(as_):
    alice, coder = as_("alice"), as_("coder")
    r = alice.send("coder", "task")
    with pytest.raises(Forbidden, match="only the opener"):
        coder.expect(r["thread_id"], "alice")
    with pytest.raises(NotFound):
        alice.expect("t-nope", "coder")


def test_a_register_write_by_a_non_opener_is_kept_but_never_wins(ws, as_):
    alice = as_("alice")
    r = alice.send("coder", "task")
    with LogStore.open(ws.db_path, [ChatReducer()]) as store:
        op = store.append(DOMAIN, "thread_expects", r["thread_id"], "ab12/coder",
                          {"expects": ["ab12/alice"]})
        assert store.get_op(op.id) is not None
    assert alice.thread(r["thread_id"])["expects"] == ["ab12/coder"]


def test_stale_after_the_deadline_with_something_outstanding(as_, clock):
    alice, coder = as_("alice"), as_("coder")
    r = alice.send("coder", "quick one", deadline="10m")
    tid = r["thread_id"]
    assert not alice.thread(tid)["stale"]
    clock.ms += 11 * 60_000
    t = alice.thread(tid)
    assert t["stale"] and t["state"] == "stale" and not t["complete"]
    coder.reply("late but here", thread=tid)
    t = alice.thread(tid)
    assert t["complete"] and not t["stale"]  # disjoint by construction


def test_deadline_formats(as_, clock):
    alice = as_("alice")
    r = alice.send("coder", "x", deadline="2027-01-15T10:00:00Z")
    assert r["deadline"] == "2027-01-15T10:00:00.000Z"
    with pytest.raises(ValidationError, match="duration"):
        alice.send("coder", "x", deadline="tomorrow")


def test_body_size_and_deadline_range_are_checked_in_the_library(as_, clock, ws):
    """What `nxc send` checks, every entry gets (CLI, MCP, a program calling `Engine`):
    a body past `MAX_BODY_BYTES`, a deadline in the past or more than a year ahead (as a
    duration, an instant or epoch ms) is a validation error and nothing is written."""
    from nixx.nxc.engine import MAX_BODY_BYTES

    alice = as_("alice")
    with LogStore.open(ws.db_path) as store:
        before = store.count()
    for body in ("x" * (MAX_BODY_BYTES + 1), "é" * (MAX_BODY_BYTES // 2 + 1)):
        with pytest.raises(ValidationError, match="KiB"):
            alice.send("coder", body)
    for deadline in ("99999999w", "1970-01-01T00:00:00Z", 0, clock.ms - 1,
                     clock.ms + 367 * 86_400_000):
        with pytest.raises(ValidationError, match="future|a year"):
            alice.send("coder", "x", deadline=deadline)
    with LogStore.open(ws.db_path) as store:
        assert store.count() == before
    r = alice.send("coder", "é" * (MAX_BODY_BYTES // 2), deadline="366d")
    with pytest.raises(ValidationError, match="a year"):
        alice.expect(r["thread_id"], "coder", deadline="53w")
    with pytest.raises(ValidationError, match="future"):
        alice.expect(r["thread_id"], "coder", deadline=clock.ms)
    with pytest.raises(ValidationError, match="KiB"):
        alice.reply("y" * (MAX_BODY_BYTES + 1), thread=r["thread_id"])


def test_channel_send_expects_members_minus_sender_and_records_the_channel(as_):
    alice = as_("alice")
    r = alice.send("team", "standup")
    assert r["target"] == "channel" and r["channel"] == "decl:team"
    # a round: the thread expects the channel's supervisor, the members answer in slots
    assert r["expects"] == ["ab12/__channel-team"]
    assert r["members"] == ["ab12/coder", "ab12/reviewer"]
    assert "public_channels" not in alice.list()  # omitted when empty; team is a group
    row = alice.conn.execute(
        "SELECT name, kind, members FROM nxc_channels WHERE channel_id = 'decl:team'").fetchone()
    assert row == ("team", "group", '["ab12/coder","ab12/reviewer","ab12/alice"]')
    alice.send("team", "again")  # the channel is recorded once, not per send
    assert alice.conn.execute("SELECT count(*) FROM ops WHERE kind = 'channel'").fetchone()[0] == 1


def test_unknown_and_undeclared_targets(ws, as_):
    alice = as_("alice")
    with pytest.raises(NotFound, match="declared"):
        alice.send("nobody", "x")
    # a channel that exists in the log (e.g. arrived by sync) but is not declared
    with LogStore.open(ws.db_path, [ChatReducer()]) as store:
        store.append(DOMAIN, "channel", "decl:ghost", "zz99/x",
                     {"fields": {"name": "ghost", "kind": "public", "members": ["zz99/x"]}})
    with pytest.raises(NotFound, match=r"channels\.yaml"):
        alice.send("ghost", "x")
    with pytest.raises(ValidationError, match="persona"):
        alice.send(dm_id("ab12/alice", "ab12/coder"), "x")
    listed = alice.list()
    ghost = [p for p in listed["public_channels"] if p["channel_id"] == "decl:ghost"]
    assert ghost and ghost[0]["declared"] is False
    assert "ghost" not in [c["name"] for c in listed["channels"]]


def test_send_validation(as_):
    alice = as_("alice")
    with pytest.raises(ValidationError, match="empty"):
        alice.send("coder", "   ")
    with pytest.raises(ValidationError, match="kind"):
        alice.send("coder", "x", kind="gossip")
    with pytest.raises(ValidationError, match="itself"):
        as_("coder").send("coder", "x")


def test_addressable_rules(ws, as_):
    folder = ws.personas_dir
    with open(f"{folder}/hermit.yaml", "w") as fh:
        fh.write("handle: hermit\nsystem_prompt: x\naddressable: none\n")
    with open(f"{folder}/picky.yaml", "w") as fh:
        fh.write("handle: picky\nsystem_prompt: x\naddressable: {personas: [coder]}\n")
    with pytest.raises(Forbidden, match="not addressable"):
        as_("alice").send("hermit", "x")
    with pytest.raises(Forbidden, match="may not address"):
        as_("alice").send("picky", "x")  # a human, humans: false
    assert as_("coder").send("picky", "x")["to"] == "ab12/picky"


def test_reply_without_thread_needs_exactly_one_open_conversation(as_):
    alice, coder = as_("alice"), as_("coder")
    with pytest.raises(ValidationError, match="0 open"):
        coder.reply("hello?")
    r1 = alice.send("coder", "one")
    assert coder.reply("done one")["thread_id"] == r1["thread_id"]
    alice.send("coder", "two")
    alice.send("coder", "three")
    with pytest.raises(ValidationError, match="2 open"):
        coder.reply("which?")


def test_reading_and_posting_need_access(as_):
    alice = as_("alice")
    r = alice.send("coder", "private")
    outsider = as_("eve")
    with pytest.raises(Forbidden):
        outsider.thread(r["thread_id"])
    with pytest.raises(Forbidden):
        outsider.reply("hi", thread=r["thread_id"])
    with pytest.raises(NotFound):
        outsider.reply("hi", thread="t-missing")
    assert outsider.search("private") == []
    assert [h["body"] for h in alice.search("private")] == ["private"]
    assert r["thread_id"] not in [t["thread_id"] for t in outsider.threads()]


def test_public_channels_are_readable_by_anyone(as_):
    coder = as_("coder")
    r = coder.send("front", "release notes are out", expect="")
    outsider = as_("eve")
    assert outsider.thread(r["thread_id"])["messages"][0]["body"] == "release notes are out"
    assert [h["message_id"] for h in outsider.search("release notes")] == [r["message_id"]]
    with pytest.raises(Forbidden, match="member"):  # but no read state for non-members
        outsider.mark_read("decl:front")


def test_unread_cursor_and_prime(as_):
    alice, coder = as_("alice"), as_("coder")
    r1 = alice.send("coder", "one")
    alice.send("coder", "two", kind="info")
    p = coder.prime()
    assert p["count"] == 2 and len(p["in_turn"]) == 2 and p["next_session"] == []
    assert "body" not in p["in_turn"][0]
    assert alice.prime()["count"] == 0  # my own messages are never unread
    moved = coder.mark_read(r1["channel"], upto=r1["message_id"])
    assert moved["moved"] and coder.prime()["count"] == 1
    assert coder.mark_read(r1["channel"], upto=r1["message_id"])["moved"] is False
    coder.mark_read(r1["channel"])
    assert coder.prime()["count"] == 0
    # an older watermark never moves it back
    before = coder.mark_read(r1["channel"])["pos"]
    assert coder.mark_read(r1["channel"], upto=r1["message_id"])["pos"] == before
    with pytest.raises(NotFound):
        coder.mark_read(r1["channel"], upto="m-missing")


def test_status_trees_and_awaiting_human(as_):
    alice, coder, rev = as_("alice"), as_("coder"), as_("reviewer")
    root = alice.send("coder", "build the feature")
    child = coder.send("reviewer", "review my part", parent=root["thread_id"])
    st = alice.status()
    (op,) = [o for o in st["operations"] if o["root"] == root["thread_id"]]
    assert [t["thread_id"] for t in op["threads"]] == [root["thread_id"], child["thread_id"]]
    assert [t["depth"] for t in op["threads"]] == [0, 1]
    assert op["live"] and op["open"] == 2 and not op["awaiting_human"]
    rev.reply("approved", thread=child["thread_id"])
    coder.reply("feature done", thread=root["thread_id"])
    assert alice.status()["operations"] == []  # finished operations hidden
    (op,) = alice.status(include_finished=True)["operations"]
    assert op["awaiting_human"] and op["threads"][0]["awaiting_human"]
    assert not op["threads"][1]["awaiting_human"]  # only ever at the root
    (op,) = alice.status(thread=child["thread_id"])["operations"]
    assert op["root"] == root["thread_id"]
    with pytest.raises(NotFound):
        alice.status(thread="t-missing")


def test_escalation_needs_a_decision(as_):
    alice, coder = as_("alice"), as_("coder")
    r = alice.send("coder", "decide the schema")
    coder.reply("A or B?", thread=r["thread_id"], escalate=True)
    (op,) = alice.status()["operations"]
    assert op["needs_decision"] and op["threads"][0]["escalated"]
    alice.expect(r["thread_id"], "coder")  # answered with a new turn
    (op,) = alice.status()["operations"]
    assert not op["needs_decision"]


def test_search_ors_words_and_survives_punctuation(as_):
    alice = as_("alice")
    alice.send("coder", "the database schema migration failed")
    alice.send("coder", "lunch at noon")
    hits = alice.search('what about the "schema"? (migration)')
    assert [h["body"] for h in hits][0] == "the database schema migration failed"
    with pytest.raises(ValidationError):
        alice.search("?!")


def test_wait_returns_at_once_when_settled(as_, clock):
    alice, coder = as_("alice"), as_("coder")
    r = alice.send("coder", "x", deadline="1m")
    coder.reply("done", thread=r["thread_id"])
    assert alice.wait(r["thread_id"], timeout=5)[0] == "complete"
    r2 = alice.send("coder", "y", deadline="1m")
    clock.ms += 120_000
    assert alice.wait(r2["thread_id"], timeout=5)[0] == "stale"
    r3 = alice.send("coder", "z")
    assert alice.wait(r3["thread_id"], timeout=0.1)[0] == "timeout"


def test_a_foreign_op_folds_into_the_same_views(ws, as_, tmp_path):
    """An op minted in another workspace (sync) lands and folds like a local one."""
    alice = as_("alice")
    r = alice.send("coder", "hello from here")
    from nixx.log.workspace import init_workspace

    other, _ = init_workspace(tmp_path / "other", replica="zz99")
    with LogStore.open(other.db_path, [ChatReducer()]) as there:
        reply = there.append(DOMAIN, "post", "m-remote", "ab12/coder", {
            "thread": r["thread_id"], "channel": r["channel"], "body": "answered remotely",
            "kind": "report"})
    with LogStore.open(ws.db_path, [ChatReducer()]) as here:
        (new,) = here.insert([Op.from_wire(reply.to_wire())])
        assert new.seq == here.max_seq()
        assert [o.id for o in here.ops_since(new.seq - 1)] == [reply.id]
    assert alice.thread(r["thread_id"])["complete"]
