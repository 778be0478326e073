"""One composition root for the log: the reducers an installation folds the workspace log
with are listed once, in `nixx.nxc.installed`, and every process opening the log with all
of nxc's views takes them from there (computed from the source, like
tests/test_architecture.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import nixx
from nixx.nxc import installed
from nixx.nxc.delivery.dispatch import LiveDelivery

SRC = Path(nixx.__file__).parent
REPO = SRC.parent.parent
PRODUCT_REDUCERS = {"ChatReducer", "DeliveryReducer"}


def _instantiations(path: Path) -> set[str]:
    """Names of the product reducer classes `path` calls (instantiates)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else getattr(func, "attr", None)
            if name in PRODUCT_REDUCERS:
                found.add(name)
    return found


def test_only_installed_lists_the_product_reducers():
    # The chat reducer alone is no list of the installation (the engine folds chat with
    # its own; bench_nxc times chat alone); the delivery reducer, or both, is.
    offenders = []
    files = [*SRC.rglob("*.py"), *(REPO / "bench").rglob("*.py"), REPO / "tests/sync/conftest.py"]
    for path in files:
        if path == SRC / "nxc" / "installed.py":
            continue
        if "DeliveryReducer" in _instantiations(path):
            offenders.append(f"  {path.relative_to(REPO)}")
    assert not offenders, (
        "product reducers listed outside nixx.nxc.installed (use installed.reducers()):\n"
        + "\n".join(offenders)
    )


def test_installed_is_chat_and_work_plus_what_live_delivery_adds():
    """What every process opening the log folds with is what the engine folds with: chat,
    tasks and leases (`nixx.nxc.work`, both always), then live delivery's reducers."""
    domains = [r.domain for r in installed.reducers()]
    assert domains[:2] == ["message", "work"]
    assert domains[2:] == [r.domain for r in LiveDelivery().reducers()]
    assert sorted(domains) == sorted({"message", "work", "delivery"})
