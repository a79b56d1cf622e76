"""recipes/qwen2.5-1.5b-1gpu.yaml as resolved (no stage runs): the curriculum SFT it names (both
stages, each probed and merged) and the benchmarks at the paper's n (issue 41 item 7)."""

from __future__ import annotations

from pathlib import Path

import pytest

from vibethinker.cli import main
from vibethinker.evaluate import samples_per_problem
from vibethinker.recipe import load_recipe
from vibethinker.stages.eval import n_profile
from vibethinker.types import Problem

RECIPE = str(Path(__file__).resolve().parents[1] / "recipes" / "qwen2.5-1.5b-1gpu.yaml")


@pytest.fixture(scope="module")
def stages() -> dict:
    return {s.name: s for s in load_recipe(RECIPE, {"run_dir": "/nonexistent/r1"}).stages}


def test_curriculum_sft_has_both_stages_each_merged(stages):
    names = list(stages)
    assert names.index("sft1") < names.index("probe1") < names.index("sft2")
    assert names.index("sft2") < names.index("probe2") < names.index("rl_math")
    sft2 = stages["sft2"].config
    assert sft2.model.endswith("probe1/merged") and sft2.epochs == 2
    assert set(sft2.domains) == {"math", "code", "stem", "instruct"}
    assert sft2.filter_rollouts == 8 and sft2.filter_min_error == 0.75
    assert stages["probe2"].config.sft == [stages["sft2"].config.out]
    assert stages["rl_math"].config.model.endswith("probe2/merged")
    head = Path(RECIPE).read_text().split("run_dir:")[0]
    assert "min_trace_tokens=5000" in head and "filter_ref_model=" in head


def test_benchmarks_use_the_papers_n(stages):
    evals = [s for s in stages.values() if s.stage == "eval"]
    assert evals and all(s.config.n == 0 for s in evals), [s.config.n for s in evals]
    math500 = stages["eval_math500"].config
    assert samples_per_problem([Problem("a", "math", "x")], n_profile(math500)) == [64]


def test_plan_fits_one_80gb_gpu(capsys):
    assert main(["plan", RECIPE, "gpu_mem_gb=80"]) == 0
    out = capsys.readouterr().out
    assert "| sft2 | sft |" in out and "| probe2 | probe_merge |" in out
