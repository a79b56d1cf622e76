"""Training-inference mismatch: the rollout engine's sampled-token logprobs against the trainer's
pi_old, as correction weights and as measurements. Pure functions over [N, T] tensors.

Correction weights (the RL config's `is_correction`), each from the per-token log ratio
d_it = log pi_old(y_it) - log pi_engine(y_it) over the response tokens, detached; `high` is the
cap C (`tis_cap`), `low` the lower bound (`is_low`, 0: none):
- "token_tis" (our default, Yao et al. 2025): w_it = min(exp(d_it), C) (and >= low if set);
  TRL vllm_importance_sampling_mode="token_truncate";
- "seq_tis": one weight per sequence, the product of its token ratios, w_i = min(exp(sum_t
  d_it), C); TRL "sequence_truncate", verl rollout_is="sequence";
- "geo_tis": the geometric mean, w_i = min(exp(mean_t d_it), C) (length-independent; verl's
  geometric level);
- "token_mask" / "seq_mask" / "geo_mask" (rejection): the same ratios, kept where they lie in
  [low, high] and set to 0 outside (TRL "token_mask" / "sequence_mask": a masked importance
  weight, not a 0/1 mask).
A sequence-level weight is [N, 1] and multiplies every token of its sequence.

Measurements per token (summed; the caller divides by tokens), NeMo-RL's and TRL's names in
brackets: k3 KL(engine || trainer) = exp(d) - d - 1 (NeMo-RL gen_kl_error), |d| (TRL
sampling/sampling_logp_difference), exp(|d|) whose mean is NeMo-RL's token_mult_prob_error (its
CI gate: median over steps < 1.1; 1.0 is no mismatch), and the largest exp(d).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch


def _bounded(log_w: torch.Tensor, low: float, high: float, mask_out: bool):
    """(weights, changed) from log ratios: truncated into [low, high], or (mask_out) zeroed
    outside it. low 0 means no lower bound; high 0 means no upper bound."""
    lo = math.log(low) if low > 0 else -math.inf
    hi = math.log(high) if high > 0 else math.inf
    outside = (log_w < lo) | (log_w > hi)
    if mask_out:
        return torch.where(outside, torch.zeros_like(log_w), torch.exp(log_w)), outside
    return torch.exp(log_w.clamp(min=lo, max=hi)), outside


def token_log_ratio(old: torch.Tensor, engine: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """[N, T] d_it = log pi_old - log pi_engine (0 off the mask)."""
    return (old.detach() - engine.detach()) * m


def seq_log_ratio(old: torch.Tensor, engine: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """[N, 1] sum_t d_it: the log of the sequence's product of ratios."""
    return token_log_ratio(old, engine, m).sum(-1, keepdim=True)


def geo_log_ratio(old: torch.Tensor, engine: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """[N, 1] mean_t d_it: the log of the geometric mean of the sequence's ratios."""
    return seq_log_ratio(old, engine, m) / m.sum(-1, keepdim=True).clamp(min=1)


def token_tis(old, engine, m, low, high):
    """Today's TIS: min(pi_old / pi_engine, cap) per token (and >= low when low > 0)."""
    w = torch.exp(old.detach() - engine.detach())
    capped = w >= high
    w = w.clamp(max=high)
    if low > 0:
        capped = capped | (w < low)
        w = w.clamp(min=low)
    return w, capped


def _rule(level: Callable, mask_out: bool) -> Callable:
    def weights(old, engine, m, low, high):
        return _bounded(level(old, engine, m), low, high, mask_out)

    return weights


CorrectionFn = Callable[..., tuple[torch.Tensor, torch.Tensor]]
IS_CORRECTIONS: dict[str, CorrectionFn] = {
    "token_tis": token_tis,
    "seq_tis": _rule(seq_log_ratio, mask_out=False),
    "geo_tis": _rule(geo_log_ratio, mask_out=False),
    "token_mask": _rule(token_log_ratio, mask_out=True),
    "seq_mask": _rule(seq_log_ratio, mask_out=True),
    "geo_mask": _rule(geo_log_ratio, mask_out=True),
}


def correction_weights(
    name: str, old: torch.Tensor, engine: torch.Tensor, m: torch.Tensor, low: float, high: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """(detached weights [N, T] or [N, 1], where the rule changed them) of `IS_CORRECTIONS`."""
    if high <= 0:
        raise ValueError(f"TIS cap must be > 0, got {high}")
    if low < 0 or low >= high:
        raise ValueError(f"correction bounds need 0 <= low < high, got [{low}, {high}]")
    w, changed = IS_CORRECTIONS[name](old, engine, m, low, high)
    return w.detach(), changed


@torch.no_grad()
def mismatch_sums(old: torch.Tensor, engine: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
    """Token sums of the mismatch measures over the mask (module docstring); `ratio_max` a max."""
    sel = mask.bool()
    d = (old.detach() - engine.detach())[sel]
    return {
        "kl": float((torch.exp(d) - d - 1).sum()),
        "absdiff": float(d.abs().sum()),
        "mult_err": float(torch.exp(d.abs()).sum()),
        "ratio_max": float(torch.exp(d).max()) if d.numel() else 0.0,
    }
