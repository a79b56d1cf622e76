"""The on-policy RL loop (docs/PAPER.md stages 2 and 3): rollout -> verify -> advantages -> loss -> step.

One step: draw `prompts_per_step` prompts (seeded, resumable order), sample G responses each with
the Sampler over the LIVE policy (the hf engine shares the trainer's weights, so rollouts come
from the current policy), verify them, turn rewards into advantages (GRPO or MGPO, optionally
after the Long2Short shift), and take one optimizer step on the clipped surrogate. Each phase is
a named, timed call (generate, verify, logprobs, update) and every step writes a metrics row.

On-policy details:
- With one update per batch (`mini_batches=1`, the default) pi_old IS the current policy: the
  update's own forward gives logp, and old = logp.detach(), so rho == 1 in value while its
  gradient is the policy gradient; no separate old-logprob forward is needed. With
  `mini_batches > 1` the old logprobs come from a no-grad forward before the first update.
- The engine's logprobs (sampled under its own kernels; bf16 on GPU) can differ from the
  trainer's; with `tis_cap > 0` each token is re-weighted by min(pi_old / pi_engine, cap).
  `engine_kl` logs the mismatch (k3 of engine vs trainer) either way.
- Rows whose advantage is exactly 0 (groups with all-equal rewards) contribute no gradient when
  there is no KL term; they are skipped in the forward but still count in the 1/N normalisation,
  so the loss is the paper's mean over ALL sequences. Entropy and clip stats cover trained rows.
- Micro-batches (`plan_micro`): `micro_batch` rows right-padded to the batch's longest row, or,
  with `max_tokens_per_micro` > 0, rows packed end to end (per-sample positions, no padding)
  into micro-batches of at most that many tokens, so that a micro-batch's memory and time follow
  its tokens, not its longest row (long-tailed response lengths). Same loss and gradients.
"""

from __future__ import annotations

import json
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import torch

from vibethinker.algo.advantages import ADVANTAGE_ESTIMATORS, batch_accuracy, batch_long2short
from vibethinker.algo.losses import LossStats, clipped_surrogate
from vibethinker.config import is_runtime
from vibethinker.engines import SamplingParams, make_sampler
from vibethinker.log import get_logger
from vibethinker.prompts.paper import paper_prompt
from vibethinker.train import dist, interrupt, packing, policy
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.rollout import (
    Batch,
    Scored,
    build_batch,
    draw_prompts,
    response_logprobs,
    rollout,
    score_groups,
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
)


# Config: the loop reads the `rl` stage's flat RLConfig itself (one documented field list, one set
# of defaults; no copy of it here).


class Timer:
    """Wall time per named phase for the current step."""

    def __init__(self) -> None:
        self.t: dict[str, float] = {}

    @contextmanager
    def __call__(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.t[name] = self.t.get(name, 0.0) + time.perf_counter() - t0


# ----------------------------------------------------------------------------- phases


def compute_advantages(sc: Scored, opts: RLConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, G] advantages and [B] MGPO weights from the verified groups."""
    # With std scaling, a group whose responses are ALL correct has a nonzero std after the
    # Long2Short shift; dividing by it (the A_i formula applied to r' as written) rescales its
    # shifts to unit size whatever l2s_lambda is. `l2s_all_correct_std=False` leaves them as
    # the shift (RLConfig; docs/EVIDENCE.md has the measurement).
    rewards = sc.rewards
    if opts.long2short:
        rewards = batch_long2short(rewards, sc.correct, sc.lengths, opts.l2s_lambda)
    est = ADVANTAGE_ESTIMATORS[opts.advantage]
    return est(
        rewards,
        sc.correct,
        lam=opts.lambda_mgpo,
        eps=opts.adv_eps,
        std_scale=opts.std_scale,
        all_correct_std=opts.l2s_all_correct_std or not opts.long2short,
    )


def trained_rows(adv: torch.Tensor, kl_coef: float) -> torch.Tensor:
    """Row indices that carry gradient (all of them when a KL term is on)."""
    if kl_coef:
        return torch.arange(adv.numel())
    return torch.nonzero(adv != 0).flatten()


@torch.no_grad()
def frozen_logprobs(
    model: Any, batch: Batch, rows: torch.Tensor, micro: int, max_tokens: int = 0
) -> torch.Tensor:
    """[N, T] logprobs of `model` (no grad) for `rows` of the batch (other rows 0); micro-batches
    of `micro` rows, or packed ones of at most `max_tokens` tokens (`plan_micro`)."""
    device = next(model.parameters()).device
    out = torch.zeros(batch.mask.shape, dtype=torch.float32)
    for r, real in plan_micro(rows, batch, micro, max_tokens, dist.is_wrapped(model)):
        with policy.autocast_context(device):
            lp, _ = dist.call(
                model, response_logprobs, batch.rows(r).to(device), packed=max_tokens > 0
            )
        if real:
            out[r] = lp.float().cpu()
    return out


def micro_chunks(
    rows: torch.Tensor, micro: int, collective: bool
) -> list[tuple[torch.Tensor, bool]]:
    """(row indices, real) per forward: `rows` in chunks of `micro`; for a model whose forward is
    a collective (FSDP2, DDP), padded with dummy chunks (row 0, not real) to the largest count
    among processes, so that every process runs as many forwards."""
    chunks = [(rows[s : s + micro], True) for s in range(0, rows.numel(), micro)]
    return _pad_chunks(chunks, collective)


def token_chunks(
    rows: torch.Tensor, lengths: torch.Tensor, max_tokens: int, collective: bool
) -> list[tuple[torch.Tensor, bool]]:
    """(row indices, real) per forward: `rows` grouped into micro-batches of at most
    `max_tokens` tokens (prompt + response; `lengths` per batch row), longest rows first, first
    fit (`packing.pack`); a row longer than the budget is a micro-batch of its own. Each
    micro-batch goes through the model packed, so its cost follows its tokens, not its row
    count times the longest row (verl's dynamic batch size does the same). Padded with dummy
    chunks like `micro_chunks` for a collective forward."""
    order = sorted(rows.tolist(), key=lambda i: (-int(lengths[i]), i))
    bins = packing.pack([int(lengths[i]) for i in order], max_tokens)
    chunks = [(torch.tensor([order[j] for j in b], dtype=torch.long), True) for b in bins]
    return _pad_chunks(chunks, collective)


def _pad_chunks(chunks: list, collective: bool) -> list[tuple[torch.Tensor, bool]]:
    """`chunks` plus dummy ones (row 0, not real) up to the most any process has, when the
    forward is a collective; as is otherwise."""
    if collective:
        most = int(dist.all_max([len(chunks)])[0])
        chunks += [(torch.zeros(1, dtype=torch.long), False)] * (most - len(chunks))
    return chunks


def plan_micro(
    rows: torch.Tensor, batch: Batch, micro: int, max_tokens: int, collective: bool
) -> list[tuple[torch.Tensor, bool]]:
    """The forwards over `rows`: token-budget packed micro-batches when `max_tokens` > 0
    (`token_chunks`), else `micro` right-padded rows at a time (`micro_chunks`)."""
    if max_tokens > 0:
        return token_chunks(rows, batch.attention_mask.sum(1), max_tokens, collective)
    return micro_chunks(rows, micro, collective)


def update(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any,
    batch: Batch,
    adv: torch.Tensor,
    rows: torch.Tensor,
    opts: RLConfig,
    old_logp: torch.Tensor | None = None,
    ref_logp: torch.Tensor | None = None,
    n_seqs: int | None = None,
) -> dict[str, float]:
    """One optimizer step on the clipped surrogate over `rows` of the batch (normalised by all
    N sequences); returns loss stats, entropy, engine-vs-trainer KL and the grad norm."""
    device = next(model.parameters()).device
    n_seqs = n_seqs or adv.numel()
    st, ent_sum, loss_sum = LossStats(), 0.0, 0.0
    chunks = plan_micro(
        rows, batch, opts.micro_batch, opts.max_tokens_per_micro, dist.is_wrapped(model)
    )
    for i, (r, real) in enumerate(chunks):
        mb = batch.rows(r).to(device)
        with dist.sync_context(model, last=i == len(chunks) - 1):
            loss, part, ent = _micro_loss(model, mb, adv, r, opts, old_logp, ref_logp, n_seqs)
            # the processes average gradients: scale back to the sum (a dummy chunk adds 0)
            (loss * (dist.grad_scale() if real else 0.0)).backward()
        if not real:
            continue
        st = st.add(part)
        ent_sum += float((ent * mb.mask).sum())
        loss_sum += float(loss.detach())
    st, ent_sum, loss_sum, n_rows = _reduce_stats(st, ent_sum, loss_sum, rows.numel())
    gnorm = 0.0
    if n_rows:
        gnorm = policy.optimizer_step(model, optimizer, scheduler, opts.max_grad_norm)
    elif scheduler is not None:  # no signal in this batch: keep the LR schedule on the step count
        with warnings.catch_warnings():  # "scheduler.step() before optimizer.step()": intended
            warnings.simplefilter("ignore", UserWarning)
            scheduler.step()
    return {
        **st.summary(),
        "loss": loss_sum,
        "entropy": ent_sum / max(st.tokens, 1),
        "grad_norm": gnorm,
        "trained_rows": int(n_rows),
    }


def _micro_loss(
    model: Any,
    mb: Batch,
    adv: torch.Tensor,
    r: torch.Tensor,
    opts: RLConfig,
    old_logp: torch.Tensor | None,
    ref_logp: torch.Tensor | None,
    n_seqs: int,
) -> tuple[torch.Tensor, LossStats, torch.Tensor]:
    """(loss, stats, entropy) of one micro-batch of rows `r` (normalised by all n_seqs)."""
    device = mb.input_ids.device
    with policy.autocast_context(device):
        logp, ent = dist.call(
            model, response_logprobs, mb, with_entropy=True, packed=opts.max_tokens_per_micro > 0
        )
    old = old_logp[r].to(device) if old_logp is not None else logp.detach()
    loss, part = clipped_surrogate(
        logp,
        old,
        adv[r].to(device),
        mb.mask,
        clip_eps=opts.clip_eps,
        # the config's clip_eps_high 0 means "same as clip_eps", which the loss spells None
        clip_eps_high=opts.clip_eps_high or None,
        engine_logp=mb.engine_logp,
        tis_cap=opts.tis_cap,
        ref_logp=ref_logp[r].to(device) if ref_logp is not None else None,
        kl_coef=opts.kl_coef,
        n_seqs=n_seqs,
    )
    return loss, part, ent


def _reduce_stats(st: LossStats, ent_sum: float, loss_sum: float, n_rows: int):
    """The step's stats summed over the processes (max for ratio_max); as is in one process."""
    if not dist.active():
        return st, ent_sum, loss_sum, n_rows
    keys = ("tokens", "clipped", "ratio_sum", "kl_sum", "tis_sum", "tis_capped", "engine_kl_sum")
    tot = dist.all_sum([getattr(st, k) for k in keys] + [ent_sum, loss_sum, n_rows])
    vals = dict(zip(keys, tot))
    vals["tokens"] = int(vals["tokens"])
    out = LossStats(**vals, ratio_max=dist.all_max([st.ratio_max])[0])
    return out, tot[-3], tot[-2], int(tot[-1])


def step_metrics(groups: list[Group], sc: Scored, weights: torch.Tensor) -> dict[str, float]:
    """Reward, accuracy, MGPO weight, degenerate-group fractions, lengths, truncation."""
    p = batch_accuracy(sc.correct)
    lens = sc.lengths.float()
    c = sc.correct

    def mean_where(mask: torch.Tensor) -> float | None:
        return round(float(lens[mask].mean()), 2) if mask.any() else None

    return {
        "reward": float(sc.rewards.mean()),
        "accuracy": float(c.float().mean()),
        "mgpo_weight": float(weights.mean()),
        "frac_p0": float((p == 0).float().mean()),
        "frac_p1": float((p == 1).float().mean()),
        "frac_p01": float(((p == 0) | (p == 1)).float().mean()),
        "len_correct": mean_where(c),
        "len_incorrect": mean_where(~c),
        "trunc_rate": float(sc.truncated.float().mean()),
        "gen_tokens": int(lens.sum()),
    }


# ----------------------------------------------------------------------------- evaluation


def evaluate_policy(
    sampler: Any,
    problems: Sequence[Problem],
    n: int,
    params: SamplingParams,
    prompt_fn: Callable[[Problem], str],
    workers: int,
) -> dict[str, float]:
    """Held-out avg@n and the mean length of correct / all responses (eval harness)."""
    from vibethinker.evaluate import evaluate

    res = evaluate(sampler, problems, n, [1], params, workers=workers, prompt_fn=prompt_fn)
    comps = [(c, s) for g in res.groups for c, s in zip(g.completions, g.scores)]
    lc = [len(c.token_ids) for c, s in comps if s.correct]
    return {
        "accuracy": res.accuracy,
        "stderr": _stderr([sum(s.correct for s in g.scores) / len(g.scores) for g in res.groups]),
        "len_correct": sum(lc) / len(lc) if lc else None,
        "len_all": sum(len(c.token_ids) for c, _ in comps) / max(len(comps), 1),
        "trunc_rate": sum(c.truncated for c, _ in comps) / max(len(comps), 1),
        "seconds": res.seconds,
    }


def _stderr(xs: list[float]) -> float | None:
    """Standard error of the mean over problems (the held-out panels' error bars)."""
    if len(xs) < 2:
        return None
    m = sum(xs) / len(xs)
    return (sum((x - m) ** 2 for x in xs) / (len(xs) - 1) / len(xs)) ** 0.5


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
    model = dist.wrap(model, opts.parallel)  # N processes: FSDP2 or DDP
    optimizer, scheduler, start = policy.start_or_resume(
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
        policy.rows_upto(out / "metrics.jsonl", start),
        policy.rows_upto(out / "evals.jsonl", start),
    )
    sync = None
    if sampler is None:
        sampler, sync = rollout_engine(model, tokenizer, opts)
    elif hasattr(sampler, "update_weights"):  # a given engine that takes weights gets them

        def sync() -> None:
            sampler.update_weights(dist.full_state_dict(model).items())

    if sync is not None:
        sync()  # the engine starts from the trainer's (possibly resumed) weights
    verify = verify or _default_verify(opts.verify_workers)
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
    from vibethinker.log import make_tracker  # experiment tracking (report_to)

    report = opts.report_to if dist.is_main() else "none"
    tracker = make_tracker(report, out, out.name, vars(opts))
    if start == 0:
        run_eval(lp, eval_problems, 0)
    bar = dist.progress_bar(opts.steps, start, "rl")
    t_begin, done = time.perf_counter(), start
    for step in range(start, opts.steps):
        row = rl_step(lp, step)
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
    tracker.close()
    return {
        "steps_done": done,
        "steps": opts.steps,
        "resumed_at": start,
        "history": lp.history,
        "evals": lp.evals,
    }


def rl_step(lp: Loop, step: int) -> dict[str, Any]:
    """One step: rollout -> verify -> advantages -> logprobs -> update; returns its metrics row."""
    opts, timer, t0 = lp.opts, Timer(), time.perf_counter()
    idx = draw_prompts(len(lp.problems), step, opts.prompts_per_step, opts.seed)
    # N processes: each samples whole groups of its share of the step's prompts (its own seed)
    batch_problems = [lp.problems[i] for i in dist.shard(idx)]
    params = lp.sampling(opts.seed * 1_000_003 + step + 7_919 * dist.rank())
    with timer("generate"):
        groups = rollout(lp.sampler, batch_problems, lp.prompt_fn, opts.group_size, params)
    with timer("verify"):
        sc_mine = score_groups(groups, lp.verify, opts.truncated_reward)
    # advantages and metrics over ALL groups of the step (each group is whole on one process)
    sc, mine = gather_scored(sc_mine)
    adv, weights = compute_advantages(sc, opts)
    adv_mine = adv[mine].flatten()
    with timer("logprobs"):
        tb, rows, old_lp, ref_lp = logprob_inputs(lp, groups, adv_mine)
    with timer("update"):
        u = update_all(lp, tb, adv_mine, rows, old_lp, ref_lp, n_total=adv.numel())
    if lp.sync is not None:
        with timer("sync"):
            lp.sync()  # the next rollout samples from the updated weights
    return {
        "step": step + 1,
        **step_metrics(groups, sc, weights),
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
    rows = trained_rows(adv, opts.kl_coef)
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


def vllm_spec(opts: RLConfig) -> Any:
    """The vLLM rollout engine's values from the rl config (engines/vllm.RolloutSpec)."""
    from vibethinker.engines.vllm import RolloutSpec

    return RolloutSpec(
        model=opts.model,
        seed=opts.seed,
        mode=opts.vllm_mode,
        url=opts.vllm_url,
        sync_dir=opts.vllm_sync_dir or str(Path(opts.out) / "engine_weights"),
        device=str(opts.device),
        gpu_memory_utilization=opts.vllm_gpu_memory_utilization,
        sleep=opts.vllm_sleep,
        rope_yarn_factor=opts.rope_yarn_factor,
        rope_original_len=opts.rope_original_len,
    )


def rollout_engine(model: Any, tokenizer: Any, opts: RLConfig) -> tuple[Any, Callable | None]:
    """(sampler, sync) for the `engine` option. sync() pushes the trainer's weights to the
    engine; the loop calls it at the start and after every optimizer step.

    - hf, one process or DDP: the sampler runs on the trainer's own module (no sync needed).
    - hf under FSDP2: the sharded model cannot sample alone (each forward is a collective), so
      every process samples with an unsharded copy refreshed from the gathered weights.
    - vllm: engines/vllm.py (colocated LLM, or a server), weights pushed in place."""
    engine = opts.engine
    if engine == "vllm":
        from vibethinker.engines.vllm import rollout_sampler

        sampler = rollout_sampler(vllm_spec(opts), tokenizer)
        return sampler, lambda: sampler.update_weights(dist.full_state_dict(model).items())
    if engine != "hf":
        raise ValueError(f"rl: engine={engine!r}: the rollout engine is hf or vllm")
    if not dist.is_fsdp(model):
        return make_sampler("hf", model=dist.inner(model), tokenizer=tokenizer), None
    copy = unsharded_copy(model)
    sampler = make_sampler("hf", model=copy, tokenizer=tokenizer)

    def sync() -> None:
        copy.load_state_dict(dist.full_state_dict(model, to_cpu=False), strict=False)

    return sampler, sync


def unsharded_copy(model: Any) -> Any:
    """A plain (unsharded, eval-mode, no-grad) model of the same architecture on this
    process's device; its weights come from `sync`."""
    from transformers import AutoModelForCausalLM

    hf = dist.inner(model)
    device = next(hf.parameters()).device
    copy = AutoModelForCausalLM.from_config(hf.config, dtype=torch.float32)
    copy.generation_config = hf.generation_config
    return copy.to(device).eval().requires_grad_(False)


def update_all(
    lp: Loop,
    tb: Batch,
    adv: torch.Tensor,
    rows: torch.Tensor,
    old_lp: torch.Tensor | None,
    ref_lp: torch.Tensor | None,
    n_total: int | None = None,
) -> dict[str, float]:
    """`mini_batches` optimizer steps over the trained rows; their stats merged. `n_total`: the
    step's sequences over all processes (the 1/N of the loss; this process's rows by default)."""
    opts = lp.opts
    # each of the mini_batches updates averages over its share of the N sequences
    share = max(1, (n_total or adv.numel()) // opts.mini_batches)
    ustats = [
        update(
            lp.model,
            lp.optimizer,
            lp.scheduler,
            tb,
            adv,
            part,
            opts,
            old_logp=old_lp,
            ref_logp=ref_lp,
            n_seqs=share,
        )
        for part in rows.tensor_split(opts.mini_batches)
    ]
    return ustats[-1] if len(ustats) == 1 else _merge(ustats)


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


def _default_verify(workers: int) -> Callable[[list[Problem], list[str]], list]:
    from vibethinker.verifiers import verify_batch

    def verify(ps, rs):
        return verify_batch(ps, rs, workers=workers)

    return verify


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
        policy.save_checkpoint(
            policy.step_dir(lp.out / "checkpoints", done),
            lp.model,
            lp.tokenizer,
            optimizer=lp.optimizer,
            scheduler=lp.scheduler,
            step=done,
            extra=extra,
        )
        policy.prune_checkpoints(lp.out / "checkpoints", opts.keep_last)
    if out_of_time and not interrupted:
        log.warning(
            "rl: wall-clock cap of %.0f s reached after %d/%d steps",
            opts.max_seconds,
            done,
            opts.steps,
        )
    return bool(interrupted or out_of_time)


def _merge(parts: list[dict[str, float]]) -> dict[str, float]:
    """Average the stats of several mini-batch updates (max for ratio_max, sum for rows)."""
    out = {k: sum(p[k] for p in parts) / len(parts) for k in parts[0]}
    out["ratio_max"] = max(p["ratio_max"] for p in parts)
    out["trained_rows"] = sum(p["trained_rows"] for p in parts)
    return out
