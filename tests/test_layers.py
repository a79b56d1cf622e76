"""The layer map: which part of vibethinker may import which (drawn in docs/README.md).

Imports point one way, down the layers. A module may import its own package and any package of
a lower layer, never one of a higher layer, and never a sibling of its own layer (siblings stay
independent so each can be read alone). Imports inside functions count too: they hide the graph,
they do not remove it. A failure names the file, the line and the import that breaks the map.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import vibethinker

# Bottom to top. A name is a subpackage or a top-level module of vibethinker.
LAYERS: list[tuple[str, ...]] = [
    ("types", "log", "malloc", "threads", "statefile", "ledger", "devices"),
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


# File-level circles within one package (a folder of modules). Each entry is the sorted tuple of
# modules in one circle, relative to vibethinker/.
KNOWN_CIRCLES: set[tuple[str, ...]] = set()  # none: a new circle fails the test
_DOTTED_RE = re.compile(r"^vibethinker(?:\.\w+)+$")


def _module_edges(path: Path, root: Path) -> set[Path]:
    """Files of `path`'s own folder that it imports, at any depth: `from pkg.mod import x`,
    `from pkg import mod`, `import pkg.mod`, and a module named by a string (`importlib`)."""
    folder, names = path.parent, []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.append(node.module)
            names += [f"{node.module}.{a.name}" for a in node.names]
        elif isinstance(node, ast.Import):
            names += [a.name for a in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str):
            if _DOTTED_RE.match(node.value):
                names.append(node.value)
    out = set()
    for name in names:
        parts = name.split(".")
        if parts[0] != root.name:
            continue
        target = root.parent.joinpath(*parts).with_suffix(".py")
        if target.parent == folder and target.exists() and target != path:
            if target.name != "__init__.py":
                out.add(target)
    return out


def circles(root: Path) -> list[tuple[str, ...]]:
    """Every file-level import circle within one folder of the package at `root` (the strongly
    connected components of more than one module), each as a sorted tuple of paths relative to
    `root`. Package `__init__` files are left out: they re-export, they hold no logic."""
    files = [p for p in sorted(root.rglob("*.py")) if p.name != "__init__.py"]
    graph = {p: _module_edges(p, root) for p in files}
    index: dict[Path, int] = {}
    low: dict[Path, int] = {}
    stack: list[Path] = []
    found = []

    def visit(v: Path) -> None:  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(tuple(sorted(str(c.relative_to(root)) for c in comp)))

    for p in files:
        if p not in index:
            visit(p)
    return sorted(found)


def test_no_import_circle_within_a_package():
    """Two modules of one folder that import each other (directly or round a longer loop) make
    the import order matter and neither readable alone: move what both need below both."""
    assert sorted(set(circles(ROOT)) - KNOWN_CIRCLES) == []


def test_known_circles_are_still_circles():
    """An allowlisted circle that is gone must leave the list (so it cannot come back unseen)."""
    assert sorted(KNOWN_CIRCLES - set(circles(ROOT))) == []


def test_the_circle_check_catches_circles(tmp_path):
    """The control: a two-module circle by `from pkg import mod`, a three-module loop with one
    import inside a function, and one import by name (importlib) are each found; a chain is not."""
    pkg = tmp_path / "vibethinker"
    (pkg / "v").mkdir(parents=True)
    (pkg / "v" / "__init__.py").write_text("from vibethinker.v.a import x\n")
    files = {
        "a.py": "from vibethinker.v import b\nx = 1\n",
        "b.py": "import importlib\nimportlib.import_module('vibethinker.v.a')\n",
        "c.py": "from vibethinker.v.d import y\n",
        "d.py": "def f():\n    from vibethinker.v.e import z\n",
        "e.py": "import vibethinker.v.c\n",
        "f.py": "from vibethinker.v.a import x\nfrom vibethinker.types import Problem\n",
    }
    for name, text in files.items():
        (pkg / "v" / name).write_text(text)
    assert circles(pkg) == [("v/a.py", "v/b.py"), ("v/c.py", "v/d.py", "v/e.py")]
