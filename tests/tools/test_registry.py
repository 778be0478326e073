"""ToolRegistry: specs, names, and execute() turning every model mistake into text."""

from __future__ import annotations

import json

import pytest

ALL = {"read_file", "write_file", "list_dir", "delete_file", "search_transcript", "view_transcript"}


def test_specs_are_openai_tool_entries(make_registry):
    reg = make_registry()
    specs = reg.specs()
    assert {s["function"]["name"] for s in specs} == ALL == reg.names()
    for spec in specs:
        assert spec["type"] == "function"
        fn = spec["function"]
        assert fn["description"]
        assert fn["parameters"]["type"] == "object"
        assert set(fn["parameters"]["required"]) <= set(fn["parameters"]["properties"])
    json.dumps(specs)  # serialisable as sent to the backend


def test_write_and_delete_are_omitted_and_refused_when_disabled(make_registry, workspace):
    reg = make_registry(tools_write=False, tools_delete=False)
    assert reg.names() == ALL - {"write_file", "delete_file"}
    assert {s["function"]["name"] for s in reg.specs()} == reg.names()
    out = reg.execute("write_file", json.dumps({"path": "x.txt", "content": "x"}))
    assert out.startswith("error:") and "disabled" in out
    assert not (workspace / "x.txt").exists()
    out = reg.execute("delete_file", json.dumps({"path": "notes.txt"}))
    assert out.startswith("error:") and "disabled" in out
    assert (workspace / "notes.txt").exists()


def test_file_tools_round_trip(make_registry, workspace):
    reg = make_registry()
    assert reg.execute("write_file", '{"path": "d/a.txt", "content": "abc"}') == (
        "wrote 3 bytes to d/a.txt"
    )
    assert reg.execute("read_file", '{"path": "d/a.txt"}') == "abc"
    assert "a.txt (3 bytes)" in reg.execute("list_dir", '{"path": "d"}')
    assert "notes.txt" in reg.execute("list_dir", "")  # no arguments: the workspace root
    assert reg.execute("delete_file", '{"path": "d/a.txt"}') == "deleted d/a.txt"
    assert not (workspace / "d" / "a.txt").exists()


@pytest.mark.parametrize(
    ("name", "arguments", "expected"),
    [
        ("read_file", "{not json", "not valid JSON"),
        ("read_file", "[1, 2]", "must be a JSON object"),
        ("read_file", "{}", "read_file needs path"),
        ("read_file", '{"path": 5}', "'path' must be a string"),
        ("write_file", '{"path": "a.txt"}', "write_file needs content"),
        ("view_transcript", '{"start": "abc"}', "'start' must be an integer"),
        ("view_transcript", '{"start": true}', "'start' must be an integer"),
        ("nope", "{}", "unknown tool 'nope'"),
        (
            "read_file",
            '{"path": "../ws-secret/key.txt"}',
            "path escapes the workspace: ../ws-secret/key.txt",
        ),
        ("read_file", '{"path": "missing.txt"}', "no such file"),
        ("search_transcript", '{"query": ""}', "query is empty"),
        ("view_transcript", '{"start": 5, "end": 2}', "before start"),
    ],
)
def test_execute_never_raises_for_model_mistakes(make_registry, name, arguments, expected):
    out = make_registry().execute(name, arguments)
    assert out.startswith("error: ")
    assert expected in out


def test_execute_refuses_escape_through_symlink_and_sibling(make_registry, workspace):
    (workspace / "out").symlink_to(workspace.parent / "ws-secret", target_is_directory=True)
    reg = make_registry()
    sibling = str(workspace.parent / "ws-secret" / "key.txt")
    for args in [{"path": "out/key.txt"}, {"path": sibling}, {"path": "/etc/passwd"}]:
        out = reg.execute("read_file", json.dumps(args))
        assert out.startswith("error: path escapes the workspace")
        assert "TOP SECRET" not in out


def test_execute_coerces_integer_strings_and_ignores_stray_keys(make_registry, store):
    for i in range(3):
        store.append_buffer("user", f"message number {i}")
    reg = make_registry()
    out = reg.execute("view_transcript", '{"start": "1", "end": 2.0, "verbose": true}')
    assert "message number 0" in out and "message number 1" in out
    assert "message number 2" not in out


@pytest.mark.parametrize(
    "name, arguments, expected",
    [
        ("view_transcript", '{"start": 9223372036854775808}', "out of range"),
        ("view_transcript", '{"start": 1, "end": -9223372036854775809}', "out of range"),
        ("search_transcript", '{"query": "x", "limit": 99999999999999999999999}', "out of range"),
        ("write_file", '{"path": "a\\ud800.txt", "content": "x"}', "lone UTF-16 surrogate"),
        ("write_file", '{"path": "a.txt", "content": "\\udfff"}', "lone UTF-16 surrogate"),
        ("read_file", '{"path": "' + "p" * 5000 + '"}', "too long"),
    ],
)
def test_values_no_store_can_take_are_refused_not_failed(make_registry, name, arguments, expected):
    out = make_registry().execute(name, arguments)
    assert out.startswith("error: ") and expected in out, out
    assert "failed unexpectedly" not in out


@pytest.mark.parametrize("arguments", [
    '{"start": 9223372036854775807}',
    '{"start": 9223372036854775800}',
    '{"start": 9223372036854775800, "end": 9223372036854775807}',
])
def test_a_start_near_the_largest_id_is_an_answer_not_an_overflow(make_registry, store, arguments):
    """In range, but start + 49 rows was not: "failed unexpectedly (OverflowError)"."""
    store.append_buffer("user", "one row")
    out = make_registry().execute("view_transcript", arguments)
    assert out.startswith("no transcript rows from id 92233720368547758"), out
    assert "(the newest row is 1)" in out


def test_the_built_in_agent_offers_the_servers_file_tools(make_registry):
    # one definition of each file tool: what nixx serve offers is what an nxc agent gets
    from nixx.nxc.delivery.builtin_runtime import FILE_TOOLS, file_tool_spec

    served = {s["function"]["name"]: s for s in make_registry().specs()}
    for name in FILE_TOOLS:
        assert file_tool_spec(name) == served[name]


def test_read_file_refuses_a_hard_link_unless_the_setting_allows_it(make_registry, workspace):
    """The model's read_file as the server offers it: a hard link to `.env` is refused
    (text the model reads); NIXX_ALLOW_HARD_LINKS reads it."""
    import os

    (workspace / ".env").write_text("OPENAI_API_KEY=sk-live-9\n")
    os.link(workspace / ".env", workspace / "plain.txt")
    out = make_registry().execute("read_file", json.dumps({"path": "plain.txt"}))
    assert out.startswith("error:") and "hard link" in out and "sk-live" not in out
    allowed = make_registry(allow_hard_links=True)
    assert "sk-live-9" in allowed.execute("read_file", json.dumps({"path": "plain.txt"}))
