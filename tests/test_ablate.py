"""`vibethinker ablate`: a study of 2 arms x 2 seeds over a fake stage, run by the real runner in
real worker processes (the stage module reaches them through VIBETHINKER_STAGE_MODULES)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from vibethinker import ablate
from vibethinker.ablate.study import Arm, Study, load_study
from vibethinker.ablate.table import read_value, write_outputs
from vibethinker.cli import main
from vibethinker.config import ConfigError

STAGE = '''
import json, os, random
from dataclasses import dataclass
from pathlib import Path
from vibethinker.stages import register


@dataclass
class FakeAblateConfig:
    out: str = ""
    """Output folder."""
    source: str = ""
    """An upstream output folder with value.txt (added to the score)."""
    steps: int = 3
    """Rows written to metrics.jsonl (the consumed budget)."""
    knob: float = 0.0
    """Added to the score (what the arms vary)."""
    seed: int = 0
    """Seed (recorded, and a tiny jitter)."""


@register("fake_ablate", FakeAblateConfig)
def run(cfg):
    """Fake stage for tests/test_ablate.py."""
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    with open(os.environ["FAKE_ABLATE_CALLS"], "a") as f:
        f.write(f"{out}\\n")
    base = float((Path(cfg.source) / "value.txt").read_text()) if cfg.source else 0.0
    value = base + cfg.knob + random.Random(cfg.seed).random() * 0.01
    with open(out / "metrics.jsonl", "w") as f:
        for i in range(cfg.steps):
            f.write(json.dumps({"step": i + 1, "tokens": 10}) + "\\n")
    (out / "value.txt").write_text(str(value))
    (out / "summary.json").write_text(json.dumps({"m": {"score": value}, "seed": cfg.seed}))
    return {"summary": str(out / "summary.json")}
'''

RECIPE = """
run_dir: unused
stages:
  - stage: fake_ablate
    name: up
    knob: 1.0
  - stage: fake_ablate
    name: arm
    source: ${up.out}
"""


@pytest.fixture
def world(tmp_path, monkeypatch):
    (tmp_path / "fake_ablate_stage.py").write_text(STAGE)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    monkeypatch.setenv("VIBETHINKER_STAGE_MODULES", "fake_ablate_stage")
    monkeypatch.setenv("FAKE_ABLATE_CALLS", str(tmp_path / "calls.log"))
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE)
    from vibethinker.recipe import execute, load_recipe

    execute(load_recipe(str(recipe), {"run_dir": str(tmp_path / "base")}), quiet=True)
    (tmp_path / "calls.log").unlink()
    return tmp_path


def calls(tmp: Path) -> list[str]:
    p = tmp / "calls.log"
    return p.read_text().split() if p.exists() else []


def study(tmp: Path, name: str = "s.yaml", **over) -> str:
    s = {
        "recipe": str(tmp / "recipe.yaml"),
        "base_run": str(tmp / "base"),
        "out": str(tmp / "out"),
        "stages": ["arm"],
        "arms": {"a": {"arm.knob": 0.0}, "b": {"arm.knob": 0.5}},
        "seeds": [0, 1],
        "budget": {
            "fixed": ["arm.steps"],
            "consumed": {
                "rows": "arm/metrics.jsonl:rows",
                "tokens": "arm/metrics.jsonl:sum.tokens",
            },
        },
        "metrics": {"score": "arm/summary.json:m.score", "seed": "arm/summary.json:seed"},
        **over,
    }
    (tmp / name).write_text(yaml.safe_dump(s))
    return str(tmp / name)


def inproc(s, cli, arm, seed, threads):  # the worker, in this process (fast)
    ablate.run_one(s.path, cli, arm.name, seed)
    return 0


def test_cli_runs_arms_in_worker_processes_on_the_base_runs_upstream(world, capsys):
    path = study(world, seeds=[7])
    assert main(["ablate", path, "--jobs", "2"]) == 0
    out = world / "out"
    # each arm ran the arm stage only, in its own run dir; upstream `up` came from the base run
    assert sorted(calls(world)) == [
        str(out / "a" / "seed7" / "arm"),
        str(out / "b" / "seed7" / "arm"),
    ]
    assert not (out / "a" / "seed7" / "up").exists()
    res = json.loads((out / "ablation.json").read_text())
    assert res["arms"]["b"]["7"]["metrics"]["seed"] == 7  # the seed reached the stage
    assert (out / "ablation.md").exists() and (out / "ablation.png").stat().st_size > 0
    capsys.readouterr()
    assert main(["ablate", path]) == 0  # finished: nothing is re-run
    assert "0 to run, 2 done already" in capsys.readouterr().out
    assert len(calls(world)) == 2


def test_table_has_means_cis_paired_differences_and_resume_reruns_only_unfinished(world):
    s = load_study(study(world))
    res = ablate.run_study(s, {}, jobs=1, spawn=inproc)
    out = world / "out"
    assert len(calls(world)) == 4
    for arm in "ab":  # the seed reached the stage
        assert [res["arms"][arm][x]["metrics"]["seed"] for x in ("0", "1")] == [0.0, 1.0]
    a, b = res["summary"]["a"]["metrics"]["score"], res["summary"]["b"]["metrics"]["score"]
    assert 1.0 <= a[0] < 1.02 and 1.5 <= b[0] < 1.52  # the base run's upstream 1.0 + knob
    assert a[1] < a[0] < a[2]
    diff = res["summary"]["b"]["diff"]["score"]
    assert diff[0] == pytest.approx(0.5) and diff[1] <= 0.5 <= diff[2]
    assert res["summary"]["a"]["budget"]["rows"] == (3.0, 3.0)
    assert res["budget_mismatch"] == []
    md = (out / "ablation.md").read_text()
    assert "| b | 2 |" in md and "Consumed budget identical" in md
    # an interrupted arm x seed (its manifest says so) is the only one re-run
    mf = out / "b" / "seed1" / "manifest.json"
    m = json.loads(mf.read_text())
    m["stages"]["arm"]["status"] = "interrupted"
    mf.write_text(json.dumps(m))
    res = ablate.run_study(s, {}, jobs=1, spawn=inproc)
    assert calls(world)[4:] == [str(out / "b" / "seed1" / "arm")]
    assert sorted(res["arms"]["b"]) == ["0", "1"]


def test_a_run_of_some_seeds_keeps_every_finished_seed_in_the_table(world):
    """`seeds=[2]` runs seed 2 only; the table still counts seeds 0 and 1 finished before, and
    a seed folder whose run never finished is listed as not finished, not averaged."""
    path = study(world)
    ablate.run_study(load_study(path), {}, jobs=1, spawn=inproc)
    res = ablate.run_study(load_study(path, {"seeds": "[2]"}), {}, jobs=1, spawn=inproc)
    assert len(calls(world)) == 6  # 2 arms x seeds 0, 1, then 2 arms x seed 2
    assert res["seeds"] == [0, 1, 2]
    assert sorted(res["arms"]["b"]) == ["0", "1", "2"]
    assert res["summary"]["b"]["seeds"] == [0, 1, 2]
    (world / "out" / "a" / "seed9").mkdir()
    res = ablate.run_study(load_study(path, {"seeds": "[2]"}), {}, jobs=1, spawn=inproc)
    assert len(calls(world)) == 6 and res["summary"]["a"]["seeds"] == [0, 1, 2]
    md = (world / "out" / "ablation.md").read_text()
    assert "| a | 3 |" in md and "Seeds [0, 1, 2, 9]" in md
    assert "Not finished (not in the table): a/seed9, b/seed9" in md


def test_a_rerun_base_stage_makes_the_arms_run_again(world):
    """The arms read `up` from the base run; when the base re-runs `up` (a new demo), finished
    arms are stale though their own config is equal: they run again, the old results moved
    aside (kept, not in the table). A run without a stamp (older runs) is trusted."""
    from vibethinker.recipe import execute, load_recipe

    path = study(world, seeds=[0])
    ablate.run_study(load_study(path), {}, jobs=1, spawn=inproc)
    out = world / "out"
    assert json.loads((out / "a" / "seed0" / "base_stages.json").read_text())["up"]
    assert len(calls(world)) == 2
    # the base re-runs `up` with another knob (as `make demo` after a recipe change)
    recipe = load_recipe(
        str(world / "recipe.yaml"), {"run_dir": str(world / "base"), "up.knob": 2.0}
    )
    execute(recipe, quiet=True)
    del_calls = len(calls(world))
    s = load_study(path)
    assert [ablate.is_done(s, a, 0) for a in s.arms] == [False, False]
    res = ablate.run_study(s, {}, jobs=1, spawn=inproc)
    assert len(calls(world)) == del_calls + 2  # both arms again
    assert res["arms"]["a"]["0"]["metrics"]["score"] == pytest.approx(2.0, abs=0.02)
    old = sorted(p.name for p in (out / "a").iterdir() if p.name.startswith("seed0.old-base-"))
    assert len(old) == 1 and res["seeds"] == [0]
    # no stamp: trusted (runs made before stamps were written)
    (out / "b" / "seed0" / "base_stages.json").unlink()
    assert ablate.is_done(s, s.arms[1], 0)


def test_consumed_budget_mismatch_is_reported(world):
    path = study(
        world,
        arms={"a": {}, "b": {"arm.steps": 5}},
        budget={"consumed": {"rows": "arm/metrics.jsonl:rows * 2"}},
    )
    res = ablate.run_study(load_study(path), {}, jobs=1, spawn=inproc)
    assert res["budget_mismatch"] == ["rows"]
    assert res["summary"]["b"]["budget"]["rows"] == (10.0, 10.0)
    assert "**Budget mismatch:** rows" in (world / "out" / "ablation.md").read_text()


def test_fixed_budget_key_differing_between_arms_is_refused(world):
    path = study(world, arms={"a": {}, "b": {"arm.steps": 5}})
    with pytest.raises(ConfigError, match=r"budget mismatch: fixed key arm.steps .*a=3, b=5"):
        ablate.run_study(load_study(path), {}, jobs=1, spawn=inproc)
    assert calls(world) == []


def test_fresh_base_run_is_built_once_from_the_recipe_prefix(world):
    path = study(world, base_run=str(world / "fresh"), seeds=[3])
    ablate.run_study(load_study(path), {}, jobs=1, spawn=inproc)
    assert calls(world).count(str(world / "fresh" / "up")) == 1
    assert len(calls(world)) == 3


def test_bad_study_files_name_the_problem(world):
    with pytest.raises(ConfigError, match="unknown key"):
        load_study(study(world, armz={}))
    with pytest.raises(ConfigError, match="not in .*recipe.yaml"):
        load_study(study(world, stages=["nope"]))
    with pytest.raises(ConfigError, match="at least two"):
        load_study(study(world, arms={"a": {}}))


def test_read_value_expressions(tmp_path):
    (tmp_path / "s").mkdir()
    (tmp_path / "s" / "m.jsonl").write_text('{"a": 1}\n{"a": 2.5}\n')
    (tmp_path / "s" / "x.json").write_text('{"k": {"pass@1": 0.25}}')
    assert read_value(tmp_path, "s/m.jsonl:rows * 4 + s/m.jsonl:sum.a") == 11.5
    assert read_value(tmp_path, "s/m.jsonl:-1.a") == 2.5
    assert read_value(tmp_path, "s/x.json:k.pass@1") == 0.25
    assert read_value(tmp_path, "s/m.jsonl:rows + t/m.jsonl:rows", absent={"t"}) == 2


def test_mixed_domain_rl_pool_splits_max_prompts_over_domains(tmp_path):
    from vibethinker.data.io import save_problems
    from vibethinker.stages.rl import load_domain
    from vibethinker.types import Problem

    probs = [Problem(id=f"m{i}", domain="math", prompt="1+1?", answer="2") for i in range(30)]
    probs += [
        Problem(id=f"s{i}", domain="stem", prompt="?", answer="A", choices=list("abcd"))
        for i in range(10)
    ]
    probs += [
        Problem(id=f"c{i}", domain="code", prompt="?", tests=[{"input": "", "output": "1"}])
        for i in range(10)
    ]
    save_problems(tmp_path / "t.jsonl", probs)
    got = load_domain(tmp_path / "t.jsonl", "math,stem", limit=12, seed=1)
    assert sorted(p.domain for p in got).count("stem") == 6 and len(got) == 12
    assert {p.domain for p in load_domain(tmp_path / "t.jsonl", "math,stem")} == {"math", "stem"}
    assert len(load_domain(tmp_path / "t.jsonl", "math", limit=12, seed=1)) == 12


def test_per_seed_rows_print_token_counts_without_decimals(tmp_path):
    s = Study(
        path="s.yaml",
        recipe="r.yaml",
        base_run="",
        out=str(tmp_path / "o"),
        arms=[Arm("a", ["x"], {}), Arm("b", ["x"], {})],
        seeds=[0, 1],
        metrics={"acc": "-", "tokens": "-"},
    )
    res = {
        "arms": {
            a: {
                str(k): {"metrics": {"acc": 0.25 + k / 8, "tokens": 120432.0 + k}, "budget": {}}
                for k in (0, 1)
            }
            for a in ("a", "b")
        },
        "failed": [],
    }
    md = Path(write_outputs(s, res)["table"]).read_text()
    assert "| a | 0 | 0.2500 | 120432 |" in md and "| b | 1 | 0.3750 | 120433 |" in md
