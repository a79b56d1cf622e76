"""RL that learns nothing must say so: in the log, the stage summary and the report."""

from __future__ import annotations

import json
import re

from tests.helpers.loop_options import rl_options
from tests.helpers.rl_data import _problems, tiny  # noqa: F401 - the tiny-model fixture
from vibethinker.reports.rl import learning_warnings, plot_curves, write_summary
from vibethinker.stages.rl import RLConfig
from vibethinker.train import policy
from vibethinker.train.rl import train
from vibethinker.types import Score


def _row(step: int, trained: int, p0: float, p1: float) -> dict:
    return {
        "step": step,
        "trained_rows": trained,
        "frac_p0": p0,
        "frac_p1": p1,
        "frac_p01": p0 + p1,
        "trunc_rate": 0.0,
    }


def test_filter_leaving_a_handful_of_prompts_warns():
    cfg = RLConfig(prompts_per_step=8)
    counts = {"prompts_in": 48, "dropped_p0": 44, "dropped_p1": 2, "prompts_out": 2, "rollouts": 4}
    (w,) = learning_warnings(cfg, counts, [_row(1, 16, 0.2, 0.1)])
    assert "kept only 2 of 48 prompts" in w and "stronger starting model" in w
    assert learning_warnings(cfg, {**counts, "prompts_out": 40}, [_row(1, 16, 0.2, 0.1)]) == []
    assert learning_warnings(cfg, {"prompts_in": 48, "filter": "off"}, []) == []


def test_all_groups_degenerate_warns_with_what_to_try():
    cfg = RLConfig()
    hist = [_row(s, 0, 0.0, 1.0) for s in range(1, 11)]
    (w,) = learning_warnings(cfg, {}, hist)
    assert "10 of 10 steps trained nothing" in w and "harder prompts" in w
    hist = [_row(s, 0, 1.0, 0.0) for s in range(1, 11)]
    assert "more SFT" in learning_warnings(cfg, {}, hist)[0]


def test_rl_on_solved_prompts_reports_it_in_the_summary(tiny, tmp_path):  # noqa: F811
    """Degenerate groups (4-token responses are all cut, and a cut response scores 0: p = 0 in
    every group): the loop trains no row, and the summary says RL learned nothing."""
    model, tok = policy.load_policy(tiny, "cpu")
    opts = rl_options(
        steps=2, prompts_per_step=4, group_size=2, max_new_tokens=4, eval_every=2, eval_n=2
    )

    def always(problems, responses):
        return [Score(1.0, True, "ok") for _ in responses]

    res = train(model, tok, _problems(8), opts, tmp_path, _problems(4), verify=always)
    assert all(r["trained_rows"] == 0 for r in res["history"])
    path = write_summary(tmp_path / "summary.md", opts, res, {"prompts_in": 8, "filter": "off"}, 1)
    text = open(path).read()
    assert "**Warning: RL may have learned nothing.**" in text and "2 of 2 steps" in text
    assert json.dumps(learning_warnings(opts, {}, res["history"]))
    # held-out panels carry error bars: one standard error over problems
    assert all(e["stderr"] is not None for e in res["evals"]) and len(res["evals"]) == 2
    assert re.search(r"\| accuracy \| \d\.\d{3} \+- \d\.\d{3} \|", text)
    assert plot_curves(res["history"], res["evals"], tmp_path / "c.png", "t").endswith("c.png")


def test_report_and_status_put_stage_warnings_on_top(tmp_path):
    from vibethinker.report import status_table, write_report

    out = tmp_path / "rl_code"
    out.mkdir()
    (out / "warnings.json").write_text(json.dumps(["the filter kept only 2 of 48 prompts"]))
    rec = {"stage": "rl", "status": "done", "config": {"out": str(out)}, "seconds": 1}
    man = {"recipe": "r.yaml", "order": ["rl_code"], "stages": {"rl_code": rec}}
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    text = open(write_report(str(tmp_path))).read()
    assert "## Warnings\n\n- **rl_code**: the filter kept only 2 of 48 prompts" in text
    assert "rl_code: WARNING the filter kept only 2" in status_table(str(tmp_path))


def test_filter_keeping_nothing_stops_or_passes_the_model_through(tiny, tmp_path, monkeypatch):  # noqa: F811
    """A filter that keeps no prompt: an error by default; with on_empty_filter=skip the start
    model passes through as final/ (same weights) and the stage warns."""
    import pytest
    import torch
    from transformers import AutoModelForCausalLM

    import vibethinker.stages.rl as rl_stage
    from vibethinker.data.io import save_problems
    from vibethinker.stages import get

    data = tmp_path / "data"
    data.mkdir()
    save_problems(data / "train.jsonl", _problems(6))

    def never(problems, responses, **kw):
        return [Score(0.0, False, "wrong_answer") for _ in responses]

    monkeypatch.setattr(rl_stage, "verify_batch", never)
    rl = get("rl")
    base = dict(
        model=tiny,
        data=str(data),
        steps=1,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=4,
        filter_rollouts=2,
        device="cpu",
        eval_every=0,
    )
    with pytest.raises(ValueError, match="left no prompt.*on_empty_filter=skip"):
        rl.fn(rl.config_cls(**base, out=str(tmp_path / "a")))
    outs = rl.fn(rl.config_cls(**base, out=str(tmp_path / "b"), on_empty_filter="skip"))
    (w,) = json.loads((tmp_path / "b" / "warnings.json").read_text())
    assert "nothing was trained" in w and "kept 0 of 6" in w
    assert "skipped" in open(outs["summary"]).read()
    a = AutoModelForCausalLM.from_pretrained(tiny).state_dict()
    b = AutoModelForCausalLM.from_pretrained(outs["model"]).state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_mismatch_panel_plots_what_the_loop_logs():
    """The curves' fourth panel draws each logged mismatch series (positive values, log scale)
    and says so when the sampler is the trainer (all zero) instead of leaving a blank axis."""
    from vibethinker.reports import pyplot
    from vibethinker.reports.rl import _plot_mismatch

    plt = pyplot()
    hist = [
        {
            "step": s,
            "engine_kl": 5e-5,
            "engine_logp_absdiff": 3e-3,
            "token_mult_prob_error": 1.003,
            "tis_capped_frac": 0.0,
        }
        for s in range(1, 4)
    ]
    fig, ax = plt.subplots()
    _plot_mismatch(ax, hist)
    labels = sorted(line.get_label() for line in ax.get_lines())
    assert labels == ["k3 KL", "mean |dlogp|", "mult. prob. error - 1"]
    assert ax.get_yscale() == "log"
    fig2, ax2 = plt.subplots()
    _plot_mismatch(ax2, [{"step": 1, "engine_kl": 0.0, "token_mult_prob_error": 1.0}])
    assert not ax2.get_lines() and "sampler = trainer" in ax2.texts[0].get_text()
    plt.close(fig)
    plt.close(fig2)
