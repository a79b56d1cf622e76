"""The on-policy RL loop (docs/PAPER.md stages 2 and 3): rollout -> verify -> advantages -> loss -> step.

One step: draw `prompts_per_step` prompts (seeded, resumable order), sample G responses each with
the Sampler over the LIVE policy (the hf engine shares the trainer's weights, so rollouts come
from the current policy), verify them, turn rewards into advantages (GRPO or MGPO, optionally
after the Long2Short shift), and take one optimizer step on the clipped surrogate. Each phase is
a named, timed call (generate, verify, logprobs, update) and every step writes a metrics row.

The parts: `rl_update` (advantages, micro-batch plans, the clipped-surrogate step, and the
on-policy details), `rl_engine` (the rollout sampler and its weight sync, the default
verifier), `rl_metrics` (phase timer, each step's metrics row, held-out evaluation).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from vibethinker import ledger
from vibethinker.algo.advantages import ADVANTAGE_ESTIMATORS
from vibethinker.config import is_runtime
from vibethinker.engines import SamplingParams
from vibethinker.log import get_logger, make_tracker
from vibethinker.prompts.paper import paper_prompt
from vibethinker.train import checkpoints, dist, interrupt, policy
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.rl_engine import default_verify, rollout_engine
from vibethinker.train.rl_metrics import Timer, check_mismatch, evaluate_policy, step_metrics
from vibethinker.train.rl_sampling import collect_groups
from vibethinker.train.rl_update import (
    compute_advantages,
    frozen_logprobs,
    merge_stats,
    trained_rows,
    update,
)
from vibethinker.train.rollout import (
    Batch,
    Scored,
    build_batch,
)
from vibethinker.types import Group, Problem

log = get_logger("train.rl")
PHASES = ("generate", "verify", "logprobs", "update")
# Options that may change when a run resumes: where things are, and when to evaluate, save, stop.
RESUME_MAY_CHANGE = (
    "model",
    "data",
    "out",
    "eval_data",
    "eval_every",
    "eval_n",
    "eval_limit",
    "save_every",
    "max_seconds",
    "log_ref_kl",
    "gradient_checkpointing",
    "report_to",
    "mismatch_limit",
    "on_mismatch",
)


# Config: the loop reads the `rl` stage's flat RLConfig itself (one documented field list, one set
# of defaults; no copy of it here).


# ----------------------------------------------------------------------------- phases


# ----------------------------------------------------------------------------- evaluation


# ----------------------------------------------------------------------------- loop


def _append(path: Path, row: dict[str, Any]) -> None:
    if not dist.is_main():
        return
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")


@dataclass
class Loop:
    """What every step uses: the policy and its sampler, the prompts, the optimizer, the files."""

    model: Any
    tokenizer: Any
    sampler: Any
    problems: Sequence[Problem]
    opts: RLConfig
    prompt_fn: Callable[[Problem], str]
    verify: Callable[[list[Problem], list[str]], list]
    ref_model: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    out: Path
    history: list[dict[str, Any]]
    evals: list[dict[str, Any]]
    sync: Callable[[], None] | None = None  # pushes the trainer's weights to the engine

    def sampling(self, seed: int) -> SamplingParams:
        return self.opts.sampling_params(seed)


@interrupt.deferring
def train(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    opts: RLConfig,
    out: str | Path,
    eval_problems: Sequence[Problem] = (),
    ref_model: Any = None,
    prompt_fn: Callable[[Problem], str] = paper_prompt,
    verify: Callable[[list[Problem], list[str]], list] | None = None,
    resume: bool = True,
    stop_at: int | None = None,
    sampler: Any = None,
) -> dict[str, Any]:
    """Run RL on `model` in place. Writes out/metrics.jsonl (one row per step), out/evals.jsonl
    (held-out evaluations, step 0 = the start) and out/checkpoints/step-XXXXXX. `stop_at` leaves
    after that many steps (checkpointed), as an interruption would. `sampler`: the rollout
    sampler; by default the `engine` option's (`rollout_engine`). An engine with
    `update_weights` gets the trainer's weights at the start and after every optimizer step."""
    _check_inputs(problems, opts)
    out = Path(out)
    if opts.prompts_per_step < dist.world():
        raise ValueError(
            f"rl: prompts_per_step={opts.prompts_per_step} is less than the "
            f"{dist.world()} processes (each samples whole groups of its prompts)"
        )
    lp, start = _start(
        model, tokenizer, problems, opts, out, ref_model, prompt_fn, verify, resume, sampler
    )
    report = opts.report_to if dist.is_main() else "none"
    tracker = make_tracker(report, out, out.name, vars(opts))
    if start == 0:
        run_eval(lp, eval_problems, 0)
    done = _run_steps(lp, eval_problems, start, stop_at, tracker)
    tracker.close()
    return {
        "steps_done": done,
        "steps": opts.steps,
        "resumed_at": start,
        "history": lp.history,
        "evals": lp.evals,
    }


def _start(
    model: Any,
    tokenizer: Any,
    problems: Sequence[Problem],
    opts: RLConfig,
    out: Path,
    ref_model: Any,
    prompt_fn: Callable[[Problem], str],
    verify: Callable[[list[Problem], list[str]], list] | None,
    resume: bool,
    sampler: Any,
) -> tuple[Loop, int]:
    """The loop's state (the model wrapped for N processes, optimizer and schedule started or
    resumed, logs cut back, rollout engine synced) and the step to start at."""
    model = dist.wrap(model, opts.parallel)  # N processes: FSDP2 or DDP
    optimizer, scheduler, start = checkpoints.start_or_resume(
        model,
        out,
        seed=opts.seed,
        lr=opts.lr,
        final_lr=opts.final_lr,
        warmup_frac=opts.warmup_frac,
        weight_decay=opts.weight_decay,
        total=opts.steps * opts.mini_batches,
        options=resume_options(opts),
        resume=resume,
    )
    history, evals = (
        checkpoints.rows_upto(out / "metrics.jsonl", start),
        checkpoints.rows_upto(out / "evals.jsonl", start),
    )
    sync = None
    if sampler is None:
        sampler, sync = rollout_engine(model, tokenizer, opts)
    elif hasattr(sampler, "update_weights"):  # a given engine that takes weights gets them

        def sync() -> None:
            sampler.update_weights(dist.iter_full_params(model))

    if sync is not None:
        sync()  # the engine starts from the trainer's (possibly resumed) weights
    verify = verify or default_verify(opts.verify_workers)
    lp = Loop(
        model=model,
        tokenizer=tokenizer,
        sampler=sampler,
        problems=problems,
        opts=opts,
        prompt_fn=prompt_fn,
        verify=verify,
        ref_model=ref_model,
        optimizer=optimizer,
        scheduler=scheduler,
        out=out,
        history=history,
        evals=evals,
        sync=sync,
    )
    return lp, start


def _run_steps(
    lp: Loop, eval_problems: Sequence[Problem], start: int, stop_at: int | None, tracker: Any
) -> int:
    """Steps from `start` until the last, a stop (`stop_at`, a signal) or the wall-clock cap,
    evaluating and checkpointing when due; returns the steps done."""
    opts = lp.opts
    bar = dist.progress_bar(opts.steps, start, "rl")
    t_begin, done = time.perf_counter(), start
    for step in range(start, opts.steps):
        try:
            row = rl_step(lp, step)
        except policy.NonFiniteError as e:  # stop: every later step would be NaN too
            raise policy.diverged(e, "rl", step + 1, opts.lr, lp.out) from None
        tracker.log(row, row["step"])
        _record(lp, row, bar)
        done = step + 1
        out_of_time = opts.max_seconds and time.perf_counter() - t_begin >= opts.max_seconds
        out_of_time = dist.broadcast_object(out_of_time)  # rank 0's clock decides for all
        if opts.eval_every and (done % opts.eval_every == 0 or done == opts.steps or out_of_time):
            run_eval(lp, eval_problems, done)
            if lp.evals and lp.evals[-1]["step"] == done:
                tracker.log({f"eval_{k}": v for k, v in lp.evals[-1].items()}, done)
        signalled = interrupt.requested()  # Ctrl-C / SIGTERM: checkpoint this step, then stop
        if _checkpoint(lp, done, done if signalled else stop_at, bool(out_of_time)):
            if signalled:
                interrupt.stop(done)
            break
    bar.close()
    return done


def rl_step(lp: Loop, step: int) -> dict[str, Any]:
    """One step: rollout -> verify -> advantages -> logprobs -> update; returns its metrics row."""
    timer, t0 = Timer(), time.perf_counter()
    # rollout + verify (a refill with groups that carry signal under `dynamic_sampling`)
    groups, sc_mine, sampled = collect_groups(lp, step, timer)
    # advantages and metrics over ALL groups of the step (each group is whole on one process)
    sc, mine = gather_scored(sc_mine)
    adv, weights = compute_advantages(sc, lp.opts)
    adv_mine = adv[mine].flatten()
    with timer("logprobs"):
        tb, rows, old_lp, ref_lp = logprob_inputs(lp, groups, adv_mine)
    with timer("update"):
        u = update_all(lp, tb, adv_mine, rows, old_lp, ref_lp, n_total=adv.numel())
    u["mismatch_over"] = check_mismatch(u, lp.opts.mismatch_limit, lp.opts.on_mismatch, step + 1)
    ledger.trained(
        int(tb.attention_mask[rows].sum()),
        tb.attention_mask[rows].numel(),
        timer.t["logprobs"] + timer.t["update"],
        ledger.n_params(lp.model),
    )
    if lp.sync is not None:
        with timer("sync"):
            lp.sync()  # the next rollout samples from the updated weights
    return {
        "step": step + 1,
        **step_metrics(groups, sc, weights),
        **sampled,
        **(lp.verify.metrics() if getattr(lp.verify, "metrics", None) else {}),  # by reward source
        **{k: (round(v, 6) if isinstance(v, float) else v) for k, v in u.items()},
        "lr": policy.current_lr(lp.optimizer),
        **{f"t_{k}": round(timer.t.get(k, 0.0), 4) for k in PHASES},
        **({"t_sync": round(timer.t["sync"], 4)} if "sync" in timer.t else {}),
        "seconds": round(time.perf_counter() - t0, 4),
    }


def logprob_inputs(
    lp: Loop, groups: list[Group], adv: torch.Tensor
) -> tuple[Batch, torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The token batch, its trained rows, and the frozen logprobs the update needs: the
    reference model's (KL) and pi_old's (only with several updates per batch)."""
    opts = lp.opts
    comps = [c for g in groups for c in g.completions]
    p_ids = [lp.sampler.encode(lp.prompt_fn(g.problem)) for g in groups for _ in g.completions]
    pad_id = lp.tokenizer.pad_token_id if lp.tokenizer.pad_token_id is not None else 0
    tb = build_batch(p_ids, comps, pad_id)
    if opts.mask_truncated:  # TRL's mask_truncated_completions: a cut response leaves the loss
        tb.mask[torch.tensor([c.truncated for c in comps], dtype=torch.bool)] = False
    rows = trained_rows(adv, opts.kl_coef, tb.mask if opts.mask_truncated else None)
    ref_lp = None
    if lp.ref_model is not None:
        ref_lp = frozen_logprobs(
            lp.ref_model, tb, rows, opts.micro_batch, opts.max_tokens_per_micro
        )
    old_lp = None
    if opts.mini_batches > 1:
        old_lp = frozen_logprobs(lp.model, tb, rows, opts.micro_batch, opts.max_tokens_per_micro)
    return tb, rows, old_lp, ref_lp


def gather_scored(sc: Scored) -> tuple[Scored, slice]:
    """The step's [B, G] tensors from every process (in rank order) and this process's rows of
    them; `sc` itself in one process."""
    if not dist.active():
        return sc, slice(0, sc.rewards.shape[0])
    parts = dist.all_gather_objects(sc)
    start = sum(p.rewards.shape[0] for p in parts[: dist.rank()])
    cat = Scored(*(torch.cat([getattr(p, f.name) for p in parts]) for f in fields(Scored)))
    return cat, slice(start, start + sc.rewards.shape[0])


def update_all(
    lp: Loop,
    tb: Batch,
    adv: torch.Tensor,
    rows: torch.Tensor,
    old_lp: torch.Tensor | None,
    ref_lp: torch.Tensor | None,
    n_total: int | None = None,
) -> dict[str, float]:
    """`mini_batches` optimizer steps; their stats merged. The batch's N rows are split into
    `mini_batches` parts; each update trains the part's `rows` and divides by the part's OWN
    counts over all processes (sequences, and tokens for token_mean), so uneven splits (16
    rows in 3) weigh every row alike. `n_total` is kept for callers; the counts are summed
    over the processes here."""
    opts = lp.opts
    ustats = []
    for part in torch.arange(adv.numel()).tensor_split(opts.mini_batches):
        seqs, toks = dist.all_sum([part.numel(), int(tb.mask[part].sum())])
        ustats.append(
            update(
                lp.model,
                lp.optimizer,
                lp.scheduler,
                tb,
                adv,
                part[torch.isin(part, rows)],
                opts,
                old_logp=old_lp,
                ref_logp=ref_lp,
                n_seqs=max(1, int(seqs)),
                n_tokens=max(1, int(toks)),
            )
        )
    return ustats[-1] if len(ustats) == 1 else merge_stats(ustats)


def run_eval(lp: Loop, eval_problems: Sequence[Problem], step: int) -> None:
    """Held-out avg@n at `step` (once per step: a resumed run does not repeat it)."""
    opts = lp.opts
    if not (eval_problems and opts.eval_every) or any(e["step"] == step for e in lp.evals):
        return
    if not dist.is_main():  # rank 0 evaluates; the others wait at the next collective
        return
    params = lp.sampling(opts.seed + 7_777_777)
    res = evaluate_policy(
        lp.sampler, eval_problems, opts.eval_n, params, lp.prompt_fn, opts.verify_workers
    )
    row = {"step": step, **res}
    lp.evals.append(row)
    _append(lp.out / "evals.jsonl", row)
    log.info(
        "rl eval @%d: avg@%d %.4f, len(correct) %s",
        step,
        opts.eval_n,
        row["accuracy"],
        row["len_correct"],
    )


# ----------------------------------------------------------------------------- loop plumbing


def _check_inputs(problems: Sequence[Problem], opts: RLConfig) -> None:
    if not problems:
        raise ValueError("rl: no training prompts")
    if opts.max_tokens_per_micro < 0:
        raise ValueError(
            f"rl: max_tokens_per_micro must be >= 0 (0: micro_batch padded rows), "
            f"got {opts.max_tokens_per_micro}"
        )
    if opts.advantage not in ADVANTAGE_ESTIMATORS:
        known = ", ".join(ADVANTAGE_ESTIMATORS)
        raise ValueError(f"unknown advantage {opts.advantage!r}; known: {known}")


def resume_options(opts: RLConfig) -> dict[str, Any]:
    """The options a resumed checkpoint must agree on: all but runtime fields, paths, and what
    only decides when to evaluate, save or stop (`RESUME_MAY_CHANGE`)."""
    return {
        f.name: getattr(opts, f.name)
        for f in fields(opts)
        if not is_runtime(f) and f.name not in RESUME_MAY_CHANGE
    }


def _record(lp: Loop, row: dict[str, Any], bar: Any) -> None:
    lp.history.append(row)
    _append(lp.out / "metrics.jsonl", row)
    bar.update(1)
    acc, w, s = f"{row['accuracy']:.2f}", f"{row['mgpo_weight']:.2f}", f"{row['seconds']:.2f}"
    bar.set_postfix(acc=acc, w=w, s=s)


def _checkpoint(lp: Loop, done: int, stop_at: int | None, out_of_time: bool) -> bool:
    """Save when due (every `save_every`, at the end, or when leaving early); True to stop."""
    opts = lp.opts
    save = (opts.save_every and done % opts.save_every == 0) or done == opts.steps
    interrupted = stop_at is not None and done >= stop_at and done < opts.steps
    if save or interrupted or out_of_time:
        extra = {
            "total_steps": opts.steps * opts.mini_batches,  # optimizer steps, as in SFT's
            "options": asdict(opts),
            "data_pos": done * opts.prompts_per_step,
        }
        checkpoints.save_checkpoint(
            checkpoints.step_dir(lp.out / "checkpoints", done),
            lp.model,
            lp.tokenizer,
            optimizer=lp.optimizer,
            scheduler=lp.scheduler,
            step=done,
            extra=extra,
        )
        checkpoints.prune_checkpoints(lp.out / "checkpoints", opts.keep_last)
    if out_of_time and not interrupted:
        log.warning(
            "rl: wall-clock cap of %.0f s reached after %d/%d steps",
            opts.max_seconds,
            done,
            opts.steps,
        )
    return bool(interrupted or out_of_time)
