"""A step's groups: draw prompts, roll out, verify; with `dynamic_sampling` > 0, refill the step
with groups that carry signal (DAPO's dynamic sampling, verl's filter_groups, open-instruct's
active sampling). Not in the paper, whose only filter is the stage-start one: as the policy
improves, more of a step's groups turn all-correct (or all-wrong) and carry no gradient, so the
step's effective batch shrinks. `frac_zero_signal` (share of the first draw's groups whose
shaped rewards are all equal) measures that staleness every step, with or without refill.

Refill: more prompts, up to prompts_per_step at a time, from a separate seeded stream per
round (`draw_prompts` with a round-specific seed, so steps and resumes are reproducible), each
rolled out and verified like the first draw; only groups with signal are kept, until the step
holds prompts_per_step of them or `dynamic_sampling` extra prompts were drawn. The step trains
on the groups with signal it holds: at most prompts_per_step, the first in draw order (round,
then position; so N processes keep the groups one process would). When none has signal it keeps
the first draw, whose update is then empty; a process left without a group (N processes, all
the first ones elsewhere) keeps one zero-signal group of its first draw (it counts in 1/N).
Extra prompts and rollouts are counted in the step's metrics (dyn_extra_prompts,
dyn_extra_rollouts, dyn_groups).
"""

from __future__ import annotations

from dataclasses import fields
from typing import Any

import torch

from vibethinker.train import dist
from vibethinker.train.rl_update import has_signal
from vibethinker.train.rollout import Scored, draw_prompts, rollout, score_groups
from vibethinker.types import Group


def draw_groups(lp: Any, step: int, timer: Any, n: int, rnd: int = 0) -> tuple[list, Scored]:
    """Round `rnd` of step `step`: `n` prompts (round 0: the step's own, as always), this
    process's share rolled out and verified."""
    opts = lp.opts
    seed = opts.seed if rnd == 0 else opts.seed + 1_000_033 * rnd
    idx = draw_prompts(len(lp.problems), step, n, seed)
    # N processes: each samples whole groups of its share of the step's prompts (its own seed)
    batch_problems = [lp.problems[i] for i in dist.shard(idx)]
    params = lp.sampling(opts.seed * 1_000_003 + step + 7_919 * dist.rank() + 104_729 * rnd)
    with timer("generate"):
        groups = rollout(lp.sampler, batch_problems, lp.prompt_fn, opts.group_size, params)
    with timer("verify"):
        sc = score_groups(groups, lp.verify, opts.truncated_reward)
    return groups, sc


def collect_groups(lp: Any, step: int, timer: Any) -> tuple[list[Group], Scored, dict[str, float]]:
    """This process's groups of the step, their scores, and the sampling metrics (module
    docstring)."""
    opts = lp.opts
    asked = opts.prompts_per_step
    groups, sc = draw_groups(lp, step, timer, asked)
    sig = has_signal(sc, opts)
    n_sig, n_all = dist.all_sum([int(sig.sum()), sig.numel()])
    metrics = {"frac_zero_signal": round(1.0 - n_sig / max(n_all, 1), 6)}
    if not opts.dynamic_sampling:
        return groups, sc, metrics
    kept_g, kept_s, keys = [], [], []  # keys: (round, position in the round's draw)
    extra, rnd, g_r, sc_r, s_r = 0, 0, groups, sc, sig
    while True:
        kept_g += [g for g, s in zip(g_r, s_r) if s]
        kept_s.append(_rows(sc_r, s_r))
        keys += [(rnd, j * dist.world() + dist.rank()) for j, s in enumerate(s_r.tolist()) if s]
        if n_sig >= asked or extra >= opts.dynamic_sampling:
            break
        n = min(asked, opts.dynamic_sampling - extra)
        rnd, extra = rnd + 1, extra + n
        g_r, sc_r = draw_groups(lp, step, timer, n, rnd)
        s_r = has_signal(sc_r, opts)
        n_sig += dist.all_sum([int(s_r.sum())])[0]
    metrics.update(
        dyn_extra_prompts=extra, dyn_extra_rollouts=extra * opts.group_size, dyn_groups=0
    )
    if n_sig == 0:  # nothing carries signal: keep the first draw (its update is empty)
        return groups, sc, metrics
    keep = _first_in_draw_order(keys, asked)
    metrics["dyn_groups"] = int(min(n_sig, asked))
    if not keep.any():  # N processes, none of the first `asked` here: one zero-signal group
        return groups[:1], _rows(sc, torch.arange(1)), metrics
    sc_kept = Scored(*(torch.cat([getattr(p, f.name) for p in kept_s]) for f in fields(Scored)))
    return [g for g, k in zip(kept_g, keep) if k], _rows(sc_kept, keep), metrics


def _first_in_draw_order(keys: list[tuple[int, int]], asked: int) -> torch.Tensor:
    """[len(keys)] True for this process's signal groups among the first `asked` of ALL
    processes' in draw order (round, then position), so that N processes keep the groups one
    process would."""
    everyone = sorted(k for ks in dist.all_gather_objects(keys) for k in ks)
    first = set(everyone[:asked])
    return torch.tensor([k in first for k in keys], dtype=torch.bool)


def _rows(sc: Scored, keep: torch.Tensor) -> Scored:
    return Scored(*(getattr(sc, f.name)[keep] for f in fields(Scored)))
