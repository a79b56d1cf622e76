"""scripts/compare_runs.py: equal runs compare equal once timings and the run's path are left
out; a changed result is reported with its file and key."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "compare_runs.py"


def _module():
    spec = importlib.util.spec_from_file_location("compare_runs", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(root: Path, acc: float, seconds: float) -> Path:
    (root / "headline").mkdir(parents=True)
    (root / "rl_math" / "checkpoints").mkdir(parents=True)
    head = {
        "rows": [{"name": "sft1", "model": f"{root}/sft1/final", "all": acc}],
        "seconds": seconds,
    }
    (root / "headline" / "headline.json").write_text(json.dumps(head))
    steps = [{"step": i, "loss": 0.5 - i / 10, "t_generate": seconds * i} for i in range(3)]
    (root / "rl_math" / "metrics.jsonl").write_text("".join(json.dumps(s) + "\n" for s in steps))
    (root / "rl_math" / "checkpoints" / "state.json").write_text(json.dumps({"rng": seconds}))
    return root


def test_equal_up_to_timings_and_paths_then_a_changed_value_is_named(tmp_path, capsys):
    cr = _module()
    a = _run(tmp_path / "a", 0.5, 1.0)
    b = _run(tmp_path / "b", 0.5, 2.0)
    assert cr.main([str(a), str(b)]) == 0
    assert "every shared result file is equal" in capsys.readouterr().out
    c = _run(tmp_path / "c", 0.52, 1.0)
    assert cr.main([str(a), str(c)]) == 1
    out = capsys.readouterr().out
    assert "headline/headline.json: /rows[0]/all: 0.5 != 0.52" in out
    assert "| headline | 0 | 1 |" in out and "| rl_math | 1 | 0 |" in out


def test_a_run_without_a_headline_is_refused(tmp_path, capsys):
    cr = _module()
    (tmp_path / "empty").mkdir()
    assert cr.main([str(_run(tmp_path / "a", 0.5, 1.0)), str(tmp_path / "empty")]) == 1
    assert "no headline/headline.json" in capsys.readouterr().err
