"""The RL update (train/rl.py's loop calls it): advantages from verified groups, the rows that
carry gradient, micro-batch plans (padded rows or token-budget packed), the frozen logprobs and
one optimizer step on the clipped surrogate.

On-policy details (docs/PAPER.md stages 2 and 3):
- With one update per batch (`mini_batches=1`, the default) pi_old IS the current policy: the
  update's own forward gives logp, and old = logp.detach(), so rho == 1 in value while its
  gradient is the policy gradient; no separate old-logprob forward is needed. With
  `mini_batches > 1` the old logprobs come from a no-grad forward before the first update.
- The engine's logprobs (sampled under its own kernels; bf16 on GPU) can differ from the
  trainer's; with `tis_cap > 0` each token is re-weighted by min(pi_old / pi_engine, cap).
  `engine_kl` logs the mismatch (k3 of engine vs trainer) either way, with NeMo-RL's
  token_mult_prob_error, mean |delta logp| and the largest ratio (the gate: `mismatch_limit`).
- `shaped_rewards`: DAPO's overlong penalty and the Long2Short shift, before the advantages;
  `has_signal` (rewards not all equal) is what dynamic sampling keeps (rl_sampling.py).
- Rows whose advantage is exactly 0 (groups with all-equal rewards) contribute no gradient when
  there is no KL term; they are skipped in the forward but still count in the 1/N normalisation,
  so the loss is the paper's mean over ALL sequences. Entropy and clip stats cover trained rows.
- Micro-batches (`plan_micro`): `micro_batch` rows right-padded to the batch's longest row, or,
  with `max_tokens_per_micro` > 0, rows packed end to end (per-sample positions, no padding)
  into micro-batches of at most that many tokens, so that a micro-batch's memory and time follow
  its tokens, not its longest row (long-tailed response lengths). Same loss and gradients.
"""

from __future__ import annotations

import warnings
from typing import Any

import torch

from vibethinker.algo.advantages import (
    ADVANTAGE_ESTIMATORS,
    batch_long2short,
    batch_overlong_penalty,
)
from vibethinker.algo.losses import LossStats, Norm, clipped_surrogate
from vibethinker.train import dist, packing, policy
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.rollout import (
    Batch,
    Scored,
    response_logprobs,
)


def shaped_rewards(sc: Scored, opts: RLConfig) -> torch.Tensor:
    """[B, G] rewards after the options' shaping: DAPO's overlong penalty, Long2Short's shift."""
    rewards = sc.rewards
    if opts.overlong_buffer:  # DAPO's soft overlong punishment, a reward term (not the verdict)
        pen = batch_overlong_penalty(
            sc.lengths, opts.max_new_tokens, opts.overlong_buffer, opts.overlong_penalty
        )
        rewards = rewards + pen.to(rewards.dtype)
    if opts.long2short:
        rewards = batch_long2short(rewards, sc.correct, sc.lengths, opts.l2s_lambda)
    return rewards


def has_signal(sc: Scored, opts: RLConfig) -> torch.Tensor:
    """[B] True where a group's shaped rewards are not all equal (its advantages are not all 0)."""
    r = shaped_rewards(sc, opts)
    return r.amax(-1) > r.amin(-1)


def compute_advantages(sc: Scored, opts: RLConfig) -> tuple[torch.Tensor, torch.Tensor]:
    """[B, G] advantages and [B] MGPO weights from the verified groups."""
    # With std scaling, a group whose responses are ALL correct has a nonzero std after the
    # Long2Short shift; dividing by it (the A_i formula applied to r' as written) rescales its
    # shifts to unit size whatever l2s_lambda is. `l2s_all_correct_std=False` leaves them as
    # the shift (RLConfig; docs/EVIDENCE.md has the measurement).
    est = ADVANTAGE_ESTIMATORS[opts.advantage]
    return est(
        shaped_rewards(sc, opts),
        sc.correct,
        lam=opts.lambda_mgpo,
        eps=opts.adv_eps,
        std_scale=opts.std_scale,
        all_correct_std=opts.l2s_all_correct_std or not opts.long2short,
        std=opts.std,
    )


def trained_rows(
    adv: torch.Tensor, kl_coef: float, mask: torch.Tensor | None = None
) -> torch.Tensor:
    """Row indices that carry gradient (all of them when a KL term is on); given the [N, T]
    loss `mask`, rows without a token in it (masked truncated responses) are left out."""
    live = torch.ones(adv.numel(), dtype=torch.bool) if kl_coef else adv != 0
    if mask is not None:
        live &= mask.any(-1)
    return torch.nonzero(live).flatten()


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
    n_tokens: int | None = None,
) -> dict[str, float]:
    """One optimizer step on the clipped surrogate over `rows` of the batch (normalised by all
    N sequences, or all their tokens for token_mean); returns loss stats, entropy,
    engine-vs-trainer KL and the grad norm."""
    device = next(model.parameters()).device
    norm = Norm(
        seqs=n_seqs or adv.numel(),
        tokens=n_tokens or int(batch.mask.sum()),
        max_len=opts.max_new_tokens,  # Dr. GRPO's constant (seq_mean_token_sum_norm)
    )
    st, ent_sum, loss_sum = LossStats(), 0.0, 0.0
    chunks = plan_micro(
        rows, batch, opts.micro_batch, opts.max_tokens_per_micro, dist.is_wrapped(model)
    )
    for i, (r, real) in enumerate(chunks):
        mb = batch.rows(r).to(device)
        with dist.sync_context(model, last=i == len(chunks) - 1):
            loss, part, ent = _micro_loss(model, mb, adv, r, opts, old_logp, ref_logp, norm)
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
    norm: Norm,
) -> tuple[torch.Tensor, LossStats, torch.Tensor]:
    """(loss, stats, entropy) of one micro-batch of rows `r` (normalised by the whole batch's
    `norm`)."""
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
        **POLICY_LOSSES[opts.policy_loss](opts),
        engine_logp=mb.engine_logp,
        tis_cap=opts.tis_cap,
        correction=opts.is_correction,
        is_low=opts.is_low,
        ref_logp=ref_logp[r].to(device) if ref_logp is not None else None,
        kl_coef=opts.kl_coef,
        n_seqs=norm.seqs,
        agg=opts.loss_agg,
        clip_c=opts.clip_ratio_c,
        n_tokens=norm.tokens,
        max_len=norm.max_len,
    )
    return loss, part, ent


def _ppo_clip(opts: RLConfig) -> dict[str, Any]:
    # the config's clip_eps_high 0 means "same as clip_eps", which the loss spells None
    return dict(level="token", clip_eps=opts.clip_eps, clip_eps_high=opts.clip_eps_high or None)


def _gspo_clip(opts: RLConfig) -> dict[str, Any]:
    return dict(level="sequence", clip_eps=opts.gspo_clip_low, clip_eps_high=opts.gspo_clip_high)


# The ratio and clip range of each `policy_loss` (STYLE.md 6).
POLICY_LOSSES = {"ppo": _ppo_clip, "gspo": _gspo_clip}


def _reduce_stats(st: LossStats, ent_sum: float, loss_sum: float, n_rows: int):
    """The step's stats summed over the processes (max for ratio_max); as is in one process."""
    if not dist.active():
        return st, ent_sum, loss_sum, n_rows
    keys = (
        "tokens",
        "clipped",
        "dual_clipped",
        "ratio_sum",
        "kl_sum",
        "tis_sum",
        "tis_capped",
        "engine_kl_sum",
        "engine_tokens",
        "engine_absdiff_sum",
        "engine_mult_err_sum",
    )
    tot = dist.all_sum([getattr(st, k) for k in keys] + [ent_sum, loss_sum, n_rows])
    vals = dict(zip(keys, tot))
    vals["tokens"], vals["engine_tokens"] = int(vals["tokens"]), int(vals["engine_tokens"])
    ratio_max, engine_ratio_max = dist.all_max([st.ratio_max, st.engine_ratio_max])
    out = LossStats(**vals, ratio_max=ratio_max, engine_ratio_max=engine_ratio_max)
    return out, tot[-3], tot[-2], int(tot[-1])


def merge_stats(parts: list[dict[str, float]]) -> dict[str, float]:
    """Average the stats of several mini-batch updates (max for ratio_max, sum for rows)."""
    out = {k: sum(p[k] for p in parts) / len(parts) for k in parts[0]}
    for k in ("ratio_max", "engine_ratio_max"):
        out[k] = max(p[k] for p in parts)
    out["trained_rows"] = sum(p["trained_rows"] for p in parts)
    return out
