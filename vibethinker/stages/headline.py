"""Stage `headline`: the run's headline, held-out accuracy per domain after each stage.

    vibethinker headline models='{sft1: runs/tiny/sft1/final, rl_math: runs/tiny/rl_math/final}' \
        data=runs/tiny/data/eval.jsonl out=runs/tiny/headline

Every listed model is sampled on the same problems (the first `limit_per_domain` of each domain)
with the same protocol and seed, through the eval stage's machinery (one batched sampler call per
model, the domain verifiers); consecutive rows with the same checkpoint (a path or identical
weights, e.g. a skipped RL stage that passed its model through) are evaluated once and marked.
Writes headline.json (every cell and line, per-problem scores), headline.md (table, stage lines,
where the story does not hold), headline.png and summary.md (protocol and cost); the run report
puts headline.md at its top (report.py). Each model's per-problem scores are cached in
`out/models/` under a key of the protocol and the checkpoint's files, so an interrupted stage
resumes without re-sampling finished models.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibethinker.config import Checks, runtime
from vibethinker.data.io import load_problems
from vibethinker.engines.settings import EngineFields, LocalEngineFields, TopKFields
from vibethinker.evaluate import evaluate, paper_prompt
from vibethinker.evaluate.headline import Row, build_headline, parse_rows, pick_problems
from vibethinker.evaluate.report import write_samples
from vibethinker.log import get_logger, progress_bar
from vibethinker.reports.headline import (
    headline_markdown,
    plot_headline,
    summary_markdown,
    training_steps,
)
from vibethinker.stages import register
from vibethinker.verifiers import check_available

log = get_logger("stages.headline")
WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt")


# The sampling and engine keys (temperature, top_p, top_k, max_new_tokens; engine, device, dtype,
# token_budget, context_len) are declared once, in engines/settings.py; the headline's own
# defaults and notes are here. Its token_budget is runtime (a recipe does not re-run the stage
# for it), but the hf engine draws every batch from one generator, so the batch size changes
# its samples: with hf, token_budget is part of the protocol that keys each model's cached
# scores, and a new budget re-scores every row (no table mixes two batchings).
HEADLINE_SAMPLING = TopKFields.with_defaults(
    max_new_tokens=160,
    notes={"max_new_tokens": "headline: the same for every row."},
)
HEADLINE_ENGINE = LocalEngineFields.with_defaults(
    token_budget=runtime(131072),
    notes={"engine": "headline: hf or vllm, the same for every row."},
)


@dataclass
class HeadlineConfig(HEADLINE_SAMPLING, HEADLINE_ENGINE):
    models: Any = field(default_factory=list)
    """The model after each stage, in pipeline order: a list of {name, model[, domain, start]}
    or a mapping name -> model. `domain` marks a specialist (checked to beat its starting point
    on that domain; `all`: on every domain); `start` names that starting row (default: the row
    before). The first row is the baseline the final (last) row must beat on every domain."""
    data: str = ""
    """Held-out problems (a Problem JSONL file or folder), e.g. the data stage's eval.jsonl."""
    out: str = "runs/headline"
    """Output folder: headline.json, headline.md, headline.png, summary.md, models/ (cache)."""
    limit_per_domain: int = 60
    """Problems per domain: the first this many of each domain in file order (0 = all). Our
    choice (the paper reports per-benchmark tables, not a per-stage headline)."""
    n: int = 4
    """Samples per problem (a problem's score is its avg@n). Same for every row."""
    seed: int = 0
    """Sampling seed, the same for every row (common random numbers for the paired comparison)
    and the bootstrap's seed."""
    conf: float = 0.95
    """Confidence level of every interval (bootstrap over problems; paired between rows)."""
    n_boot: int = 2000
    """Bootstrap resamples per interval."""
    workers: int = runtime(2)
    """Verifier workers."""

    def __post_init__(self) -> None:
        """Every key's range, when the config is built."""
        c = Checks(self)
        c.at_least(1, "limit_per_domain", "n", "n_boot", "token_budget", "workers")
        c.at_least(0, "max_new_tokens", "top_k", "context_len", "temperature")
        c.in_range("top_p", 0, 1)
        c.in_range("conf", 0, 1)
        c.one_of("engine", ("hf", "openai", "vllm"))
        c.one_of("dtype", ("auto", "bfloat16", "float16", "float32"))  # as the eval stage's
        c.device(empty_ok=True)
        c.done()


def check_models(rows: list[Row]) -> None:
    """Every listed model folder exists: the error names the stage (row) and the path."""
    for r in rows:
        if not Path(r.model).is_dir():
            raise FileNotFoundError(
                f"headline: the model of stage {r.name!r} was not found at "
                f"{r.model} (did that stage run?)"
            )


def _files(folder: str) -> list[Path]:
    return sorted(p for p in Path(folder).rglob("*") if p.is_file())


def fingerprint(folder: str) -> list[list[Any]]:
    """The checkpoint's files (relative name, size, mtime): a cache entry is stale when the
    model at the same path was rewritten."""
    root = Path(folder)
    return [
        [str(p.relative_to(root)), p.stat().st_size, p.stat().st_mtime_ns] for p in _files(folder)
    ]


def _weights(folder: str) -> list[Path]:
    return [p for p in _files(folder) if p.suffix in WEIGHT_SUFFIXES]


def same_checkpoint(a: str, b: str) -> bool:
    """The same folder, or the same weight files byte for byte (a stage that passed its input
    through as a copy). Hashes only when the names and sizes already match."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    wa, wb = _weights(a), _weights(b)
    shape = [(p.relative_to(a), p.stat().st_size) for p in wa]
    if not wa or shape != [(p.relative_to(b), p.stat().st_size) for p in wb]:
        return False
    return all(_sha256(x) == _sha256(y) for x, y in zip(wa, wb))


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def same_as_map(rows: list[Row]) -> dict[str, str]:
    """Row name -> the earlier row it shares its checkpoint with (consecutive rows only; a run
    of equal rows all point at its first)."""
    out: dict[str, str] = {}
    for prev, r in zip(rows, rows[1:]):
        if same_checkpoint(prev.model, r.model):
            out[r.name] = out.get(prev.name, prev.name)
    return out


def protocol(cfg: HeadlineConfig, problems: list) -> dict[str, Any]:
    counts: dict[str, int] = {}
    for p in problems:
        counts[p.domain] = counts.get(p.domain, 0) + 1
    return {
        "data": cfg.data,
        "problems_per_domain": counts,
        "n": cfg.n,
        "max_new_tokens": cfg.max_new_tokens,
        "temperature": cfg.temperature,
        "top_p": cfg.top_p,
        "top_k": cfg.top_k,
        "seed": cfg.seed,
        "engine": cfg.engine,
        "dtype": cfg.dtype,
        "context_len": cfg.context_len,
        **({"token_budget": cfg.token_budget} if cfg.engine == "hf" else {}),
        "problem_ids": hashlib.sha256("\n".join(p.id for p in problems).encode()).hexdigest(),
    }


def _cache_path(cfg: HeadlineConfig, name: str) -> Path:
    return Path(cfg.out) / "models" / f"{name}.json"


def load_cached(path: Path, key: dict[str, Any]) -> dict[str, Any] | None:
    """A model's cached scores when its key (protocol + checkpoint files) still matches."""
    try:
        rec = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return rec if rec.get("key") == json.loads(json.dumps(key)) else None


def _write_json(path: Path, obj: Any) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(obj, indent=1) + "\n")
    os.replace(tmp, path)  # atomic: an interrupt never leaves half a cache entry
    return str(path)


def score_model(cfg: HeadlineConfig, row: Row, problems: list) -> dict[str, Any]:
    """Sample and verify one model (one batched sampler call); per-problem avg@n."""

    engine = EngineFields(
        engine=cfg.engine,
        dtype=cfg.dtype,
        device=cfg.device,
        token_budget=cfg.token_budget,
        context_len=cfg.context_len,
    )
    params = cfg.sampling_params(seed=cfg.seed)
    sampler = engine.make_engine(row.model, cfg.seed)
    try:
        result = evaluate(
            sampler,
            problems,
            n=cfg.n,
            ks=[1],
            params=params,
            workers=cfg.workers,
            prompt_fn=paper_prompt,
            chunk=len(problems),
        )
    finally:
        del sampler
        gc.collect()
    write_samples(Path(cfg.out) / "models" / f"{row.name}.samples.jsonl", result.sample_rows())
    return {
        "ids": [p.id for p in problems],
        "scores": [s["avg"] for s in result.stats],
        "seconds": result.seconds,
        "accuracy": result.accuracy,
    }


def check_config(cfg: HeadlineConfig) -> None:
    """Refuse missing data, an engine other than hf or vllm, and n < 1."""
    if not cfg.data or not Path(cfg.data).exists():
        raise FileNotFoundError(f"headline: data {cfg.data!r} not found (held-out problems)")
    if cfg.engine not in ("hf", "vllm"):
        raise ValueError(f"headline: engine must be hf or vllm, got {cfg.engine!r}")
    if cfg.n < 1:
        raise ValueError(f"headline: n must be >= 1, got {cfg.n}")


def score_or_reuse(
    cfg: HeadlineConfig, r: Row, problems: list, proto: dict[str, Any]
) -> dict[str, Any]:
    """One row's scores: from its cache when the protocol, data and model files are unchanged,
    else sampled and verified (`score_model`) and cached."""
    key = {
        **proto,
        "data": os.path.realpath(cfg.data),
        "model": os.path.realpath(r.model),
        "files": fingerprint(r.model),
    }
    cached = load_cached(_cache_path(cfg, r.name), key)
    if cached is None:
        rec = {"key": key, **score_model(cfg, r, problems), "cached": False}
        _write_json(_cache_path(cfg, r.name), rec)
        log.info("headline: %s all %.3f (%.0f s)", r.name, rec["accuracy"], rec["seconds"])
    else:
        rec = {**cached, "cached": True}
        log.info("headline: %s from the cache (%s)", r.name, _cache_path(cfg, r.name))
    return rec


def write_outputs(out: Path, h: dict[str, Any]) -> dict[str, str]:
    """headline.json, headline.png, headline.md and summary.md; their paths."""
    outputs = {
        "headline": _write_json(out / "headline.json", h),
        "plot": plot_headline(out / "headline.png", h),
    }
    (out / "headline.md").write_text(headline_markdown(h))
    (out / "summary.md").write_text(summary_markdown(h))
    outputs.update(table=str(out / "headline.md"), summary=str(out / "summary.md"))
    log.info("headline:\n%s", headline_markdown(h))
    return outputs


@register("headline", HeadlineConfig, resumable=True)
def run(cfg: HeadlineConfig) -> dict[str, str]:
    """The report's headline: held-out accuracy per domain after each stage, with intervals."""

    rows = parse_rows(cfg.models)
    check_config(cfg)
    check_models(rows)
    problems = pick_problems(load_problems(cfg.data), cfg.limit_per_domain)
    if not problems:
        raise ValueError(f"headline: no problems in {cfg.data}")
    check_available({p.domain for p in problems})
    proto = protocol(cfg, problems)
    same_as = same_as_map(rows)
    todo = [r for r in rows if r.name not in same_as]
    log.info(
        "headline: %d rows (%d models to evaluate) x %d problems x %d samples",
        len(rows),
        len(todo),
        len(problems),
        cfg.n,
    )
    results: dict[str, dict[str, Any]] = {}
    bar = progress_bar(len(todo), desc="headline models")
    t0 = time.perf_counter()
    for r in todo:
        bar.set_postfix(model=r.name)
        results[r.name] = score_or_reuse(cfg, r, problems, proto)
        bar.update(1)
    bar.close()
    for name, first in same_as.items():
        results[name] = results[first]
    domains = [p.domain for p in problems]
    h = build_headline(
        rows,
        {r.name: results[r.name]["scores"] for r in rows},
        domains,
        cfg.n,
        same_as,
        cfg.conf,
        cfg.n_boot,
        cfg.seed,
    )
    h["protocol"] = proto
    h["problems"] = [{"id": p.id, "domain": p.domain} for p in problems]
    for row in h["rows"]:
        rec = results[row["name"]]
        row.update(
            scores=rec["scores"],
            seconds=0.0 if row["same_as"] else rec["seconds"],
            cached=rec["cached"],
            steps=training_steps(row["model"]),
        )
    h["seconds"] = time.perf_counter() - t0
    return write_outputs(Path(cfg.out), h)
