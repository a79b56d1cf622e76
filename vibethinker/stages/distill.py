"""Stage `distill`: offline self-distillation by learning potential (docs/PAPER.md, stage 4).

Each domain's RL specialist (a teacher) samples `n_samples` responses per prompt of its domain
with the paper's protocol; the domain verifier keeps the correct ones; exact duplicates go. Every
kept response y to prompt q is scored under the STUDENT, teacher-forced, with the student's own
chat template: S_LP(q, y) = -(1/|y|) sum_t log pi_student(y_t | q, y_<t) over the response tokens
(algo/potential.py; batched no-grad forwards sharing each prompt, train/lp_score.py). Per domain, length buckets, a minimum length, an outlier cut and a
middle-to-high band pick the traces (`select=random`: the same count per bucket at random, the
reviewers' baseline); domains are mixed by shares or counts; then the `sft` stage trains the
student on the selection (packing, assistant-only loss, schedule, checkpoints, resume).

    vibethinker distill student=runs/tiny/merge/model out=runs/distill \
      teachers='[{model: runs/tiny/rl_math/final, data: runs/tiny/data, domain: math}]'

Outputs in `out`: candidates.jsonl (every verified, deduplicated trace with its S_LP; reused by a
re-run with the same sampling settings), selected.jsonl (Problem JSONL, one record per kept trace,
`meta` = teacher, s_lp, bucket, tokens), funnel.json, s_lp.png, sft/ (the `sft` stage's outputs:
final/ is the student model), summary.md.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import shutil
import time
from pathlib import Path
from typing import Any

from vibethinker.data.io import load_problems, save_problems
from vibethinker.engines import make_sampler
from vibethinker.evaluate import PROMPT_STYLES, evaluate
from vibethinker.log import get_logger
from vibethinker.reports.distill import plot_s_lp, summary_md
from vibethinker.stages import distill_candidates as candidates
from vibethinker.stages import register
from vibethinker.stages import sft as sft_stage
from vibethinker.stages.distill_candidates import load_or_build_candidates
from vibethinker.stages.distill_config import DistillConfig, check_config
from vibethinker.stages.distill_select import (
    check_nonempty,
    funnel_table,
    mean_or_none,
    select,
    to_problems,
)
from vibethinker.types import Problem

log = get_logger("stages.distill")


# ----------------------------------------------------------------------------- held-out eval


def eval_problems(cfg: DistillConfig) -> dict[str, list[Problem]]:
    """The first `eval_limit` problems of each domain of `eval_data` (all when 0)."""
    by: dict[str, list[Problem]] = {}
    for p in load_problems(cfg.eval_data):
        by.setdefault(p.domain, []).append(p)
    return {d: ps[: cfg.eval_limit] if cfg.eval_limit else ps for d, ps in sorted(by.items())}


def pass1(cfg: DistillConfig, sampler: Any, problems: list[Problem]) -> dict[str, float]:
    """avg@n (the paper's Pass@1) per domain and "all" of `sampler` on `problems`, sampled with
    the paper's protocol (the teachers' temperature and top-p)."""
    params = cfg.sampling_params(seed=cfg.seed, max_new_tokens=cfg.eval_max_new_tokens)
    res = evaluate(
        sampler, problems, cfg.eval_n, [1], params, prompt_fn=PROMPT_STYLES[cfg.prompt_style]
    )
    return {k: round(v["avg@n"], 4) for k, v in res.metrics.items() if "/" not in k}


def held_out(cfg: DistillConfig, student: str) -> dict[str, dict[str, float]]:
    """Pass@1 per domain of the distilled student (row "student") and, with `eval_baselines`,
    of its starting checkpoint ("start") on every domain and of each teacher on its own domain
    ("teacher <domain>: <model>")."""
    from vibethinker.train.policy import resolve_device

    probs = eval_problems(cfg)
    every = [p for ps in probs.values() for p in ps]
    device = resolve_device(cfg.device)
    rows: dict[str, dict[str, float]] = {}
    if cfg.eval_baselines:
        rows["start"] = pass1(cfg, make_sampler("hf", model=cfg.student, device=device), every)
        for t in cfg.teachers:
            if probs.get(t["domain"]):
                rows[f"teacher {t['domain']}: {t['model']}"] = pass1(
                    cfg, candidates.make_teacher_sampler(cfg, t), probs[t["domain"]]
                )
    rows["student"] = pass1(cfg, make_sampler("hf", model=student, device=device), every)
    log.info("distill: held-out Pass@1 of the student: %s", rows["student"])
    return rows


# ----------------------------------------------------------------------------- outputs


def fresh_sft(out: Path, selection: bytes) -> None:
    """The SFT in out/sft resumes from its checkpoints; when the selection differs from the one
    it was started on (new selection settings), its checkpoints are stale: remove them."""
    digest = hashlib.sha256(selection).hexdigest()
    mark = out / "selection.sha256"
    if (out / "sft").exists() and (not mark.exists() or mark.read_text().strip() != digest):
        log.info("distill: the selection changed; restarting the student's SFT")
        shutil.rmtree(out / "sft")
    mark.write_text(digest + "\n")


def prepare(cfg: DistillConfig, out: Path) -> tuple[Path, dict, list[str]]:
    """Sample, verify, score and select; write selected.jsonl, funnel.json and the S_LP plot.
    Returns (selected path, funnel, warnings)."""
    cands, sampling = load_or_build_candidates(cfg, out)
    pools, sels = select(cfg, cands)
    kept = {
        d: [dataclasses.replace(pools[d][i], bucket=sels[d].bucket[i]) for i in sels[d].kept]
        for d in sels
    }
    overlong = {d: sum(c.problem.domain == d for c in cands) - len(pools[d]) for d in pools}
    funnel = funnel_table(sampling, sels, overlong)
    for d in pools:  # how far the selection moved S_LP (kept vs every scored candidate)
        funnel[d]["s_lp_mean"] = mean_or_none([c.s_lp for c in pools[d]])
        funnel[d]["s_lp_mean_kept"] = mean_or_none([c.s_lp for c in kept[d]])
    (out / "funnel.json").write_text(json.dumps(funnel, indent=1) + "\n")
    warnings = check_nonempty(cfg, kept, funnel)
    selected = out / "selected.jsonl"
    save_problems(selected, to_problems(kept))
    fresh_sft(out, selected.read_bytes())
    plot_s_lp(pools, sels, out / "s_lp.png", cfg.select)
    return selected, funnel, warnings


@register("distill", DistillConfig, resumable=True)
def run(cfg: DistillConfig) -> dict[str, str]:
    """Offline self-distillation: sample specialists, verify, select by learning potential, SFT.

    Under torchrun, rank 0 samples, scores and selects (the teachers' sampling is not sharded)
    and every process then trains the student together through the SFT stage."""
    from vibethinker.train import dist
    from vibethinker.train.policy import resolve_device

    check_config(cfg)
    t0 = time.time()
    out = Path(cfg.out)
    resolve_device(cfg.device)  # under torchrun: starts the process group (nothing otherwise)
    prep = prepare(cfg, out) if dist.is_main() else None
    selected, funnel, warnings = dist.broadcast_object(prep)
    sft_cfg = sft_stage.SFTConfig(
        model=cfg.student,
        data=str(selected),
        out=str(out / "sft"),
        epochs=cfg.epochs,
        max_steps=cfg.max_steps,
        global_batch=cfg.global_batch,
        micro_batch=cfg.micro_batch,
        lr=cfg.lr,
        final_lr=cfg.final_lr,
        warmup_frac=cfg.warmup_frac,
        max_len=cfg.max_len,
        save_every=cfg.save_every,
        prompt_style=cfg.prompt_style,
        seed=cfg.seed,
        device=cfg.device,
        gradient_checkpointing=cfg.gradient_checkpointing,
        rope_yarn_factor=cfg.rope_yarn_factor,
        rope_original_len=cfg.rope_original_len,
        report_to=cfg.report_to,
    )
    res = sft_stage.run(sft_cfg)
    outputs = {
        "model": res["model"],
        "selected": str(selected),
        "funnel": str(out / "funnel.json"),
        "plot": str(out / "s_lp.png"),
        "summary": str(out / "summary.md"),
    }
    if not dist.is_main():  # rank 0 evaluates and writes the reports
        return outputs
    evals = None
    if cfg.eval_data:
        evals = held_out(cfg, res["model"])
        (out / "eval.json").write_text(json.dumps(evals, indent=1) + "\n")
        outputs["eval"] = str(out / "eval.json")
    (out / "summary.md").write_text(
        summary_md(cfg, funnel, warnings, out / "sft", time.time() - t0, evals)
    )
    return outputs
