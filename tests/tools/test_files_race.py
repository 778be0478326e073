"""File tools against a real racing process and over generated paths.

A separate process flips a workspace folder between a real folder and a symlink to a
folder outside, as fast as it can, while this process reads and writes through that
folder. Every outside read or write counts; the only acceptable number is zero. The loops
are bounded by iteration counts, never by time.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from nixx.errors import WorkspaceError
from nixx.tools import files

FLIPPER = textwrap.dedent(
    """
    import ctypes, os, sys
    ws, outside, stop = sys.argv[1], sys.argv[2], sys.argv[3]
    d, tmp = os.path.join(ws, "d"), os.path.join(ws, "d.swap")
    os.symlink(outside, tmp)
    libc = ctypes.CDLL(None, use_errno=True)
    AT_FDCWD, RENAME_EXCHANGE = -100, 2
    def exchange():
        # atomically swap the real folder `d` and the symlink `d.swap` -> outside
        if libc.renameat2(AT_FDCWD, d.encode(), AT_FDCWD, tmp.encode(), RENAME_EXCHANGE):
            raise OSError(ctypes.get_errno(), "renameat2")
    flips = 0
    print("ready", flush=True)
    while not os.path.exists(stop) and flips < 5_000_000:
        exchange()  # d -> outside
        exchange()  # d is the real folder again
        flips += 1
    print(flips, flush=True)
    """
)


@pytest.fixture
def racing(tmp_path: Path):
    ws = tmp_path / "ws"
    (ws / "d").mkdir(parents=True)
    (ws / "d" / "f.txt").write_text("inside")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    stop = tmp_path / "stop"
    proc = subprocess.Popen(
        [sys.executable, "-c", FLIPPER, str(ws), str(outside), str(stop)],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"

    def finish() -> int:
        stop.touch()
        out, _ = proc.communicate(timeout=60)
        return int(out.strip())

    yield ws, outside, finish
    if proc.poll() is None:
        stop.touch()
        proc.wait(timeout=60)


def test_reads_through_a_folder_flipped_to_a_symlink_never_see_outside(racing) -> None:
    ws, outside, finish = racing
    seen = {"inside": 0, "refused": 0, "outside": 0}
    for _ in range(1500):
        try:
            text = files.read_file(ws, "d/f.txt")
        except WorkspaceError:
            seen["refused"] += 1
            continue
        seen["outside" if "OUTSIDE" in text else "inside"] += 1
        assert text == "inside"
    flips = finish()
    assert flips > 0
    assert seen["outside"] == 0, seen


def test_writes_and_deletes_through_a_flipped_folder_never_land_outside(racing) -> None:
    ws, outside, finish = racing
    for i in range(500):
        for call, args in (
            (files.write_file, (ws, f"d/w{i}.txt", "written")),
            (files.delete_file, (ws, "d/f.txt")),
            (files.list_dir, (ws, "d")),
        ):
            try:
                out = call(*args)
            except WorkspaceError:
                continue
            assert "OUTSIDE" not in out
    flips = finish()
    assert flips > 0
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]
    assert (outside / "f.txt").read_text() == "OUTSIDE"
    assert not list(outside.glob("*.nixx-tmp"))


# ---- generated paths ------------------------------------------------------------------

NAMES = st.sampled_from(["a", "b", "sub", "..", ".", "", "in-link", "out-link", "loop", "f.txt"])


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("paths")
    ws, outside = base / "ws", base / "ws-outside"
    (ws / "sub" / "a").mkdir(parents=True)
    outside.mkdir()
    (outside / "f.txt").write_text("OUTSIDE")
    (outside / "a").mkdir()
    (ws / "f.txt").write_text("inside")
    (ws / "sub" / "f.txt").write_text("inside")
    (ws / "in-link").symlink_to(ws / "sub")
    (ws / "sub" / "out-link").symlink_to(outside)
    (ws / "out-link").symlink_to("../ws-outside")
    (ws / "sub" / "loop").symlink_to("loop")
    return ws, outside


@settings(
    max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(parts=st.lists(NAMES, min_size=1, max_size=6), absolute=st.booleans())
def test_generated_paths_agree_with_the_real_path_and_never_leave(tree, parts, absolute) -> None:
    ws, outside = tree
    path = "/".join(parts)
    if absolute:
        path = str(ws) + "/" + path
    try:
        real: Path | None = Path(os.path.realpath(ws / path, strict=True))
    except OSError:
        real = None  # the kernel cannot reach it (missing folder, loop)
    inside = real is not None and real.is_relative_to(ws.resolve())
    try:
        got = files.confine(ws, path)
    except WorkspaceError:
        got = None
    if got is not None and real is not None:
        assert got == real and inside  # what the walk reached is what the kernel reaches
    if got is not None:
        assert got.is_relative_to(ws.resolve())
    try:
        text = files.read_file(ws, path)
    except WorkspaceError:
        text = None
    assert text in (None, "inside")
    if text == "inside":
        assert inside and real is not None and real.is_file()
    with contextlib.suppress(WorkspaceError):
        files.write_file(ws, path, "inside")
    assert sorted(p.name for p in outside.iterdir()) == ["a", "f.txt"]
    assert list((outside / "a").iterdir()) == []
    assert (outside / "f.txt").read_text() == "OUTSIDE"
