"""Stage `sft`: curriculum SFT (docs/PAPER.md, stage 1). A recipe runs it twice.

Stage 1 (broad): every trace of every problem, 5 epochs. Stage 2 (hard, long): start from stage
1's model, keep only traces of at least `min_trace_tokens` tokens, and only prompts that a
reference model gets wrong at least `filter_min_error` of the time over `filter_rollouts` samples;
2 epochs. Both save a checkpoint every `save_every` steps for diversity probing (`probe_merge`).

    vibethinker sft model=runs/tiny/model data=runs/tiny/data/train.jsonl out=runs/sft1

Outputs in `out`: checkpoints/step-XXXXXX/ (HF folders + trainer state), final/ (HF folder),
metrics.jsonl, loss.png, summary.md, data.jsonl (the training set after the filters) and
filters.json (how many each filter removed). Interrupted runs resume from the last checkpoint.
"""

from __future__ import annotations

import dataclasses
import json
import time
from pathlib import Path
from typing import Any

from vibethinker import statefile, verifiers
from vibethinker.data.io import load_mixture, load_problems, save_problems
from vibethinker.data.shapes import RowShape
from vibethinker.engines import SamplingParams, make_sampler
from vibethinker.evaluate import PROMPT_STYLES, evaluate
from vibethinker.evaluate.metrics import truncation_verdicts
from vibethinker.log import get_logger
from vibethinker.models import check_context
from vibethinker.prompts.paper import prompt_examples, write_prompt_examples
from vibethinker.reports.sft import plot_loss, summary_md
from vibethinker.stages import register
from vibethinker.train.sft_config import SFTConfig
from vibethinker.types import CHAT_DOMAIN, Problem

log = get_logger("stages.sft")


# ----------------------------------------------------------------------------- filters


def row_shape(cfg: SFTConfig) -> RowShape:
    """How this stage reads rows in other tools' shapes: rows without an id are numbered, a sole
    `domains` entry is the default domain (else `chat`: SFT needs no verifier, so a TRL
    conversational row, `{"messages": [...]}` alone, trains as dialogue), and answers are needed
    only by the stage-2 filter."""
    return RowShape(
        domain=cfg.domains[0] if len(cfg.domains) == 1 else CHAT_DOMAIN,
        answer_key=cfg.answer_key,
        ids=True,
        need_gold=bool(cfg.filter_ref_model),
    )


def read_training_data(cfg: SFTConfig) -> list[Problem]:
    """The `data` records, checked: run before any model loads, so a data problem costs no load.
    Raises when no record has a trace (nothing to train on)."""
    shape = row_shape(cfg)
    raw = (
        load_mixture(
            cfg.data, list(cfg.data_probs), cfg.seed, domains=list(cfg.domains), shape=shape
        )
        if "," in cfg.data
        else load_problems(_train_path(cfg.data), shape=shape)
    )
    if raw and not any(p.traces for p in raw):
        raise ValueError(
            f"sft: none of the {len(raw)} records in {cfg.data} has a trace (the response to "
            "train on): give `traces`, `completion`, `solution` or a final assistant message "
            "(docs/REAL_WORLD.md, Bringing your own data)"
        )
    return raw


def _train_path(data: str) -> Path:
    path = Path(data)
    if path.is_dir():
        path = path / "train.jsonl"
    if not path.exists():
        raise FileNotFoundError(f"sft: training data {path} not found (set `data`)")
    return path


def filter_short_traces(
    problems: list[Problem], n_tokens: Any, min_tokens: int
) -> tuple[list[Problem], dict[str, int]]:
    """Keep traces with at least `min_tokens` tokens (`n_tokens(text) -> int`); problems left
    without a trace are dropped. Returns (kept problems, counts)."""
    kept, removed = [], 0
    for p in problems:
        traces = [t for t in p.traces or [] if n_tokens(t) >= min_tokens]
        removed += len(p.traces or []) - len(traces)
        if traces:
            kept.append(dataclasses.replace(p, traces=traces))
    return kept, {
        "short_traces_removed": removed,
        "problems_left_without_trace": len(problems) - len(kept),
    }


def filter_easy_prompts(
    problems: list[Problem],
    sampler: Any,
    rollouts: int,
    min_error: float,
    max_new_tokens: int,
    seed: int,
    prompt_fn: Any = None,
    verify: Any = None,
    truncated_reward: str = "zero",
) -> tuple[list[Problem], dict[str, Any]]:
    """Sample `rollouts` responses per prompt, verify them, keep prompts whose error rate is at
    least `min_error` (docs/PAPER.md stage 2: 8 rollouts, drop error rate < 0.75). A rollout cut at
    `max_new_tokens` is judged by `truncated_reward` ("zero": an error; "verify": its text is
    scored), the rl stage's rule; the counts say how many rollouts were cut and how many
    keep/drop decisions the rule decided (`truncation_decisions`)."""
    if verify is None:
        verify = verifiers.verify_batch
    params = SamplingParams(max_new_tokens=max_new_tokens, seed=seed)
    prompt_fn = prompt_fn or (lambda p: p.prompt)
    outs = sampler.generate([prompt_fn(p) for p in problems], rollouts, params)
    flat = [(p, c) for p, cs in zip(problems, outs) for c in cs]
    scores = verify([p for p, _ in flat], [c.text for _, c in flat])
    cut = [c.truncated for _, c in flat]
    verdicts = truncation_verdicts([s.correct for s in scores], cut)  # rule -> [correct]
    if truncated_reward not in verdicts:
        raise ValueError(f"truncated_reward must be one of {sorted(verdicts)}")
    kept, errors, flips = [], [], 0
    for i, p in enumerate(problems):
        span = slice(i * rollouts, (i + 1) * rollouts)
        keep = {r: 1.0 - sum(v[span]) / rollouts >= min_error for r, v in verdicts.items()}
        err = 1.0 - sum(verdicts[truncated_reward][span]) / rollouts
        errors.append(err)
        flips += len(set(keep.values())) > 1
        if keep[truncated_reward]:
            kept.append(p)
    counts = {
        "easy_prompts_removed": len(problems) - len(kept),
        "ref_mean_error": round(sum(errors) / max(len(errors), 1), 4),
        "ref_truncated_rollouts": sum(cut),
        "truncation_decisions": flips,
    }
    if sum(cut):
        log.warning(
            "sft filter: %d of %d reference rollouts hit filter_max_new_tokens=%d and "
            "count as %s; %d keep/drop decisions depend on that (raise the cap, or set "
            "filter_truncated_reward)",
            sum(cut),
            len(cut),
            max_new_tokens,
            "errors" if truncated_reward == "zero" else "verified text",
            flips,
        )
    return kept, counts


def apply_filters(cfg: SFTConfig, problems: list[Problem], tokenizer: Any) -> tuple[list, dict]:
    counts: dict[str, Any] = {
        "problems_in": len(problems),
        "traces_in": sum(len(p.traces or []) for p in problems),
    }
    no_trace = [p for p in problems if not p.traces]
    if no_trace:
        log.warning("sft: %d problems have no traces and are skipped", len(no_trace))
    counts["problems_without_traces"] = len(no_trace)
    problems = [p for p in problems if p.traces]
    if cfg.domains:
        before = len(problems)
        problems = [p for p in problems if p.domain in cfg.domains]
        counts["other_domains_removed"] = before - len(problems)
    if cfg.min_trace_tokens > 0:
        n_tok = lambda t: len(tokenizer(t, add_special_tokens=False)["input_ids"])  # noqa: E731
        problems, c = filter_short_traces(problems, n_tok, cfg.min_trace_tokens)
        counts.update(c)
        log.info(
            "sft filter: %d traces shorter than %d tokens removed",
            c["short_traces_removed"],
            cfg.min_trace_tokens,
        )
    if cfg.filter_ref_model and problems:
        kw: dict[str, Any] = {"model": cfg.filter_ref_model}
        if cfg.filter_engine == "hf":
            from vibethinker.train.policy import resolve_device

            kw["device"] = resolve_device(cfg.device)
        sampler = make_sampler(cfg.filter_engine, **kw)
        problems, c = filter_easy_prompts(
            problems,
            sampler,
            cfg.filter_rollouts,
            cfg.filter_min_error,
            cfg.filter_max_new_tokens,
            cfg.seed,
            PROMPT_STYLES[cfg.prompt_style],
            truncated_reward=cfg.filter_truncated_reward,
        )
        del sampler
        counts.update(c)
        log.info(
            "sft filter: %d prompts with reference error rate < %.2f removed",
            c["easy_prompts_removed"],
            cfg.filter_min_error,
        )
    counts["problems_out"] = len(problems)
    counts["traces_out"] = sum(len(p.traces or []) for p in problems)
    return problems, counts


def _filter_key(cfg: SFTConfig) -> dict[str, Any]:
    keys = (
        "model",
        "data",
        "data_probs",
        "domains",
        "answer_key",
        "prompt_style",
        "min_trace_tokens",
        "filter_ref_model",
        "filter_rollouts",
        "filter_min_error",
        "filter_max_new_tokens",
        "filter_truncated_reward",
        "seed",
    )
    return {k: getattr(cfg, k) for k in keys}


def load_training_set(cfg: SFTConfig, tokenizer: Any) -> tuple[list[Problem], dict[str, Any]]:
    """The filtered problems; cached in out/data.jsonl + filters.json so a resumed run does not
    re-sample the reference model (and trains on exactly the same set)."""
    out = Path(cfg.out)
    cache, meta = out / "data.jsonl", out / "filters.json"
    info = statefile.read_json(meta) if cache.exists() else None  # empty/torn: recomputed
    if isinstance(info, dict) and "counts" in info:
        if info.get("key") == _filter_key(cfg):
            log.info("sft: reusing the filtered training set %s", cache)
            return load_problems(cache, shape=row_shape(cfg)), info["counts"]
    raw = read_training_data(cfg)
    problems, counts = apply_filters(cfg, raw, tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    save_problems(cache, problems)
    statefile.write_json(meta, {"key": _filter_key(cfg), "counts": counts})
    return problems, counts


def train_render(tokenizer: Any) -> Any:
    """A prompt as SFT trains on it: the tokens before the response (packing.encode_chat), as
    text."""
    from vibethinker.train.packing import encode_chat

    def render(prompt: Any) -> str:
        ids, mask = encode_chat(tokenizer, prompt, "")
        return tokenizer.decode(ids[: mask.index(1)] if 1 in mask else ids)

    return render


# ----------------------------------------------------------------------------- eval report


def sampled_pass1(
    model_dir: str,
    path: str,
    n: int,
    limit: int,
    max_new: int,
    seed: int,
    device: str,
    prompt_style: str,
) -> dict[str, float]:
    """avg@n (the paper's Pass@1) per slice (all, domains, subdomains) on the first `limit`
    problems of `path`, through the evaluation harness."""
    problems = load_problems(path)[:limit]
    sampler = make_sampler("hf", model=model_dir, device=device)
    res = evaluate(
        sampler,
        problems,
        n,
        [1],
        SamplingParams(max_new_tokens=max_new, seed=seed),
        prompt_fn=PROMPT_STYLES[prompt_style],
    )
    return {k: round(v["avg@n"], 4) for k, v in res.metrics.items()}


# ----------------------------------------------------------------------------- stage


def training_samples(
    cfg: SFTConfig, tok: Any, problems: list[Problem], counts: dict[str, Any]
) -> tuple[list[Any], int, int]:
    """(packed samples, how many were cut, how many dropped) of every trace of `problems`, in
    the prompt style; the first prompts as trained on are written out (rank 0)."""
    from vibethinker.train import dist, packing

    out = Path(cfg.out)
    prompt_fn = PROMPT_STYLES[cfg.prompt_style]
    if dist.is_main():  # the first prompts as trained on: prompt_style and chat template applied
        write_prompt_examples(out, prompt_examples(problems, prompt_fn, train_render(tok)))
    pairs = [(prompt_fn(p), t) for p in problems for t in p.traces or []]
    samples = packing.build_samples(pairs, tok, cfg.max_len, cfg.overlong)
    n_cut = sum(s.truncated for s in samples)
    n_dropped = len(pairs) - len(samples)
    if n_cut or n_dropped:
        log.warning(
            "sft: %d of %d samples are longer than max_len=%d: %s",
            n_cut + n_dropped,
            len(pairs),
            cfg.max_len,
            "cut" if n_cut else "dropped",
        )
    if not pairs:
        raise ValueError(f"sft: no trace left to train on after the filters ({counts})")
    if not samples:
        raise ValueError(
            f"sft: every sample is longer than max_len={cfg.max_len} (overlong="
            f"{cfg.overlong}); raise max_len or set overlong=cut"
        )
    return samples, n_cut, n_dropped


def write_reports(
    cfg: SFTConfig,
    final: str,
    stats: dict[str, Any],
    counts: dict[str, Any],
    sizes: tuple[int, int, int],
    device: str,
    t0: float,
) -> None:
    """The loss plot, the held-out pass@1 (with `eval_data`), stats.json and summary.md;
    `sizes`: (samples, cut, dropped)."""
    out = Path(cfg.out)
    n_samples, n_cut, n_dropped = sizes
    plot_loss(out / "metrics.jsonl", out / "loss.png", f"SFT: {out.name}")
    pass1 = None
    if cfg.eval_data:
        pass1 = sampled_pass1(
            final,
            cfg.eval_data,
            cfg.eval_n,
            cfg.eval_limit,
            cfg.eval_max_new_tokens,
            cfg.seed,
            device,
            cfg.prompt_style,
        )
    stats.update(
        samples=n_samples,
        samples_cut=n_cut,
        samples_dropped_overlong=n_dropped,
        filters=counts,
        pass1=pass1,
        wall_seconds=round(time.time() - t0, 1),
    )
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    (out / "summary.md").write_text(
        summary_md(cfg, stats, counts, n_samples, n_cut, pass1, n_dropped)
    )
    log.info(
        "sft done: %d steps, final loss %.4f, %s tokens/s",
        stats["steps"],
        stats["final_loss"],
        stats["tokens_per_s"],
    )


@register("sft", SFTConfig, resumable=True, positional=("model", "data"))
def run(cfg: SFTConfig) -> dict[str, str]:
    """Supervised fine-tuning on multi-path traces (curriculum stage 1 or 2), checkpointing."""
    from vibethinker.train import checkpoints, dist, policy, sft

    if not cfg.model:
        raise ValueError("sft: `model` is required (a HF folder or hub id)")
    t0 = time.time()
    out = Path(cfg.out)
    read_training_data(cfg)  # a data problem is reported before the model loads
    device = policy.resolve_device(cfg.device)
    model, tok = policy.load_policy(
        cfg.model,
        device,
        cfg.gradient_checkpointing,
        rope_yarn_factor=cfg.rope_yarn_factor,
        rope_original_len=cfg.rope_original_len,
    )

    check_context(model.config, cfg.max_len, f"sft max_len={cfg.max_len}")
    model = policy.apply_lora(model, cfg.lora_r, cfg.lora_alpha, cfg.lora_targets)
    problems, counts = dist.main_first(load_training_set, cfg, tok)  # rank 0 filters

    samples, n_cut, n_dropped = training_samples(cfg, tok, problems, counts)
    stats = sft.train(model, tok, samples, cfg, out)
    final = checkpoints.save_hf(model, tok, out / "final")
    del model
    if not dist.is_main():  # under torchrun rank 0 writes the reports
        return {"model": final}
    write_reports(cfg, final, stats, counts, (len(samples), n_cut, n_dropped), device, t0)
    return {
        "model": final,
        "checkpoints": str(out / "checkpoints"),
        "metrics": str(out / "metrics.jsonl"),
        "summary": str(out / "summary.md"),
    }
