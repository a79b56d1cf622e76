"""The SFT loop: assistant-only next-token loss over (packed) chat samples, with resumable
checkpoints, a metrics JSONL and a loss curve.

One optimizer step = one global batch of samples (`packing.plan_steps`), split in micro-batches
whose gradients accumulate. The loss of a step is the mean over ALL assistant tokens of the global
batch (each micro-batch contributes its token sum / the step's token count), so the gradient does
not depend on how the batch is split or packed. The paper does not say how it averages (per token
or per sequence); per token is the common SFT choice.

Only positions whose next token is trained go through the LM head (`token_loss_sum`): the prompt's
logits are never computed, which is most of the win over a plain `model(labels=...)` forward when
prompts are long or the vocabulary is large. Those positions go through the head a chunk at a
time (`chunked.token_logprobs`): the [positions, vocab] logits are never whole, in forward or in
backward (at 32K positions and a 151,936 vocabulary they would be ~20 GB in fp32).
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F

from vibethinker import ledger
from vibethinker.log import get_logger, make_tracker
from vibethinker.train import checkpoints, chunked, dist, interrupt, packing, policy
from vibethinker.train.packing import IGNORE, Sample
from vibethinker.train.sft_config import SFTConfig

log = get_logger("train.sft")


# Config: the loop reads the `sft` stage's flat SFTConfig itself (one documented field list, one
# set of defaults; no copy of it here). LOOP_FIELDS are the fields that shape the run: saved with each checkpoint and
# compared on resume (the stage's paths, filters and eval report may change between sessions).
LOOP_FIELDS = (
    "epochs",
    "max_steps",
    "global_batch",
    "micro_batch",
    "lr",
    "final_lr",
    "warmup_frac",
    "max_len",
    "pack",
    "save_every",
    "max_grad_norm",
    "weight_decay",
    "seed",
    "lora_r",
    "lora_alpha",
    "lora_targets",
)


def loop_options(opts: SFTConfig) -> dict[str, Any]:
    """The fields of `opts` that shape the run (saved with each checkpoint)."""
    return {k: getattr(opts, k) for k in LOOP_FIELDS}


def resume_options(opts: SFTConfig) -> dict[str, Any]:
    """What a resumed checkpoint must agree on: the loop options but `save_every`."""
    return {k: v for k, v in loop_options(opts).items() if k != "save_every"}


# ----------------------------------------------------------------------------- loss


def backbone_and_head(model: Any) -> tuple[Any, Any] | None:
    """(decoder, lm_head) when logits are a plain linear map of the last hidden state."""
    if hasattr(model, "get_base_model"):  # a peft (LoRA) wrapper: its adapters live inside
        model = model.get_base_model()
    cfg = model.config
    if getattr(cfg, "final_logit_softcapping", None) or getattr(cfg, "logit_scale", None):
        return None  # the head does more than a matmul: use the model's own forward
    base = getattr(model, getattr(model, "base_model_prefix", "model"), None)
    head = model.get_output_embeddings()
    return (base, head) if base is not None and head is not None else None


def token_loss_sum(model: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, int]:
    """(sum of next-token cross-entropy over trained positions, number of those positions)."""
    ids, labels = batch["input_ids"], batch["labels"]
    target = labels[:, 1:]
    sel = target != IGNORE  # [B, L-1]: positions whose next token is trained
    n = int(sel.sum())
    kw = {"position_ids": batch["position_ids"], "attention_mask": batch["attention_mask"]}
    parts = backbone_and_head(model)
    if parts is None:  # a head that is more than a matmul: the model's own (whole) logits
        logits = model(input_ids=ids, use_cache=False, **kw).logits[:, :-1][sel]
    else:
        base, head = parts
        hidden = base(input_ids=ids, use_cache=False, **kw).last_hidden_state
        logp, _ = chunked.token_logprobs(hidden[:, :-1][sel], head, target[sel])
        return -logp.sum(), n
    return F.cross_entropy(logits.float(), target[sel], reduction="sum"), n


def _to(batch: dict[str, Any], device: Any) -> dict[str, Any]:
    return {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in batch.items()}


def train_step(model: Any, micro: Sequence[dict[str, Any]], device: Any) -> tuple[float, int, int]:
    """Forward/backward the micro-batches of one step, loss normalised by the step's trained
    tokens; returns (mean token loss, trained tokens, all tokens). `micro` is the WHOLE step:
    under N processes each runs its share (`dist.shard`, padded to equal counts) with its loss
    scaled by N (the processes average gradients), so the gradient is the one-process one."""
    n_loss = sum(int((m["labels"][:, 1:] != IGNORE).sum()) for m in micro)
    mine, real = dist.pad(dist.shard(micro), fallback=micro[0])
    scale = dist.grad_scale() / max(n_loss, 1)
    total = 0.0
    for i, m in enumerate(mine):
        with dist.sync_context(model, last=i == len(mine) - 1):
            with policy.autocast_context(device):
                loss_sum, _ = dist.call(model, token_loss_sum, _to(m, device))
            (loss_sum * (scale if i < real else 0.0)).backward()
        total += float(loss_sum.detach()) if i < real else 0.0
    total = dist.all_sum([total])[0]
    return total / max(n_loss, 1), n_loss, sum(m["n_tokens"] for m in micro)


# ----------------------------------------------------------------------------- loop


class _Run(NamedTuple):
    """What every step of the SFT loop uses."""

    model: Any
    tokenizer: Any
    optimizer: torch.optim.Optimizer
    scheduler: Any
    samples: Sequence[Sample]
    plan: list
    opts: SFTConfig
    out: Path
    full: int  # optimizer steps of the whole data (the epoch counter's unit)
    history: list[dict[str, Any]]
    stats: dict[str, Any]
    extra: dict[str, Any]


@interrupt.deferring
def train(
    model: Any,
    tokenizer: Any,
    samples: Sequence[Sample],
    opts: SFTConfig,
    out: str | Path,
    resume: bool = True,
    stop_at: int | None = None,
) -> dict[str, Any]:
    """Train `model` in place on `samples`; checkpoints in out/checkpoints/step-XXXXXX, metrics in
    out/metrics.jsonl. With `resume`, continues exactly from the latest checkpoint in `out`.
    `stop_at`: leave after that many steps (checkpointed) as an interruption would."""
    if not samples:
        raise ValueError("SFT: no samples to train on")
    run, start = _start(model, tokenizer, samples, opts, Path(out), resume)
    total = len(run.plan)
    bar = dist.progress_bar(total, start, "sft")

    tracker = make_tracker(
        opts.report_to if dist.is_main() else "none", run.out, run.out.name, vars(opts)
    )
    with _main_file(run.out / "metrics.jsonl") as mf:
        for step in range(start, total):
            try:
                row, postfix = _one_step(run, step)
            except policy.NonFiniteError as e:  # stop: every later step would be NaN too
                raise policy.diverged(e, "sft", step + 1, opts.lr, run.out) from None
            _append(mf, row, run.out / "metrics.jsonl")
            tracker.log(row, row["step"])
            run.history.append(row)
            bar.update(1)
            bar.set_postfix(**postfix)
            done = step + 1
            due = bool(opts.save_every and done % opts.save_every == 0) or done == total
            interrupted = stop_at is not None and done >= stop_at and done < total
            signalled = interrupt.requested()  # Ctrl-C / SIGTERM: checkpoint this step, then stop
            if due or interrupted or signalled:
                _save(run, done)
            if signalled and done < total:  # at the last step the run is simply complete
                interrupt.stop(done, checkpoints.step_dir(run.out / "checkpoints", done))
            if interrupted:
                break
    bar.close()
    tracker.close()
    return summarize(run.history, run.stats, total, start)


def _start(
    model: Any, tokenizer: Any, samples: Sequence[Sample], opts: SFTConfig, out: Path, resume: bool
) -> tuple[_Run, int]:
    """The loop's state (the step plan, the model wrapped for N processes, optimizer and
    schedule started or resumed, the metrics cut back) and the step to start at."""
    plan = _plan(samples, opts)
    total = len(plan)
    # the epoch counter counts epochs of the data, also when max_steps cuts the run short
    full = len(_plan(samples, replace(opts, max_steps=None))) if opts.max_steps else total
    model = dist.wrap(model, opts.parallel)  # N processes: FSDP2 or DDP
    optimizer, scheduler, start = checkpoints.start_or_resume(
        model,
        out,
        seed=opts.seed,
        lr=opts.lr,
        final_lr=opts.final_lr,
        warmup_frac=opts.warmup_frac,
        weight_decay=opts.weight_decay,
        total=total,
        options=resume_options(opts),
        resume=resume,
    )
    history = checkpoints.rows_upto(out / "metrics.jsonl", start)
    model.train()
    stats = {"tokens": sum(r.get("tokens", 0) for r in history), "seconds": 0.0}
    extra = {"total_steps": total, "options": loop_options(opts)}
    run = _Run(
        model,
        tokenizer,
        optimizer,
        scheduler,
        samples,
        plan,
        opts,
        out,
        full,
        history,
        stats,
        extra,
    )
    return run, start


def _one_step(run: _Run, step: int) -> tuple[dict[str, Any], dict[str, str]]:
    """One optimizer step: (its metrics row, the progress bar's postfix)."""
    tok = run.tokenizer
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
    device = next(run.model.parameters()).device
    t0 = time.perf_counter()
    micro = [packing.collate(run.samples, rows, pad_id, run.opts.pack) for rows in run.plan[step]]
    loss, n_loss, n_tok = train_step(run.model, micro, device)
    policy.check_finite("loss", loss)  # all-summed: every process agrees
    lr = policy.current_lr(run.optimizer)
    gnorm = policy.optimizer_step(run.model, run.optimizer, run.scheduler, run.opts.max_grad_norm)
    dt = time.perf_counter() - t0
    ledger.trained(
        n_tok, sum(m["input_ids"].numel() for m in micro), dt, ledger.n_params(run.model)
    )
    run.stats["tokens"] += n_tok
    run.stats["seconds"] += dt
    row = _row(
        step=step,
        total=run.full,
        epochs=run.opts.epochs,
        loss=loss,
        lr=lr,
        gnorm=gnorm,
        n_tok=n_tok,
        n_loss=n_loss,
        dt=dt,
    )
    return row, {"loss": f"{loss:.4f}", "lr": f"{lr:.2e}", "tok_s": f"{n_tok / dt:.0f}"}


def _save(run: _Run, done: int) -> None:
    """A checkpoint after `done` steps; older ones pruned to their weights (`keep_last`)."""
    checkpoints.save_checkpoint(
        checkpoints.step_dir(run.out / "checkpoints", done),
        run.model,
        run.tokenizer,
        optimizer=run.optimizer,
        scheduler=run.scheduler,
        step=done,
        extra=run.extra,
    )
    checkpoints.prune_checkpoints(run.out / "checkpoints", run.opts.keep_last, keep_weights=True)


class _Null:
    def write(self, _: str) -> None: ...

    def flush(self) -> None: ...


def _append(f: Any, row: dict[str, Any], path: Path) -> None:
    """One metrics row, flushed; a failed write (a full disk) names the file (a rerun drops the
    torn line it may leave: `checkpoints.rows_upto`)."""
    try:
        f.write(json.dumps(row) + "\n")
        f.flush()
    except OSError as e:
        raise OSError(e.errno, f"{path}: could not append step {row['step']} ({e.strerror})") from e


def _main_file(path: Path) -> Any:
    """The metrics file opened for appending on rank 0; a sink elsewhere."""
    import contextlib

    return path.open("a") if dist.is_main() else contextlib.nullcontext(_Null())


def _plan(samples: Sequence[Sample], opts: SFTConfig) -> list:
    """Micro-batches of sample indices per optimizer step (capped at `max_steps`)."""
    lengths = [len(s.ids) for s in samples]
    plan = packing.plan_steps(
        lengths,
        opts.max_len,
        opts.pack,
        opts.global_batch,
        opts.micro_batch,
        opts.seed,
        opts.epochs,
    )
    return plan[: opts.max_steps] if opts.max_steps else plan


def _row(*, step, total, epochs, loss, lr, gnorm, n_tok, n_loss, dt) -> dict[str, Any]:
    return {
        "step": step + 1,
        "epoch": round((step + 1) / total * epochs, 4),
        "loss": round(loss, 6),
        "lr": lr,
        "grad_norm": round(gnorm, 6),
        "tokens": n_tok,
        "loss_tokens": n_loss,
        "tokens_per_s": round(n_tok / dt, 1),
        "seconds": round(dt, 4),
    }


def summarize(
    history: list[dict[str, Any]], stats: dict[str, Any], total: int, start: int
) -> dict[str, Any]:
    """Headline numbers of a run (this session's speed; the whole run's tokens and losses)."""
    tail = history[-max(1, min(10, len(history))) :] if history else []
    sess = [r for r in history if r["step"] > start]
    sess_tok = sum(r["tokens"] for r in sess)
    sess_s = sum(r["seconds"] for r in sess)
    return {
        "steps": total,
        "resumed_at": start,
        "tokens": int(stats["tokens"]),
        "loss_tokens": int(sum(r["loss_tokens"] for r in history)),
        "first_loss": history[0]["loss"] if history else None,
        "final_loss": sum(r["loss"] for r in tail) / len(tail) if tail else None,
        "train_seconds": round(sess_s, 2),
        "tokens_per_s": round(sess_tok / sess_s, 1) if sess_s else None,
    }
