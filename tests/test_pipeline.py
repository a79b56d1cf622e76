"""End to end: a miniature of recipes/tiny.yaml through the real CLI, every stage chained by
references, with a pinned learning effect (SFT loss falls, RL runs on-policy from the merged
model) and outputs that load with plain transformers."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

RECIPE = """\
# Run: vibethinker run mini.yaml
run_dir: {run}
model: ${{run_dir}}/model
stages:
  - {{stage: data, kind: tiny, seed: 1, n_train: 240, n_probe: 4, n_eval: 40}}
  - {{stage: model, kind: tiny, data: "${{data.out}}", out: "${{model}}", size: 1m}}
  - stage: sft
    name: sft1
    model: ${{model}}
    data: ${{data.out}}/train.jsonl
    max_steps: 24
    global_batch: 32
    micro_batch: 8
    max_len: 256
    lr: 3e-3
    final_lr: 3e-5
    save_every: 12
  - stage: probe_merge
    sft: ["${{sft1.out}}"]
    probe: ${{data.out}}
    domains: [math]
    k: 2
    n: 2
    max_new_tokens: 48
  - stage: rl
    name: rl_math
    model: ${{probe_merge.out}}/merged
    data: ${{data.out}}
    domain: math
    steps: 2
    prompts_per_step: 4
    group_size: 4
    lr: 1e-4
    max_new_tokens: 48
    filter_rollouts: 0
    eval_every: 2
    eval_n: 1
    eval_limit: 8
  - stage: eval
    name: eval_final
    model: ${{rl_math.out}}/final
    data: ${{data.out}}/eval.jsonl
    n: 2
    k: [1, 2]
    max_new_tokens: 48
    limit: 12
"""


@pytest.mark.slow
def test_mini_recipe_end_to_end(tmp_path):
    recipe = tmp_path / "mini.yaml"
    run = tmp_path / "run"
    recipe.write_text(RECIPE.format(run=run))
    env = {**os.environ, "OMP_NUM_THREADS": "2", "HF_HUB_OFFLINE": "1"}
    cmd = [sys.executable, "-m", "vibethinker.cli", "run", str(recipe), "--quiet"]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    manifest = json.loads((run / "manifest.json").read_text())
    names = ["data", "model", "sft1", "probe_merge", "rl_math", "eval_final"]
    assert [manifest["stages"][n]["status"] for n in names] == ["done"] * len(names)

    # SFT learns: the loss of the last steps is far below the first step's
    rows = [json.loads(line) for line in (run / "sft1" / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows if "loss" in r]
    assert len(losses) >= 20 and sum(losses[-3:]) / 3 < 0.75 * losses[0]

    # probing scored both checkpoints and merged them; RL logged its steps on-policy
    probe = json.loads((run / "probe_merge" / "probe.json").read_text())
    assert "merged" in json.dumps(probe)
    rl_rows = (run / "rl_math" / "metrics.jsonl").read_text().splitlines()
    assert len(rl_rows) == 2 and "mgpo_weight" in json.loads(rl_rows[0])

    # the final checkpoint is a plain HF folder; the eval wrote its four outputs
    from transformers import AutoModelForCausalLM, AutoTokenizer

    final = run / "rl_math" / "final"
    AutoModelForCausalLM.from_pretrained(final)
    AutoTokenizer.from_pretrained(final)
    for f in ("samples.jsonl", "summary.json", "summary.md", "passk.png"):
        assert (run / "eval_final" / f).exists(), f
    report = Path(run / "report.md").read_text()
    assert "| rl_math | rl | done |" in report

    # a second run resumes: everything is skipped
    again = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0
    assert "done, skipping" in (run / "run.log").read_text()

    # the README's single-stage example on a recipe: its own folder, the recipe's run untouched
    manifest_before = (run / "manifest.json").read_text()
    eval_before = (run / "eval_final" / "summary.json").read_text()
    base = [sys.executable, "-m", "vibethinker.cli"]
    one = subprocess.run(
        [*base, "eval", str(recipe), "n=1", "limit=4", "--quiet"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert one.returncode == 0, one.stderr[-2000:]
    assert (run / "single" / "eval_final" / "summary.json").exists()
    assert (run / "manifest.json").read_text() == manifest_before
    assert (run / "eval_final" / "summary.json").read_text() == eval_before
    # status: the manifest as a table, the report rebuilt, the single run listed
    st = subprocess.run([*base, "status", str(run)], env=env, capture_output=True, text=True)
    assert st.returncode == 0 and "rl_math" in st.stdout and "single/eval_final" in st.stdout
    assert "### " in (run / "report.md").read_text()  # stage summaries nest under their stage
