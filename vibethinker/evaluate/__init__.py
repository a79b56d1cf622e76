"""Evaluation harness: sample n responses per problem, verify, and measure (docs/PAPER.md protocol).

`evaluate(sampler, problems, n, ks, params, workers) -> EvalResult` is the one entry point, used by
the `eval` stage and by other stages (probing, RL evaluation, reports). `reports.eval.write_outputs`
writes the per-sample JSONL, summary.json, summary.md and passk.png of a result.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from vibethinker import ledger, verifiers
from vibethinker.engines import Sampler, SamplingParams
from vibethinker.evaluate.metrics import aggregate, answer_key, group_stats, n_tokens, passk_curve
from vibethinker.log import get_logger, progress
from vibethinker.prompts.paper import PROMPT_STYLES, paper_prompt
from vibethinker.types import Group, Problem

log = get_logger("evaluate")


@dataclass
class EvalResult:
    groups: list[Group]  # [problems], each with n completions and their scores
    metrics: dict[str, dict[str, Any]]  # slice ("all", "math", "math/algebra") -> metrics
    stats: list[dict[str, Any]]  # [problems] per-problem numbers (n, correct, pass, maj, ...)
    n: int  # the largest n (samples per problem; see n_by_domain)
    ks: list[int]
    params: SamplingParams
    prompts: list[str] = field(default_factory=list)  # [problems] the user turns sent
    seconds: float = 0.0
    n_by_domain: dict[str, int] = field(default_factory=dict)  # domain -> samples per problem

    @property
    def accuracy(self) -> float:
        """avg@n over all problems (the paper's Pass@1)."""
        return self.metrics.get("all", {}).get("avg@n", 0.0)

    def curves(self) -> dict[str, dict[int, float]]:
        return {name: passk_curve(self.groups, name) for name in self.metrics if "/" not in name}

    def sample_rows(self) -> list[dict[str, Any]]:
        """One row per sample: problem id, domain, sample index, text, score, reason, tokens."""
        rows = []
        for g, prompt in zip(self.groups, self.prompts or [""] * len(self.groups)):
            p = g.problem
            for j, (c, s) in enumerate(zip(g.completions, g.scores)):
                rows.append(
                    {
                        "id": p.id,
                        "domain": p.domain,
                        "subdomain": p.subdomain,
                        "sample": j,
                        "prompt": prompt if j == 0 else None,
                        "response": c.text,
                        "score": s.value,
                        "correct": s.correct,
                        "reason": s.reason,
                        "answer": answer_key(p, c.text),
                        "gold": p.answer,
                        "tokens": n_tokens(c),
                        "finish_reason": c.finish_reason,
                        "partial_score": s.value,
                        **({"detail": s.detail} if s.detail else {}),  # eval-only (types.Score)
                    }
                )
        return rows

    def summary(self, **meta: Any) -> dict[str, Any]:
        return {
            **meta,
            "n": self.n,
            "n_by_domain": self.n_by_domain,
            "k": self.ks,
            "params": asdict(self.params),
            "seconds": self.seconds,
            "metrics": self.metrics,
            "passk_curves": self.curves(),
        }


def samples_per_problem(problems: Sequence[Problem], n: int | Mapping[str, int]) -> list[int]:
    """n of each problem: one int for all, or a map keyed by a problem's `meta.source` (its
    benchmark) or its domain (e.g. the paper's profile: math 64, imo-answerbench 16, stem 16,
    code 8); the source's entry first, then the domain's, then "default", else 8."""
    if isinstance(n, int):
        return [n] * len(problems)
    out = []
    for p in problems:
        src = (p.meta or {}).get("source")
        out.append(int(n[src] if src in n else n.get(p.domain, n.get("default", 8))))
    return out


def evaluate(
    sampler: Sampler,
    problems: Sequence[Problem],
    n: int | Mapping[str, int] = 8,
    ks: Sequence[int] = (1, 4, 8),
    params: SamplingParams | None = None,
    workers: int = 2,
    prompt_fn: Callable[[Problem], str] = paper_prompt,
    equivalent: Callable[[str, str], bool] | None = None,
    chunk: int = 64,
    verify_fn: Callable[..., list] | None = None,
) -> EvalResult:
    """Sample n responses per problem, verify them, and compute the metrics.

    `n` is one count or a domain -> count map (`samples_per_problem`). `chunk` problems are sent
    to the sampler per call (the engine batches inside a call); ks larger than every n are
    dropped with a warning (a k larger than a domain's n is left out of that domain). `equivalent` optionally merges wrong answers for
    maj@k beyond normalised-string equality (metrics.py). `verify_fn` replaces `verify_batch`
    (same signature), e.g. with the math judge as a second opinion (verifiers/math_judge.py).
    """
    params = params or SamplingParams()
    ns = samples_per_problem(problems, n)
    n_max = max(ns, default=n if isinstance(n, int) else 0)
    if any(x < 1 for x in ns):
        raise ValueError(f"n must be >= 1, got {n}")
    ks = sorted({int(k) for k in ks})
    if any(k > n_max for k in ks):
        log.warning("dropping k > n=%d from %s", n_max, ks)
        ks = [k for k in ks if k <= n_max]
    t0 = time.perf_counter()
    prompts = [prompt_fn(p) for p in problems]
    completions: list[list[Any]] = [[] for _ in problems]
    # one sampler call per chunk of problems sharing an n
    calls = [
        idx[s : s + chunk]
        for v in sorted(set(ns))
        for idx in [[i for i, x in enumerate(ns) if x == v]]
        for s in range(0, len(idx), chunk)
    ]
    with ledger.phase("eval"):  # the cost ledger counts this sampling and verifying as eval
        for idx in progress(calls, desc="eval sample", total=len(calls)):
            outs = sampler.generate([prompts[i] for i in idx], ns[idx[0]], params)
            for i, cs in zip(idx, outs):
                completions[i] = list(cs)
        flat_p = [p for p, cs in zip(problems, completions) for _ in cs]
        flat_r = [c.text for cs in completions for c in cs]
        scores = (verify_fn or verifiers.verify_batch)(flat_p, flat_r, workers=workers)
    groups, k = [], 0
    for p, cs in zip(problems, completions):
        groups.append(Group(p, list(cs), list(scores[k : k + len(cs)])))
        k += len(cs)
    stats = [group_stats(g, ks, equivalent) for g in groups]
    metrics = aggregate(groups, stats, ks)
    seconds = time.perf_counter() - t0
    by_domain = {p.domain: x for p, x in zip(problems, ns)}
    return EvalResult(groups, metrics, stats, n_max, ks, params, prompts, seconds, by_domain)


__all__ = [
    "PROMPT_STYLES",
    "EvalResult",
    "evaluate",
    "paper_prompt",
    "samples_per_problem",
]
