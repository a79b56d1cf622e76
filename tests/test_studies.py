"""Every study shipped in studies/ loads, builds each arm's recipe, keeps its fixed budget equal
across arms, and reads its metrics from stages the arms run (no run needed)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from vibethinker.ablate import study as ablate
from vibethinker.ablate.table import read_value

ROOT = Path(__file__).resolve().parents[1]
STUDIES = sorted(p for p in (ROOT / "studies").glob("*.yaml") if p.name != "claims.yaml")


@pytest.mark.parametrize("path", STUDIES, ids=[p.stem for p in STUDIES])
def test_shipped_study_is_well_formed(path, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    study = ablate.load_study(
        str(path.relative_to(ROOT)), {"out": str(tmp_path / "out"), "base_run": "runs/tiny"}
    )
    assert len(study.arms) >= 2 and len(study.seeds) >= 3
    ablate.check_fixed(study)  # raises on a fixed key that differs between arms
    run_by_some_arm = {s for arm in study.arms for s in arm.stages}
    for spec in [*study.metrics.values(), *study.consumed.values()]:
        for term in re.split(r"[+*]", spec):
            term = term.strip()
            if ":" in term:
                stage = term.split("/", 1)[0]
                assert stage in run_by_some_arm, f"{path.name}: {spec!r} reads {stage}"
    for arm in study.arms:
        recipe = ablate.arm_recipe(study, arm, study.seeds[0])
        assert {ps.name for ps in recipe.stages} == set(arm.stages)


def test_read_value_takes_keys_with_colons_and_spaces(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "eval.json").write_text(
        '{"teacher math: runs/tiny/rl_l2s/final": {"math": 0.5}, "student": {"math": 0.25}}'
    )
    spec = "d/eval.json:student.math + -1 * d/eval.json:teacher math: runs/tiny/rl_l2s/final.math"
    assert read_value(tmp_path, spec) == -0.25
