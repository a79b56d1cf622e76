"""Per-step dynamic sampling (train/rl_sampling.py): a step refills its batch with groups whose
rewards are not all equal, within its cap of extra prompts, counted in the metrics; the
first draw's share of zero-signal groups is logged with or without refill."""

from __future__ import annotations

from types import SimpleNamespace

import torch

from tests.helpers.rl_loop import _opts, _problems
from tests.train.test_rl_loop import tiny  # noqa: F401
from vibethinker.engines import SamplingParams, make_sampler
from vibethinker.train import policy
from vibethinker.train.rl import train
from vibethinker.train.rl_metrics import Timer
from vibethinker.train.rl_sampling import collect_groups, draw_groups
from vibethinker.types import Score

SIGNAL = {"p3", "p7", "p8", "p10"}  # the prompts whose groups get rewards 1, 0, 1, 0


def split_verdicts(problems, responses):
    """Groups are contiguous in the flat lists (G = 4): a SIGNAL prompt's responses alternate
    1, 0 by position; every other prompt's responses all score 1 (no signal)."""
    return [
        Score(float(ok), ok, "ok")
        for ok in (p.id not in SIGNAL or j % 2 == 0 for j, p in enumerate(problems))
    ]


def _loop(model_path, **kw):
    model, tok = policy.load_policy(model_path, "cpu")
    opts = _opts(**kw)
    return SimpleNamespace(
        opts=opts,
        problems=_problems(12),
        sampler=make_sampler("hf", model=model, tokenizer=tok),
        prompt_fn=lambda p: p.prompt,
        verify=split_verdicts,
        sampling=lambda seed: SamplingParams(max_new_tokens=4, seed=seed),
    )


def test_refill_keeps_only_groups_with_signal_within_the_cap(tiny):  # noqa: F811
    lp = _loop(tiny, dynamic_sampling=40)
    first, sc0 = draw_groups(lp, 0, Timer(), 4)
    n0 = sum(g.problem.id in SIGNAL for g in first)
    groups, sc, m = collect_groups(lp, 0, Timer())
    assert m["frac_zero_signal"] == 1 - n0 / 4
    assert [g.problem.id in SIGNAL for g in groups] == [True] * len(groups)
    assert len(groups) == sc.rewards.shape[0] == m["dyn_groups"] == 4  # 40 extra is enough
    assert 0 < m["dyn_extra_prompts"] <= 40 and m["dyn_extra_prompts"] % 4 == 0
    assert m["dyn_extra_rollouts"] == 4 * m["dyn_extra_prompts"]
    assert sc.rewards.tolist() == [[1.0, 0.0, 1.0, 0.0]] * 4
    # the first draw's signal groups come first, in their order
    assert [g.problem.id for g in groups[:n0]] == [
        g.problem.id for g in first if g.problem.id in SIGNAL
    ]


def test_the_cap_bounds_the_extra_prompts_and_off_keeps_the_first_draw(tiny):  # noqa: F811
    lp = _loop(tiny, dynamic_sampling=2)
    groups, sc, m = collect_groups(lp, 0, Timer())
    assert m["dyn_extra_prompts"] == 2 and len(groups) == m["dyn_groups"] <= 4
    off = _loop(tiny)
    first, _ = draw_groups(off, 0, Timer(), 4)
    groups, sc, m = collect_groups(off, 0, Timer())
    assert set(m) == {"frac_zero_signal"}
    assert [g.problem.id for g in groups] == [g.problem.id for g in first]


def test_no_signal_anywhere_keeps_the_first_draw(tiny):  # noqa: F811
    lp = _loop(tiny, dynamic_sampling=8)
    lp.verify = lambda problems, responses: [Score(1.0, True, "ok") for _ in responses]
    groups, sc, m = collect_groups(lp, 0, Timer())
    assert len(groups) == 4 and m["dyn_groups"] == 0 and m["dyn_extra_prompts"] == 8
    assert m["frac_zero_signal"] == 1.0


def test_dynamic_sampling_through_train(tiny, tmp_path):  # noqa: F811
    """Every trained row belongs to a group with signal; the metrics rows carry the counts."""
    model, tok = policy.load_policy(tiny, "cpu")
    opts = _opts(steps=2, dynamic_sampling=24, filter_rollouts=0)
    res = train(model, tok, _problems(12), opts, tmp_path / "rl", verify=split_verdicts)
    for row in res["history"]:
        assert row["trained_rows"] == 4 * row["dyn_groups"] > 0
        assert row["accuracy"] == 0.5 and row["frac_p01"] == 0.0
        assert {"frac_zero_signal", "dyn_extra_prompts", "dyn_extra_rollouts"} <= set(row)
    assert torch.is_tensor(res["history"][0]["trained_rows"]) is False
