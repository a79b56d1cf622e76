"""What the RL loop measures: per-phase wall time, each step's metrics row, held-out evaluation."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from vibethinker.algo.advantages import batch_accuracy
from vibethinker.engines import SamplingParams
from vibethinker.evaluate import evaluate
from vibethinker.log import get_logger
from vibethinker.train.rollout import (
    Scored,
)
from vibethinker.types import Group, Problem

log = get_logger("train.rl")


class MismatchError(RuntimeError):
    """The engine's logprobs drifted past `mismatch_limit` with on_mismatch=stop."""


def check_mismatch(u: dict[str, float], limit: float, action: str, step: int) -> int:
    """1 when the step's token_mult_prob_error passed `limit` (warned, or raised with
    action "stop"), else 0; limit 0 is off."""
    err = u.get("token_mult_prob_error", 1.0)
    if not limit or err <= limit:
        return 0
    msg = (
        f"rl step {step}: engine-vs-trainer mismatch token_mult_prob_error {err:.4f} > "
        f"mismatch_limit {limit} (engine_kl {u.get('engine_kl', 0.0):.3g}, mean |delta logp| "
        f"{u.get('engine_logp_absdiff', 0.0):.3g}, largest ratio "
        f"{u.get('engine_ratio_max', 0.0):.3g}, share past the correction's bounds "
        f"{u.get('tis_capped_frac', 0.0):.3g}): the rollouts are not the trainer's policy"
    )
    if action == "stop":
        raise MismatchError(msg + " (on_mismatch=stop; raise mismatch_limit or fix the engine)")
    log.warning(msg)
    return 1


class Timer:
    """Wall time per named phase for the current step."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.t[name] = self.t.get(name, 0.0) + time.perf_counter() - t0


def step_metrics(groups: list[Group], sc: Scored, weights: torch.Tensor) -> dict[str, float]:
    """Reward, accuracy, MGPO weight, degenerate-group fractions, lengths, truncation."""
    p = batch_accuracy(sc.correct)
    lens = sc.lengths.float()
    c = sc.correct

    def mean_where(mask: torch.Tensor) -> float | None:
        return round(float(lens[mask].mean()), 2) if mask.any() else None

    return {
        "reward": float(sc.rewards.mean()),
        "accuracy": float(c.float().mean()),
        "mgpo_weight": float(weights.mean()),
        "frac_p0": float((p == 0).float().mean()),
        "frac_p1": float((p == 1).float().mean()),
        "frac_p01": float(((p == 0) | (p == 1)).float().mean()),
        "len_correct": mean_where(c),
        "len_incorrect": mean_where(~c),
        "trunc_rate": float(sc.truncated.float().mean()),
        "gen_tokens": int(lens.sum()),
        "verifier_errors": int(sc.verifier_error.sum()),  # no verdict after a retry: scored 0
        "verifier_retried": int(sc.verifier_retried.sum()),  # failed once, run again
    }


def evaluate_policy(
    sampler: Any,
    problems: Sequence[Problem],
    n: int,
    params: SamplingParams,
    prompt_fn: Callable[[Problem], str],
    workers: int,
) -> dict[str, float]:
    """Held-out avg@n and the mean length of correct / all responses (eval harness)."""
    res = evaluate(sampler, problems, n, [1], params, workers=workers, prompt_fn=prompt_fn)
    comps = [(c, s) for g in res.groups for c, s in zip(g.completions, g.scores)]
    lc = [len(c.token_ids) for c, s in comps if s.correct]
    return {
        "accuracy": res.accuracy,
        "stderr": _stderr([sum(s.correct for s in g.scores) / len(g.scores) for g in res.groups]),
        "len_correct": sum(lc) / len(lc) if lc else None,
        "len_all": sum(len(c.token_ids) for c, _ in comps) / max(len(comps), 1),
        "trunc_rate": sum(c.truncated for c, _ in comps) / max(len(comps), 1),
        "seconds": res.seconds,
    }


def _stderr(xs: list[float]) -> float | None:
    """Standard error of the mean over problems (the held-out panels' error bars)."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) ** 0.5
