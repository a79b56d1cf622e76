"""Stage `clr`'s phases (docs/CLR.md): sample, extract claims, verify them (the model, the
symbolic check, or both: `CLAIM_VERIFIERS`), cluster the answers and weight each by its
reliability r_k; the trajectory record and the run's counters. Each phase is one Sampler call
batched across problems and trajectories. The stage (stages/clr.py) holds the config and the run.
"""

from __future__ import annotations

import copy
import functools
import random
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from vibethinker import verifiers
from vibethinker.algo.clr import (
    ClaimList,
    cluster_answers,
    parse_claims,
    parse_verdict,
    reliability,
    verdict_or_zero,
)
from vibethinker.evaluate.metrics import answer_key, normalize_answer
from vibethinker.prompts import fill
from vibethinker.types import Problem
from vibethinker.verifiers.claims import symbolic_verdict
from vibethinker.verifiers.extract import answer_part, last_boxed
from vibethinker.verifiers.math import check_answer

_INT = re.compile(r"^-?\d+$")


@dataclass(frozen=True)
class ClaimVerifier:
    """How a claim's verdict is reached: whether the symbolic check runs, whether the model is
    asked (given the symbolic verdict, None = not checkable), and how the two combine into
    (final verdict, the path that decided it)."""

    symbolic: bool
    ask_model: Callable[[int | None], bool]
    combine: Callable[[int | None, int | None], tuple[int, str]]


CLAIM_VERIFIERS = {
    # the paper: the model judges every claim
    "model": ClaimVerifier(False, lambda sym: True, lambda sym, model: (model, "model")),
    # checkable claims by the symbolic check alone, the rest by the model
    "symbolic": ClaimVerifier(
        True,
        lambda sym: sym is None,
        lambda sym, model: (sym, "symbolic") if sym is not None else (model, "model"),
    ),
    # checkable claims must pass both; the rest by the model
    "both": ClaimVerifier(
        True,
        lambda sym: True,
        lambda sym, model: (min(sym, model), "both") if sym is not None else (model, "model"),
    ),
}


@dataclass
class Trajectory:
    """One sampled trajectory and everything CLR did with it."""

    problem: int  # index into the problems
    sample: int  # index in the problem's pool (the first R x K are CLR's)
    text: str
    tokens: int  # response tokens (0 when the engine reported none; see counters)
    correct: bool = False
    reason: str = ""
    answer: str | None = None  # the trajectory's own final answer (boxed / letter)
    status: str = "ok"  # ok | empty_response | no_final_answer
    cluster: int | None = None
    claims: ClaimList | None = None
    extract_tokens: int = 0
    extract_prompt_tokens: int = 0
    verdicts: list[dict[str, Any]] = field(default_factory=list)  # per claim
    verify_tokens: int = 0
    verify_prompt_tokens: int = 0
    r: float = 0.0

    @property
    def cost(self) -> int:
        """Every token CLR spent on this trajectory: sampling, extraction, verification."""
        return (
            self.tokens
            + self.extract_tokens
            + self.extract_prompt_tokens
            + self.verify_tokens
            + self.verify_prompt_tokens
        )


@contextmanager
def timed(seconds: dict[str, float], name: str) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    seconds[name] = time.perf_counter() - t0


class Counter(dict):
    def add(self, key: str, n: int = 1) -> None:
        self[key] = self.get(key, 0) + n


def _n(c: Any, counters: Counter) -> int:
    n = c.n_tokens
    if n is None:
        counters.add("tokens_unknown")
        return 0
    return int(n)


def prompt_counter(sampler: Any, counters: Counter):
    """Prompt-token counter from the sampler's tokenizer (`encode`), or None when it has none."""
    encode = getattr(sampler, "encode", None)
    if encode is None:
        return None

    def count(prompt: str) -> int:
        try:
            return len(encode(prompt))
        except Exception:  # counting must never stop a run
            counters.add("prompt_tokens_uncounted")
            return 0

    return count


def answer_of(problem: Problem, text: str) -> str | None:
    """The trajectory's final answer: the last box of the answer part (math), the committed
    letter (stem); None when it gives none."""
    if problem.domain == "math":
        part = answer_part(text)
        box = last_boxed(part) if part is not None else None
        return box.strip() if box and box.strip() else None
    return answer_key(problem, text)


@functools.lru_cache(maxsize=65536)
def math_equivalent(a: str, b: str) -> bool:
    """The math verifier's answer equivalence (either direction), False on any failure."""
    try:
        na, nb = normalize_answer(a), normalize_answer(b)
        if na == nb:  # `0.5` and `\\frac{1}{2}`: no sympy
            return True
        if _INT.match(na) and _INT.match(nb):  # two different integers: no sympy either
            return False
        return check_answer(a, b).correct or check_answer(b, a).correct
    except Exception:
        return False


def letters_equivalent(a: str, b: str) -> bool:
    return a.strip().upper() == b.strip().upper()


EQUIVALENCE = {"math": math_equivalent, "stem": letters_equivalent}


def sample_phase(
    sampler, prompts, problems, pool, params, workers, counters, verify_fn=None
) -> list[Trajectory]:
    """Phase 1: one call for R x K trajectories of every problem; verify (`verify_fn`, e.g. with
    the math judge as second opinion; default the rule verifiers); their answers."""
    out = sampler.generate(prompts, pool, params)
    short = sum(max(0, pool - len(c)) for c in out) + pool * max(0, len(prompts) - len(out))
    counters.add("samples_missing", short)  # a sampler that returned fewer than asked
    trajs = [
        Trajectory(i, j, c.text or "", _n(c, counters))
        for i, comps in enumerate(out)
        for j, c in enumerate(comps)
    ]
    verify = verify_fn or verifiers.verify_batch
    scores = verify([problems[t.problem] for t in trajs], [t.text for t in trajs], workers=workers)
    for t, s in zip(trajs, scores):
        t.correct, t.reason = bool(s.correct), s.reason
        if not t.text.strip():
            t.status = "empty_response"
        else:
            t.answer = answer_of(problems[t.problem], t.text)
            t.status = "ok" if t.answer is not None else "no_final_answer"
        counters.add(t.status)
    return trajs


def extract_phase(
    sampler, trajs, problems, texts, template, m, clr_pool, params, count, counters
) -> None:
    """Phase 2: one call; claims of every CLR trajectory that has a final answer (the others
    cannot join a cluster, so no tokens are spent on them)."""
    todo = [t for t in trajs if t.status == "ok" and t.sample < clr_pool]
    if not todo:
        return
    prompts = [fill(template, problem=texts[t.problem], response=t.text, m=m) for t in todo]
    out = sampler.generate(prompts, 1, params)
    for t, prompt, comps in zip(todo, prompts, out):
        reply = comps[0] if comps else None
        t.extract_tokens = _n(reply, counters) if reply else 0
        t.extract_prompt_tokens = count(prompt) if count else 0
        t.claims = parse_claims(reply.text if reply else "", m)
        counters.add("extractions")
        counters.add("claims", len(t.claims.claims))
        counters.add("malformed_lists", int(t.claims.malformed))
        counters.add("extractions_unfinished", int(t.claims.unfinished))
        counters.add("extra_claims_dropped", t.claims.dropped_extra)
        counters.add("empty_claims_dropped", t.claims.dropped_empty)
        counters.add("no_claims", int(not t.claims.claims))
        counters.add("fewer_than_m_claims", int(0 < len(t.claims.claims) < m))
        if t.claims.answer is None:
            counters.add("extracted_answer_missing")
        elif t.answer is not None:  # does the extractor restate the trajectory's own answer?
            same = EQUIVALENCE[problems[t.problem].domain](t.answer, t.claims.answer)
            counters.add("extracted_answer_agrees", int(same))
        parsed = t.claims.claims and not (t.claims.malformed or t.claims.unfinished)
        counters.add("extractions_parsed", int(bool(parsed and t.claims.answer is not None)))


def verify_phase(sampler, trajs, texts, template, how, params, count, counters) -> None:
    """Phase 3: one call for every claim the model must judge; the symbolic check first."""
    jobs: list[tuple[Trajectory, dict[str, Any]]] = []
    for t in trajs:
        for claim in t.claims.claims if t.claims else []:
            sym = symbolic_verdict(claim) if how.symbolic else None
            asked = how.ask_model(sym)
            v = {"claim": claim, "symbolic": sym, "asked": asked, "model": None, "final": None}
            t.verdicts.append(v)
            counters.add("claims_checkable", int(sym is not None))
            if asked:
                jobs.append((t, v))
    if jobs:
        prompts = [fill(template, problem=texts[t.problem], claim=v["claim"]) for t, v in jobs]
        out = sampler.generate(prompts, 1, params)
        for (t, v), prompt, comps in zip(jobs, prompts, out):
            reply = comps[0] if comps else None
            v["tokens"] = _n(reply, counters) if reply else 0
            v["prompt_tokens"] = count(prompt) if count else 0
            t.verify_tokens += v["tokens"]
            t.verify_prompt_tokens += v["prompt_tokens"]
            v["model"] = parse_verdict(reply.text if reply else "")
            counters.add("verdicts_unparseable", int(v["model"] is None))
            if v["symbolic"] is not None:
                disagree = verdict_or_zero(v["model"]) != v["symbolic"]
                counters.add("model_symbolic_disagree", int(disagree))
    decide(trajs, how, counters)


def decide(trajs: list[Trajectory], how: ClaimVerifier, counters: Counter) -> None:
    """Final verdict per claim from its symbolic and model verdicts (an unparseable model
    verdict -> 0), and the path that decided it."""
    for t in trajs:
        for v in t.verdicts:
            model = verdict_or_zero(v["model"]) if v["asked"] else None
            v["final"], v["by"] = how.combine(v["symbolic"], model)
            counters.add(f"decided_by_{v['by']}")
    for t in trajs:
        finals = [v["final"] for v in t.verdicts]
        counters.add("verdicts_1", sum(finals))
        counters.add("verdicts_0", len(finals) - sum(finals))


def as_variant(
    trajs: list[Trajectory], counters: Counter, name: str, m: int, short_claims: str = "unverified"
):
    """The run of another `claim_verifier` derived from a `both` run (which computed the symbolic
    verdict of every claim and asked the model about every claim): the same samples, claims and
    model verdicts, so variants compare paired. The model verification tokens of claims the
    variant would not have asked about are taken off. Returns (trajectories, counters)."""
    how = CLAIM_VERIFIERS[name]
    trajs = copy.deepcopy(trajs)
    drop = ("decided_by_", "verdicts_0", "verdicts_1", "verdicts_unparseable")
    out = Counter({k: v for k, v in counters.items() if not k.startswith(drop)})
    for t in trajs:
        for v in t.verdicts:
            if not v["asked"]:
                raise ValueError("as_variant needs a run that asked the model about every claim")
            if not how.ask_model(v["symbolic"]):  # this variant would not have asked
                v["asked"] = False
                t.verify_tokens -= v.get("tokens", 0)
                t.verify_prompt_tokens -= v.get("prompt_tokens", 0)
                v["model"], v["tokens"], v["prompt_tokens"] = None, 0, 0
            elif v["model"] is None:
                out.add("verdicts_unparseable")
    decide(trajs, how, out)
    cluster_phase(trajs, [], m, reuse_clusters=True, short_claims=short_claims)
    return trajs, out


def labelled_claims(problems: list[Problem], n: int, seed: int) -> list[tuple[int, str, bool]]:
    """(problem index, claim, truth): up to n labelled claims of the problems, half true and
    half false where both exist, a seeded draw; distinct texts per problem."""
    pools: dict[bool, list[tuple[int, str, bool]]] = {True: [], False: []}
    for i, p in enumerate(problems):
        seen: set[str] = set()
        for c in (c for cl in p.claims or [] for c in cl):
            text, truth = c.get("text"), c.get("true")
            if isinstance(text, str) and text.strip() and isinstance(truth, bool):
                if text not in seen:
                    seen.add(text)
                    pools[truth].append((i, text, truth))
    rng = random.Random(seed)
    half = n // 2
    take_t = min(len(pools[True]), max(half, n - len(pools[False])))
    take_f = min(len(pools[False]), n - take_t)
    return rng.sample(pools[True], take_t) + rng.sample(pools[False], take_f)


def claim_eval_phase(sampler, problems, texts, template, n, params, seed) -> dict[str, Any]:
    """Held-out claim-verification accuracy: one call for `n` labelled claims. An unparseable
    verdict counts as wrong here (it is neither a validation nor a falsification)."""
    items = labelled_claims(problems, n, seed) if n > 0 else []
    if not items:
        return {"claims": 0}
    prompts = [fill(template, problem=texts[i], claim=c) for i, c, _ in items]
    out = sampler.generate(prompts, 1, params)
    res: dict[str, list[int]] = {}
    unparseable = 0
    for (i, _, truth), comps in zip(items, out):
        v = parse_verdict(comps[0].text if comps else "")
        unparseable += v is None
        ok = int(v is not None and v == int(truth))
        for key in ("all", problems[i].domain, "true" if truth else "false"):
            res.setdefault(key, []).append(ok)
    acc = {k: round(sum(v) / len(v), 4) for k, v in res.items()}
    return {
        "claims": len(items),
        "unparseable": unparseable,
        "accuracy": acc,
        "counts": {k: len(v) for k, v in res.items()},
    }


def cluster_phase(
    trajs: list[Trajectory],
    problems: list[Problem],
    m: int,
    reuse_clusters: bool = False,
    short_claims: str = "unverified",
) -> None:
    """r_k per trajectory; cluster ids per problem over its whole pool (kept as they are with
    `reuse_clusters`)."""
    by_problem: dict[int, list[Trajectory]] = {}
    for t in trajs:
        verdicts = [v["final"] for v in t.verdicts]
        t.r = reliability(verdicts, m, short_claims) if t.status == "ok" else 0.0
        by_problem.setdefault(t.problem, []).append(t)
    if reuse_clusters:
        return
    for i, group in by_problem.items():
        eq = EQUIVALENCE[problems[i].domain]
        ids = cluster_answers([t.answer if t.status == "ok" else None for t in group], eq)
        for t, c in zip(group, ids):
            t.cluster = c
