"""The layers of the tree, enforced: contracts and pure audio at the bottom, then the runtime,
then the features, then processors/producers/sinks, then applications. A module may import
its own layer or a lower one; within the features layer and the processors/clients layer the
rooms do not import each other."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "streamtts"

LAYERS: dict[str, int] = {
    "streamtts.errors": 0,
    "streamtts.schemas": 0,
    "streamtts.audio": 0,
    "streamtts.runtime": 1,
    "streamtts.infra": 1,
    "streamtts.features": 2,
    "streamtts.processors": 3,
    "streamtts.producers": 3,
    "streamtts.sinks": 3,
    "streamtts.integrations": 3,
    "streamtts.cli": 4,
    "streamtts.gateway": 4,
    "streamtts.worker": 4,
    "streamtts.worker_services": 4,
    "streamtts.worker_run": 4,
    "streamtts.demo": 4,
    "streamtts.bench": 4,
}
# Rooms of one layer that must not reach into each other (shared code moves down a layer).
SEPARATE = [
    ("streamtts.processors", "streamtts.producers", "streamtts.sinks", "streamtts.integrations"),
    ("streamtts.processors.segment", "streamtts.processors.synthesize", "streamtts.processors.encode"),
    (
        "streamtts.features.releases",
        "streamtts.features.lexicons",
        "streamtts.features.control",
        "streamtts.features.audit",
        "streamtts.features.retention",
    ),
]
# The card's folders are subpackages, never top-level imports.
TOP_LEVEL_FOLDERS = {"schemas", "producers", "processors", "sinks", "infra", "bench"}


def _modules() -> list[tuple[str, Path]]:
    out = []
    paths = [
        Path(d) / f
        for d, _, files in os.walk(PACKAGE, followlinks=True)  # the card's folders are symlinked in
        for f in files
        if f.endswith(".py")
    ]
    for path in sorted(paths):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out.append((".".join(parts), path))
    return out


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every imported module name with its line, at any depth (functions, TYPE_CHECKING)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _owner(name: str, table: dict[str, int] | tuple[str, ...]) -> str | None:
    best = None
    for prefix in table:
        if (name == prefix or name.startswith(prefix + ".")) and (best is None or len(prefix) > len(best)):
            best = prefix
    return best


def _violations() -> list[str]:
    bad = []
    for module, path in _modules():
        here = _owner(module, LAYERS)
        if here is None:
            continue  # streamtts/__init__.py
        for line, target in _imports(path):
            where = f"{path.relative_to(ROOT)}:{line}: {module} imports {target}"
            if target.split(".")[0] in TOP_LEVEL_FOLDERS:
                bad.append(f"{where} (use streamtts.{target})")
                continue
            there = _owner(target, LAYERS)
            if there is None:
                continue  # third-party or stdlib
            if LAYERS[there] > LAYERS[here]:
                bad.append(f"{where} (layer {LAYERS[here]} reaching up to layer {LAYERS[there]})")
            for rooms in SEPARATE:
                a, b = _owner(module, rooms), _owner(target, rooms)
                if a and b and a != b:
                    bad.append(f"{where} (sideways: {a} → {b})")
            if here == "streamtts.runtime" and there == "streamtts.infra":
                bad.append(f"{where} (the runtime does not depend on local infrastructure tooling)")
    return bad


def test_the_walk_sees_every_layer() -> None:
    seen = {_owner(m, LAYERS) for m, _ in _modules()}
    assert set(LAYERS) <= seen, f"no modules found for {set(LAYERS) - seen}"


def test_every_module_belongs_to_a_layer() -> None:
    unplaced = [m for m, _ in _modules() if m != "streamtts" and _owner(m, LAYERS) is None]
    assert not unplaced, f"modules outside every layer: {unplaced}"


def test_no_module_imports_upward_or_sideways() -> None:
    bad = _violations()
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize(
    ("module", "target", "kind"),
    [
        ("streamtts.runtime.x", "streamtts.features.releases.watch", "up"),
        ("streamtts.features.x", "streamtts.processors.segment.stage", "up"),
        ("streamtts.features.lexicons.x", "streamtts.features.releases.watch", "sideways"),
        ("streamtts.schemas.x", "streamtts.runtime.kafka", "up"),
        ("streamtts.sinks.x", "streamtts.processors.encode", "sideways"),
        ("streamtts.processors.segment.x", "streamtts.processors.synthesize.registry", "sideways"),
    ],
)
def test_the_checker_catches_what_it_claims(module: str, target: str, kind: str) -> None:
    here, there = _owner(module, LAYERS), _owner(target, LAYERS)
    assert here and there
    upward = LAYERS[there] > LAYERS[here]
    sideways = any((a := _owner(module, r)) and (b := _owner(target, r)) and a != b for r in SEPARATE)
    assert upward if kind == "up" else sideways
