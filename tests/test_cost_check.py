"""scripts/cost_check.py on a small case: a three-stage run writes its ledgers; the plan,
reading that run's counts, predicts exactly the rollouts the recipe fixes, and its stage times
within a loose bound (a few-second stage on a shared CPU; the demo-sized check is the script's)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from vibethinker.recipe import execute, load_recipe

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "cost_check.py"
RECIPE = """
run_dir: {run}
model: ${{run_dir}}/model
stages:
  - {{stage: data, kind: tiny, seed: 0, domains: [math], n_train: 120, n_eval: 20, n_probe: 4}}
  - {{stage: model, kind: tiny, data: "${{data.out}}", out: "${{model}}", size: 1m}}
  - stage: rl
    name: rl_math
    model: ${{model}}
    data: ${{data.out}}
    eval_data: ${{data.out}}/eval.jsonl
    domain: math
    steps: 2
    prompts_per_step: 4
    group_size: 4
    max_new_tokens: 24
    filter_rollouts: 0
    max_prompts: 8
    eval_every: 2
    eval_limit: 4
    eval_n: 2
    save_every: 0
"""


def _script():
    spec = importlib.util.spec_from_file_location("cost_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_small_run_against_its_plan(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))  # a fresh CPU probe
    path = tmp_path / "small.yaml"
    path.write_text(RECIPE.format(run=tmp_path / "run"))
    manifest = execute(load_recipe(str(path)), quiet=True)
    led = manifest["stages"]["rl_math"]["ledger"]
    gen = led["generation"]
    # the recipe fixes these (a random model: no start filter, it would keep no prompt): 2 steps
    # x 4 prompts x 4 rollouts; evals at steps 0 and 2, 4 problems x 2
    assert gen["sample"]["rollouts"] == 2 * 4 * 4
    assert gen["eval"]["rollouts"] == 2 * 4 * 2
    assert led["verify"]["verify"]["calls"] == 2 * 4 * 4
    cc = _script()
    costs, _, ex = cc.predict(
        load_recipe(str(path)), "cpu", 1, 64, {"ledger": str(tmp_path / "run")}
    )
    rl = next(c for c in costs if c.name == "rl_math")
    assert rl.tokens["rollouts_sample"] == gen["sample"]["rollouts"]
    assert rl.tokens["rollouts_eval"] == gen["eval"]["rollouts"]
    assert rl.tokens["trained"] == led["trained_tokens"]  # read back from the ledger
    assert any("earlier run's ledger" in u for u in ex.used)
    table, _ = cc.compare(str(path), str(tmp_path / "run"), {})
    row = next(x for x in table.splitlines() if x.startswith("| rl_math |")).split(" | ")
    assert 1 / 3 < float(row[3]) < 3, table
    assert "rl_math: rollouts predicted 32, recorded 32" in table
