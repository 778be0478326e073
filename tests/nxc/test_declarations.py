"""Declarations: personas and channels YAML, strict validation naming file and field."""

from __future__ import annotations

import os

import pytest

from nixx.errors import ValidationError
from nixx.nxc.declarations import load_declarations

from .conftest import write_personas


def load(root, files, origin="ab12", cache=True):
    folder = write_personas(root, files)
    return load_declarations(folder, origin, cache_dir=root if cache else None)


def test_missing_folder_is_not_an_error(tmp_path):
    decls = load_declarations(tmp_path / ".nxs-personas", "ab12")
    assert decls.personas == {} and decls.channels == {} and decls.files == 0


def test_personas_and_channels_parse_with_qualified_handles(tmp_path):
    decls = load(tmp_path, {
        "coder.yaml": (
            "handle: coder\nsystem_prompt: code\njob_title: Coder\nmodel: m\ntools: []\n"
            "addressable: {personas: [reviewer], humans: true}\n"
            "runtime: {start: [my-agent, -p, '{prompt}'], resume: [my-agent, -r, '{runtime_session}', '{prompt}']}\n"
        ),
        "other.yaml": "handle: zz99/remote\nsystem_prompt: far away\nruntime: nixx\n",
        "channels.yaml": (
            "- name: team\n  members: [coder, alice]\n  expects: [coder]\n  flow: sequential\n"
            "  timeout: 10m\n  on_complete: summarize\n  summary_prompt: sum up\n"
            "- name: front\n  kind: public\n  members: [coder]\n  timeout: 2026-05-01T12:00:00Z\n"
        ),
    })
    coder = decls.personas["ab12/coder"]
    assert coder.tools == () and coder.model == "m"
    assert coder.addressable.personas == ("ab12/reviewer",) and coder.addressable.humans
    assert coder.runtime.start == ("my-agent", "-p", "{prompt}")
    assert decls.personas["zz99/remote"].runtime.builtin == "nixx"
    team = decls.channels["team"]
    assert team.id == "decl:team" and team.members == ("ab12/coder", "ab12/alice")
    assert team.expects == ("ab12/coder",) and team.flow == "sequential"
    assert team.timeout_ms == 600_000
    front = decls.channels["front"]
    assert front.kind == "public" and front.expects == front.members
    assert front.timeout_at_ms == 1777636800000
    assert decls.find_persona("coder", "ab12") is coder


@pytest.mark.parametrize(
    ("files", "field"),
    [
        ({"a.yaml": "system_prompt: x\n"}, "handle"),
        ({"a.yaml": "handle: a\n"}, "system_prompt"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\nmodle: y\n"}, "modle"),
        ({"a.yaml": "handle: __engine\nsystem_prompt: x\n"}, "handle"),
        ({"a.yaml": "handle: a b\nsystem_prompt: x\n"}, "handle"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\ntools: read_file\n"}, "tools"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\naddressable: everyone\n"}, "addressable"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\nruntime: claude\n"}, "runtime"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\nruntime: {resume: [x]}\n"}, "runtime.start"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\nruntime: {start: ['{promt}']}\n"},
         "runtime.start"),
        ({"a.yaml": "handle: a\nsystem_prompt: x\nworking_tree: mine\n"}, "working_tree"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  kind: direct\n"}, "[t].kind"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  kind: secret\n"}, "[t].kind"),
        ({"channels.yaml": "- name: t\n"}, "[t].members"),
        ({"channels.yaml": "- name: t\n  members: []\n"}, "[t].members"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  expects: [b]\n"}, "[t].expects"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  timeout: soon\n"}, "[t].timeout"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  flow: random\n"}, "[t].flow"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  on_complete: summarize\n"},
         "[t].summary_prompt"),
        ({"channels.yaml": "- name: t\n  members: [a]\n- name: t\n  members: [b]\n"}, "[t].name"),
        ({"channels.yaml": "- members: [a]\n"}, "[0].name"),
        ({"channels.yaml": "- name: t\n  members: [a]\n  colour: red\n"}, "[t].colour"),
    ],
)
def test_validation_errors_name_the_file_and_the_field(tmp_path, files, field):
    with pytest.raises(ValidationError) as info:
        load(tmp_path, files)
    err = info.value
    (name,) = files
    assert err.details["file"].endswith(name) and name in err.message
    assert err.param == field and f"`{field}`" in err.message


def test_direct_is_refused_with_a_reason(tmp_path):
    with pytest.raises(ValidationError, match="derived"):
        load(tmp_path, {"channels.yaml": "- name: t\n  members: [a]\n  kind: direct\n"})


def test_bad_yaml_names_the_file(tmp_path):
    with pytest.raises(ValidationError, match=r"a\.yaml: not valid YAML"):
        load(tmp_path, {"a.yaml": "handle: [unclosed\n"})


def test_duplicate_handles_are_refused(tmp_path):
    with pytest.raises(ValidationError, match="also declared"):
        load(tmp_path, {"a.yaml": "handle: x\nsystem_prompt: p\n",
                        "b.yaml": "handle: x\nsystem_prompt: p\n"})


def test_the_cache_follows_edits_and_gives_the_same_result(tmp_path):
    first = load(tmp_path, {"a.yaml": "handle: a\nsystem_prompt: one\n"})
    assert (tmp_path / "declarations.json").is_file()
    again = load_declarations(tmp_path / ".nxs-personas", "ab12", cache_dir=tmp_path)
    assert again.personas == first.personas
    uncached = load_declarations(tmp_path / ".nxs-personas", "ab12")
    assert uncached.personas == first.personas
    path = tmp_path / ".nxs-personas" / "a.yaml"
    path.write_text("handle: a\nsystem_prompt: two, longer\n")
    assert load_declarations(path.parent, "ab12", cache_dir=tmp_path).personas[
        "ab12/a"].system_prompt == "two, longer"
    # same size, new content, mtime forced back: the inode/ctime still tell
    st = path.stat()
    path.write_text("handle: a\nsystem_prompt: TWO, LONGER\n")
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert load_declarations(path.parent, "ab12", cache_dir=tmp_path).personas[
        "ab12/a"].system_prompt == "TWO, LONGER"
    (tmp_path / ".nxs-personas" / "b.yaml").write_text("handle: b\nsystem_prompt: p\n")
    assert set(load_declarations(path.parent, "ab12", cache_dir=tmp_path).personas) == {
        "ab12/a", "ab12/b"}
    path.unlink()
    assert set(load_declarations(path.parent, "ab12", cache_dir=tmp_path).personas) == {"ab12/b"}


def test_a_corrupt_cache_is_ignored(tmp_path):
    (tmp_path / "declarations.json").write_text("{not json")
    decls = load(tmp_path, {"a.yaml": "handle: a\nsystem_prompt: p\n"})
    assert "ab12/a" in decls.personas


def test_workspace_yaml_declares_the_origin_and_is_not_a_persona(tmp_path):
    from nixx.nxc.declarations import declared_origin

    folder = write_personas(tmp_path, {"coder.yaml": "handle: coder\nsystem_prompt: x\n",
                                       "workspace.yaml": "origin: team\n"})
    assert declared_origin(folder) == "team"
    decls = load_declarations(folder, "team")
    assert list(decls.personas) == ["team/coder"]
    (folder / "workspace.yaml").write_text("origin: a/b\n")
    with pytest.raises(ValidationError, match=r"workspace\.yaml: field `origin` must be"):
        declared_origin(folder)
    (folder / "workspace.yaml").write_text("origin: team\nreplica: x\n")
    with pytest.raises(ValidationError, match=r"`replica` is not a workspace field"):
        load_declarations(folder, "team")
    (folder / "workspace.yaml").unlink()
    assert declared_origin(folder) is None
