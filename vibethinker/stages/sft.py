"""Stage `sft`: curriculum SFT (PAPER.md, stage 1). A recipe runs it twice.

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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibethinker.config import runtime
from vibethinker.log import get_logger
from vibethinker.stages import register
from vibethinker.types import Problem

log = get_logger("stages.sft")


@dataclass
class SFTConfig:
    model: str = ""
    """Starting model: a HF folder or hub id (stage 2 starts from stage 1's `final`)."""
    data: str = ""
    """Training problems with `traces`: a JSONL file or a data folder (its train.jsonl); several
    as a comma-separated list (mixed by `data_probs`)."""
    data_probs: list[float] = field(default_factory=list)
    """Sampling weights of the `data` list, OpenRLHF-style (empty: concatenate): dataset i gives
    round(w_i / sum(w) * total) records, oversampled when smaller (data/io.py load_mixture)."""
    out: str = "runs/sft"
    """Output folder (checkpoints/, final/, metrics.jsonl, loss.png, summary.md)."""
    epochs: int = 5
    """Passes over the data. Paper: 5 (stage 1), 2 (stage 2)."""
    max_steps: int | None = None
    """Optional cap on optimizer steps (the schedule then spans the capped run)."""
    global_batch: int = 128
    """Samples (traces) per optimizer step, packed or not. Paper: 128."""
    micro_batch: int = 4
    """Rows per forward pass (packed rows of max_len tokens, or single samples); gradients
    accumulate to the global batch. Memory knob only; not in the paper."""
    lr: float = 5e-5
    """Peak learning rate. Paper: 5e-5."""
    final_lr: float = 8e-8
    """Learning rate at the last step, reached by cosine decay. Paper: 8e-8."""
    warmup_frac: float = 0.05
    """Fraction of steps of linear warm-up. Paper: 5%."""
    max_len: int = 4096
    """Tokens per packed row and per sample (prompt + trace): the SFT context. Must fit the
    model's positions (after RoPE scaling). Paper: unpublished; the RL context is 64K."""
    overlong: str = "drop"
    """Samples longer than max_len: "drop" (counted in the summary; a cut trace would train no
    final answer and no end token) or "cut" (keep the first max_len tokens). Paper: silent."""
    rope_yarn_factor: float = 0.0
    """Extend the model's context with YaRN RoPE scaling by this factor (0: off); the saved
    checkpoints keep it. Needed when max_len exceeds the model's max_position_embeddings."""
    rope_original_len: int = 0
    """YaRN's original (pretraining) length; 0: the model's max_position_embeddings."""
    report_to: str = "none"
    """Experiment tracking of the per-step metrics: none, tensorboard, wandb, trackio, or a
    comma list (log.py). Offline when the service is unreachable."""
    pack: bool = True
    """Pack several samples per row (attention and positions stay per sample). Paper: packing."""
    save_every: int = 0
    """Save a checkpoint every k steps (0: only the last). Paper: k unpublished."""
    max_grad_norm: float = 1.0
    """Gradient clipping (global L2 norm). Paper: unpublished; 1.0 is customary."""
    weight_decay: float = 0.0
    """AdamW weight decay. Paper: unpublished."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward to save memory (long sequences on GPU)."""
    lora_r: int = 0
    """LoRA rank through peft (0: full fine-tuning, the paper's setting). Only the adapters then
    train; final/ and checkpoints are saved merged (plain HF folders), the adapter in adapter/."""
    lora_alpha: float = 32.0
    """LoRA alpha (the update is scaled by alpha / r). Our choice: 32."""
    lora_targets: str = "all-linear"
    """Modules given adapters: "all-linear" or a comma list (q_proj,k_proj,v_proj,o_proj)."""
    domains: list[str] = field(default_factory=list)
    """Train only on these domains (empty: all)."""
    min_trace_tokens: int = 0
    """Stage-2 filter: drop traces shorter than this many tokens (0: off). Paper: 5K."""
    filter_ref_model: str = ""
    """Stage-2 filter: reference model sampled on each prompt (empty: off). Paper:
    VibeThinker-1.5B; the tiny recipe uses stage 1's model."""
    filter_rollouts: int = 8
    """Stage-2 filter: rollouts per prompt from the reference model. Paper: 8."""
    filter_min_error: float = 0.75
    """Stage-2 filter: keep prompts whose reference error rate is at least this (drop those
    below). Paper: 0.75."""
    filter_max_new_tokens: int = 1024
    """Stage-2 filter: token cap of each reference rollout."""
    filter_engine: str = "hf"
    """Stage-2 filter: sampler engine for the reference model (hf, vllm, openai)."""
    filter_truncated_reward: str = "zero"
    """Stage-2 filter: how a reference rollout cut at filter_max_new_tokens is judged, as the
    rl stage's `truncated_reward`: "zero" (an error) or "verify" (score the cut text). How many
    keep/drop decisions depend on this is reported (`truncation_decisions`)."""
    prompt_style: str = "paper"
    """User turn of each sample: "paper" (the evaluation prompt of the problem's domain, so the
    model is trained on what it is asked at test time) or "raw" (the stored prompt)."""
    eval_data: str = ""
    """Optional: problems to report sampled Pass@1 on after training (e.g. eval.jsonl)."""
    eval_n: int = 4
    """Samples per eval problem for that report."""
    eval_limit: int = 200
    """At most this many eval problems (the first ones) for that report."""
    eval_max_new_tokens: int = 256
    """Token cap of each eval sample."""
    seed: int = 0
    """Seed of data order and sampling."""
    device: str = runtime("auto")
    """cpu, cuda, or auto (cuda when available)."""


# ----------------------------------------------------------------------------- filters


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
    least `min_error` (PAPER.md stage 2: 8 rollouts, drop error rate < 0.75). A rollout cut at
    `max_new_tokens` is judged by `truncated_reward` ("zero": an error; "verify": its text is
    scored), the rl stage's rule; the counts say how many rollouts were cut and how many
    keep/drop decisions the rule decided (`truncation_decisions`)."""
    from vibethinker.engines import SamplingParams
    from vibethinker.evaluate.metrics import truncation_verdicts

    if verify is None:
        from vibethinker.verifiers import verify_batch as verify
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
        log.warning("sft filter: %d of %d reference rollouts hit filter_max_new_tokens=%d and "
                    "count as %s; %d keep/drop decisions depend on that (raise the cap, or set "
                    "filter_truncated_reward)", sum(cut), len(cut), max_new_tokens,
                    "errors" if truncated_reward == "zero" else "verified text", flips)  # fmt: skip
    return kept, counts


def apply_filters(cfg: SFTConfig, problems: list[Problem], tokenizer: Any) -> tuple[list, dict]:
    counts: dict[str, Any] = {"problems_in": len(problems),
                              "traces_in": sum(len(p.traces or []) for p in problems)}  # fmt: skip
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
        log.info("sft filter: %d traces shorter than %d tokens removed", c["short_traces_removed"],
                 cfg.min_trace_tokens)  # fmt: skip
    if cfg.filter_ref_model and problems:
        from vibethinker.engines import make_sampler
        from vibethinker.evaluate import PROMPT_STYLES

        kw: dict[str, Any] = {"model": cfg.filter_ref_model}
        if cfg.filter_engine == "hf":
            from vibethinker.train.policy import resolve_device

            kw["device"] = resolve_device(cfg.device)
        sampler = make_sampler(cfg.filter_engine, **kw)
        problems, c = filter_easy_prompts(problems, sampler, cfg.filter_rollouts,
                                          cfg.filter_min_error, cfg.filter_max_new_tokens,
                                          cfg.seed, PROMPT_STYLES[cfg.prompt_style],
                                          truncated_reward=cfg.filter_truncated_reward)  # fmt: skip
        del sampler
        counts.update(c)
        log.info("sft filter: %d prompts with reference error rate < %.2f removed",
                 c["easy_prompts_removed"], cfg.filter_min_error)  # fmt: skip
    counts["problems_out"] = len(problems)
    counts["traces_out"] = sum(len(p.traces or []) for p in problems)
    return problems, counts


def _filter_key(cfg: SFTConfig) -> dict[str, Any]:
    keys = ("model", "data", "data_probs", "domains", "prompt_style", "min_trace_tokens",
            "filter_ref_model",
            "filter_rollouts", "filter_min_error", "filter_max_new_tokens",
            "filter_truncated_reward", "seed")  # fmt: skip
    return {k: getattr(cfg, k) for k in keys}


def load_training_set(cfg: SFTConfig, tokenizer: Any) -> tuple[list[Problem], dict[str, Any]]:
    """The filtered problems; cached in out/data.jsonl + filters.json so a resumed run does not
    re-sample the reference model (and trains on exactly the same set)."""
    from vibethinker.data.io import load_mixture, load_problems, save_problems

    out = Path(cfg.out)
    cache, meta = out / "data.jsonl", out / "filters.json"
    if cache.exists() and meta.exists():
        info = json.loads(meta.read_text())
        if info.get("key") == _filter_key(cfg):
            log.info("sft: reusing the filtered training set %s", cache)
            return load_problems(cache), info["counts"]
    raw = (load_mixture(cfg.data, list(cfg.data_probs), cfg.seed, domains=list(cfg.domains))
           if "," in cfg.data else load_problems(_train_path(cfg.data)))  # fmt: skip
    problems, counts = apply_filters(cfg, raw, tokenizer)
    out.mkdir(parents=True, exist_ok=True)
    save_problems(cache, problems)
    meta.write_text(json.dumps({"key": _filter_key(cfg), "counts": counts}, indent=2) + "\n")
    return problems, counts


# ----------------------------------------------------------------------------- eval report


def sampled_pass1(model_dir: str, path: str, n: int, limit: int, max_new: int, seed: int,
                  device: str, prompt_style: str) -> dict[str, float]:  # fmt: skip
    """avg@n (the paper's Pass@1) per slice (all, domains, subdomains) on the first `limit`
    problems of `path`, through the evaluation harness."""
    from vibethinker.data.io import load_problems
    from vibethinker.engines import SamplingParams, make_sampler
    from vibethinker.evaluate import PROMPT_STYLES, evaluate

    problems = load_problems(path)[:limit]
    sampler = make_sampler("hf", model=model_dir, device=device)
    res = evaluate(sampler, problems, n, [1], SamplingParams(max_new_tokens=max_new, seed=seed),
                   prompt_fn=PROMPT_STYLES[prompt_style])  # fmt: skip
    return {k: round(v["avg@n"], 4) for k, v in res.metrics.items()}


# ----------------------------------------------------------------------------- stage


def _summary(cfg: SFTConfig, stats: dict, counts: dict, n_samples: int, n_cut: int,
             pass1: dict | None, n_dropped: int = 0) -> str:  # fmt: skip
    lines = [
        f"SFT from `{cfg.model}` on `{cfg.data}`: {n_samples} samples (one per trace), "
        f"{cfg.epochs} epoch(s), global batch {cfg.global_batch}, LR {cfg.lr:g} -> "
        f"{cfg.final_lr:g} ({cfg.warmup_frac:.0%} warm-up), packing {'on' if cfg.pack else 'off'}.",
        "",
        "| steps | tokens | first loss | final loss | train s | tokens/s |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {stats['steps']} | {stats['tokens']:,} | {stats['first_loss']:.4f} | "
        f"{stats['final_loss']:.4f} | {stats['train_seconds']} | {stats['tokens_per_s']} |",
        "",
        "Filters: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + (f"; {n_cut} samples cut to max_len {cfg.max_len}" if n_cut else "")
        + (f"; {n_dropped} samples over max_len {cfg.max_len} dropped" if n_dropped else "")
        + ".",
    ]
    if stats.get("resumed_at"):
        lines.append(f"Resumed at step {stats['resumed_at']} (speed is this session's).")
    if pass1:
        lines += ["", f"Sampled Pass@1 (avg over {cfg.eval_n} samples) on `{cfg.eval_data}`: "
                  + ", ".join(f"{k} **{v:.3f}**" for k, v in pass1.items()) + "."]  # fmt: skip
    return "\n".join(lines) + "\n"


@register("sft", SFTConfig, resumable=True, positional=("model", "data"))
def run(cfg: SFTConfig) -> dict[str, str]:
    """Supervised fine-tuning on multi-path traces (curriculum stage 1 or 2), checkpointing."""
    from vibethinker.train import packing, policy, sft

    if not cfg.model:
        raise ValueError("sft: `model` is required (a HF folder or hub id)")
    t0 = time.time()
    out = Path(cfg.out)
    device = policy.resolve_device(cfg.device)
    model, tok = policy.load_policy(cfg.model, device, cfg.gradient_checkpointing,
                                    rope_yarn_factor=cfg.rope_yarn_factor,
                                    rope_original_len=cfg.rope_original_len)  # fmt: skip
    from vibethinker.models import check_context

    check_context(model.config, cfg.max_len, f"sft max_len={cfg.max_len}")
    model = policy.apply_lora(model, cfg.lora_r, cfg.lora_alpha, cfg.lora_targets)
    problems, counts = load_training_set(cfg, tok)
    from vibethinker.evaluate import PROMPT_STYLES

    prompt_fn = PROMPT_STYLES[cfg.prompt_style]
    pairs = [(prompt_fn(p), t) for p in problems for t in p.traces or []]
    samples = packing.build_samples(pairs, tok, cfg.max_len, cfg.overlong)
    n_cut = sum(s.truncated for s in samples)
    n_dropped = len(pairs) - len(samples)
    if n_cut or n_dropped:
        log.warning("sft: %d of %d samples are longer than max_len=%d: %s", n_cut + n_dropped,
                    len(pairs), cfg.max_len, "cut" if n_cut else "dropped")  # fmt: skip
    if not samples:
        raise ValueError(f"sft: every sample is longer than max_len={cfg.max_len} (overlong="
                         f"{cfg.overlong}); raise max_len or set overlong=cut")  # fmt: skip
    stats = sft.train(model, tok, samples, cfg, out)
    final = policy.save_hf(model, tok, out / "final")
    del model
    sft.plot_loss(out / "metrics.jsonl", out / "loss.png", f"SFT: {out.name}")
    pass1 = None
    if cfg.eval_data:
        pass1 = sampled_pass1(final, cfg.eval_data, cfg.eval_n, cfg.eval_limit,
                              cfg.eval_max_new_tokens, cfg.seed, device,
                              cfg.prompt_style)  # fmt: skip
    stats.update(samples=len(samples), samples_cut=n_cut, samples_dropped_overlong=n_dropped,
                 filters=counts, pass1=pass1,
                 wall_seconds=round(time.time() - t0, 1))  # fmt: skip
    (out / "stats.json").write_text(json.dumps(stats, indent=2) + "\n")
    (out / "summary.md").write_text(_summary(cfg, stats, counts, len(samples), n_cut, pass1,
                                             n_dropped))  # fmt: skip
    log.info("sft done: %d steps, final loss %.4f, %s tokens/s", stats["steps"],
             stats["final_loss"], stats["tokens_per_s"])  # fmt: skip
    return {
        "model": final,
        "checkpoints": str(out / "checkpoints"),
        "metrics": str(out / "metrics.jsonl"),
        "summary": str(out / "summary.md"),
    }
