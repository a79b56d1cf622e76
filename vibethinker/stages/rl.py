"""Stage `rl`: on-policy RL with MGPO on one domain (docs/PAPER.md stages 2 and 3).

A recipe runs it once per domain, in sequence (math -> Long2Short math -> code -> stem), each
starting from the previous one's `final` model; `long2short=true` makes the second math pass
reshape rewards among correct answers toward shorter ones.

    vibethinker rl model=runs/tiny/sft2/final data=runs/tiny/data domain=math out=runs/rl_math

Before training, the stage-start filter samples `filter_rollouts` responses per training prompt
with the starting model and drops prompts it always or never solves (p in {0, 1}; Long2Short
keeps p = 1: its length shift acts among correct responses). Outputs in
`out`: final/ (HF folder), checkpoints/, metrics.jsonl (one row per step), evals.jsonl (held-out
avg@n every `eval_every` steps, step 0 = the start), curves.png, summary.md, prompts.jsonl and
filter.json (the filtered training prompts and the counts). Interrupted runs resume exactly.
"""

from __future__ import annotations

import json
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vibethinker import statefile
from vibethinker.data.io import load_mixture, load_problems, save_problems
from vibethinker.data.shapes import RowShape
from vibethinker.engines import make_sampler
from vibethinker.evaluate import PROMPT_STYLES
from vibethinker.evaluate.metrics import truncation_verdicts
from vibethinker.log import get_logger
from vibethinker.models import check_context
from vibethinker.prompts.paper import prompt_examples, sampler_render, write_prompt_examples
from vibethinker.reports.rl import (
    cap_warning,
    learning_warnings,
    mismatch_warning,
    plot_curves,
    skipped_md,
    write_summary,
)
from vibethinker.stages import register
from vibethinker.train.rewards import instruct_reward
from vibethinker.train.rl_config import RLConfig
from vibethinker.types import Problem
from vibethinker.verifiers import check_available, verify_batch
from vibethinker.verifiers.math_judge import judged_verify

log = get_logger("stages.rl")


def _split(path: str, name: str) -> Path:
    p = Path(path)
    return p / name if p.is_dir() else p


def load_domain(
    path: Path, domain: str, limit: int = 0, seed: int | None = None, weights: list | None = None
) -> list[Problem]:
    """Problems of one domain (or several, comma-separated: mixed-domain RL, `limit` split
    equally over them) from a JSONL (or a comma-separated list mixed by `weights`); `limit` keeps a
    seeded sample (or the first ones)."""
    wanted = domain.split(",")
    # Rows without an id are numbered; one domain is also the domain of rows without one.
    shape = RowShape(domain=domain if len(wanted) == 1 else "", ids=True)
    if "," in str(path):
        probs = load_mixture(str(path), weights, seed or 0, domains=wanted, shape=shape)
    elif not path.exists():
        raise FileNotFoundError(f"rl: {path} not found")
    else:
        probs = [p for p in load_problems(path, shape=shape) if p.domain in wanted]
    if limit and len(probs) > limit and len(wanted) > 1:  # mixed: limit // k from each domain
        pools = [[p for p in probs if p.domain == d] for d in wanted]
        rng, share = random.Random(seed or 0), limit // len(wanted)
        probs = [
            p for pool in pools for p in (rng.sample(pool, share) if len(pool) > share else pool)
        ]
    elif limit and len(probs) > limit:
        if seed is not None:
            probs = random.Random(seed).sample(probs, limit)
        else:
            probs = probs[:limit]
    return probs


def filter_prompts(
    problems: list[Problem],
    sampler: Any,
    n: int,
    params: Any,
    prompt_fn: Any,
    verify: Any,
    truncated_reward: str = "zero",
    keep_solved: bool = False,
) -> tuple[list[Problem], dict[str, Any]]:
    """Stage-start filter: keep prompts whose accuracy over n rollouts is strictly in (0, 1);
    with `keep_solved` (Long2Short) also those at p = 1, whose all-correct groups carry the
    length signal. A rollout cut at max_new_tokens is judged by `truncated_reward`, as training
    will reward it; `truncation_decisions` counts the prompts whose keep/drop the rule decided."""
    import torch

    from vibethinker.algo.advantages import batch_accuracy
    from vibethinker.train.rollout import rollout, score_groups

    groups = rollout(sampler, problems, prompt_fn, n, params)
    sc = score_groups(groups, verify, "verify")  # raw verdicts; the rule is applied below
    cut = sc.truncated.flatten().tolist()
    rules = truncation_verdicts(sc.correct.flatten().tolist(), cut)
    acc = {r: batch_accuracy(torch.tensor(v).view(sc.correct.shape)) for r, v in rules.items()}
    p = acc[truncated_reward]
    inside = {r: (a > 0) & ((a < 1) | keep_solved) for r, a in acc.items()}  # p = 1: Long2Short
    keep = [pr for pr, ok in zip(problems, inside[truncated_reward].tolist()) if ok]
    counts = {
        "prompts_in": len(problems),
        "dropped_p0": int((p == 0).sum()),
        "dropped_p1": 0 if keep_solved else int((p == 1).sum()),
        "kept_p1": int((p == 1).sum()) if keep_solved else 0,
        "prompts_out": len(keep),
        "start_accuracy": round(float(p.mean()), 4),
        "rollouts": n,
        "truncated_rollouts": int(sum(cut)),
        "truncated_reward": truncated_reward,
        "truncation_decisions": int((inside["zero"] != inside["verify"]).sum()),
    }
    return keep, counts


def _filter_key(cfg: RLConfig) -> dict[str, Any]:
    """Every setting the cached filter depends on: prompts, sampling, and whatever changes the
    rewards or verdicts (math judge, instruct rule form, rubric back-end and its settings)."""
    keys = (
        "model",
        "data",
        "data_probs",
        "domain",
        "filter_rollouts",
        "max_prompts",
        "long2short",
        "max_new_tokens",
        "temperature",
        "top_p",
        "prompt_style",
        "seed",
        "truncated_reward",
        "math_judge",
        "rule_reward",
        "rubric_model",
        "rubric_prompt",
        "rubric_weight",
        "rubric_threshold",
        "rubric_fail_value",
    )
    return {k: getattr(cfg, k) for k in keys}


def training_prompts(cfg: RLConfig, sampler: Any, prompt_fn: Any, verify: Any) -> tuple[list, dict]:
    """The filtered prompts, cached in out/prompts.jsonl + filter.json (a resumed run reuses
    them rather than re-sampling)."""
    out = Path(cfg.out)
    cache, meta = out / "prompts.jsonl", out / "filter.json"
    info = statefile.read_json(meta) if cache.exists() else None  # empty/torn: recomputed
    if isinstance(info, dict) and "counts" in info:
        if info.get("key") == _filter_key(cfg):
            return load_problems(cache), info["counts"]
    probs = load_domain(
        _split(cfg.data, "train.jsonl"), cfg.domain, cfg.max_prompts, cfg.seed, list(cfg.data_probs)
    )
    if not probs:
        raise ValueError(f"rl: no {cfg.domain} prompts in {cfg.data}")
    counts: dict[str, Any] = {"prompts_in": len(probs), "filter": "off"}
    if cfg.filter_rollouts > 0:
        params = cfg.sampling_params(seed=cfg.seed + 99)
        probs, counts = filter_prompts(
            probs,
            sampler,
            cfg.filter_rollouts,
            params,
            prompt_fn,
            verify,
            cfg.truncated_reward,
            cfg.long2short,
        )
        if counts["truncated_rollouts"]:
            log.warning(
                "rl filter: %d of %d rollouts hit max_new_tokens=%d (judged by "
                "truncated_reward=%s); %d keep/drop decisions depend on it",
                counts["truncated_rollouts"],
                counts["prompts_in"] * cfg.filter_rollouts,
                cfg.max_new_tokens,
                cfg.truncated_reward,
                counts["truncation_decisions"],
            )
        log.info(
            "rl filter (%d rollouts/prompt): %d in, %d dropped at p=0, %d at p=1, %d kept",
            cfg.filter_rollouts,
            counts["prompts_in"],
            counts["dropped_p0"],
            counts["dropped_p1"],
            counts["prompts_out"],
        )
    if not probs:
        msg = (
            f"rl {cfg.domain}: the stage-start filter left no prompt with 0 < accuracy < 1 "
            f"({counts.get('dropped_p0', 0)} never solved, {counts.get('dropped_p1', 0)} always "
            f"solved in {cfg.filter_rollouts} rollouts)"
        )
        if cfg.on_empty_filter != "skip":
            raise ValueError(f"{msg}; on_empty_filter=skip passes the model through instead")
        log.warning("%s: on_empty_filter=skip, the start model passes through untrained", msg)
    out.mkdir(parents=True, exist_ok=True)
    save_problems(cache, probs)
    statefile.write_json(meta, {"key": _filter_key(cfg), "counts": counts})
    return probs, counts


def check_rl_context(cfg: RLConfig, model: Any, sampler: Any, prompt_fn: Any) -> None:
    """Refuse, before any rollout, a run whose longest prompt + max_new_tokens exceeds the
    model's positions (a 64K cap on a 32K model without RoPE scaling)."""
    probs = load_domain(
        _split(cfg.data, "train.jsonl"), cfg.domain, cfg.max_prompts, cfg.seed, list(cfg.data_probs)
    )
    longest = max((len(sampler.encode(prompt_fn(p))) for p in probs), default=0)
    check_context(
        model.config,
        longest + cfg.max_new_tokens,
        f"rl: max_new_tokens={cfg.max_new_tokens} + the longest prompt ({longest} tokens)",
    )


# ----------------------------------------------------------------------------- outputs


def write_steps(out: Path, cfg: RLConfig, done: int) -> None:
    """steps.json: steps trained and planned, read by the headline."""
    rec = {"done": done, "planned": cfg.steps, "capped": done < cfg.steps}
    (out / "steps.json").write_text(json.dumps(rec) + "\n")


def _pass_through(cfg: RLConfig, model: Any, tok: Any, counts: dict) -> dict[str, str]:
    """No prompt to train on: final/ is the start model, and the stage says so loudly."""
    from vibethinker.train import checkpoints, dist

    out = Path(cfg.out)
    final = checkpoints.save_hf(model, tok, out / "final")
    if not dist.is_main():
        return {"model": str(final)}
    warns = [
        f"nothing was trained: the stage-start filter kept 0 of {counts.get('prompts_in')} "
        f"prompts ({counts.get('dropped_p0', 0)} never solved, {counts.get('dropped_p1', 0)} "
        f"always solved in {cfg.filter_rollouts} rollouts); final/ is the start model. Try: a "
        "stronger starting model (more SFT on this domain), more filter_rollouts, a larger "
        "max_new_tokens, or easier/harder prompts."
    ]
    for w in warns:
        log.warning("rl %s: %s", cfg.domain, w)
    (out / "warnings.json").write_text(json.dumps(warns, indent=1) + "\n")
    summary = out / "summary.md"
    summary.write_text(skipped_md(cfg, warns[0]))
    metrics = out / "metrics.jsonl"
    metrics.touch()
    return {
        "model": str(final),
        "metrics": str(metrics),
        "curves": "",
        "summary": str(summary),
        "checkpoints": str(out / "checkpoints"),
    }


def training_data(cfg: RLConfig) -> list[Problem]:
    """The domain's training prompts of `data` (a `max_prompts` sample, mixed by `data_probs`);
    an error when there is none."""
    problems = load_domain(
        _split(cfg.data, "train.jsonl"), cfg.domain, cfg.max_prompts, cfg.seed, list(cfg.data_probs)
    )
    if not problems:
        raise ValueError(
            f"rl: no {cfg.domain} prompts in {cfg.data} (set `domain`, or give the "
            "rows a `domain` column)"
        )
    return problems


def reference_model(cfg: RLConfig, device: str) -> Any:
    """The frozen reference policy of the KL term (or of `log_ref_kl`): the start model."""
    from vibethinker.train import policy

    rope = {"rope_yarn_factor": cfg.rope_yarn_factor, "rope_original_len": cfg.rope_original_len}
    ref, _ = policy.load_policy(cfg.model, device, **rope)
    return ref.eval().requires_grad_(False)


def reward_fn(cfg: RLConfig, problems: list[Problem], device: str) -> Callable:
    """The step's verifier: the domain verifiers (the math judge as a second opinion with
    `math_judge`; rule + rubric rewards for instruct), with `metrics` when the rewards keep any."""
    verify_fn = verify_batch
    if cfg.math_judge:
        verify_fn = judged_verify(cfg.math_judge, cfg.out)
    if cfg.domain == "instruct":  # stage 5: rule + rubric rewards, checked here (train/rewards.py)
        verify_fn = instruct_reward(cfg, verify_fn, problems, device)

    def verify(ps, rs):
        return verify_fn(ps, rs, workers=cfg.verify_workers)

    verify.metrics = getattr(verify_fn, "metrics", None)  # per-step reward metrics, if any
    return verify


def held_out_problems(cfg: RLConfig) -> list[Problem]:
    """The held-out prompts of the loop's evaluations: `eval_data`, or data/eval.jsonl (none
    when `eval_every` is 0 or the file is missing)."""
    eval_path = cfg.eval_data or (
        str(Path(cfg.data) / "eval.jsonl") if Path(cfg.data).is_dir() else ""
    )
    return (
        load_domain(Path(eval_path), cfg.domain, cfg.eval_limit)
        if eval_path and cfg.eval_every and Path(eval_path).exists()
        else []
    )


def write_reports(
    cfg: RLConfig, res: dict[str, Any], counts: dict[str, Any], seconds: float
) -> tuple[str, str]:
    """curves.png, summary.md, steps and warnings.json (warnings also logged); returns the
    plot's and the summary's paths."""
    out = Path(cfg.out)
    plot = plot_curves(
        res["history"],
        res["evals"],
        out / "curves.png",
        f"RL {cfg.domain}" + (" (Long2Short)" if cfg.long2short else ""),
    )
    summary = write_summary(out / "summary.md", cfg, res, counts, seconds)
    warns = learning_warnings(cfg, counts, res["history"]) + mismatch_warning(cfg, res["history"])
    if res["steps_done"] < cfg.steps:  # the cap is a safety net: say so loudly
        warns.insert(0, cap_warning(cfg, res["steps_done"]))
    write_steps(out, cfg, res["steps_done"])
    for w in warns:  # also in summary.md; warnings.json puts them at the top of the run report
        log.warning("rl %s: %s", cfg.domain, w)
    (out / "warnings.json").write_text(json.dumps(warns, indent=1) + "\n")
    return plot, summary


@register("rl", RLConfig, resumable=True, positional=("model", "data"))
def run(cfg: RLConfig) -> dict[str, str]:
    """On-policy RL with MGPO on one domain (optionally Long2Short), resumable."""
    from vibethinker.train import checkpoints, dist, policy, rl

    if not cfg.model or not cfg.data:
        raise ValueError("rl: `model` and `data` are required")
    check_available(cfg.domain.split(","))
    if "," in cfg.domain and "instruct" in cfg.domain.split(","):
        raise ValueError(f"rl: domain={cfg.domain}: instruct cannot be mixed (its rewards differ)")
    t0 = time.time()
    out = Path(cfg.out)
    all_probs = training_data(cfg)  # checked before the model loads
    device = policy.resolve_device(cfg.device)
    rope = {"rope_yarn_factor": cfg.rope_yarn_factor, "rope_original_len": cfg.rope_original_len}
    model, tok = policy.load_policy(cfg.model, device, cfg.gradient_checkpointing, **rope)
    model = policy.apply_lora(model, cfg.lora_r, cfg.lora_alpha, cfg.lora_targets)
    prompt_fn = PROMPT_STYLES[cfg.prompt_style]

    verify = reward_fn(cfg, all_probs, device)

    sampler = make_sampler("hf", model=model, tokenizer=tok)
    if dist.is_main():  # the first prompts as the policy sees them (prompt_style, template)
        write_prompt_examples(out, prompt_examples(all_probs, prompt_fn, sampler_render(sampler)))
    check_rl_context(cfg, model, sampler, prompt_fn)
    problems, counts = dist.main_first(training_prompts, cfg, sampler, prompt_fn, verify)
    del sampler
    if not problems:  # on_empty_filter=skip (training_prompts raises otherwise)
        return _pass_through(cfg, model, tok, counts)
    eval_problems = held_out_problems(cfg)
    ref = reference_model(cfg, device) if cfg.kl_coef > 0 or cfg.log_ref_kl else None
    res = rl.train(
        model,
        tok,
        problems,
        cfg,
        out,
        eval_problems=eval_problems,
        ref_model=ref,
        prompt_fn=prompt_fn,
        verify=verify,
    )
    final = checkpoints.save_hf(model, tok, out / "final")
    if not dist.is_main():  # under torchrun rank 0 writes the reports
        return {"model": str(final)}
    plot, summary = write_reports(cfg, res, counts, time.time() - t0)
    return {
        "model": str(final),
        "metrics": str(out / "metrics.jsonl"),
        "curves": plot,
        "summary": summary,
        "checkpoints": str(out / "checkpoints"),
    }
