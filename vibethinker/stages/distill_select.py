"""Stage `distill`'s selection: per domain, the learning-potential band (algo/potential.py) or
the random baseline, the mix quotas, the funnel of where traces went, and the kept traces as
Problems for the student's SFT. The stage (stages/distill.py) holds the config and the run.
"""

from __future__ import annotations

import dataclasses
import math
import random
from typing import Any

from vibethinker.algo import potential
from vibethinker.log import get_logger
from vibethinker.reports.distill import FUNNEL_COLS
from vibethinker.stages.distill_config import DistillConfig
from vibethinker.types import Candidate, Problem

log = get_logger("stages.distill")  # the stage's logger: the same records as before


def select(cfg: DistillConfig, cands: list[Candidate]) -> tuple[dict[str, list[Candidate]], dict]:
    """Per domain: drop traces over max_len (SFT would drop them), LP selection, the mix quota,
    then (select=random) the random draw with the same count per bucket. Returns (the pool of
    each domain, its Selection, whose indices point into the pool)."""
    domains = sorted({c.problem.domain for c in cands})
    pools = {
        d: [c for c in cands if c.problem.domain == d and c.length <= cfg.max_len] for d in domains
    }

    def lp(d: str, quota: int | None) -> potential.Selection:
        return potential.select_lp(
            [c.tokens for c in pools[d]],
            [c.s_lp for c in pools[d]],
            cfg.n_buckets,
            cfg.min_tokens,
            cfg.outlier_pct,
            cfg.band_lo_pct,
            cfg.band_hi_pct,
            quota,
        )

    first = {d: lp(d, None) for d in domains}
    quotas = potential.domain_quotas(
        {d: len(first[d].kept) for d in domains}, dict(cfg.shares), dict(cfg.counts)
    )
    sels = {d: first[d] if quotas[d] is None else lp(d, quotas[d]) for d in domains}
    if cfg.select == "random":
        rng = random.Random(cfg.seed)
        sels = {d: potential.select_random(sels[d], cfg.n_buckets, rng) for d in domains}
    return pools, sels


def check_nonempty(
    cfg: DistillConfig, kept: dict[str, list[Candidate]], funnel: dict | None = None
) -> list[str]:
    """Warnings (or an error, on_empty_domain=error) for domains whose teachers keep nothing,
    with that domain's funnel (where the traces went)."""
    msgs = []
    for d in sorted({t["domain"] for t in cfg.teachers}):
        if not kept.get(d):
            names = ", ".join(t["model"] for t in cfg.teachers if t["domain"] == d)
            row = (funnel or {}).get(d, {})
            where = ", ".join(f"{k.replace('_', ' ')} {row[k]}" for k in FUNNEL_COLS if k in row)
            msgs.append(
                f"distill: domain {d} (teacher {names}) keeps no trace: no correct "
                f"response survived sampling, verification and selection "
                f"({where or 'see funnel.json'})"
            )
    if msgs and (cfg.on_empty_domain == "error" or not any(kept.values())):
        raise ValueError(
            "; ".join(msgs)
            + ("" if any(kept.values()) else "; nothing to train on")
            + " (on_empty_domain=warn trains on the other domains)"
        )
    for m in msgs:
        log.warning(m)
    return msgs


def funnel_table(sampling: dict, sels: dict, overlong: dict) -> dict[str, dict[str, Any]]:
    """Per domain: prompts, sampled, truncated, correct, duplicates, over max_len, then the
    selection's funnel (dropped short, dropped outlier, out of band, over quota, kept), with the
    bucket edges and the kept S_LP band of each bucket."""
    table = {}
    for d in sorted(set(sampling) | set(sels)):
        row = dict(sampling.get(d, {}))
        row["over_max_len"] = overlong.get(d, 0)
        if d in sels:
            sel = sels[d]
            row.update({k: v for k, v in sel.counts.items() if k != "candidates"})
            row["bucket_edges"] = [round(e, 2) for e in sel.edges]
            row["outlier_cut"] = None if math.isinf(sel.outlier_cut) else round(sel.outlier_cut, 4)
            row["bands"] = [
                None if math.isnan(lo) else [round(lo, 4), round(hi, 4)] for lo, hi in sel.bands
            ]
        else:
            row.update({k: 0 for k in potential.FUNNEL if k != "candidates"})
        table[d] = row
    return table


def mean_or_none(xs: list[float]) -> float | None:
    return round(sum(xs) / len(xs), 4) if xs else None


def to_problems(kept: dict[str, list[Candidate]]) -> list[Problem]:
    """One Problem per kept trace: the source problem with traces=[trace], id `<id>/t<k>`."""
    out = []
    for d in sorted(kept):
        for k, c in enumerate(kept[d]):
            p = c.problem
            meta = {
                **p.meta,
                "problem_id": p.id,
                "teacher": c.teacher,
                "s_lp": c.s_lp,
                "bucket": c.bucket,
                "tokens": c.tokens,
            }
            out.append(
                dataclasses.replace(
                    p, id=f"{p.id}/t{k}", traces=[c.text], wrong_traces=None, claims=None, meta=meta
                )
            )
    return out
