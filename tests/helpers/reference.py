"""Slow reference forms of the algorithm's formulas, for tests only: plain Python over lists, one
group at a time, written from docs/PAPER.md rather than from the package's tensor code. The package
keeps one (vectorised) implementation; tests compare it with these on many inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence


def group_accuracy(correct: Sequence[bool]) -> float:
    """p(q): the fraction of correct responses (the verdicts, not reward == 1)."""
    return sum(bool(c) for c in correct) / len(correct)


def max_entropy_deviation(p: float) -> float:
    """D_ME(p || 0.5) = p log(p / 0.5) + (1 - p) log((1 - p) / 0.5), 0 log 0 = 0, in nats."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p must be in [0, 1], got {p}")
    return sum(x * math.log(x / 0.5) for x in (p, 1.0 - p) if x > 0)


def mgpo_weight(p: float, lam: float) -> float:
    """w(q) = exp(-lambda * D_ME(p || 0.5))."""
    return math.exp(-lam * max_entropy_deviation(p))


def group_advantages(
    rewards: Sequence[float], weight: float = 1.0, eps: float = 1e-6, std_scale: bool = True
) -> list[float]:
    """A_i = weight * (r_i - mean r) / (population std r + eps); no division without std_scale."""
    g = len(rewards)
    mean = sum(rewards) / g
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / g)
    return [weight * (r - mean) / ((std + eps) if std_scale else 1.0) for r in rewards]


def long2short_rewards(
    rewards: Sequence[float], correct: Sequence[bool], lengths: Sequence[int], lam: float = 0.2
) -> list[float]:
    """r_i' = r_i + lam (s_i - s_bar) / max_C |s_j - s_bar| over the correct set C, s_i = 1/L_i
    (a length of 0 counts as 1); unchanged when |C| < 2 or all correct lengths are equal."""
    out = [float(r) for r in rewards]
    idx = [i for i, c in enumerate(correct) if c]
    if len(idx) < 2 or len({max(lengths[i], 1) for i in idx}) == 1:
        return out
    s = {i: 1.0 / max(lengths[i], 1) for i in idx}
    s_bar = sum(s.values()) / len(idx)
    denom = max(abs(v - s_bar) for v in s.values())
    for i in idx:
        out[i] += lam * (s[i] - s_bar) / denom
    return out


def advantages(
    rewards: Sequence[Sequence[float]],
    correct: Sequence[Sequence[bool]],
    lam: float,
    eps: float = 1e-6,
    std_scale: bool = True,
) -> tuple[list[list[float]], list[float]]:
    """Per-group advantages and MGPO weights of a batch of groups, one group at a time."""
    adv, w = [], []
    for r, c in zip(rewards, correct):
        wt = mgpo_weight(group_accuracy(c), lam)
        w.append(wt)
        adv.append(group_advantages(r, wt, eps, std_scale))
    return adv, w


def surrogate_loss(logp, old, adv, mask, n_seqs=None, eps=0.2, tis=None, ref=None, kl_coef=0.0):
    """-1/N sum_i 1/|y_i| sum_t [min(rho A_i, clip(rho, 1-eps, 1+eps) A_i) w_it - kl_coef k3_it],
    a loop over rows and tokens (tensors in, a float out); w = TIS weights (1 without),
    k3 = e^d - d - 1 with d = ref - logp; N = n_seqs or the rows; all-masked rows add 0."""
    total = 0.0
    for i in range(len(adv)):
        toks = [t for t in range(mask.shape[1]) if mask[i, t]]
        s = 0.0
        for t in toks:
            rho = math.exp(float(logp[i, t] - old[i, t]))
            a = float(adv[i])
            w = 1.0 if tis is None else float(tis[i, t])
            s += min(rho * a, min(max(rho, 1 - eps), 1 + eps) * a) * w
            if ref is not None:
                d = float(ref[i, t] - logp[i, t])
                s -= kl_coef * (math.exp(d) - d - 1)
        total += -s / max(len(toks), 1)
    return total / (n_seqs or len(adv))
