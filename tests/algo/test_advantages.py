"""Advantages, MGPO weights and the Long2Short shift against hand-computed numbers and the slow
reference forms in tests/helpers/reference.py (one implementation in the package, the loops
here)."""

from __future__ import annotations

import math
import random

import pytest
import torch

from tests.helpers.reference import (
    advantages,
    group_accuracy,
    group_advantages,
    long2short_rewards,
    max_entropy_deviation,
    mgpo_weight,
)
from vibethinker.algo.advantages import (
    ADVANTAGE_ESTIMATORS,
    batch_accuracy,
    batch_advantages,
    batch_long2short,
    batch_max_entropy_deviation,
)


def _dme(p: float) -> float:  # the package's D_ME at one p
    return float(batch_max_entropy_deviation(torch.tensor([p])))


def _weight(p: float, lam: float) -> float:  # the package's MGPO weight of a group with p(q) = p
    g = 8
    correct = torch.tensor([[i < round(p * g) for i in range(g)]])
    return float(batch_advantages(correct.float(), correct, lam)[1])


def _adv(rewards, lam=0.0, eps=1e-6, std_scale=True, correct=None):  # one group's advantages
    r = torch.tensor([rewards], dtype=torch.float32)
    c = torch.tensor([correct]) if correct is not None else r > 0.5
    return batch_advantages(r, c, lam, eps, std_scale)[0][0].tolist()


def _l2s(rewards, correct, lengths, lam=0.2):  # one group's Long2Short rewards
    t = torch.tensor
    return batch_long2short(t([rewards], dtype=torch.float32), t([correct]), t([lengths]), lam)[
        0
    ].tolist()


def test_group_accuracy():
    assert group_accuracy([True, False, False, True]) == 0.5
    assert batch_accuracy(torch.tensor([[True, False, False, True], [True] * 4])).tolist() == [
        0.5,
        1.0,
    ]


@pytest.mark.parametrize("dme", [max_entropy_deviation, _dme], ids=["reference", "package"])
def test_max_entropy_deviation_hand_values(dme):
    # p = 0.5: both terms are 0.5 log 1 = 0
    assert dme(0.5) == 0.0
    # p in {0, 1}: 0 log 0 = 0 and 1 log(1/0.5) = log 2 = 0.693147
    assert dme(0.0) == pytest.approx(0.693147, abs=1e-6)
    assert dme(1.0) == pytest.approx(0.693147, abs=1e-6)
    # p = 0.25: 0.25 log 0.5 + 0.75 log 1.5 = -0.173287 + 0.304099 = 0.130812
    assert dme(0.25) == pytest.approx(0.130812, abs=1e-6)
    assert dme(0.75) == pytest.approx(0.130812, abs=1e-6)  # symmetric


@pytest.mark.parametrize("weight", [mgpo_weight, _weight], ids=["reference", "package"])
def test_mgpo_weight_hand_values(weight):
    # lambda = 2, p = 0.25: exp(-2 * 0.130812) = exp(-0.261624) = 0.769800
    assert weight(0.25, 2.0) == pytest.approx(0.769800, abs=1e-6)
    # p in {0, 1}: exp(-lambda log 2) = 2^-lambda; lambda = 1 -> 0.5
    assert weight(1.0, 1.0) == pytest.approx(0.5)
    assert weight(0.0, 3.0) == pytest.approx(0.125)
    assert weight(0.5, 5.0) == 1.0  # the max-entropy group keeps full weight
    for p in (0.0, 0.125, 0.5, 0.875, 1.0):
        assert weight(p, 0.0) == 1.0  # lambda = 0 is GRPO
    with pytest.raises(ValueError):
        batch_advantages(torch.ones(1, 2), torch.ones(1, 2, dtype=torch.bool), -1.0)


def _group_adv(rewards, weight=1.0, eps=1e-6, std_scale=True):
    """The package's advantages of one group, with its weight applied by hand."""
    return [weight * a for a in _adv(rewards, 0.0, eps, std_scale)]


@pytest.mark.parametrize("adv", [group_advantages, _group_adv], ids=["reference", "package"])
def test_group_advantages_hand_values(adv):
    # r = [1,0,0,0]: mean 0.25, centred [.75,-.25,-.25,-.25], population std sqrt(.1875)=.433013
    # -> [1.732051, -0.577350 x3]
    a = adv([1, 0, 0, 0], eps=0.0)
    assert a == pytest.approx([1.732051, -0.577350, -0.577350, -0.577350], abs=1e-6)
    # MGPO weight at p = .25, lambda = 2 (0.769800) scales them: [1.333333, -0.444444 x3]
    a = adv([1, 0, 0, 0], weight=0.769800, eps=0.0)
    assert a == pytest.approx([1.333333, -0.444444, -0.444444, -0.444444], abs=1e-5)
    # no std scaling: just the centred rewards
    assert adv([1, 0, 0, 0], std_scale=False) == pytest.approx([0.75, -0.25] + [-0.25] * 2)
    # all equal: no signal, eps keeps it finite
    assert adv([1, 1, 1, 1]) == [0.0] * 4
    assert sum(adv([1, 0, 1, 1, 0, 0])) == pytest.approx(0.0, abs=1e-6)
    # eps is added to the std: std of [1, 0] is 0.5, eps 0.5 -> (0.5) / 1.0
    assert adv([1, 0], eps=0.5) == pytest.approx([0.5, -0.5])


@pytest.mark.parametrize("l2s", [long2short_rewards, _l2s], ids=["reference", "package"])
def test_long2short_hand_values(l2s):
    # correct lengths 10, 20, 40 -> s = [.1, .05, .025], s_bar = .058333,
    # s - s_bar = [.041667, -.008333, -.033333], max |.| = .041667
    # shift = 0.2 * [1, -0.2, -0.8] = [.2, -.04, -.16]; the incorrect response keeps 0
    r = l2s([1, 1, 1, 0], [True, True, True, False], [10, 20, 40, 5], 0.2)
    assert r == pytest.approx([1.2, 0.96, 0.84, 0.0])
    assert sum(r[:3]) == pytest.approx(3.0)  # zero-sum over C
    # lambda scales the shift; a reward other than 1 keeps its own base
    r = l2s([0.5, 1, 0], [True, True, False], [10, 30, 5], 0.3)
    assert r == pytest.approx([0.8, 0.7, 0.0])
    # an empty correct response counts as length 1: s = [1, .5], shift [.2, -.2]
    assert l2s([1, 1], [True, True], [0, 2], 0.2) == pytest.approx([1.2, 0.8])


@pytest.mark.parametrize("l2s", [long2short_rewards, _l2s], ids=["reference", "package"])
def test_long2short_no_shift_cases(l2s):
    # one correct response: nothing to compare with
    assert l2s([1, 0, 0], [True, False, False], [5, 9, 3]) == [1.0, 0.0, 0.0]
    # equal correct lengths (an incorrect one of another length does not count)
    assert l2s([1, 1, 0], [True, True, False], [7, 7, 3]) == [1.0, 1.0, 0.0]
    assert l2s([1, 1, 1], [True, True, True], [3000, 3000, 3000]) == [1.0, 1.0, 1.0]
    # no correct response
    assert l2s([0, 0], [False, False], [3, 4]) == [0.0, 0.0]
    # equal lengths whose mean 1/L rounds (3 x 1/5 sum to 0.6000000000000001): still no shift
    assert l2s([1, 1, 1, 0], [True, True, True, False], [5, 5, 5, 9]) == [1.0, 1.0, 1.0, 0.0]


def test_long2short_long_responses_and_defaults():
    # 60000 vs 60001 tokens: s differ by 2.8e-10, still a full +-lambda shift (two responses)
    assert _l2s([1, 1], [True, True], [60000, 60001]) == pytest.approx([1.2, 0.8])
    # the default lambda is the paper's 0.2; the rewards' dtype is kept
    r = torch.tensor([[1.0, 1.0, 0.0]])
    out = batch_long2short(r, torch.tensor([[True, True, False]]), torch.tensor([[10, 30, 5]]))
    assert out.dtype == torch.float32 and out.tolist() == [pytest.approx([1.2, 0.8, 0.0])]


@pytest.mark.parametrize("std_scale", [True, False])
@pytest.mark.parametrize("lam", [0.0, 0.7, 3.0])
def test_batch_matches_slow_loop(lam, std_scale):
    rng = random.Random(0)
    B, G = 12, 8
    correct = [[rng.random() < q for _ in range(G)] for q in [rng.random() for _ in range(B)]]
    correct[0] = [True] * G  # p = 1
    correct[1] = [False] * G  # p = 0
    lengths = [[rng.randint(3, 30) for _ in range(G)] for _ in range(B)]
    lengths[2] = [9] * G  # equal lengths: no shift
    rewards = [[float(c) for c in row] for row in correct]
    shifted = [long2short_rewards(r, c, n, 0.2) for r, c, n in zip(rewards, correct, lengths)]
    t = lambda x: torch.tensor(x)  # noqa: E731
    fast_shift = batch_long2short(t(rewards), t(correct), t(lengths), 0.2)
    for fr, sr in zip(fast_shift.tolist(), shifted):
        assert fr == pytest.approx(sr, abs=1e-6)
    adv, w = batch_advantages(t(shifted), t(correct), lam, 1e-6, std_scale)
    slow_adv, slow_w = advantages(shifted, correct, lam, 1e-6, std_scale)
    assert w.tolist() == pytest.approx(slow_w, abs=1e-6)
    for fr, sr in zip(adv.tolist(), slow_adv):
        assert fr == pytest.approx(sr, abs=1e-5)


def test_batch_advantages_defaults_and_estimators_pass_options():
    r = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 0.0]])
    c = r.bool()
    # defaults: lambda 0 (GRPO weights), eps 1e-6, std scaling on
    adv, w = batch_advantages(r, c)
    assert w.tolist() == [1.0, 1.0]
    assert adv[0].tolist() == pytest.approx(
        [0.75 / (0.433013 + 1e-6)] + [-0.25 / 0.433014] * 3, abs=1e-5
    )
    with pytest.raises(ValueError, match="lambda must be >= 0"):
        batch_advantages(r, c, -0.5)
    for name in ("grpo", "mgpo"):  # both estimators forward eps and std_scale
        est = ADVANTAGE_ESTIMATORS[name]
        a, _ = est(r, c, lam=0.0, std_scale=False)
        assert a[0].tolist() == pytest.approx([0.75, -0.25, -0.25, -0.25])
        a, _ = est(r, c, lam=0.0, eps=0.5)
        assert a[0].tolist() == pytest.approx(
            [0.75 / 0.933013, -0.25 / 0.933013, -0.25 / 0.933013, -0.25 / 0.933013], abs=1e-5
        )


def test_batch_dme_zero_log_zero():
    d = batch_max_entropy_deviation(torch.tensor([0.0, 0.5, 1.0]))
    assert d.tolist() == pytest.approx([math.log(2), 0.0, math.log(2)])
    assert torch.isfinite(d).all()


def test_lambda_zero_mgpo_is_grpo_exactly():
    rewards = torch.tensor([[1.0, 0, 0, 1], [1, 1, 1, 0], [0, 0, 0, 0]])
    correct = rewards.bool()
    a_grpo, w_grpo = ADVANTAGE_ESTIMATORS["grpo"](rewards, correct)
    a_mgpo, w_mgpo = ADVANTAGE_ESTIMATORS["mgpo"](rewards, correct, lam=0.0)
    assert torch.equal(a_grpo, a_mgpo) and torch.equal(w_grpo, w_mgpo)
    assert w_grpo.tolist() == [1.0, 1.0, 1.0]
    # lambda > 0 keeps the p = .5 group and shrinks the p = .75 group
    a, w = ADVANTAGE_ESTIMATORS["mgpo"](rewards, correct, lam=2.0)
    assert w[0] == 1.0 and w[1] == pytest.approx(0.769800, abs=1e-6)
    assert torch.allclose(a[1], a_grpo[1] * w[1])


def test_long2short_all_correct_group_keeps_lambda_without_std():
    """An all-correct group of 8 with lengths 1K-8K: divided by its own std (the formula
    literally) lambda 0.02, 0.2 and 1.0 give the same advantages; with all_correct_std=False
    they are the shift itself, within +-lambda, so lambda sets their size."""
    lengths = torch.tensor([[1000.0 * (i + 1) for i in range(8)]])
    correct = torch.ones(1, 8, dtype=torch.bool)
    ones = torch.ones(1, 8)
    literal, kept = [], []
    for lam in (0.02, 0.2, 1.0):
        shifted = batch_long2short(ones, correct, lengths, lam)
        literal.append(batch_advantages(shifted, correct, 0.0, all_correct_std=True)[0])
        adv = batch_advantages(shifted, correct, 0.0, all_correct_std=False)[0]
        kept.append(adv)
        assert adv.abs().max().item() == pytest.approx(lam, rel=1e-4)  # the largest shift
        assert adv[0, 0].item() > 0 > adv[0, -1].item()  # shortest up, longest down
        assert adv.sum().item() == pytest.approx(0.0, abs=1e-6)
    assert torch.allclose(literal[0], literal[2], atol=1e-3)  # lambda gone (float32 rounding)
    assert not torch.allclose(kept[0], kept[2], atol=1e-4)  # lambda kept
    assert torch.allclose(kept[2], kept[0] * 50, atol=1e-4)


def test_all_correct_std_leaves_mixed_groups_alone():
    """The switch touches only all-correct groups: a half-right group is divided as before."""
    r = torch.tensor([[1.0, 1.0, 0.0, 0.0], [1.0, 1.1, 0.9, 1.0]])
    c = torch.tensor([[True, True, False, False], [True, True, True, True]])
    a_lit = batch_advantages(r, c, 1.0, all_correct_std=True)[0]
    a_off = batch_advantages(r, c, 1.0, all_correct_std=False)[0]
    assert torch.allclose(a_lit[0], a_off[0])
    w1 = math.exp(-math.log(2))  # MGPO weight at p = 1 with lambda 1
    assert a_off[1].tolist() == pytest.approx([0.0, 0.1 * w1, -0.1 * w1, 0.0], abs=1e-6)


def test_mgpo_norm_keeps_the_weighting_and_grpo_step_size():
    from vibethinker.algo.advantages import ADVANTAGE_ESTIMATORS

    # groups with p = 1/8, 4/8, 0 (inactive) and 7/8
    correct = torch.zeros(4, 8)
    correct[0, :1] = 1
    correct[1, :4] = 1
    correct[3, :7] = 1
    rewards = correct.clone()
    mg, wm = ADVANTAGE_ESTIMATORS["mgpo"](rewards, correct, lam=1.0)
    nm, wn = ADVANTAGE_ESTIMATORS["mgpo_norm"](rewards, correct, lam=1.0)
    gr, _ = ADVANTAGE_ESTIMATORS["grpo"](rewards, correct, lam=1.0)
    active = torch.tensor([True, True, False, True])
    # mean weight 1 over the active groups, relative weights unchanged
    assert torch.isclose(wn[active].mean(), torch.tensor(1.0), atol=1e-6)
    assert torch.allclose(wn / wn[1], wm / wm[1], atol=1e-6)
    assert wm[active].mean() < 0.99  # plain MGPO's step is smaller
    # advantages: MGPO's times one batch-wide factor; the total size of the step matches GRPO's
    factor = 1.0 / wm[active].mean()
    assert torch.allclose(nm, mg * factor, atol=1e-5)
    assert torch.isclose(nm.abs().sum(), gr.abs().sum(), rtol=0.2)
    assert torch.equal(nm[2], torch.zeros(8))


def test_mgpo_norm_with_no_active_group_is_mgpo():
    from vibethinker.algo.advantages import ADVANTAGE_ESTIMATORS

    correct = torch.ones(2, 4)
    a, w = ADVANTAGE_ESTIMATORS["mgpo_norm"](correct.clone(), correct, lam=1.0)
    b, v = ADVANTAGE_ESTIMATORS["mgpo"](correct.clone(), correct, lam=1.0)
    assert torch.equal(a, b) and torch.equal(w, v)


def test_config_advantage_names_match_the_registry():
    from vibethinker.algo.advantages import ADVANTAGE_ESTIMATORS
    from vibethinker.train.rl_config import ADVANTAGE_NAMES

    assert set(ADVANTAGE_NAMES) == set(ADVANTAGE_ESTIMATORS)
