"""CLR's numbers: CLR@k vs maj@k vs avg@n per token spent (stage `clr`; reports/clr.py
writes them out).

Costs are tokens per problem. CLR@k spends, on its k trajectories, the sampled tokens plus the
extraction and verification tokens (replies, and their prompts when the sampler can count them:
a judge prompt contains the whole trajectory, so it is a real cost). maj@k spends the k sampled
tokens; avg@n the tokens of one sample (its accuracy does not grow with more samples). The
table also gives CLR's generated tokens alone (judge prompts are prefill, cheaper than decoding
and cacheable), so a reader can price the two differently.

Equal budgets: for each CLR@k, maj gets the largest k' whose mean cost fits CLR@k's mean cost
(capped at the pool: R x K samples, or `maj_pool` when the stage drew more for the baseline). Repeat r of CLR@k uses samples [rK, rK + k); maj@k' uses
the cyclic window of k' samples starting at rK (for k' <= K the same samples as CLR: a paired
comparison). Both select with the same tie rule (algo/clr.py).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from typing import Any

from vibethinker.algo.clr import clr_select, majority_select


def powers(top: int) -> list[int]:
    return sorted({2**i for i in range(top.bit_length()) if 2**i < top} | {top})


def _pick(subset: list, select) -> tuple[bool, Any]:
    sel = select([t.cluster for t in subset], [t.r for t in subset])
    ok = sel.index is not None and subset[sel.index].correct
    return ok, sel


def _clr(subset):
    return _pick(subset, clr_select)


def _maj(subset):
    return _pick(subset, lambda c, _r: majority_select(c))


def run_method(pools: Sequence[list], starts_k: list[tuple[int, int]], method, cost_fn):
    """Mean accuracy and cost per problem over repeats; a repeat = (start, k) window of each pool.

    Returns (mean accuracy, spread (std over repeats), mean cost per problem, tie count,
    abstain count)."""
    accs, costs, ties, abstains = [], [], 0, 0
    for start, k in starts_k:
        ok_sum, cost_sum = 0.0, 0.0
        for pool in pools:
            if not pool:  # the sampler returned nothing for this problem: wrong, no cost
                continue
            subset = [pool[(start + j) % len(pool)] for j in range(k)]
            ok, sel = method(subset)
            ok_sum += ok
            cost_sum += sum(cost_fn(t) for t in subset)
            ties += int(sel.tie_broken)
            abstains += int(sel.winner is None)
        accs.append(ok_sum / len(pools))
        costs.append(cost_sum / len(pools))
    spread = statistics.pstdev(accs) if len(accs) > 1 else 0.0
    return statistics.mean(accs), spread, statistics.mean(costs), ties, abstains


def _tokens(t) -> int:
    return t.tokens


def _cost(t) -> int:
    return t.cost


def _generated(t) -> int:
    """CLR's cost without the judge prompts (prefill is cheaper than decoding)."""
    return t.tokens + t.extract_tokens + t.verify_tokens


def compare(pools: list[list], k: int, repeats: int) -> dict[str, Any]:
    """CLR@k and maj@k (same samples) for k = 1, 2, 4, ..., K; maj at CLR's budget; avg@n."""
    size = max((len(p) for p in pools), default=0)
    flat = [t for p in pools for t in p]
    one = statistics.mean(t.tokens for t in flat) if flat else 0.0
    avg = {
        "accuracy": statistics.mean(float(t.correct) for t in flat) if flat else 0.0,
        "tokens": one,
    }
    rows = []
    for kk in powers(k):
        starts = [(r * k, kk) for r in range(repeats)]
        c_acc, c_sd, c_cost, c_ties, c_abs = run_method(pools, starts, _clr, _cost)
        m_acc, m_sd, m_cost, _, _ = run_method(pools, starts, _maj, _tokens)
        gen_cost = run_method(pools, starts, _clr, _generated)[2]
        budget_k = max(1, min(size, int(c_cost // one))) if one > 0 else size
        b_starts = [(r * k, budget_k) for r in range(repeats)]
        b_acc, b_sd, b_cost, _, _ = run_method(pools, b_starts, _maj, _tokens)
        rows.append(
            {
                "k": kk,
                "clr": c_acc,
                "clr_spread": c_sd,
                "clr_tokens": c_cost,
                "clr_generated_tokens": gen_cost,
                "clr_ties": c_ties,
                "clr_abstains": c_abs,
                "maj": m_acc,
                "maj_spread": m_sd,
                "maj_tokens": m_cost,
                "maj_budget_k": budget_k,
                "maj_budget_capped": budget_k == size and c_cost > size * one,
                "maj_at_budget": b_acc,
                "maj_at_budget_spread": b_sd,
                "maj_at_budget_tokens": b_cost,
                "avg": avg["accuracy"],
            }
        )
    maj_curve = []
    for kk in powers(size):
        starts = [(r * k, kk) for r in range(repeats)]
        acc, sd, cost, _, _ = run_method(pools, starts, _maj, _tokens)
        maj_curve.append({"k": kk, "accuracy": acc, "spread": sd, "tokens": cost})
    return {"rows": rows, "maj_curve": maj_curve, "avg": avg}


def per_domain(problems, pools, k: int, repeats: int) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for dom in sorted({p.domain for p in problems}):
        sub = [pool for p, pool in zip(problems, pools) if p.domain == dom]
        starts = [(r * k, k) for r in range(repeats)]
        out[dom] = {
            "problems": len(sub),
            f"clr@{k}": run_method(sub, starts, _clr, _cost)[0],
            f"maj@{k}": run_method(sub, starts, _maj, _tokens)[0],
            "avg": statistics.mean([float(t.correct) for pool in sub for t in pool] or [0.0]),
        }
    return out


def token_totals(trajs, clr_pool: int) -> dict[str, int]:
    """Totals per phase over CLR's trajectories; the majority baseline's extra samples apart."""
    mine = [t for t in trajs if t.sample < clr_pool]
    keys = ("tokens", "extract_tokens", "extract_prompt_tokens", "verify_tokens")
    out = {k: sum(getattr(t, k) for t in mine) for k in keys}
    out["verify_prompt_tokens"] = sum(t.verify_prompt_tokens for t in mine)
    out["all"] = sum(t.cost for t in mine)
    out["baseline_only_samples"] = sum(t.tokens for t in trajs if t.sample >= clr_pool)
    return out


def sample_row(problem, t, k: int) -> dict[str, Any]:
    c = t.claims
    return {
        "id": problem.id,
        "domain": problem.domain,
        "sample": t.sample,
        "repeat": t.sample // k,
        "response": t.text,
        "tokens": t.tokens,
        "correct": t.correct,
        "reason": t.reason,
        "status": t.status,
        "answer": t.answer,
        "cluster": t.cluster,
        "claims": c.claims if c else None,
        "extracted_answer": c.answer if c else None,
        "malformed_list": c.malformed if c else None,
        "verdicts": t.verdicts,
        "r": t.r,
        "extract_tokens": t.extract_tokens,
        "extract_prompt_tokens": t.extract_prompt_tokens,
        "verify_tokens": t.verify_tokens,
        "verify_prompt_tokens": t.verify_prompt_tokens,
    }


def judge_quality(summary: dict[str, Any]) -> dict[str, float]:
    """How well the model did the two judge tasks: extraction parse rate (a numbered list with
    at least one claim and a final-answer line), how often the extracted answer is the
    trajectory's own, and the held-out claim-verification accuracy (stage `claim_eval`)."""
    c = summary["counters"]
    n = c.get("extractions", 0)
    out: dict[str, float] = {}
    if n:
        out["extraction_parse_rate"] = round(c.get("extractions_parsed", 0) / n, 4)
        out["extracted_answer_agreement"] = round(c.get("extracted_answer_agrees", 0) / n, 4)
    ce = summary.get("claim_eval") or {}
    if ce.get("claims"):
        out["claim_verification_accuracy"] = ce["accuracy"]["all"]
    return out


def summarize(problems, trajs, k: int, repeats: int, counters, meta: dict) -> dict[str, Any]:
    """summary.json's content: `meta`, the comparison, per domain, token totals, counters and
    judge quality. Adds the top k's abstain and tie counts to `counters`."""
    pools: list[list] = [[] for _ in problems]
    for t in trajs:
        pools[t.problem].append(t)
    comparison = compare(pools, k, repeats)
    top = comparison["rows"][-1] if comparison["rows"] else {}
    counters["clr_abstained"] = top.get("clr_abstains", 0)
    counters["clr_ties_broken"] = top.get("clr_ties", 0)
    summary = {
        **meta,
        "problems": len(problems),
        "comparison": comparison,
        "domains": per_domain(problems, pools, k, repeats),
        "tokens": token_totals(trajs, k * repeats),
        "counters": dict(counters),
    }
    summary["judge"] = judge_quality(summary)
    return summary
