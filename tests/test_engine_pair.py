"""scripts/engine_pair.py: two runs' headlines paired problem by problem."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "engine_pair.py"


def _script():
    spec = importlib.util.spec_from_file_location("engine_pair", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(root: Path, scores: list[float], ids: list[str], secs: float) -> str:
    (root / "headline").mkdir(parents=True)
    probs = [{"id": i, "domain": "math" if n < 20 else "code"} for n, i in enumerate(ids)]
    head = {
        "columns": ["math", "code", "all"],
        "conf": 0.95,
        "problems": probs,
        "rows": [{"name": "rl_math", "scores": scores}],
    }
    (root / "headline" / "headline.json").write_text(json.dumps(head))
    (root / "manifest.json").write_text(json.dumps({"stages": {"rl_math": {"seconds": secs}}}))
    return str(root)


def test_pairs_by_problem_and_marks_what_the_interval_resolves(tmp_path):
    ids = [f"p{i}" for i in range(40)]
    a = _run(tmp_path / "a", [0.0] * 40, ids, 100.0)
    # B solves every math problem (a difference the data resolve) and no more code ones
    b = _run(tmp_path / "b", [1.0] * 20 + [0.0] * 20, ids, 150.0)
    out = _script().table(a, b)
    row = next(line for line in out.splitlines() if line.startswith("| rl_math"))
    math, code, everything = row.removesuffix(" |").split(" | ")[1:4]
    assert math.startswith("0.000 / 1.000: +1.000 [+1.000, +1.000]*")
    assert code.startswith("0.000 / 0.000: +0.000") and "*" not in code
    assert everything.startswith("0.000 / 0.500: +0.500") and everything.endswith("*")
    assert "| rl_math | 100 | 150 | 1.50 |" in out


def test_headlines_of_other_problems_are_refused(tmp_path):
    a = _run(tmp_path / "a", [0.0] * 40, [f"p{i}" for i in range(40)], 1.0)
    b = _run(tmp_path / "b", [0.0] * 40, [f"q{i}" for i in range(40)], 1.0)
    with pytest.raises(SystemExit, match="different problems"):
        _script().table(a, b)
