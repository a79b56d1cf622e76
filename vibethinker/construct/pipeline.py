"""One chunk of seeds through the construction pipeline (the steps of docs/CONSTRUCT.md).

`build_chunk(seeds, ctx) -> kept Problems`: expand -> judge -> decontaminate queries -> teacher
samples -> vote / agreed code tests -> verify traces -> multi-path -> repetition filter ->
decontaminate traces. Every drop is counted in `ctx.funnel` with its reason. The teacher is any
Sampler; verification goes through vibethinker.verifiers (code in the sandbox).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field, replace

from vibethinker import sandbox as sb
from vibethinker.construct.codetests import agreed_tests
from vibethinker.construct.decontam import EvalIndex
from vibethinker.construct.expand import AXES, ParseError, expand_prompt, parse_expansion
from vibethinker.construct.funnel import Funnel
from vibethinker.construct.multipath import select_paths
from vibethinker.construct.ngram import repetition_reason
from vibethinker.construct.quality import judge_prompt, parse_verdict
from vibethinker.construct.vote import majority_vote
from vibethinker.engines import Sampler, SamplingParams
from vibethinker.log import get_logger
from vibethinker.types import Problem, Score
from vibethinker.verifiers import verify_batch
from vibethinker.verifiers.choice import committed_letters
from vibethinker.verifiers.code import (
    DEFAULT_MEMORY_MB,
    DEFAULT_TIMEOUT,
    MAX_OUTPUT,
    run_stdio_case,
)
from vibethinker.verifiers.extract import answer_part, last_boxed, last_python_block
from vibethinker.verifiers.math import check_answer

log = get_logger("construct")


@dataclass(frozen=True)
class Settings:
    """The numbers the chunk pipeline reads (the construct stage's config documents each one and
    builds this record: `stages/construct.py settings`)."""

    seed: int
    axes: tuple[str, ...]  # expansion axes, cycled with the seed's position
    expansions_per_seed: int
    expand_fraction: float  # share of seeds that get expansions (hash of id and seed)
    keep_seeds: bool  # the seed itself stays a query
    judge_seeds: bool  # the quality judge also sees kept seeds
    n_samples: int  # teacher samples per query (the vote)
    vote_min_margin: float
    workers: int  # verification worker processes
    code_min_agree: int  # teacher solutions that must agree on a code test's output
    code_min_tests: int
    max_traces: int  # reasoning paths kept per query
    path_max_overlap: float
    path_ngram: int
    rep_min_words: int
    rep_max_dup_line: int
    rep_max_top: float
    rep_max_dup: float
    chunk: int = 256  # seeds (or records) per chunk


@dataclass
class Context:
    """What every chunk needs: the teacher, templates, the eval index, settings, counters."""

    sampler: Sampler | None  # None: no teacher step (decontamination only)
    params: SamplingParams  # teacher sampling settings (seed set per chunk)
    expand_template: str
    judge_template: str
    index: EvalIndex | None
    settings: Settings
    funnel: Funnel = field(default_factory=Funnel)
    eval_hits: Counter = field(default_factory=Counter)  # eval item id -> queries dropped
    planted: dict[str, int] = field(
        default_factory=lambda: {"reached": 0, "caught": 0, "flagged": 0}
    )


def _gen(ctx: Context, prompts: list[str], n: int, seed: int) -> list[list[str]]:
    if not prompts:
        return []
    if ctx.sampler is None:
        raise ValueError("construct: this step needs a teacher (mode=decontaminate has none)")
    res = ctx.sampler.generate(prompts, n, replace(ctx.params, seed=seed))
    return [[c.text if isinstance(c.text, str) else "" for c in row] for row in res]


def expand(seeds: list[tuple[int, Problem]], ctx: Context, seed: int) -> list[Problem]:
    """Seeds kept as queries (when `keep_seeds`) plus the parsed expansions."""
    cfg = ctx.settings
    jobs = []
    for idx, s in seeds:
        if (hash_unit(s.id, cfg.seed) < cfg.expand_fraction) and cfg.axes:
            for k in range(cfg.expansions_per_seed):
                jobs.append((s, cfg.axes[(idx + k) % len(cfg.axes)]))
    replies = _gen(ctx, [expand_prompt(ctx.expand_template, s, a) for s, a in jobs], 1, seed)
    out = []
    for _, s in seeds:
        if cfg.keep_seeds:
            out.append(
                replace(
                    s,
                    traces=None,
                    wrong_traces=None,
                    claims=None,
                    meta={**s.meta, "source_seed": s.id, "axis": "seed"},
                )
            )
    per_dom: Counter = Counter()
    kept: Counter = Counter()
    for (s, axis), reply in zip(jobs, replies):
        per_dom[s.domain] += 1
        try:
            q = parse_expansion(reply[0] if reply else "", s, axis)
        except ParseError as e:
            ctx.funnel.drop(s.domain, "expand", e.reason)
            continue
        kept[s.domain] += 1
        out.append(q)
    for d in per_dom:
        ctx.funnel.step(d, "expand", per_dom[d], kept[d])
    return out


def hash_unit(key: str, seed: int) -> float:
    """A stable pseudo-random number in [0, 1) from a string (which seeds get expanded)."""
    import hashlib

    h = hashlib.blake2b(f"{seed}:{key}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "big") / 2**64


def judge(queries: list[Problem], ctx: Context, seed: int) -> list[Problem]:
    """The teacher's query-quality verdicts; non-valid and unparsable verdicts drop the query."""
    todo = [q for q in queries if q.meta.get("axis") in AXES or ctx.settings.judge_seeds]
    verdicts = _gen(ctx, [judge_prompt(ctx.judge_template, q) for q in todo], 1, seed)
    bad: set[int] = set()
    for q, v in zip(todo, verdicts):
        verdict = parse_verdict(v[0] if v else "")
        ctx.funnel.step(q.domain, "judge", 1, int(verdict == "valid"))
        if verdict != "valid":
            ctx.funnel.drop(q.domain, "judge", verdict or "judge_unparsable")
            bad.add(id(q))
    return [q for q in queries if id(q) not in bad]


def decontam_queries(queries: list[Problem], ctx: Context) -> list[Problem]:
    if ctx.index is None:
        return queries
    hits = ctx.index.hits([q.prompt for q in queries])
    planted = getattr(ctx.sampler, "planted", None)
    out = []
    for q, h in zip(queries, hits):
        is_planted = planted is not None and q.prompt.strip() in planted
        ctx.planted["reached"] += is_planted
        ctx.funnel.step(q.domain, "decontam_query", 1, int(not h))
        if h:
            ctx.eval_hits.update(h)
            ctx.funnel.drop(q.domain, "decontam_query", "eval_overlap")
            ctx.planted["flagged"] += 1
            ctx.planted["caught"] += is_planted
            continue
        out.append(q)
    return out


def final_answer(domain: str, text: str, choices: list[str] | None = None) -> str | None:
    """The answer a response commits to: math the last \\boxed{} of the answer part, stem the
    single letter it commits to (an option's text counts as its letter; None when it hedges)."""
    part = answer_part(text)
    if part is None:
        return None
    if domain == "math":
        return last_boxed(part)
    letters = set(committed_letters(part, choices))
    return letters.pop() if len(letters) == 1 else None


def _same_math(a: str, b: str) -> bool:
    return a == b or check_answer(a, b).correct


SAME = {"math": _same_math, "stem": lambda a, b: a == b}


def run_on_inputs(problem: Problem, response: str) -> Score:
    """verify_batch hook: run the response's program on every test input in the sandbox; the
    outputs (None = timeout / nonzero exit) travel back as JSON in Score.detail."""
    code = last_python_block(response)
    if code is None:
        return Score(0.0, False, "no_code_block", "[]")
    limits = sb.Limits(
        timeout=DEFAULT_TIMEOUT, memory_mb=DEFAULT_MEMORY_MB, fsize_mb=MAX_OUTPUT >> 20
    )
    outs = []
    for t in problem.tests or []:
        status, rc, out = run_stdio_case(code, t["input"], "bwrap", limits)
        outs.append(out.decode("utf-8", "replace") if status == "done" and rc == 0 else None)
    return Score(1.0, True, "ran", json.dumps(outs))


def label(queries: list[Problem], samples: list[list[str]], ctx: Context) -> list[int]:
    """Give each query its supervision from the samples where it has none: majority vote (math,
    stem), agreed sandbox outputs (expanded code). Returns the indices of queries kept; writes
    vote margin and share into meta."""
    cfg, keep, code_jobs = ctx.settings, [], []
    for i, (q, texts) in enumerate(zip(queries, samples)):
        expanded = q.meta.get("axis") in AXES
        if q.domain in SAME:
            v = majority_vote([final_answer(q.domain, t, q.choices) for t in texts], SAME[q.domain])
            q.meta.update(vote_margin=round(v.margin, 4), vote_share=round(v.share, 4))
            if expanded:
                ok = v.label is not None and v.margin >= cfg.vote_min_margin
                ctx.funnel.step(q.domain, "vote", 1, int(ok))
                if not ok:
                    ctx.funnel.drop(
                        q.domain, "vote", "no_majority" if v.label is None else "low_margin"
                    )
                    continue
                q.answer = v.label
            keep.append(i)
        elif q.domain == "code" and expanded:
            code_jobs.append(i)
        else:
            keep.append(i)
    if code_jobs:
        items = [(queries[i], t) for i in code_jobs for t in dict.fromkeys(samples[i])]
        scores = verify_batch(
            [p for p, _ in items], [t for _, t in items], workers=cfg.workers, fn=run_on_inputs
        )
        runs: dict[int, dict[str, list]] = {}
        for (p, t), s in zip(items, scores):
            try:
                outs = json.loads(s.detail) if s.reason == "ran" else None
            except json.JSONDecodeError:
                outs = None
            runs.setdefault(id(p), {})[t] = outs or [None] * len(p.tests or [])
        for i in code_jobs:
            q = queries[i]
            per_sample = [runs[id(q)][t] for t in samples[i]]  # every sample, repeats included
            tests = agreed_tests(
                [t["input"] for t in q.tests or []], per_sample, cfg.code_min_agree
            )
            ok = len(tests) >= cfg.code_min_tests
            ctx.funnel.step(q.domain, "code_tests", 1, int(ok))
            if not ok:
                ctx.funnel.drop(q.domain, "code_tests", "too_few_agreed_tests")
                continue
            q.tests = tests
            q.meta["agreed_tests"] = len(tests)
            keep.append(i)
    return sorted(keep)


def correct_traces(
    queries: list[Problem], samples: list[list[str]], ctx: Context
) -> list[list[str]]:
    """Each query's correct samples (verifier against its label / tests), in sample order, and
    its teacher pass rate in meta (the curriculum's difficulty signal)."""
    items = [(q, t) for q, texts in zip(queries, samples) for t in dict.fromkeys(texts) if t]
    scores = verify_batch(
        [p for p, _ in items], [t for _, t in items], workers=ctx.settings.workers
    )
    ok = {(id(p), t): s.correct for (p, t), s in zip(items, scores)}
    out = []
    for q, texts in zip(queries, samples):
        good = [t for t in texts if t and ok.get((id(q), t))]
        n_bad = len(texts) - len(good)
        ctx.funnel.step(q.domain, "correct", len(texts), len(good))
        if n_bad:
            ctx.funnel.drop(q.domain, "correct", "wrong_or_empty", n_bad)
        rate = len(good) / len(texts) if texts else 0.0
        q.meta.update(pass_rate=round(rate, 4), difficulty=round(1 - rate, 4))
        out.append(good)
    return out


def select_and_filter(q: Problem, good: list[str], ctx: Context) -> list[str]:
    """Multi-path selection, then the repetition filter on the chosen traces."""
    cfg = ctx.settings
    paths = select_paths(good, cfg.max_traces, cfg.path_max_overlap, cfg.path_ngram)
    ctx.funnel.step(q.domain, "multipath", len(good), len(paths))
    kept = []
    for t in paths:
        why = repetition_reason(
            t, cfg.rep_min_words, cfg.rep_max_dup_line, cfg.rep_max_top, cfg.rep_max_dup
        )
        if why:
            ctx.funnel.drop(q.domain, "repetition", why)
        else:
            kept.append(t)
    ctx.funnel.step(q.domain, "repetition", len(paths), len(kept))
    return kept


def build_chunk(seeds: list[tuple[int, Problem]], ctx: Context, chunk_seed: int) -> list[Problem]:
    """Seeds (with their index in the input) -> finished SFT Problems (see the module doc)."""
    for d, n in Counter(s.domain for _, s in seeds).items():
        ctx.funnel.step(d, "seeds", n, n)
    queries = expand(seeds, ctx, chunk_seed)
    queries = judge(queries, ctx, chunk_seed + 1)
    queries = decontam_queries(queries, ctx)
    samples = _gen(ctx, [q.prompt for q in queries], ctx.settings.n_samples, chunk_seed + 2)
    live = []
    for i, (q, texts) in enumerate(zip(queries, samples)):
        n_empty = sum(1 for t in texts if not t.strip())
        if n_empty:
            ctx.funnel.drop(q.domain, "sample", "empty_reply", n_empty)
        ctx.funnel.step(q.domain, "sample", 1, int(n_empty < len(texts)))
        if n_empty < len(texts):
            live.append(i)
    queries, samples = [queries[i] for i in live], [samples[i] for i in live]
    keep = label(queries, samples, ctx)
    queries, samples = [queries[i] for i in keep], [samples[i] for i in keep]
    goods = correct_traces(queries, samples, ctx)
    done = []
    for q, good in zip(queries, goods):
        traces = select_and_filter(q, good, ctx)
        if not traces:
            ctx.funnel.drop(q.domain, "kept", "no_trace_left")
            continue
        if ctx.index is not None:
            hits = ctx.index.hits(traces)
            bad = sorted({h for hs in hits for h in hs})
            ctx.funnel.step(q.domain, "decontam_trace", 1, int(not bad))
            if bad:
                ctx.eval_hits.update(bad)
                ctx.funnel.drop(q.domain, "decontam_trace", "eval_overlap")
                continue
        q.traces = traces
        q.meta["trace_chars"] = [len(t) for t in traces]
        done.append(q)
    for d, n in Counter(q.domain for q in done).items():
        ctx.funnel.step(d, "kept", n, n)
    return done
