"""Stage `eval`: sample n responses per problem, verify, report avg@n / pass@k / maj@k / tokens.

`vibethinker eval model=runs/x/final data=eval.jsonl n=8 k=1,4,8 engine=hf out=runs/x/eval`
writes `samples.jsonl` (every sample with its score and reason), `summary.json`, `summary.md`
(a markdown table per domain and subdomain) and `passk.png`. Defaults follow the paper's
protocol: temperature 1.0, top-p 0.95, top-k off, the paper's prompts, the model's chat template,
n per domain (math 64, stem/GPQA 16, code 8; `PAPER_N`) and no extra output cap (each response
may fill the model's context: `max_new_tokens=0`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vibethinker.config import runtime
from vibethinker.log import get_logger
from vibethinker.stages import register

log = get_logger("stages.eval")

# Samples per problem in the paper's protocol (PAPER.md, Evaluation protocol): math 64, GPQA
# (our stem) 16, code 8. Instruction following is not given; we choose 8.
PAPER_N = {"math": 64, "stem": 16, "code": 8, "instruct": 8}


@dataclass
class EvalConfig:
    model: str = ""
    """Model folder or hub id (engines hf, vllm); the served model name (engine openai)."""
    data: str = ""
    """Problems to evaluate: a Problem JSONL/JSON/parquet file or folder, or a public-format file
    read with `format`."""
    format: str = "problems"
    """`problems` (our records) or a public format: math (AIME/MATH), gpqa, livecodebench,
    humaneval, ifeval (data/adapters.py)."""
    out: str = "runs/eval"
    """Output folder: samples.jsonl, summary.json, summary.md, passk.png."""
    n: int = 0
    """Samples per problem; 0 = the paper's per-domain profile (PAPER_N: math 64, stem 16,
    code 8, instruct 8). Paper: math 64, IMO-AnswerBench 16, GPQA 16, code 8."""
    k: list[int] = field(default_factory=list)
    """k values for pass@k and maj@k; empty = follow n: the powers of two below n, and n (n=4:
    1, 2, 4; the per-domain profile: up to its largest n). k > n are dropped."""
    engine: str = "hf"
    """Sampler: hf (in-process transformers), openai (HTTP server), vllm (in-process, GPU)."""
    temperature: float = 1.0
    """Sampling temperature. Paper: 1.0."""
    top_p: float = 0.95
    """Nucleus sampling. Paper: 0.95."""
    top_k: int = 0
    """Top-k sampling, 0 = off. Paper: off."""
    max_new_tokens: int = 0
    """Cap on response tokens; 0 = no extra cap: a response may fill the context (prompt +
    response <= context_len). Paper: no extra cap beyond the context (40K for VibeThinker)."""
    context_len: int = 0
    """hf engine: prompt + response token bound; 0 = the model's max_position_embeddings
    (after RoPE scaling). More than the model's positions is refused without rope_yarn_factor."""
    rope_yarn_factor: float = 0.0
    """hf/vllm engine: extend the model's context with YaRN by this factor (0: off)."""
    rope_original_len: int = 0
    """YaRN's original length; 0 = the model's max_position_embeddings."""
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
    """Evaluate only these domains (empty = all)."""
    workers: int = runtime(2)
    """Verifier workers. Paper: silent; 2 = this CPU."""
    device: str = runtime("")
    """hf engine: cpu, cuda, cuda:1 ...; empty = cuda when available."""
    dtype: str = "auto"
    """hf/vllm engine: auto (fp32 on CPU, the checkpoint's dtype on GPU), bfloat16, float32."""
    token_budget: int = 131072
    """hf engine: rows x (prompt + max_new_tokens) per batch; bounds KV-cache memory."""
    base_url: str = "http://127.0.0.1:8000/v1"
    """openai engine: the server's base URL (API key from OPENAI_API_KEY)."""
    endpoint: str = "chat"
    """openai engine: chat (server applies the chat template) or completions."""
    concurrency: int = runtime(8)
    """openai engine: requests in flight."""
    timeout: float = runtime(600.0)
    """openai engine: seconds per request before a retry."""
    tokenizer: str = ""
    """openai engine: the served model's tokenizer folder (default: `model` when it is a local
    folder): adds the chat template's turn end as a stop string and counts tokens when the
    server reports none."""
    math_judge: str = ""
    """LLM judge as a second opinion for math, `MODEL@BASE_URL` (OpenAI-compatible; key from
    OPENAI_API_KEY): asked only where the rules cannot decide or say wrong; cached in `out`.
    Paper: math-verify plus an LLM judge. Empty = rules only."""


def make_engine(cfg: EvalConfig):
    from vibethinker.engines import make_sampler

    rope = {"rope_yarn_factor": cfg.rope_yarn_factor, "rope_original_len": cfg.rope_original_len}
    if cfg.engine == "hf":
        return make_sampler(
            "hf",
            model=cfg.model,
            device=cfg.device or None,
            dtype=cfg.dtype,
            token_budget=cfg.token_budget,
            context_len=cfg.context_len,
            **rope,
        )
    if cfg.engine == "openai":
        tok = cfg.tokenizer or (cfg.model if (Path(cfg.model) / "config.json").exists() else "")
        return make_sampler(
            "openai",
            base_url=cfg.base_url,
            model=cfg.model,
            endpoint=cfg.endpoint,
            concurrency=cfg.concurrency,
            timeout=cfg.timeout,
            tokenizer=tok or None,
        )
    kw = {"max_model_len": cfg.context_len} if cfg.context_len else {}
    return make_sampler(cfg.engine, model=cfg.model, dtype=cfg.dtype, seed=cfg.seed, **kw, **rope)


def load_eval_problems(cfg: EvalConfig):
    if cfg.format == "problems":
        from vibethinker.data.io import load_problems

        problems = load_problems(cfg.data)
    else:
        from vibethinker.data.adapters import load_adapter

        problems = load_adapter(cfg.format, cfg.data or None, seed=cfg.seed)
    from vibethinker.data.io import select

    return select(problems, cfg.limit, list(cfg.domains))


def default_ks(n: int | dict) -> list[int]:
    """k values that follow n: 1, 2, 4, ... below the largest n, and that n."""
    top = max(n.values()) if isinstance(n, dict) else n
    return sorted({2**i for i in range(top.bit_length()) if 2**i < top} | {top})


@register("eval", EvalConfig, positional=("model", "data"))
def run(cfg: EvalConfig) -> dict[str, str]:
    """Evaluate a model: n samples per problem, avg@n, pass@k, maj@k, tokens, truncation."""
    from vibethinker.engines import SamplingParams
    from vibethinker.evaluate import PROMPT_STYLES, evaluate, write_outputs
    from vibethinker.evaluate.report import markdown_table, n_text
    from vibethinker.verifiers import check_available

    if not cfg.model or not (cfg.data or cfg.format == "humaneval"):
        raise ValueError("eval: `model` and `data` are required")
    if cfg.prompt_style not in PROMPT_STYLES:
        raise ValueError(f"prompt_style must be one of {sorted(PROMPT_STYLES)}")
    problems = load_eval_problems(cfg)
    if not problems:
        raise ValueError(f"eval: no problems in {cfg.data}")
    check_available({p.domain for p in problems})  # fail before sampling, not after
    params = SamplingParams(
        temperature=cfg.temperature,
        top_p=cfg.top_p,
        top_k=cfg.top_k,
        max_new_tokens=cfg.max_new_tokens,
        stop=list(cfg.stop),
        seed=cfg.seed,
    )
    n = cfg.n if cfg.n > 0 else PAPER_N
    log.info("eval: %d problems x %s samples with %s", len(problems),
             n_text(n, {p.domain for p in problems}), cfg.engine)  # fmt: skip
    sampler = make_engine(cfg)
    judged = None
    if cfg.math_judge:
        from vibethinker.verifiers.math_judge import judged_verify

        judged = judged_verify(cfg.math_judge, cfg.out)
    result = evaluate(
        sampler,
        problems,
        n=n,
        ks=list(cfg.k) or default_ks(n),
        params=params,
        workers=cfg.workers,
        prompt_fn=PROMPT_STYLES[cfg.prompt_style],
        verify_fn=judged,
    )
    if judged is not None:
        log.info("math judge: %s", judged.stats.as_dict())
    outputs = write_outputs(
        result, cfg.out, model=cfg.model, data=cfg.data, engine=cfg.engine, format=cfg.format
    )
    log.info("eval results (%.0f s):\n%s", result.seconds, markdown_table(result.metrics))
    return outputs
