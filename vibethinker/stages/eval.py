"""Stage `eval`: sample n responses per problem, verify, report avg@n / pass@k / maj@k / tokens.

`vibethinker eval model=runs/x/final data=eval.jsonl n=8 k=1,4,8 engine=hf out=runs/x/eval`
writes `samples.jsonl` (every sample with its score and reason), `summary.json`, `summary.md`
(a markdown table per domain and subdomain) and `passk.png`. Defaults follow the paper's
protocol: temperature 1.0, top-p 0.95, top-k off, the paper's prompts, the model's chat template,
n per domain and benchmark (math 64, IMO-AnswerBench 16, stem/GPQA 16, code 8; `PAPER_N`) and
no extra output cap (each response
may fill the model's context: `max_new_tokens=0`).
"""

from __future__ import annotations

import dataclasses
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Protocol

from vibethinker.config import PROMPT_STYLE_NAMES, Checks, runtime
from vibethinker.data.adapters import ADAPTERS, load_adapter
from vibethinker.data.io import load_problems, select
from vibethinker.data.shapes import RowShape
from vibethinker.engines.settings import EngineFields, TopKFields
from vibethinker.evaluate import PROMPT_STYLES, evaluate, samples_per_problem
from vibethinker.log import get_logger
from vibethinker.prompts.paper import prompt_examples, sampler_render, write_prompt_examples
from vibethinker.reports.eval import markdown_table, write_outputs
from vibethinker.stages import register
from vibethinker.verifiers import check_available
from vibethinker.verifiers.extract import ANSWER_FORMATS
from vibethinker.verifiers.math import with_answer_format
from vibethinker.verifiers.math_judge import judged_verify

log = get_logger("stages.eval")

# Samples per problem in the paper's protocol (docs/PAPER.md, Evaluation protocol): math 64,
# IMO-AnswerBench 16 (a math benchmark: keyed by its problems' `meta.source`), GPQA (our stem)
# 16, code 8. Instruction following is not given; we choose 8.
PAPER_N = {"math": 64, "imo-answerbench": 16, "stem": 16, "code": 8, "instruct": 8}


# The sampling and engine keys (temperature, top_p, top_k, max_new_tokens; engine, device,
# base_url, ...) are declared once, in engines/settings.py; eval's own default and note are here.
EVAL_SAMPLING = TopKFields.with_defaults(
    max_new_tokens=0,
    notes={"max_new_tokens": "Paper: no extra cap beyond the context (40K for VibeThinker)."},
)


@dataclass
class EvalConfig(EVAL_SAMPLING, EngineFields):
    model: str = ""
    """Model folder or hub id (engines hf, vllm); the served model name (engine openai)."""
    data: str = ""
    """Problems to evaluate: a Problem JSONL/JSON/parquet file or folder, or a public-format file
    read with `format`."""
    format: str = "problems"
    """`problems` (our records) or a public format: math (AIME/MATH), imo-answerbench (the math
    reader; source imo-answerbench, so n_by's 16, not math's 64), gpqa, livecodebench,
    humaneval, ifeval (data/adapters.py)."""
    out: str = "runs/eval"
    """Output folder: samples.jsonl, summary.json, summary.md, passk.png."""
    n: int = 0
    """Samples per problem; 0 = the paper's profile (PAPER_N: math 64, imo-answerbench 16,
    stem 16, code 8, instruct 8). Paper: math 64, IMO-AnswerBench 16, GPQA 16, code 8."""
    n_by: dict[str, int] = field(default_factory=dict)
    """Per-benchmark n on top of `n`: keys are a problem's `meta.source` (its benchmark, e.g.
    imo-answerbench; the adapters set it) or a domain; a problem takes its source's entry, else
    its domain's, else `n` (n = 0: PAPER_N's). Empty = `n` alone."""
    k: list[int] = field(default_factory=list)
    """k values for pass@k and maj@k; empty = follow n: the powers of two below n, and n (n=4:
    1, 2, 4; the per-domain profile: up to its largest n). k > n are dropped."""
    stop: list[str] = field(default_factory=list)
    """Stop strings (the model's EOS always stops). Paper: silent."""
    seed: int = 0
    """Sampling seed (same seed, same samples on the hf engine)."""
    prompt_style: str = "paper"
    """`paper`: the paper's math / multiple-choice prompts; `raw`: the stored prompt as is."""
    limit: int = 0
    """Evaluate at most `limit` problems (0 = all), balanced over the domains in the file
    (round-robin in file order), so a mixed file is not cut to its first domain."""
    domains: list[str] = field(default_factory=list)
    """Evaluate only these domains (empty = all). With one domain, it is also the domain of rows
    that have none (TRL-style data: data/shapes.py)."""
    answer_key: str = ""
    """The data's gold-answer column when it is not `answer` (e.g. `gold`; data/shapes.py)."""
    quick: bool = False
    """A cheap first look (`--quick`): n=4, max_new_tokens=2048 and limit=64 where those keys
    are left at 0 (QUICK). Not the paper's protocol; the default (false) is."""
    workers: int = runtime(2)
    """Verifier workers. Paper: silent; 2 = this CPU."""
    math_judge: str = ""
    """LLM judge as a second opinion for math, `MODEL@BASE_URL` (OpenAI-compatible; key from
    OPENAI_API_KEY): asked only where the rules cannot decide or say wrong; cached in `out`.
    summary.json's `math_judge` counts its work: `consulted`, `overturned` (the verdicts it
    changed, wrong -> right), `errors`, `share`. Paper: math-verify plus an LLM judge. Empty =
    rules only."""
    answer_format: str = "boxed"
    """Where a math response states its final answer (docs/VERIFY_MATH.md): `boxed` (the
    paper's), `answer_line` (PRM800K's `# Answer` line), `final_answer` ("The final answer is
    X"), `answer_colon` ("Answer: X"), `last_line`, or `auto` (boxed, answer_line, final_answer,
    answer_colon in turn). Paper: boxed; the others read outputs in other sources' formats."""

    def __post_init__(self) -> None:
        check_eval(self)


def check_eval(cfg: EvalConfig) -> None:
    """Every key's range; one error naming each bad key (config.Checks)."""
    c = Checks(cfg)
    c.at_least(
        0,
        "n",
        "top_k",
        "max_new_tokens",
        "context_len",
        "rope_yarn_factor",
        "rope_original_len",
        "limit",
    )
    c.at_least(1, "workers", "token_budget", "concurrency")
    for i, k in enumerate(cfg.k):
        if k < 1:
            c.bad("k", f"k[{i}]={k}: every k must be >= 1")
    c.at_least(0, "temperature")
    c.in_range("top_p", 0, 1)
    c.positive("timeout")
    c.one_of("format", ["problems", *ADAPTERS])
    c.one_of("engine", ("hf", "openai", "vllm"))
    c.one_of("prompt_style", PROMPT_STYLE_NAMES)
    c.one_of("dtype", ("auto", "bfloat16", "float16", "float32"))
    c.one_of("endpoint", ("chat", "completions"))
    c.domains("domains")
    c.one_of("answer_format", ANSWER_FORMATS)
    c.device(empty_ok=True)
    c.done()


# The `quick` profile: each applies where the key is left at 0. Our choice: small enough for a
# first try on a CPU, large enough to see whether a model answers at all.
QUICK = {"n": 4, "max_new_tokens": 2048, "limit": 64}


def apply_quick(cfg: EvalConfig) -> EvalConfig:
    """`cfg` with the QUICK profile filled in where quick=true and the key is 0."""
    if not cfg.quick:
        return cfg
    return dataclasses.replace(cfg, **{k: v for k, v in QUICK.items() if not getattr(cfg, k)})


def plan_line(cfg: EvalConfig, problems: list, n: int | dict) -> str:
    """What the run will do, said before it starts: problems per domain, samples, the token cap
    and the most tokens it may generate (every response at the cap)."""
    counts = Counter(p.domain for p in problems)
    each = samples_per_problem(problems, n)
    per: dict[str, set[int]] = {}
    for p, k in zip(problems, each):
        per.setdefault(p.domain, set()).add(k)
    samples = sum(each)
    shown = {d: "/".join(str(k) for k in sorted(ks)) for d, ks in per.items()}
    by_domain = ", ".join(f"{d} {counts[d]} x {shown[d]}" for d in sorted(counts))
    profile = " (n=0: the paper's per-domain profile)" if cfg.n == 0 else ""
    if cfg.max_new_tokens:
        most = samples * cfg.max_new_tokens
        cap = f"up to {cfg.max_new_tokens:,} new tokens each (at most {most:,} in all)"
    else:
        cap = "no token cap (max_new_tokens=0: each response may fill the model's context)"
    line = f"eval: {len(problems)} problems ({by_domain}) = {samples:,} samples{profile}, {cap}"
    if not cfg.quick and (cfg.n == 0 or not cfg.max_new_tokens):
        quick = ", ".join(f"{k}={v}" for k, v in QUICK.items())
        line += f"; for a cheap first look use --quick ({quick})"
    return line


class TimedSampler:
    """Wraps a sampler to say, after its first call, the measured rate and the time the whole
    run will take at that rate (the estimate a user needs before committing hours)."""

    def __init__(self, sampler: Any, total_samples: int):
        self.sampler, self.total, self.calls = sampler, total_samples, 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sampler, name)

    def generate(self, prompts: list, n: int, params: Any) -> list:
        t0 = time.perf_counter()
        outs = self.sampler.generate(prompts, n, params)
        self.calls += 1
        if self.calls == 1 and self.total > len(prompts) * n:
            done, secs = len(prompts) * n, time.perf_counter() - t0
            toks = sum(c.n_tokens or 0 for cs in outs for c in cs)
            log.info(
                "eval: the first %d samples took %.0f s (%.0f tokens/s): about %.0f min for "
                "all %d at this rate",
                done,
                secs,
                toks / max(secs, 1e-9),
                secs * self.total / done / 60,
                self.total,
            )
        return outs


class ProblemSource(Protocol):
    """The data keys an eval reads its problems by (EvalConfig's; the clr stage has the same)."""

    data: str
    format: str
    limit: int
    domains: list[str]
    seed: int


def load_eval_problems(cfg: ProblemSource, answer_key: str = ""):
    """The problems to evaluate; none of the asked domains is an error naming those present.
    `answer_key`: the gold column when it is not `answer` (EvalConfig.answer_key)."""
    if cfg.format == "problems":
        one = cfg.domains[0] if len(cfg.domains) == 1 else ""
        shape = RowShape(domain=one, answer_key=answer_key, ids=True)
        problems = load_problems(cfg.data, shape=shape)
    else:
        problems = load_adapter(cfg.format, cfg.data or None, seed=cfg.seed)
    chosen = select(problems, cfg.limit, list(cfg.domains))
    if problems and not chosen:
        have = ", ".join(f"{d} {k}" for d, k in sorted(Counter(p.domain for p in problems).items()))
        raise ValueError(
            f"eval: no problems of domains={','.join(cfg.domains) or 'any'} in "
            f"{cfg.data} (it has {have})"
        )
    return chosen


def n_profile(cfg: EvalConfig) -> int | dict[str, int]:
    """The n of `evaluate`: one int, or a source/domain -> n map (`n_by` over `n` or PAPER_N)."""
    if cfg.n > 0 and not cfg.n_by:
        return cfg.n
    base = dict(PAPER_N) if cfg.n <= 0 else {"default": cfg.n}
    bad = {k: v for k, v in cfg.n_by.items() if not isinstance(v, int) or v < 1}
    if bad:
        raise ValueError(f"eval: n_by values must be integers >= 1, got {bad}")
    return {**base, **cfg.n_by}


def default_ks(n: int | dict) -> list[int]:
    """k values that follow n: 1, 2, 4, ... below the largest n, and that n."""
    top = max(n.values()) if isinstance(n, dict) else n
    return sorted({2**i for i in range(top.bit_length()) if 2**i < top} | {top})


@register("eval", EvalConfig, positional=("model", "data"))
def run(cfg: EvalConfig) -> dict[str, str]:
    """Evaluate a model: n samples per problem, avg@n, pass@k, maj@k, tokens, truncation."""

    if not cfg.model or not (cfg.data or cfg.format == "humaneval"):
        raise ValueError("eval: `model` and `data` are required")
    cfg = apply_quick(cfg)
    problems = with_answer_format(load_eval_problems(cfg, cfg.answer_key), cfg.answer_format)
    if not problems:
        raise ValueError(f"eval: no problems in {cfg.data}")
    check_available({p.domain for p in problems})  # fail before sampling, not after
    params = cfg.sampling_params(seed=cfg.seed, stop=list(cfg.stop))
    n = n_profile(cfg)
    log.info("%s; engine %s", plan_line(cfg, problems, n), cfg.engine)
    total = sum(samples_per_problem(problems, n))
    sampler = TimedSampler(cfg.make_engine(cfg.model, cfg.seed), total)
    prompt_fn = PROMPT_STYLES[cfg.prompt_style]
    examples = prompt_examples(problems, prompt_fn, sampler_render(sampler))
    write_prompt_examples(cfg.out, examples)  # out/prompt_examples.jsonl
    judged = None
    if cfg.math_judge:
        judged = judged_verify(cfg.math_judge, cfg.out)
    result = evaluate(
        sampler,
        problems,
        n=n,
        ks=list(cfg.k) or default_ks(n),
        params=params,
        workers=cfg.workers,
        prompt_fn=prompt_fn,
        verify_fn=judged,
    )
    meta: dict[str, Any] = {}
    if judged is not None:  # how many verdicts the judge changed, in summary.json
        meta["math_judge"] = judged.stats.as_dict()
        log.info("math judge: %s", meta["math_judge"])
    outputs = write_outputs(
        result,
        cfg.out,
        model=cfg.model,
        data=cfg.data,
        engine=cfg.engine,
        format=cfg.format,
        **meta,
    )
    log.info("eval results (%.0f s):\n%s", result.seconds, markdown_table(result.metrics))
    return outputs
