"""Bounded YAML in `.nxs-personas/` (issue 14, item 7): a 512-byte alias bomb, a file too
large, nesting too deep — each is a validation error naming the file, for every `nxc`
verb (real subprocesses), never a hang or a MemoryError; and a property over generated
YAML with anchors and aliases: either the declarations load with exactly the values
written, or the expansion is past the bound and the error names the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nixx.errors import ValidationError
from nixx.nxc import declarations
from nixx.nxc.declarations import MAX_FILE_BYTES, MAX_VALUES, load_declarations

from .conftest import cli_env, run, write_personas

BOMB = (
    "handle: bomb\nsystem_prompt: x\npermissions:\n"
    '  a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n'
    + "".join(f"  {b}: &{b} [{','.join([f'*{a}'] * 9)}]\n"
              for a, b in zip("abcdefgh", "bcdefghi", strict=True))
)


def test_the_bomb_is_small():
    assert len(BOMB.encode()) <= 512


@pytest.mark.parametrize("verb", [["list"], ["status"], ["send", "--to", "coder", "hello"]])
def test_an_alias_bomb_is_a_validation_error_naming_the_file_for_every_verb(ws, verb):
    bomb = Path(ws.root) / ".nxs-personas" / "bomb.yaml"
    bomb.write_text(BOMB)
    proc = run("nxc", *verb, "--json", cwd=ws.root, env=cli_env(NXC_ACTOR="alice"),
               timeout=60)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    err = json.loads(proc.stdout)["error"]
    assert err["kind"] == "validation"
    assert str(bomb) in err["msg"]
    assert "aliases" in err["msg"] and "Traceback" not in proc.stderr
    # the verdict is cached with the file's stat: the next verb fails the same way
    again = run("nxc", *verb, "--json", cwd=ws.root, env=cli_env(NXC_ACTOR="alice"), timeout=60)
    assert json.loads(again.stdout)["error"] == err
    # and once the file is fixed, the verb works again
    bomb.write_text("handle: bomb\nsystem_prompt: x\n")
    assert run("nxc", "list", "--json", cwd=ws.root, env=cli_env()).returncode == 0


@pytest.mark.parametrize("verb", [["threads", "list"], ["prime"]])
def test_verbs_that_need_no_declarations_are_not_held_up_by_a_bomb(ws, verb):
    (Path(ws.root) / ".nxs-personas" / "bomb.yaml").write_text(BOMB)
    proc = run("nxc", *verb, "--json", cwd=ws.root, env=cli_env(NXC_ACTOR="alice"), timeout=60)
    assert proc.returncode == 0, (proc.stdout, proc.stderr)


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path):
    folder = write_personas(tmp_path, {
        "big.yaml": "handle: big\nsystem_prompt: |\n" + "  x\n" * (MAX_FILE_BYTES // 4 + 1)})
    with pytest.raises(ValidationError, match=r"big\.yaml: is larger than 256 KiB"):
        load_declarations(folder, "ab12")


def test_nesting_and_recursive_aliases_are_refused(tmp_path):
    folder = write_personas(tmp_path, {
        "deep.yaml": "handle: deep\nsystem_prompt: x\npermissions: " + "[" * 80 + "]" * 80})
    with pytest.raises(ValidationError, match=r"deep\.yaml: nests deeper than 64"):
        load_declarations(folder, "ab12")
    folder = write_personas(tmp_path, {
        "deep.yaml": "handle: loop\nsystem_prompt: x\npermissions: &a [*a]\n"})
    with pytest.raises(ValidationError, match=r"deep\.yaml: nests deeper"):
        load_declarations(folder, "ab12")


@st.composite
def aliased_documents(draw):
    """A persona whose `permissions` map holds anchored lists, each level made of aliases
    to earlier levels: (yaml text, the value a plain reader sees, how many values that
    is)."""
    levels = draw(st.integers(1, 7))
    lines = ["handle: gen", "system_prompt: generated", "permissions:"]
    plain: dict[str, list] = {}
    sizes: dict[str, int] = {}
    leaves = draw(st.lists(st.sampled_from(["a", "1", "true", "x y"]), min_size=1, max_size=4))
    lines.append(f"  l0: &l0 [{', '.join(json.dumps(v) for v in leaves)}]")
    plain["l0"] = list(leaves)  # written quoted: strings all
    sizes["l0"] = 1 + len(leaves)
    for n in range(1, levels):
        refs = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=12))
        name = f"l{n}"
        lines.append(f"  {name}: &{name} [{', '.join(f'*l{r}' for r in refs)}]")
        plain[name] = [plain[f"l{r}"] for r in refs]
        sizes[name] = 1 + sum(sizes[f"l{r}"] for r in refs)
    # the document: the root map, its 2 scalars and the map (4), then every level
    total = 4 + len(plain) + sum(sizes.values())
    return "\n".join(lines) + "\n", plain, total


@settings(max_examples=60, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(doc=aliased_documents())
def test_generated_aliases_load_exactly_or_are_refused_past_the_bound(tmp_path_factory, doc):
    text, plain, total = doc
    root = tmp_path_factory.mktemp("gen")
    folder = write_personas(root, {"gen.yaml": text})
    if total <= MAX_VALUES:
        loaded = declarations._parse_yaml(str(folder / "gen.yaml"))
        assert loaded == {"data": {"handle": "gen", "system_prompt": "generated",
                                   "permissions": plain}}
    else:
        with pytest.raises(ValidationError, match=r"gen\.yaml: expands to more than"):
            load_declarations(folder, "ab12", cache_dir=root)
