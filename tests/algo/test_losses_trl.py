"""Parity with TRL: every loss aggregation, GSPO, truncation masking and the group std give
TRL's GRPOTrainer loss AND gradient on the same tensors, through TRL's own installed code
(`GRPOTrainer._compute_loss` on a trainer object holding only what that method reads, its
per-token logprob forward replaced by our tensors; `trl.trainer.utils.nanstd`;
`trl.rewards.get_soft_overlong_punishment`). Dual clip has no TRL equivalent: hand numbers."""

from __future__ import annotations

import math
from collections import defaultdict
from types import SimpleNamespace

import pytest
import torch

from vibethinker.algo.advantages import batch_advantages, batch_overlong_penalty
from vibethinker.algo.correction import correction_weights
from vibethinker.algo.losses import clipped_surrogate

trl_grpo = pytest.importorskip("trl.trainer.grpo_trainer")
trl_utils = pytest.importorskip("trl.trainer.utils")
trl_rewards = pytest.importorskip("trl.rewards")

# our loss_agg -> TRL's loss_type (TRL's "bnpo" is token_mean per micro-batch: equal here, one call)
TRL_LOSS_TYPE = {
    "seq_mean": "grpo",
    "token_mean": "dapo",
    "seq_mean_token_sum_norm": "dr_grpo",
}
MAX_LEN = 9  # max_completion_length: Dr. GRPO's constant


def _trl_trainer(loss_type: str, level: str, eps_low: float, eps_high: float, logp, entropies):
    """A GRPOTrainer with only the attributes `_compute_loss` reads (no model, no accelerate
    state): one process, no gradient accumulation, no vLLM, beta 0; its logprob forward
    returns `logp` (the tensor whose gradient we compare)."""
    t = object.__new__(trl_grpo.GRPOTrainer)
    t.__dict__.update(
        loss_type=loss_type,
        importance_sampling_level=level,
        epsilon_low=eps_low,
        epsilon_high=eps_high,
        beta=0.0,
        top_entropy_quantile=1.0,
        off_policy_mask_threshold=None,
        use_vllm=False,
        vllm_importance_sampling_correction=False,
        _entropy_bonus_enabled=False,
        aux_loss_enabled=False,
        max_completion_length=MAX_LEN,
        current_gradient_accumulation_steps=1,
        model=SimpleNamespace(training=True),
        args=SimpleNamespace(delta=None, use_bias_correction_kl=False, steps_per_generation=1),
        accelerator=SimpleNamespace(
            num_processes=1, gather=lambda x: x, reduce=lambda x, reduction="sum": x
        ),
        _metrics={"train": defaultdict(list), "eval": defaultdict(list)},
    )
    t._get_per_token_logps_and_entropies = lambda *a, **k: (logp, entropies, None)
    return t


def _tensors(seed: int = 0, n: int = 5, t: int = 7):
    g = torch.Generator().manual_seed(seed)
    logp = -torch.rand(n, t, generator=g, dtype=torch.float64) * 3
    old = logp + 0.3 * torch.randn(n, t, generator=g, dtype=torch.float64)  # ratios off 1: clips
    adv = torch.randn(n, generator=g, dtype=torch.float64)
    mask = torch.rand(n, t, generator=g) > 0.3
    mask[:, 0] = True
    return logp, old, adv, mask


def _trl_loss_grad(loss_type, level, eps_low, eps_high, logp, old, adv, mask, is_ratio=None):
    lp = logp.clone().requires_grad_(True)
    n, t = mask.shape
    trainer = _trl_trainer(loss_type, level, eps_low, eps_high, lp, torch.zeros(n, t))
    if is_ratio is not None:  # TRL's vLLM importance-sampling correction multiplies the loss
        trainer.use_vllm = trainer.vllm_importance_sampling_correction = True
    inputs = {
        "prompt_ids": torch.zeros(n, 1, dtype=torch.long),
        "prompt_mask": torch.ones(n, 1, dtype=torch.long),
        "completion_ids": torch.zeros(n, t, dtype=torch.long),
        "completion_mask": mask.long(),
        "advantages": adv,
        "old_per_token_logps": old,
        "num_items_in_batch": mask.sum(),
        **({"importance_sampling_ratio": is_ratio} if is_ratio is not None else {}),
    }
    loss = trl_grpo.GRPOTrainer._compute_loss(trainer, None, inputs)
    loss.backward()
    return float(loss.detach()), lp.grad


def _ours_loss_grad(logp, old, adv, mask, **kw):
    lp = logp.clone().requires_grad_(True)
    loss, _ = clipped_surrogate(lp, old, adv, mask, **kw)
    loss.backward()
    return float(loss.detach()), lp.grad


@pytest.mark.parametrize("agg", sorted(TRL_LOSS_TYPE))
@pytest.mark.parametrize("eps_high", [0.2, 0.28])
def test_loss_aggregations_equal_trl(agg, eps_high):
    """seq_mean = TRL "grpo", token_mean = "dapo", seq_mean_token_sum_norm = "dr_grpo" (divides
    by max_completion_length), with an asymmetric clip (TRL's epsilon_high), off-policy ratios."""
    logp, old, adv, mask = _tensors()
    want_loss, want_grad = _trl_loss_grad(
        TRL_LOSS_TYPE[agg], "token", 0.2, eps_high, logp, old, adv, mask
    )
    loss, grad = _ours_loss_grad(
        logp, old, adv, mask, clip_eps=0.2, clip_eps_high=eps_high, agg=agg, max_len=MAX_LEN
    )
    assert loss == pytest.approx(want_loss, rel=1e-12, abs=1e-15)
    assert torch.allclose(grad, want_grad, rtol=1e-10, atol=1e-15)
    assert grad.abs().sum() > 0


def test_seq_mean_token_sum_by_hand():
    """No TRL loss_type: 1/N sum_i sum_t. On-policy (rho = 1), A = (1, -2), lengths 2 and 1:
    per-token loss -A, so (-(1 + 1) + 2) / 2 = 0; gradient -A_i / N per token."""
    logp = torch.tensor([[-1.0, -2.0], [-0.5, -9.0]], requires_grad=True)
    mask = torch.tensor([[True, True], [True, False]])
    loss, _ = clipped_surrogate(
        logp, logp.detach(), torch.tensor([1.0, -2.0]), mask, agg="seq_mean_token_sum"
    )
    loss.backward()
    assert float(loss.detach()) == 0.0
    assert logp.grad.tolist() == [[-0.5, -0.5], [1.0, 0.0]]


@pytest.mark.parametrize("low,high", [(3e-4, 4e-4), (0.05, 0.1)])
def test_gspo_equals_trl_sequence_level(low, high):
    """GSPO = TRL importance_sampling_level="sequence" with loss_type "grpo" (the GSPO paper's
    setup): one ratio exp(mean_t log rho) per sequence, its own clip range."""
    logp, old, adv, mask = _tensors(seed=3)
    old = logp + 0.02 * (old - logp)  # sequence ratios near 1: some inside, some outside clip
    want_loss, want_grad = _trl_loss_grad("grpo", "sequence", low, high, logp, old, adv, mask)
    loss, grad = _ours_loss_grad(
        logp, old, adv, mask, clip_eps=low, clip_eps_high=high, level="sequence"
    )
    assert loss == pytest.approx(want_loss, rel=1e-12, abs=1e-15)
    assert torch.allclose(grad, want_grad, rtol=1e-10, atol=1e-15)


@pytest.mark.parametrize("agg", ["seq_mean", "token_mean"])
def test_mask_truncated_equals_trl(agg):
    """TRL's mask_truncated_completions zeroes a cut completion's mask (completion_mask *
    ~is_truncated, in its generation step) before the loss; num_items_in_batch then counts
    the kept tokens. Ours: the same [N, T] mask (the loop zeroes it) and that token count."""
    logp, old, adv, mask = _tensors(seed=5)
    truncated = torch.tensor([False, True, False, False, True])
    kept = mask & ~truncated[:, None]
    want = _trl_loss_grad(TRL_LOSS_TYPE[agg], "token", 0.2, 0.2, logp, old, adv, kept)
    got = _ours_loss_grad(logp, old, adv, kept, agg=agg, n_seqs=5, n_tokens=int(kept.sum()))
    assert got[0] == pytest.approx(want[0], rel=1e-12)
    assert torch.allclose(got[1], want[1], rtol=1e-10, atol=1e-15)
    assert float(got[1][truncated].abs().sum()) == 0.0


def test_dual_clip_by_hand():
    """verl's dual clip (no TRL equivalent): A = -1, rho = 5, c = 3: PPO's min(5 * -1,
    clip(5) * -1) = -5, bounded below by c * A = -3, so the token's loss is 3 (not 5) and its
    gradient 0; for A > 0 nothing changes. Two one-token sequences, N = 2."""
    logp = torch.tensor([[math.log(5.0)], [math.log(5.0)]], requires_grad=True)
    old = torch.zeros(2, 1)
    mask = torch.ones(2, 1, dtype=torch.bool)
    adv = torch.tensor([-1.0, 1.0])
    loss, st = clipped_surrogate(logp, old, adv, mask, clip_c=3.0)
    loss.backward()
    # (3 + -(min(5, 1.2) * 1)) / 2 = (3 - 1.2) / 2 = 0.9; both tokens' gradients 0 (bound, clip)
    assert float(loss.detach()) == pytest.approx(0.9)
    assert logp.grad.tolist() == [[0.0], [0.0]]
    assert st.dual_clipped == 1 and st.summary()["dual_clip_frac"] == 0.5
    # without the dual clip: (5 - 1.2) / 2 = 1.9, the negative token's gradient rho * -A / N
    plain, _ = clipped_surrogate(logp.detach(), old, adv, mask)
    assert float(plain) == pytest.approx(1.9)
    # rho = 2 < c: the bound is not reached; the result equals plain PPO
    lp2 = torch.tensor([[math.log(2.0)]])
    a, _ = clipped_surrogate(lp2, old[:1], adv[:1], mask[:1], clip_c=3.0)
    b, _ = clipped_surrogate(lp2, old[:1], adv[:1], mask[:1])
    assert float(a) == float(b) == pytest.approx(2.0)
    with pytest.raises(ValueError, match="> 1"):
        clipped_surrogate(lp2, old[:1], adv[:1], mask[:1], clip_c=0.5)


def test_overlong_penalty_equals_trl_and_hand():
    """DAPO's soft overlong punishment: TRL's get_soft_overlong_punishment at factor 1; by hand
    with verl's penalty factor: L_max 100, buffer 20, factor 0.5: 80 -> 0, 90 -> -0.25, 100 -> -0.5."""
    lengths = torch.tensor([[10, 80, 81, 90, 99, 100]])
    trl_fn = trl_rewards.get_soft_overlong_punishment(max_completion_len=100, soft_punish_cache=20)
    want = trl_fn([[1] * int(n) for n in lengths[0]])
    assert batch_overlong_penalty(lengths, 100, 20).tolist()[0] == pytest.approx(want, abs=1e-12)
    assert batch_overlong_penalty(torch.tensor([80, 90, 100]), 100, 20, 0.5).tolist() == [
        0.0,
        -0.25,
        -0.5,
    ]
    with pytest.raises(ValueError):
        batch_overlong_penalty(lengths, 100, 0)


def test_sample_std_equals_trl_population_by_hand():
    """std="sample" is TRL's (nanstd, Bessel's correction): advantages (r - mean) / (std + eps)
    equal TRL's with its eps; "population" divides by G. Rewards (1, 0, 0, 0): mean 1/4, sample
    std sqrt(3/4 / 3) = 0.5, population sqrt(3/16) = 0.4330."""
    r = torch.tensor([[1.0, 0.0, 0.0, 0.0], [1.0, 1.0, 0.0, 0.5]])
    c = r > 0.5
    trl_std = trl_utils.nanstd(r, dim=1, keepdim=True)
    want = (r - r.mean(1, keepdim=True)) / (trl_std + 1e-4)
    got, w = batch_advantages(r, c, lam=0.0, eps=1e-4, std="sample")
    assert torch.allclose(got, want, atol=1e-6) and w.tolist() == [1.0, 1.0]
    assert got[0].tolist() == pytest.approx(
        [0.75 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001, -0.25 / 0.5001]
    )
    pop, _ = batch_advantages(r, c, lam=0.0, eps=0.0, std="population")
    assert pop[0, 0].item() == pytest.approx(0.75 / math.sqrt(3 / 16))
    # MGPO weights do not depend on the std form
    _, w_s = batch_advantages(r, c, lam=1.0, std="sample")
    _, w_p = batch_advantages(r, c, lam=1.0, std="population")
    assert torch.equal(w_s, w_p)


@pytest.mark.parametrize(
    "rule,low,high",
    [
        ("token_tis", 0.0, 1.2),
        ("seq_tis", 0.0, 1.5),
        ("token_mask", 0.8, 1.25),
        ("seq_mask", 0.8, 1.5),
    ],
)
def test_correction_weights_enter_the_loss_as_in_trl(rule, low, high):
    """TRL computes its vllm_importance_sampling_mode ratios inline in its generation step (hand
    tests in test_correction.py check ours against the same rules); its loss then multiplies
    every token's loss by them ([N, T] per token, [N, 1] per sequence). Given the same weights,
    TRL's _compute_loss and ours (which computes them from the engine's logprobs) agree in
    loss and gradient."""
    logp, old, adv, mask = _tensors(seed=7)
    g = torch.Generator().manual_seed(8)
    engine = old + 0.3 * torch.randn(old.shape, generator=g, dtype=torch.float64)
    w, changed = correction_weights(rule, old, engine, mask.double(), low, high)
    assert 0 < float(changed.expand_as(mask)[mask].double().mean()) < 1  # the rule acts
    want = _trl_loss_grad("grpo", "token", 0.2, 0.2, logp, old, adv, mask, is_ratio=w)
    got = _ours_loss_grad(
        logp, old, adv, mask, engine_logp=engine, tis_cap=high, correction=rule, is_low=low
    )
    assert got[0] == pytest.approx(want[0], rel=1e-12)
    assert torch.allclose(got[1], want[1], rtol=1e-10, atol=1e-15)
