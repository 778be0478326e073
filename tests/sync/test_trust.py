"""What one clone may claim in the ops it pushes (docs/sync.md, "Trust"), over real
remotes (a bare git repository; the embedded PostgreSQL) and the real `nxc` / `nxs`
commands: a message or thread is written once, clocks from outside are bounded, ops
arrive only under the replica that pushed them, another clone's answers and delivery
outcomes are shown as coming from there and never settle a local `nxc wait`."""

from __future__ import annotations

import json

import pytest

from nixx.log import clock as hlc
from nixx.log.op import Op
from nixx.nxc.reducer import snapshot

from .conftest import cli_env, open_store, run, sync
from .test_cli import _clones, as_, ok_json


def _forge(ws, *, kind: str, target: str, origin: str, clock: str, actor: str,
           payload: dict, domain: str = "message") -> Op:
    """What a hostile clone does: write any op it likes into its own log, so that its
    next pass pushes it (an op that did not arrive from the stream is pushable)."""
    op = Op.make(domain=domain, kind=kind, target=target, origin=origin, clock=clock,
                 actor=actor, payload=payload, created=0)
    with open_store(ws) as store:
        store.conn.execute(
            "INSERT INTO ops(id, domain, kind, target, origin, clock, actor, payload, created,"
            " local) VALUES (?,?,?,?,?,?,?,?,?,0)",
            (op.id, op.domain, op.kind, op.target, op.origin, op.clock, op.actor,
             op.payload_json(), op.created))
    return op


@pytest.fixture
def team(tmp_path):
    """Two clones A (aaaa) and B (bbbb) of one repository declaring the origin `team`
    and a channel of alice and bob, bound to the repository's stream."""
    _, a, b = _clones(tmp_path, {
        "workspace.yaml": "origin: team\n",
        "channels.yaml": "- name: pair\n  members: [team/alice, team/bob]\n",
        "reviewer.yaml": "handle: reviewer\nsystem_prompt: You review.\n",
    })
    for folder in (a, b):
        ok_json("nxs", "sync", "bind", "--no-daemon", cwd=folder)
    return a, b


def _ws(folder):
    from nixx.log.workspace import find_workspace

    return find_workspace(str(folder))


def test_a_clone_cannot_rewrite_a_message_or_take_over_a_thread(team, tmp_path):
    a, b = team
    sent = ok_json("nxc", "send", "--to", "reviewer", "the original text", cwd=a,
                   env=as_("alice"))
    thread, message = sent["thread_id"], sent["message_id"]
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)
    shown = ok_json("nxc", "threads", "show", thread, cwd=b, env=as_("alice"))
    first = shown["messages"][0]
    # B reuses both ids with an earlier clock, as alice and as mallory
    early = hlc.encode(1, 0)
    forged_post = _forge(_ws(b), kind="post", target=message, origin="bbbb", clock=early,
                         actor="team/alice", payload={
                             "thread": thread, "channel": first["channel_id"],
                             "body": "FORGED", "kind": "task"})
    forged_root = _forge(_ws(b), kind="thread_open", target=thread, origin="bbbb",
                         clock=early, actor="team/mallory", payload={
                             "channel": first["channel_id"], "parent": None,
                             "expects": ["team/mallory"], "deadline": None})
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)

    for folder in (a, b):  # the view is the same on the writer's clone and the forger's
        seen = ok_json("nxc", "threads", "show", thread, cwd=folder, env=as_("alice"))
        assert seen["opener"] == "team/alice"
        assert [m["body"] for m in seen["messages"]] == ["the original text"]
    # alice still owns her thread
    ok_json("nxc", "expect", "--thread", thread, "reviewer", cwd=a, env=as_("alice"))
    status = ok_json("nxs", "sync", "status", cwd=a)
    found = {item["op"]: item for item in status["conflicts"]["items"]}
    assert status["conflicts"]["count"] == 2 and set(found) == {forged_post.id, forged_root.id}
    assert found[forged_post.id]["origin"] == "bbbb" and "minted by aaaa" in \
        found[forged_post.id]["reason"]
    human = run("nxs", "sync", "status", cwd=a)
    assert "conflicts  2 claims" in human.stdout and forged_post.id in human.stdout


def test_a_clone_cannot_set_another_clones_thread_registers(team):
    """B forges alice's `thread_expects` (team/mallory) and `thread_deadline` (1970) on the
    thread she opened in A: A's thread keeps its expectation and deadline, `nxc wait` does
    not call it stale, and A lists the register writes as refused
    (docs/limits-and-safety.md, who writes what)."""
    a, b = team
    sent = ok_json("nxc", "send", "--to", "pair", "--expect", "team/bob", "--deadline", "2h",
                   "please look", cwd=a, env=as_("alice"))
    thread = sent["thread_id"]
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)
    before = ok_json("nxc", "threads", "show", thread, cwd=a, env=as_("alice"))
    forged_expects = _forge(_ws(b), kind="thread_expects", target=thread, origin="bbbb",
                            clock=hlc.tick(None), actor="team/alice",
                            payload={"expects": ["team/mallory"]})
    forged_deadline = _forge(_ws(b), kind="thread_deadline", target=thread, origin="bbbb",
                             clock=hlc.tick(None), actor="team/alice", payload={"deadline": 0})
    ok_json("nxs", "sync", "run", cwd=b)
    got = ok_json("nxs", "sync", "run", cwd=a)
    assert got["stored"] == 2  # stored (the log is whole), never winning

    for folder in (a, b):  # the same view on the owner's clone and the forger's
        after = ok_json("nxc", "threads", "show", thread, cwd=folder, env=as_("alice"))
        assert after["expects"] == before["expects"] and "team/mallory" not in after["expects"]
        assert after["deadline"] == before["deadline"] and after["state"] == "open"
    waited = run("nxc", "wait", "--thread", thread, "--timeout", "1", "--json", cwd=a,
                 env=as_("alice"))
    assert waited.returncode == 4, waited.stdout + waited.stderr  # timeout, not stale (3)
    status = ok_json("nxs", "sync", "status", cwd=a)
    found = {item["op"]: item for item in status["conflicts"]["items"]}
    assert set(found) == {forged_expects.id, forged_deadline.id}
    assert found[forged_expects.id]["kind"] == "thread_expects"
    assert found[forged_deadline.id]["kind"] == "thread_deadline"
    assert all(i["origin"] == "bbbb" and "owned by aaaa" in i["reason"] for i in found.values())
    human = run("nxs", "sync", "status", cwd=a)
    assert "conflicts  2 claims" in human.stdout and forged_expects.id in human.stdout
    # alice in B cannot set them either (her write could never count): said before writing
    proc = run("nxc", "expect", "--thread", thread, "team/bob", "--json", cwd=b,
               env=as_("alice"))
    assert proc.returncode != 0 and json.loads(proc.stdout)["error"]["kind"] == "forbidden"
    assert "opened in clone aaaa" in proc.stdout
    # in A she still can
    ok_json("nxc", "expect", "--thread", thread, "team/bob", "--deadline", "3h",
            cwd=a, env=as_("alice"))


def test_a_read_in_one_clone_holds_in_another_and_a_cursor_never_moves_back(team):
    """The read cursor is one max register per (reader, channel) across clones (an ack on
    one machine is not re-delivered on another): bob reads in B and the message is read in
    A too; a cursor synced with an older position re-delivers nothing. The accepted limit
    (docs/limits-and-safety.md, who writes what): a forged cursor far ahead hides bob's
    unread messages, while `nxc threads show` still shows them."""
    from nixx.nxc.engine import Engine

    a, b = team
    first = ok_json("nxc", "send", "--to", "pair", "one", cwd=a, env=as_("alice"))
    ok_json("nxc", "send", "--to", "pair", "two", cwd=a, env=as_("alice"))
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)
    for folder in (a, b):
        assert ok_json("nxc", "prime", cwd=folder, env=as_("bob"))["count"] == 2
    bob_in_b = Engine.open(cwd=b, env=as_("bob"))
    try:
        moved = bob_in_b.mark_read("decl:pair", upto=first["message_id"])
    finally:
        bob_in_b.close()
    assert moved["moved"]
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)
    for folder in (a, b):  # read in B, read in A
        left = ok_json("nxc", "prime", cwd=folder, env=as_("bob"))
        assert left["count"] == 1, (folder, left)
    # a cursor from B with an older position (late, or forged) never moves it back
    _forge(_ws(b), kind="read_cursor", target="decl:pair", origin="bbbb",
           clock=hlc.tick(None), actor="team/bob", payload={"pos": "0"})
    ok_json("nxs", "sync", "run", cwd=b)
    assert ok_json("nxs", "sync", "run", cwd=a)["stored"] == 1
    assert ok_json("nxc", "prime", cwd=a, env=as_("bob"))["count"] == 1
    # the accepted limit: a forged cursor far ahead counts (a shared handle has no owning
    # clone), so bob's unread message is hidden in A — but never lost from the thread
    _forge(_ws(b), kind="read_cursor", target="decl:pair", origin="bbbb",
           clock=hlc.tick(None), actor="team/bob", payload={"pos": "z"})
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)
    assert ok_json("nxc", "prime", cwd=a, env=as_("bob"))["count"] == 0
    shown = ok_json("nxc", "threads", "show", first["thread_id"], cwd=a, env=as_("bob"))
    assert [m["body"] for m in shown["messages"]] == ["one"]


def test_disputed_legacy_ids_converge_whatever_the_delivery_order(remote):
    """Ids that name no minter (made before the rule): the claim with the least
    (clock, origin, op id) is shown on every clone, whatever order the claims arrive in,
    and each clone reports the others."""
    a, b, c = (remote.workspace(n, r) for n, r in (("a", "aaaa"), ("b", "bbbb"), ("c", "cccc")))
    with open_store(a) as sa:
        sa.append("message", "thread_open", "t-old", "aaaa/ann",
                  {"channel": "decl:x", "parent": None, "expects": [], "deadline": None})
        sa.append("message", "post", "m-old", "aaaa/ann",
                  {"thread": "t-old", "channel": "decl:x", "body": "ann's", "kind": "info"})
    with open_store(b) as sb:
        sb.append("message", "post", "m-old", "bbbb/bob",
                  {"thread": "t-old", "channel": "decl:x", "body": "bob's", "kind": "info"})
    sync(b)  # c gets bob's claim first, then ann's
    sync(c)
    sync(a)
    for ws in (c, b, a, b, c):
        sync(ws)
    snaps = []
    for ws in (a, b, c):
        with open_store(ws) as store:
            snaps.append(snapshot(store.conn))
            from nixx.nxc.reducer import conflicts

            clash = conflicts(store.conn)
            assert clash["count"] == 1 and clash["items"][0]["id"] == "m-old"
            body = store.conn.execute(
                "SELECT body FROM nxc_messages WHERE message_id = 'm-old'").fetchone()[0]
            assert body == "ann's"  # the least pos: ann's clock is earlier
    assert snaps[0] == snaps[1] == snaps[2]


def test_a_far_future_clock_is_refused_and_local_writes_go_on(team):
    a, b = team
    poison = _forge(_ws(b), kind="read_cursor", target="decl:pair", origin="bbbb",
                    clock="ffffffffffffffff", actor="team/bob", payload={"pos": "z"})
    ok_json("nxs", "sync", "run", cwd=b)
    got = ok_json("nxs", "sync", "run", cwd=a)
    assert got["refused"] == 1 and got["stored"] == 0
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert status["refused"]["count"] == 1
    (item,) = status["refused"]["items"]
    assert item["op"] == poison.id and "ahead" in item["reason"]
    # B itself (which holds the op) still writes, with 16-digit clocks
    sent = ok_json("nxc", "send", "--to", "pair", "still writing", cwd=b, env=as_("bob"))
    with open_store(_ws(b)) as store:
        clocks = [op.clock for op in store.ops() if op.target == sent["message_id"]]
        assert clocks and all(hlc.is_clock(c) and c < "ffffffffffffffff" for c in clocks)
    # and what B writes now still reaches A
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)
    shown = ok_json("nxc", "threads", "show", sent["thread_id"], cwd=a, env=as_("alice"))
    assert [m["body"] for m in shown["messages"]] == ["still writing"]


def test_refold_recovers_a_log_poisoned_before_clocks_were_bounded(team):
    """A log that stored (and folded) a far-future op under an older nixx: `nxs refold`
    leaves it unfolded, and writes go on with sane clocks."""
    a, _ = team
    ws = _ws(a)
    _forge(ws, kind="channel", target="decl:pair", origin="zzzz", clock="ffffffffffffffff",
           actor="zzzz/x", payload={"fields": {"description": "POISON"}})
    with open_store(ws) as store:  # the fold an older nixx ran on insert
        store.conn.execute(
            "INSERT INTO nxc_channel_fields VALUES ('decl:pair', 'description', '\"POISON\"',"
            " 'ffffffffffffffff.zzzz.o0')")
    folded = ok_json("nxs", "refold", cwd=a)
    assert folded["folded"]["message"] >= 0
    with open_store(ws) as store:
        assert store.conn.execute(
            "SELECT count(*) FROM nxc_channel_fields WHERE value = '\"POISON\"'").fetchone()[0] == 0
    sent = ok_json("nxc", "send", "--to", "pair", "after the refold", cwd=a, env=as_("alice"))
    with open_store(ws) as store:
        mine = [op for op in store.ops() if op.target == sent["message_id"]]
        assert mine and all(hlc.is_clock(op.clock) and op.clock < hlc.ceiling() for op in mine)


def test_ops_arrive_only_under_the_replica_that_pushed_them(remote):
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(a) as sa:
        sa.append("message", "post", "m-a", "aaaa/ann",
                  {"thread": "t-a", "channel": "decl:x", "body": "real", "kind": "info"})
    # B pushes an op that claims to come from cccc (a third clone)
    impostor = _forge(b, kind="post", target="m-c", origin="cccc", clock=hlc.tick(None),
                      actor="cccc/cy", payload={"thread": "t-a", "channel": "decl:x",
                                                "body": "said by cy?", "kind": "info"})
    sync(a)
    sync(b)
    got = sync(a)
    assert got.refused == 1
    with open_store(a) as sa:
        assert sa.get_op(impostor.id) is None
        from nixx.sync import state

        (item,) = state.refused(sa)["items"]
        assert item["pusher"] == "bbbb" and item["origin"] == "cccc"


def test_another_clones_answer_and_failed_outcome_are_shown_as_from_there(team):
    """An answer written in B is marked as coming from B in A; a `failed` delivery
    outcome B writes about A's thread is shown but does not make A's `nxc wait` exit 5
    (outcomes are about the sessions of the clone that writes them)."""
    a, b = team
    sent = ok_json("nxc", "send", "--to", "pair", "--expect", "team/bob", "please look",
                   cwd=a, env=as_("alice"))
    thread = sent["thread_id"]
    ok_json("nxs", "sync", "run", cwd=a)
    ok_json("nxs", "sync", "run", cwd=b)
    supervisor = ok_json("nxc", "threads", "show", thread, cwd=b, env=as_("bob"))["expects"][0]
    _forge(_ws(b), kind="failed", target=thread, origin="bbbb", clock=hlc.tick(None),
           actor="team/bob", domain="delivery",
           payload={"thread": thread, "persona": supervisor, "session": "s-x",
                    "reason": "INVENTED CAUSE"})
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)
    waited = run("nxc", "wait", "--thread", thread, "--timeout", "1", "--json", cwd=a,
                 env=as_("alice"))
    assert waited.returncode == 4, waited.stdout + waited.stderr  # timeout, not failed (5)
    status = ok_json("nxc", "status", "--all", cwd=a, env=as_("alice"))
    (op,) = [o for o in status["operations"] if o["root"] == thread]
    remote_outcomes = [d for t in op["threads"] for d in t["deliveries"]
                       if d["outcome"] == "failed"]
    assert remote_outcomes and all(d["remote"] and d["origin"] == "bbbb"
                                   for d in remote_outcomes)
    human = run("nxc", "status", "--all", cwd=a, env=as_("alice"))
    assert "from clone bbbb: failed:" in human.stdout, human.stdout
    assert not [line for line in human.stdout.splitlines()
                if "INVENTED CAUSE" in line and "from clone bbbb" not in line]
    # bob answers in his slot in B: A shows it as coming from clone bbbb
    answered = ok_json("nxc", "reply", "looked", cwd=b, env=as_("bob"))
    ok_json("nxs", "sync", "run", cwd=b)
    ok_json("nxs", "sync", "run", cwd=a)
    slot = ok_json("nxc", "threads", "show", answered["thread_id"], cwd=a, env=as_("alice"))
    reply = slot["messages"][-1]
    assert reply["body"] == "looked" and reply["origin"] == "bbbb" and reply["remote"] is True
    human = run("nxc", "threads", "show", answered["thread_id"], cwd=a, env=as_("alice"))
    assert "from clone bbbb" in human.stdout


def test_expect_refuses_undeclared_and_reserved_handles(team):
    a, _ = team
    sent = ok_json("nxc", "send", "--to", "reviewer", "look", cwd=a, env=as_("alice"))
    thread = sent["thread_id"]
    for bad in ("team/nobody", "team/__channel-pair"):
        proc = run("nxc", "expect", "--thread", thread, bad, "--json", cwd=a, env=as_("alice"))
        assert proc.returncode == 1, proc.stdout
        assert json.loads(proc.stdout)["error"]["kind"] == "validation"
    ok_json("nxc", "expect", "--thread", thread, "reviewer", cwd=a, env=as_("alice"))
    # nor at the send (an undeclared handle there stays a warning: it may answer elsewhere)
    proc = run("nxc", "send", "--to", "reviewer", "--expect", "team/__channel-pair", "look",
               "--json", cwd=a, env=as_("alice"))
    assert proc.returncode == 1, proc.stdout
    assert json.loads(proc.stdout)["error"]["kind"] == "validation"


def test_an_oversized_op_is_refused_unread_and_the_next_pass_syncs(remote):
    """An op longer than the pass's bound (here 64 KiB, configured) is never decoded nor
    stored: it is listed as refused, the pass stores what else arrived, and later passes
    go on (docs/limits-and-safety.md, "What a sync pass takes in")."""
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    bound = 64 * 1024
    huge = _forge(b, kind="post", target="m-huge", origin="bbbb", clock=hlc.tick(None),
                  actor="bbbb/bo", payload={"thread": "t-b", "channel": "decl:x",
                                            "body": "x" * (4 * bound), "kind": "info"})
    with open_store(b) as sb:
        sb.append("message", "post", "m-fine", "bbbb/bo",
                  {"thread": "t-b", "channel": "decl:x", "body": "fine", "kind": "info"})
    sync(b)
    got = sync(a, max_op_bytes=bound)
    assert got.refused == 1 and got.stored == 1
    with open_store(a) as sa:
        assert sa.get_op(huge.id) is None and sa.count() == 1
        from nixx.sync import state

        (item,) = state.refused(sa)["items"]
        assert item["op"] == huge.id and item["origin"] == "bbbb" and item["kind"] == "post"
        assert item["target"] == "m-huge" and "bytes, more than the 65536" in item["reason"]
    with open_store(b) as sb:
        sb.append("message", "post", "m-later", "bbbb/bo",
                  {"thread": "t-b", "channel": "decl:x", "body": "later", "kind": "info"})
    sync(b)
    again = sync(a, max_op_bytes=bound)
    assert again.refused == 0 and again.stored == 1
    with open_store(a) as sa:
        assert sa.count() == 2
        from nixx.sync import state

        assert state.refused(sa)["count"] == 1


def test_a_pass_pulls_at_most_the_bound_and_the_next_goes_on(remote):
    """The op count per pass is bounded by default too (`sync_max_pull_ops`)."""
    a, b = remote.workspace("a", "aaaa"), remote.workspace("b", "bbbb")
    with open_store(b) as sb:
        for i in range(5):
            sb.append("message", "post", f"m-{i}", "bbbb/bo",
                      {"thread": "t-b", "channel": "decl:x", "body": str(i), "kind": "info"})
    sync(b, batch_size=1)  # one op per git segment: git reads whole segments
    first = sync(a, max_pull=3, pull_batch=1)
    assert first.stored == 3 and first.more
    second = sync(a, max_pull=3, pull_batch=1)
    assert second.stored == 2 and not second.more


def test_nxs_sync_run_takes_its_op_bound_from_the_settings(team):
    a, b = team
    forged = _forge(_ws(b), kind="post", target="m-big", origin="bbbb", clock=hlc.tick(None),
                    actor="team/bob", payload={"thread": "t-b", "channel": "decl:pair",
                                               "body": "y" * 20_000, "kind": "info"})
    ok_json("nxs", "sync", "run", cwd=b)
    got = ok_json("nxs", "sync", "run", cwd=a, env=cli_env(NIXX_SYNC_MAX_OP_BYTES="8192"))
    assert got["refused"] == 1
    status = ok_json("nxs", "sync", "status", cwd=a)
    assert [i["op"] for i in status["refused"]["items"]] == [forged.id]
    human = run("nxs", "sync", "status", cwd=a)
    assert "refused    1 ops on arrival" in human.stdout and "8192" in human.stdout
