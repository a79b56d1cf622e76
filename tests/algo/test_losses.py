"""The clipped MGPO surrogate, TIS, k3 KL and entropy against hand-computed numbers and a loop."""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from tests.helpers.reference import surrogate_loss
from vibethinker.algo.losses import (
    LossStats,
    clipped_surrogate,
    entropy_from_logits,
    kl_k3,
    masked_mean,
    tis_weights,
)

L = math.log


def test_clip_hand_values_positive_and_negative_advantage():
    # one sequence, two tokens, ratios 1.5 and 0.5, eps 0.2
    old = torch.zeros(1, 2)
    logp = torch.tensor([[L(1.5), L(0.5)]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    # A = +1: min(1.5, 1.2) = 1.2 (clipped), min(0.5, 0.8) = 0.5 -> mean 0.85 -> loss -0.85
    loss, st = clipped_surrogate(logp, old, torch.tensor([1.0]), mask, clip_eps=0.2)
    assert float(loss) == pytest.approx(-0.85)
    assert st.summary()["clip_frac"] == 0.5
    assert st.summary()["ratio_mean"] == pytest.approx(1.0)
    assert st.summary()["ratio_max"] == pytest.approx(1.5)
    # A = -1: min(-1.5, -1.2) = -1.5, min(-0.5, -0.8) = -0.8 (clipped) -> mean -1.15 -> 1.15
    loss, st = clipped_surrogate(logp, old, torch.tensor([-1.0]), mask, clip_eps=0.2)
    assert float(loss) == pytest.approx(1.15)
    assert st.summary()["clip_frac"] == 0.5
    # asymmetric clip (eps_high 0.6): token 1 now unclipped at A=+1 -> (1.5 + 0.5)/2 = 1.0
    loss, _ = clipped_surrogate(logp, old, torch.tensor([1.0]), mask, 0.2, clip_eps_high=0.6)
    assert float(loss) == pytest.approx(-1.0)


def test_per_sequence_normalisation_not_per_token():
    # seq 1: 1 token, A = +1; seq 2: 3 tokens, A = -1; ratios 1.
    # per sequence: (1 + (-1)) / 2 = 0 -> loss 0; a token mean would give (1 - 3) / 4 -> 0.5
    logp = torch.zeros(2, 3)
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    loss, st = clipped_surrogate(logp, logp, torch.tensor([1.0, -1.0]), mask)
    assert float(loss) == pytest.approx(0.0)
    assert st.tokens == 4


def test_on_policy_gradient_is_advantage_over_length():
    # with old = logp.detach(), rho = 1 in value and d loss / d logp_it = -A_i / (|y_i| N)
    logp = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.2, -9.0]], requires_grad=True)
    mask = torch.tensor([[1, 1, 1], [1, 1, 0]], dtype=torch.bool)
    adv = torch.tensor([0.6, -1.2])
    loss, st = clipped_surrogate(logp, logp.detach(), adv, mask)
    loss.backward()
    # seq 1: -0.6 / (3 * 2) = -0.1; seq 2: 1.2 / (2 * 2) = 0.3; padding gets 0
    expect = torch.tensor([[-0.1, -0.1, -0.1], [0.3, 0.3, 0.0]])
    assert torch.allclose(logp.grad, expect, atol=1e-6)
    assert st.clipped == 0 and st.summary()["ratio_mean"] == 1.0


def test_n_seqs_makes_microbatches_add_up():
    torch.manual_seed(0)
    logp = torch.randn(6, 5)
    old = logp + 0.3 * torch.randn(6, 5)
    adv = torch.randn(6)
    mask = torch.rand(6, 5) > 0.3
    mask[:, 0] = True
    full, _ = clipped_surrogate(logp, old, adv, mask)
    parts = sum(
        clipped_surrogate(
            logp[i : i + 2], old[i : i + 2], adv[i : i + 2], mask[i : i + 2], n_seqs=6
        )[0]
        for i in (0, 2, 4)
    )
    assert float(parts) == pytest.approx(float(full), abs=1e-6)


def test_micro_batch_stats_add_up_to_the_whole_batch():
    """LossStats of micro-batches, added, equal the whole batch's (sums, max, token counts)."""
    torch.manual_seed(3)
    logp = -torch.rand(6, 5) * 2
    old = logp + 0.3 * torch.randn(6, 5)
    engine = old + 0.5 * torch.randn(6, 5)
    ref = logp + 0.2 * torch.randn(6, 5)
    adv = torch.randn(6)
    mask = torch.rand(6, 5) > 0.3
    mask[:, 0] = True
    kw = dict(engine_logp=engine, tis_cap=1.2, ref_logp=ref, kl_coef=0.1)
    _, whole = clipped_surrogate(logp, old, adv, mask, **kw)
    parts = LossStats()
    for i in (0, 2, 4):
        sl = slice(i, i + 2)
        _, st = clipped_surrogate(
            logp[sl],
            old[sl],
            adv[sl],
            mask[sl],
            engine_logp=engine[sl],
            tis_cap=1.2,
            ref_logp=ref[sl],
            kl_coef=0.1,
            n_seqs=6,
        )
        parts = parts.add(st)
    for f in dataclasses.fields(LossStats):
        assert getattr(parts, f.name) == pytest.approx(getattr(whole, f.name), rel=1e-5), f.name
    assert whole.tokens == int(mask.sum()) and 0 < whole.tis_capped < whole.tokens
    assert whole.clipped > 0 and whole.kl_sum > 0 and whole.engine_kl_sum > 0
    assert parts.summary() == pytest.approx(whole.summary(), rel=1e-5)


def test_defaults_and_off_switches():
    """Defaults: clip 0.2, TIS off (even given engine logprobs), KL logged but not added."""
    old = torch.zeros(1, 2)
    logp = torch.tensor([[L(1.5), L(1.1)]])
    mask = torch.ones(1, 2, dtype=torch.bool)
    engine = torch.tensor([[L(0.25), L(4.0)]])  # pi_old / pi_engine = 4, 0.25
    ref = torch.tensor([[L(0.5), L(2.0)]])
    # A = 1: min(1.5, 1.2) and min(1.1, 1.1) -> -(1.2 + 1.1) / 2 = -1.15
    loss, st = clipped_surrogate(
        logp, old, torch.tensor([1.0]), mask, engine_logp=engine, ref_logp=ref
    )
    assert float(loss) == pytest.approx(-1.15)
    s = st.summary()
    assert s["tis_mean"] == 1.0 and s["tis_capped_frac"] == 0.0 and s["kl"] > 0
    # engine KL logged: k3(engine, old) = e^d - d - 1, d = old - engine = log 4, log .25
    k3 = [math.exp(d) - d - 1 for d in (L(4.0), L(0.25))]
    assert s["engine_kl"] == pytest.approx(sum(k3) / 2)
    # a cap below 1 is valid: weight 4 is capped to 0.5, 0.25 stays (one token capped)
    loss, st = clipped_surrogate(
        logp, old, torch.tensor([1.0]), mask, engine_logp=engine, tis_cap=0.5
    )
    assert float(loss) == pytest.approx(-(1.2 * 0.5 + 1.1 * 0.25) / 2)
    assert st.tis_capped == 1 and st.summary()["tis_capped_frac"] == 0.5
    # no reference, no engine logprobs, an empty mask: zero stats, not 1s
    _, st = clipped_surrogate(logp, old, torch.tensor([1.0]), torch.zeros(1, 2, dtype=torch.bool))
    assert (st.tokens, st.ratio_max, st.kl_sum, st.engine_kl_sum, st.tis_sum) == (0, 0, 0, 0, 0)
    with pytest.raises(ValueError, match="TIS cap must be > 0"):
        tis_weights(old, engine, 0.0)
    # one token: the summary divides by 1
    one = LossStats(tokens=1, clipped=1, ratio_sum=2.0, tis_capped=1, kl_sum=0.5).summary()
    assert one["clip_frac"] == 1 and one["ratio_mean"] == 2.0 and one["tis_capped_frac"] == 1
    assert one["kl"] == 0.5


def test_masked_mean_and_entropy_shapes():
    assert float(masked_mean(torch.tensor([3.0, 5.0]), torch.tensor([True, False]))) == 3.0
    assert float(masked_mean(torch.tensor([3.0]), torch.tensor([False]))) == 0.0
    ent = entropy_from_logits(torch.tensor([[0.0, 0.0], [50.0, 0.0]]))
    assert ent.shape == (2,) and ent.tolist() == pytest.approx([L(2), 0.0], abs=1e-6)


def _slow_loss(logp, old, adv, mask, eps, tis, ref, kl_coef):
    return surrogate_loss(logp, old, adv, mask, eps=eps, tis=tis, ref=ref, kl_coef=kl_coef)


def test_matches_slow_loop_with_tis_and_kl():
    torch.manual_seed(1)
    logp = -torch.rand(4, 7) * 3
    old = logp + 0.4 * torch.randn(4, 7)
    engine = old + 0.2 * torch.randn(4, 7)
    ref = logp + 0.5 * torch.randn(4, 7)
    adv = torch.randn(4)
    mask = torch.rand(4, 7) > 0.25
    mask[:, 0] = True
    w = tis_weights(old, engine, cap=1.5)
    loss, st = clipped_surrogate(
        logp, old, adv, mask, 0.2, engine_logp=engine, tis_cap=1.5, ref_logp=ref, kl_coef=0.05
    )
    assert float(loss) == pytest.approx(
        _slow_loss(logp, old, adv, mask, 0.2, w, ref, 0.05), abs=1e-5
    )
    assert float(w.max()) <= 1.5
    s = st.summary()
    assert s["kl"] == pytest.approx(float(masked_mean(kl_k3(logp, ref), mask)), abs=1e-6)
    # the TIS stats come from the loss itself: capped tokens counted there, by a loop here
    ratios = [math.exp(float(old[i, t] - engine[i, t])) for i, t in mask.nonzero().tolist()]
    assert st.tis_capped == sum(r >= 1.5 for r in ratios) > 0
    assert s["tis_mean"] == pytest.approx(sum(min(r, 1.5) for r in ratios) / len(ratios), rel=1e-5)
    assert s["engine_kl"] == pytest.approx(float(masked_mean(kl_k3(engine, old), mask)), abs=1e-6)
    # TIS off (cap 0 or no engine logprobs): weights 1, nothing capped, same loss without w
    for kw in ({"engine_logp": engine, "tis_cap": 0.0}, {}):
        l0, s0 = clipped_surrogate(logp, old, adv, mask, 0.2, ref_logp=ref, kl_coef=0.05, **kw)
        assert float(l0) == pytest.approx(
            _slow_loss(logp, old, adv, mask, 0.2, None, ref, 0.05), abs=1e-5
        )
        assert s0.tis_capped == 0 and s0.summary()["tis_mean"] == 1.0


def test_kl_tis_entropy_hand_values():
    # k3 with logp = log .5, ref = log .25: d = log .5 = -0.693147 -> e^d - d - 1 = 0.193147
    assert float(kl_k3(torch.tensor(L(0.5)), torch.tensor(L(0.25)))) == pytest.approx(
        0.193147, abs=1e-6
    )
    assert float(kl_k3(torch.tensor(-1.0), torch.tensor(-1.0))) == 0.0
    # TIS: pi_old / pi_engine = .5 / .25 = 2, capped at 1.5; .25 / .5 = .5 stays
    w = tis_weights(torch.tensor([L(0.5), L(0.25)]), torch.tensor([L(0.25), L(0.5)]), 1.5)
    assert w.tolist() == pytest.approx([1.5, 0.5])
    with pytest.raises(ValueError):
        tis_weights(torch.zeros(1), torch.zeros(1), 0.0)
    # entropy of a uniform distribution over 4 tokens = log 4; a one-hot-ish one ~ 0
    assert float(entropy_from_logits(torch.zeros(4))) == pytest.approx(L(4))
    assert float(entropy_from_logits(torch.tensor([50.0, 0, 0]))) < 1e-6
