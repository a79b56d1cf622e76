"""Group advantages for GRPO / MGPO and the Long2Short reward shift (docs/PAPER.md, stages 2 and 3).

Over [B, G] tensors: B prompts q, G responses each, rewards r_i and binary verdicts c_i.
- `batch_accuracy`: p(q) = mean_i 1[c_i]  (the verdict, not `r_i == 1`: after a Long2Short shift
  a correct reward is no longer exactly 1); the one place p(q) is computed;
- `batch_max_entropy_deviation`: D_ME(p || 0.5) = p log(p/0.5) + (1-p) log((1-p)/0.5), with
  0 log 0 = 0 (natural log; 0 at p = 0.5, log 2 = 0.693 at p in {0, 1});
- `batch_advantages`: MGPO weight w(q) = exp(-lambda * D_ME) (lambda = 0 gives w = 1, i.e. plain
  GRPO) and A_i = w * (r_i - mean(r)) / (std(r) + eps); with `std_scale=False` the division is
  dropped (Dr. GRPO style). `std` picks the group std (`GROUP_STD`): "population" (divide by G,
  our default; with 0/1 rewards it is sqrt(p(1-p))) or "sample" (divide by G - 1, Bessel's
  correction: what TRL's GRPOTrainer and verl use, advantages sqrt((G-1)/G) times ours, e.g.
  x0.935 at G = 8). The paper writes std(r) without saying which. With
  `all_correct_std=False`, groups whose responses are ALL correct are centred but not divided
  (Long2Short: their only spread is the length shift, and dividing it by its own std would
  rescale every such group to unit size whatever lambda is; docs/PAPER.md, Stage 3);
- `batch_long2short`: r_i' = r_i + lambda * (s_i - s_bar) / max_{j in C} |s_j - s_bar| for i in
  the correct set C, s_i = 1 / L_i (a length of 0 counts as 1), s_bar the mean over C; incorrect
  responses keep r_i; no shift when |C| < 2 or all correct lengths are equal. The shift sums to
  zero over C;
- `batch_overlong_penalty` (DAPO's soft overlong punishment, not the paper): a reward term
  0 for L <= L_max - L_buf, -factor * (L - (L_max - L_buf)) / L_buf inside the last L_buf
  tokens (so -factor at the cap L_max), added to r_i before advantages; the verdict c_i and so
  p(q) are unchanged. At factor 1 it is TRL's `get_soft_overlong_punishment` (DAPO eq. 13);
  the factor is verl's `overlong_buffer.penalty_factor`;
- `mgpo_norm_advantages` (an ablation arm, not the paper): MGPO with weights rescaled to mean 1
  over the groups that carry gradient, so its step size matches GRPO's at the same LR.

One implementation each; tests/helpers/reference.py holds slow per-group loops written from the
paper, and the tests compare the two. Estimators are chosen by name from `ADVANTAGE_ESTIMATORS`
(STYLE.md 6).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

# ----------------------------------------------------------------------------- batched forms


def batch_accuracy(correct: torch.Tensor) -> torch.Tensor:
    """[B, G] bool -> [B] p(q)."""
    return correct.float().mean(dim=-1)


def batch_max_entropy_deviation(p: torch.Tensor) -> torch.Tensor:
    """[B] p -> [B] D_ME(p || 0.5) with 0 log 0 = 0 (xlogy is 0 where x is 0)."""
    p = p.double()
    half = torch.full_like(p, 0.5)
    return torch.xlogy(p, p / half) + torch.xlogy(1 - p, (1 - p) / half)


def batch_long2short(
    rewards: torch.Tensor, correct: torch.Tensor, lengths: torch.Tensor, lam: float = 0.2
) -> torch.Tensor:
    """[B, G] rewards, verdicts, lengths -> [B, G] shifted rewards (module docstring)."""
    r = rewards.double()
    c = correct.bool()
    n_c = c.sum(-1, keepdim=True)
    s = torch.where(c, 1.0 / lengths.double().clamp(min=1), torch.zeros_like(r))
    s_bar = s.sum(-1, keepdim=True) / n_c.clamp(min=1)
    dev = torch.where(c, s - s_bar, torch.zeros_like(r))
    denom = dev.abs().amax(-1, keepdim=True)
    # Relative tolerance: 1/L values of equal lengths are bit-identical, so this only guards
    # against summation rounding in s_bar.
    active = (n_c >= 2) & (denom > 1e-12 * s_bar.abs())
    shift = torch.where(active & c, lam * dev / denom.clamp(min=1e-300), torch.zeros_like(r))
    return (r + shift).to(rewards.dtype)


def batch_overlong_penalty(
    lengths: torch.Tensor, max_len: int, buffer: int, factor: float = 1.0
) -> torch.Tensor:
    """[B, G] response lengths -> [B, G] DAPO soft overlong penalty (<= 0; module docstring)."""
    if buffer <= 0 or buffer > max_len:
        raise ValueError(f"overlong buffer must be in [1, max_len={max_len}], got {buffer}")
    exceed = lengths.double() - (max_len - buffer)
    return (-factor * exceed / buffer).clamp(max=0.0)


# The group std of `batch_advantages`, by name (the RL config's `std` key).
GROUP_STD: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "population": lambda r: r.std(-1, unbiased=False, keepdim=True),
    "sample": lambda r: r.std(-1, unbiased=True, keepdim=True),
}


def batch_advantages(
    rewards: torch.Tensor,
    correct: torch.Tensor,
    lam: float = 0.0,
    eps: float = 1e-6,
    std_scale: bool = True,
    all_correct_std: bool = True,
    std: str = "population",
) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, G] rewards and verdicts -> ([B, G] advantages, [B] MGPO weights)."""
    if lam < 0:
        raise ValueError(f"lambda must be >= 0, got {lam}")
    group_std = GROUP_STD[std]
    r = rewards.double()
    w = torch.exp(-lam * batch_max_entropy_deviation(batch_accuracy(correct)))
    centred = r - r.mean(-1, keepdim=True)
    if std_scale:
        scale = group_std(r) + eps
        if not all_correct_std:
            all_correct = correct.bool().all(-1, keepdim=True)
            scale = torch.where(all_correct, torch.ones_like(scale), scale)
        centred = centred / scale
    return (w[:, None] * centred).float(), w.float()


def grpo_advantages(
    rewards: torch.Tensor, correct: torch.Tensor, lam: float = 0.0, **kw: float | bool | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """GRPO: every group weighs 1 (MGPO with lambda = 0; `lam` is ignored)."""
    return batch_advantages(rewards, correct, 0.0, **kw)


def mgpo_advantages(
    rewards: torch.Tensor, correct: torch.Tensor, lam: float, **kw: float | bool | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """MGPO: groups far from p = 0.5 are down-weighted by exp(-lambda * D_ME)."""
    return batch_advantages(rewards, correct, lam, **kw)


def mgpo_norm_advantages(
    rewards: torch.Tensor, correct: torch.Tensor, lam: float, **kw: float | bool | str
) -> tuple[torch.Tensor, torch.Tensor]:
    """MGPO with its weights rescaled to mean 1 over the batch's groups that carry gradient
    (some nonzero advantage). MGPO's weights are <= 1, so at the same LR its steps are smaller
    than GRPO's; this variant keeps the relative weighting (which groups count more) and GRPO's
    step size, separating the two effects. Not in the paper: an ablation arm. A batch with no
    active group is returned unchanged."""
    adv, w = batch_advantages(rewards, correct, lam, **kw)
    active = (adv != 0).any(-1)
    if not bool(active.any()):
        return adv, w
    scale = 1.0 / w[active].double().mean()
    return (adv.double() * scale).float(), (w.double() * scale).float()


AdvantageFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]
ADVANTAGE_ESTIMATORS: dict[str, AdvantageFn] = {
    "grpo": grpo_advantages,
    "mgpo": mgpo_advantages,
    "mgpo_norm": mgpo_norm_advantages,
}
