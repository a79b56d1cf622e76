"""The layer map: which part of vibethinker may import which (drawn in docs/README.md).

Imports point one way, down the layers. A module may import its own package and any package of
a lower layer, never one of a higher layer, and never a sibling of its own layer (siblings stay
independent so each can be read alone). Imports inside functions count too: they hide the graph,
they do not remove it. A failure names the file, the line and the import that breaks the map.
"""

from __future__ import annotations

import ast
from pathlib import Path

import vibethinker

# Bottom to top. A name is a subpackage or a top-level module of vibethinker.
LAYERS: list[tuple[str, ...]] = [
    ("types", "log", "malloc", "threads", "ledger", "devices"),
    ("config",),
    ("algo", "dist"),
    ("sandbox",),
    ("verifiers",),
    ("models",),
    ("prompts",),
    ("data",),
    ("engines",),
    ("evaluate",),
    ("construct",),
    ("train",),
    ("reports",),
    ("stages",),
    ("rundir",),
    ("report",),
    ("recipe",),
    ("plan", "ablate"),
    ("claims",),
    ("cli",),
]
LEVEL = {name: i for i, names in enumerate(LAYERS) for name in names}
ROOT = Path(vibethinker.__file__).parent


def _unit(module: str) -> str:
    """The layer unit of a dotted module name (`vibethinker.train.rl` -> `train`)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "vibethinker"


def _imports(path: Path) -> list[tuple[int, str]]:
    """(line, dotted module) of every `vibethinker` import in the file, at any depth."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "vibethinker":
                out += [(node.lineno, f"vibethinker.{a.name}") for a in node.names]
            elif node.module.startswith("vibethinker."):
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names if a.name.startswith("vibethinker.")]
    return out


def units(root: Path) -> set[str]:
    """The subpackages and top-level modules of the package at `root`."""
    return {p.stem for p in root.iterdir() if p.suffix == ".py" and p.stem != "__init__"} | {
        p.name for p in root.iterdir() if p.is_dir() and (p / "__init__.py").exists()
    }


def violations(root: Path) -> list[str]:
    """Every import of the package at `root` that breaks LAYERS, as `file:line: why`."""
    bad = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root.parent)
        me = _unit(".".join(rel.with_suffix("").parts))
        if me == "__init__":  # the package's own __init__ re-exports nothing
            continue
        for line, target in _imports(path):
            other = _unit(target)
            if other in (me, "vibethinker"):
                continue
            if me not in LEVEL or other not in LEVEL:
                bad.append(f"{rel}:{line}: {target} ({me} or {other} is not in the layer map)")
            elif LEVEL[other] >= LEVEL[me]:
                what = "a sibling" if LEVEL[other] == LEVEL[me] else "a higher layer"
                bad.append(f"{rel}:{line}: {me} imports {target} ({what})")
    return bad


def test_every_package_is_in_the_layer_map():
    assert sorted(units(ROOT) - set(LEVEL)) == []


def test_imports_point_down_the_layers():
    assert violations(ROOT) == []


def test_the_check_catches_upward_and_sibling_imports(tmp_path):
    """The control, on a copy-shaped tree: a verifier importing a stage, and engines importing a
    function-level sibling (imports inside functions count), are both reported."""
    pkg = tmp_path / "vibethinker"
    for sub in ("verifiers", "stages", "engines", "algo"):
        (pkg / sub).mkdir(parents=True)
        (pkg / sub / "__init__.py").write_text("")
    (pkg / "verifiers" / "probe.py").write_text("from vibethinker.stages import rl\n")
    (pkg / "engines" / "probe.py").write_text("def f():\n    import vibethinker.evaluate.metrics\n")
    (pkg / "algo" / "ok.py").write_text("from vibethinker.types import Problem\n")
    got = violations(pkg)
    assert any(v.startswith("vibethinker/verifiers/probe.py:1:") for v in got), got
    assert any(v.startswith("vibethinker/engines/probe.py:2:") for v in got), got
    assert not any("algo/ok.py" in v for v in got)
