"""Stage `clr`: Claim-Level Reliability test-time scaling (docs/PAPER.md, "Test time: CLR").

`vibethinker clr model=runs/x/final data=eval.jsonl k=32 repeats=8 out=runs/x/clr` runs, with the
same model throughout and ONE Sampler call per phase (batched across problems and trajectories):
1. sample: R x K trajectories per problem (temperature 1.0, top-p 0.95: the paper's protocol);
2. extract: each trajectory with a final answer -> M claims + final answer (prompt template
   `extract_prompt`, parse rules in algo/clr.py);
3. verify: each claim judged on its own (`verify_prompt`) -> verdict v in {0, 1}; with
   `claim_verifier=symbolic|both`, checkable numeric claims are decided by verifiers/claims.py;
4. select: r_k = (mean v)^M, answers clustered by the math verifier's equivalence (math) or by
   letter (multiple choice), Score = sum of r_k, argmax (ties: larger cluster, then first seen).
Repeats: the pool of R x K samples is drawn once; repeat r uses samples [rK, (r+1)K), so the R
repeats are independent runs of the whole procedure on disjoint samples. CLR@k for k < K uses the
first k of each repeat (the same extraction, no extra calls).

Writes `samples.jsonl` (every trajectory with its claims, verdicts, r and token costs),
`summary.json`, `summary.md` (CLR vs maj@k vs avg@n at equal token budgets, counters) and
`clr.png` (accuracy against tokens per problem). Problems of domains without a votable final
answer (code, instruct) are skipped and counted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from vibethinker.algo.clr import (
    SHORT_CLAIMS,
)
from vibethinker.config import runtime
from vibethinker.engines import SamplingParams
from vibethinker.engines.settings import EngineFields, TopKFields
from vibethinker.evaluate import PROMPT_STYLES
from vibethinker.evaluate.clr import compare
from vibethinker.log import get_logger
from vibethinker.prompts import claim_count_rule, claims_in_step, load_template, problem_text
from vibethinker.reports.clr import write_clr_outputs
from vibethinker.stages import register
from vibethinker.stages.clr_phases import (
    CLAIM_VERIFIERS,
    Counter,
    Trajectory,
    claim_eval_phase,
    cluster_phase,
    extract_phase,
    prompt_counter,
    sample_phase,
    timed,
    verify_phase,
)
from vibethinker.stages.eval import load_eval_problems
from vibethinker.types import Problem
from vibethinker.verifiers.math_judge import judged_verify

log = get_logger("stages.clr")

CLR_DOMAINS = ("math", "stem")  # domains with a final answer to cluster


# The sampling and engine keys (temperature, top_p, top_k, max_new_tokens; engine, device,
# base_url, ...) are declared once, in engines/settings.py; CLR's own default and notes are here.
CLR_SAMPLING = TopKFields.with_defaults(
    max_new_tokens=0,
    notes={
        "temperature": "clr: the trajectories' (extraction and verification: judge_temperature).",
        "top_p": "clr: the trajectories' (extraction and verification: judge_top_p).",
        "max_new_tokens": "clr: the trajectories' cap. Paper: no extra cap.",
    },
)


@dataclass
class ClrConfig(CLR_SAMPLING, EngineFields):
    model: str = ""
    """Model folder or hub id (engines hf, vllm); the served model name (engine openai). The same
    model samples, extracts and verifies. Paper: the same model."""
    data: str = ""
    """Problems: a Problem JSONL/JSON/parquet file or folder, or a public format (`format`)."""
    format: str = "problems"
    """`problems` (our records) or a public format read by data/adapters.py (math, gpqa)."""
    out: str = "runs/clr"
    """Output folder: samples.jsonl, summary.json, summary.md, clr.png."""
    k: int = 32
    """Trajectories per problem per repeat. Paper: 32."""
    m: int = 5
    """Claims per trajectory (also the exponent of r_k). Paper: 5."""
    short_claims: str = "unverified"
    """A claim list shorter than M: `unverified` (the paper's mean over M: absent claims count
    as unverified, 1 validated claim -> (1/5)^5) or `present` (the mean over the claims there
    are: 1 validated claim -> 1, so short lists win). summary.json's `short_claims` reports
    CLR@K under both rules on the same samples and verdicts."""
    repeats: int = 8
    """Repeats of the whole procedure (Pass@1 is their mean), on disjoint samples. Paper: 8."""
    maj_pool: int = 0
    """Samples per problem for the majority-vote baseline; 0 = CLR's R x K pool. Beyond the
    paper: CLR spends many times its K samples' tokens, so maj@k' at CLR's budget needs more
    samples than CLR's pool. Drawn in the same sampling call; only the first R x K go to CLR."""
    claim_eval: int = 200
    """Labelled held-out claims (the data's `Problem.claims`: the world's true claims and
    corrupted copies, half of each) the model judges with `verify_prompt`, in one more Sampler
    call, to report its claim-verification accuracy; 0 = off. Beyond the paper."""
    claim_verifier: str = "model"
    """model (the paper), symbolic (checkable numeric claims by verifiers/claims.py, the rest by
    the model) or both (checkable claims need the model AND the symbolic check). Beyond the paper."""
    extract_prompt: str = ""
    """Claim-extraction template ({problem}, {response}, {m}): a file, or the name of a packaged
    one (`clr_extract_verbose.txt`, which asks for exactly {m} claims); empty =
    prompts/clr_extract.txt (short, for the tiny tokenizer: at most {m}). Paper: unpublished; it
    extracts M claims per trajectory. With `short_claims=unverified` the prompt should ask for
    exactly {m} (missing claims count as failed): the stage warns, and summary.json's
    `extract_asks` says, when the two are out of step. Ours are in docs/CLR.md."""
    verify_prompt: str = ""
    """Claim-verification template ({problem}, {claim}): a file or a packaged name
    (`clr_verify_verbose.txt`); empty = prompts/clr_verify.txt. Paper: unpublished."""
    math_judge: str = ""
    """LLM judge as a second opinion on math trajectories' correctness, `MODEL@BASE_URL`
    (OpenAI-compatible; key from OPENAI_API_KEY), as the eval stage's `math_judge`: asked only
    where the rules cannot decide or say wrong; summary.json's `math_judge` counts the verdicts
    it changed. Paper: math is scored by math-verify plus an LLM judge. Empty = rules only."""
    judge_temperature: float = 1.0
    """Temperature of extraction and verification. Paper silent: our choice, the paper's one
    sampling protocol (1.0), so a repeat re-runs the whole stochastic procedure."""
    judge_top_p: float = 0.95
    """Nucleus of extraction and verification. Paper silent: our choice, as sampling (0.95)."""
    judge_max_new_tokens: int = 0
    """Token cap of each extraction / verification reply; 0 = up to the context. Paper silent:
    our choice, no cap, as for the trajectories."""
    prompt_style: str = "paper"
    """`paper`: the paper's math / multiple-choice prompts; `raw`: the stored prompt as is."""
    seed: int = 0
    """Sampling seed (each phase uses seed + phase number)."""
    limit: int = 0
    """At most `limit` problems (0 = all), balanced over domains."""
    domains: list[str] = field(default_factory=list)
    """Only these domains (empty = all); only math and stem can be run."""
    workers: int = runtime(2)
    """Verifier workers. Paper silent: 2 = this CPU."""


def load_problems(cfg: ClrConfig, counters: Counter) -> list[Problem]:
    problems = load_eval_problems(cfg)
    kept = [p for p in problems if p.domain in CLR_DOMAINS]
    if len(kept) < len(problems):
        counters.add("skipped_problems", len(problems) - len(kept))
        log.warning("clr: %d problems skipped (no votable answer)", len(problems) - len(kept))
    return kept


def check_config(cfg: ClrConfig) -> None:
    if not cfg.model or not cfg.data:
        raise ValueError("clr: `model` and `data` are required")
    if cfg.claim_verifier not in CLAIM_VERIFIERS:
        raise ValueError(f"claim_verifier must be one of {', '.join(sorted(CLAIM_VERIFIERS))}")
    if cfg.k < 1 or cfg.m < 1 or cfg.repeats < 1:
        raise ValueError("clr: k, m and repeats must be >= 1")
    if cfg.short_claims not in SHORT_CLAIMS:
        raise ValueError(f"clr: short_claims must be one of {', '.join(SHORT_CLAIMS)}")


@register("clr", ClrConfig, positional=("model", "data"))
def run(cfg: ClrConfig, sampler: Any = None) -> dict[str, str]:
    """CLR test-time scaling: K samples, claims, verdicts, reliability-weighted vote; vs maj@k."""
    problems, trajs, counters, meta = run_phases(cfg, sampler)
    meta["short_claims"] = short_claims_compare(problems, trajs, cfg)
    log.info("clr: CLR@%d by short_claims rule: %s", cfg.k, meta["short_claims"])
    return write_clr_outputs(cfg.out, problems, trajs, cfg.k, cfg.repeats, counters, meta)


def short_claims_compare(problems: list[Problem], trajs: list[Trajectory], cfg: ClrConfig):
    """CLR@K under each `short_claims` rule on the same samples, claims and verdicts, and how
    many answered trajectories had fewer than M claims; the run's own r_k are left as they are."""
    saved = [t.r for t in trajs]
    pools: list[list[Trajectory]] = [[] for _ in problems]
    for t in trajs:
        pools[t.problem].append(t)
    res: dict[str, Any] = {"rule": cfg.short_claims}
    for rule in SHORT_CLAIMS:
        cluster_phase(trajs, problems, cfg.m, reuse_clusters=True, short_claims=rule)
        res[rule] = compare(pools, cfg.k, cfg.repeats)["rows"][-1]["clr"]
    for t, r in zip(trajs, saved):
        t.r = r
    ok = [t for t in trajs if t.sample < cfg.k * cfg.repeats and t.status == "ok"]
    res["short_lists"] = sum(0 < len(t.verdicts) < cfg.m for t in ok)
    res["answered"] = len(ok)
    return res


def run_phases(cfg: ClrConfig, sampler: Any = None):
    """Every phase of CLR (no output written): (problems, trajectories, counters, meta)."""
    check_config(cfg)
    counters = Counter()
    problems = load_problems(cfg, counters)
    if not problems:
        raise ValueError(f"clr: no math or stem problems in {cfg.data}")
    extract_t = load_template(cfg.extract_prompt, "clr_extract.txt", ("{response}",))
    verify_t = load_template(cfg.verify_prompt, "clr_verify.txt", ("{claim}",))
    if not claims_in_step(extract_t, cfg.short_claims):
        log.warning(
            "clr: the extraction prompt asks for %s {m} claims while short_claims=%s counts "
            "missing claims as failed; ask for exactly {m} (extract_prompt="
            "clr_extract_verbose.txt) or set short_claims=present",
            claim_count_rule(extract_t),
            cfg.short_claims,
        )
    sampler = sampler or cfg.make_engine(cfg.model, cfg.seed)
    count = prompt_counter(sampler, counters)
    verify_fn = judged_verify(cfg.math_judge, cfg.out) if cfg.math_judge else None
    trajs, claim_eval, seconds = timed_phases(
        cfg, sampler, problems, (extract_t, verify_t), count, counters, verify_fn
    )
    meta = run_meta(cfg, count is not None, seconds, claim_eval)
    meta["extract_asks"] = claim_count_rule(extract_t)
    if verify_fn is not None:
        meta["math_judge"] = verify_fn.stats.as_dict()
    return problems, trajs, counters, meta


def sample_pool(cfg: ClrConfig) -> int:
    """Samples drawn per problem: CLR's R x K, or the majority-vote baseline's pool if larger."""
    return max(cfg.k * cfg.repeats, cfg.maj_pool)


def judge_params(cfg: ClrConfig, phase: int) -> SamplingParams:
    """Sampling of extraction (phase 1), verification (2) and the claim evaluation (3)."""
    return SamplingParams(
        cfg.judge_temperature,
        cfg.judge_top_p,
        0,
        cfg.judge_max_new_tokens,
        seed=cfg.seed + phase,
    )


def timed_phases(
    cfg: ClrConfig,
    sampler: Any,
    problems: list[Problem],
    templates: tuple[str, str],
    count: Any,
    counters: Counter,
    verify_fn: Any = None,
) -> tuple[list[Trajectory], dict[str, Any], dict[str, float]]:
    """Sample, extract, verify, claim_eval, cluster, each timed: (trajs, claim_eval, seconds)."""
    extract_t, verify_t = templates
    prompts = [PROMPT_STYLES[cfg.prompt_style](p) for p in problems]
    texts = [problem_text(p) for p in prompts]  # {problem} of the judge templates
    pool = sample_pool(cfg)
    sample_p = cfg.sampling_params(seed=cfg.seed)
    log.info("clr: %d problems x %d samples (K=%d, R=%d)", len(problems), pool, cfg.k, cfg.repeats)
    how, seconds = CLAIM_VERIFIERS[cfg.claim_verifier], {}
    with timed(seconds, "sample"):
        trajs = sample_phase(
            sampler, prompts, problems, pool, sample_p, cfg.workers, counters, verify_fn
        )
    with timed(seconds, "extract"):
        clr_pool = cfg.k * cfg.repeats
        extract_phase(
            sampler,
            trajs,
            problems,
            texts,
            extract_t,
            cfg.m,
            clr_pool,
            judge_params(cfg, 1),
            count,
            counters,
        )
    with timed(seconds, "verify"):
        verify_phase(sampler, trajs, texts, verify_t, how, judge_params(cfg, 2), count, counters)
    with timed(seconds, "claim_eval"):
        claim_eval = claim_eval_phase(
            sampler, problems, texts, verify_t, cfg.claim_eval, judge_params(cfg, 3), cfg.seed
        )
    with timed(seconds, "cluster"):
        cluster_phase(trajs, problems, cfg.m, short_claims=cfg.short_claims)
    log.info("clr phases (s): %s", {k: round(v, 1) for k, v in seconds.items()})
    return trajs, claim_eval, seconds


def run_meta(
    cfg: ClrConfig, counted: bool, seconds: dict[str, float], claim_eval: dict[str, Any]
) -> dict[str, Any]:
    """The run's `meta` (summary.json): the settings, the phase times, the claim evaluation."""
    return {
        "model": cfg.model,
        "data": cfg.data,
        "k": cfg.k,
        "m": cfg.m,
        "repeats": cfg.repeats,
        "pool": sample_pool(cfg),
        "claim_verifier": cfg.claim_verifier,
        "prompt_tokens_counted": counted,
        "seconds": seconds,
        "claim_eval": claim_eval,
    }
