"""Bradley-Terry reward model training (the `reward_model` stage's loop).

A sequence-classification model with one logit r(x, y) (the last non-pad token's hidden state
through a linear head) is trained on preference pairs (prompt, chosen, rejected) by the
Bradley-Terry loss  L = -log sigmoid(r(x, y_c) - r(x, y_r)), averaged over the batch (as TRL's
RewardTrainer does, without its optional margin or centring terms).

Speed: every text is tokenized once up front; batches are built from length-sorted buckets
(pairs of similar length share a batch, batch order shuffled per epoch, seeded), so padding stays
small; AdamW is the fused kernel where the device has one. No Trainer machinery per step.

Memory (as SFT and RL): a step's pairs go through in micro-batches (`micro_groups`: at most
`micro_batch` pairs, or with `max_tokens_per_micro` > 0 as many as fit that many padded tokens),
each micro-batch's chosen and rejected in ONE forward ([2m, S], S its own longest row), without a
KV cache, under bf16 autocast on GPU, with optional activation checkpointing (set on the model by
the stage). Each micro-batch's loss is its pairs' summed NLL / the step's pair count, so the
accumulated gradients equal one forward over the whole step's pairs.
"""

from __future__ import annotations

import contextlib
import math
import random
import time
from collections.abc import Sequence
from typing import Any

import torch

from vibethinker import ledger
from vibethinker.log import get_logger
from vibethinker.train.policy import autocast_context
from vibethinker.verifiers.rubric import rm_text

log = get_logger("train.reward_model")


def bt_loss(r_chosen: torch.Tensor, r_rejected: torch.Tensor) -> torch.Tensor:
    """Bradley-Terry negative log-likelihood, mean over pairs."""
    return -torch.nn.functional.logsigmoid(r_chosen - r_rejected).mean()


def encode_pairs(tokenizer: Any, pairs: Sequence[dict], max_len: int) -> list[tuple[list, list]]:
    """[(chosen ids, rejected ids)] of rows {prompt, chosen, rejected}, each cut to its last
    `max_len` tokens (the response end is what differs)."""
    texts = [rm_text(tokenizer, p["prompt"], p[k]) for p in pairs for k in ("chosen", "rejected")]
    ids = tokenizer(texts, add_special_tokens=False)["input_ids"]
    ids = [x[-max_len:] for x in ids]
    return list(zip(ids[0::2], ids[1::2]))


def length_batches(
    enc: Sequence[tuple[list, list]], batch: int, seed: int, bucket: bool = True
) -> list[list[int]]:
    """Pair indices grouped into batches of similar length; batch order shuffled by `seed`.
    `bucket=False`: pairs in random order (a plain random sampler, for comparison)."""
    rng = random.Random(seed)
    if not bucket:
        order = list(range(len(enc)))
        rng.shuffle(order)
        return [order[s : s + batch] for s in range(0, len(order), batch)]
    order = sorted(
        range(len(enc)), key=lambda i: (max(len(enc[i][0]), len(enc[i][1])), rng.random())
    )
    batches = [order[s : s + batch] for s in range(0, len(order), batch)]
    rng.shuffle(batches)
    return batches


def micro_groups(
    enc: Sequence[tuple[list, list]], idx: Sequence[int], micro_batch: int, max_tokens: int = 0
) -> list[list[int]]:
    """A step's pair indices split, in order, into micro-batches: at most `micro_batch` pairs
    each, or with `max_tokens` > 0 as many pairs as keep 2 x pairs x longest row <= max_tokens
    (at least one pair)."""
    if max_tokens <= 0:
        m = max(1, micro_batch)
        return [list(idx[s : s + m]) for s in range(0, len(idx), m)]
    groups: list[list[int]] = []
    longest = 0
    for i in idx:
        n = max(len(enc[i][0]), len(enc[i][1]))
        if groups and 2 * (len(groups[-1]) + 1) * max(longest, n) <= max_tokens:
            groups[-1].append(i)
            longest = max(longest, n)
        else:
            groups.append([i])
            longest = n
    return groups


def step_tokens(
    enc: Sequence[tuple[list, list]], idx: Sequence[int], micro_batch: int, max_tokens: int = 0
) -> tuple[int, int]:
    """(real tokens, computed positions) of one step's forwards: each micro-batch's 2B rows
    right-padded to its own longest (`collate` over `micro_groups`), for the cost ledger."""
    real = positions = 0
    for group in micro_groups(enc, idx, micro_batch, max_tokens):
        lens = [len(enc[i][0]) for i in group] + [len(enc[i][1]) for i in group]
        real += sum(lens)
        positions += len(lens) * max(lens)
    return real, positions


def collate(enc: Sequence[tuple[list, list]], idx: Sequence[int], pad_id: int):
    """[2B, S] input ids and mask: the B chosen rows, then the B rejected rows (right-padded)."""
    seqs = [enc[i][0] for i in idx] + [enc[i][1] for i in idx]
    s_len = max(len(x) for x in seqs)
    ids = torch.full((len(seqs), s_len), pad_id, dtype=torch.long)
    att = torch.zeros((len(seqs), s_len), dtype=torch.long)
    for r, x in enumerate(seqs):
        ids[r, : len(x)] = torch.tensor(x)
        att[r, : len(x)] = 1
    return ids, att


def rewards_of(
    model: Any, ids: torch.Tensor, att: torch.Tensor, autocast: bool = False
) -> torch.Tensor:
    """[N] reward logits (the model's score at each row's last real token); `autocast`: the
    forward under bf16 autocast on GPU (training; nothing on CPU)."""
    device = next(model.parameters()).device
    ctx = autocast_context(device) if autocast else contextlib.nullcontext()
    with ctx:
        out = model(input_ids=ids.to(device), attention_mask=att.to(device), use_cache=False)
    return out.logits[:, 0].float()  # no KV cache: one full pass, nothing to keep


def accumulate_step(
    model: Any,
    enc: Sequence[tuple[list, list]],
    idx: Sequence[int],
    pad_id: int,
    micro_batch: int,
    max_tokens: int = 0,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Forward and backward of one optimizer step's pairs `idx`, micro-batch by micro-batch
    (`micro_groups`), gradients accumulated in the parameters' .grad. Each micro-batch's loss
    is its pairs' NLL summed / len(idx), so the gradients and the returned loss equal one
    forward over all of `idx` (`bt_loss`). Returns (loss, chosen rewards, rejected rewards),
    detached."""
    total, rc_all, rr_all = torch.zeros(()), [], []
    for group in micro_groups(enc, idx, micro_batch, max_tokens):
        z = rewards_of(model, *collate(enc, group, pad_id), autocast=True)
        rc, rr = z[: len(group)], z[len(group) :]
        loss = bt_loss(rc, rr) * (len(group) / len(idx))
        loss.backward()
        total += loss.detach().cpu()
        rc_all.append(rc.detach().cpu())
        rr_all.append(rr.detach().cpu())
    return total, torch.cat(rc_all), torch.cat(rr_all)


@torch.no_grad()
def evaluate_pairs(
    model: Any, enc: Sequence[tuple[list, list]], pad_id: int, batch: int = 32
) -> dict[str, Any]:
    """Pairwise accuracy (chosen scored above rejected; ties count half) and the logits."""
    model.eval()
    rc, rr = [], []
    for s in range(0, len(enc), batch):
        idx = list(range(s, min(s + batch, len(enc))))
        z = rewards_of(model, *collate(enc, idx, pad_id)).cpu()
        rc += z[: len(idx)].tolist()
        rr += z[len(idx) :].tolist()
    wins = [1.0 if c > r else 0.5 if c == r else 0.0 for c, r in zip(rc, rr)]
    return {"accuracy": sum(wins) / max(len(wins), 1), "wins": wins, "chosen": rc, "rejected": rr}


def make_adamw(params: list, lr: float, weight_decay: float) -> torch.optim.Optimizer:
    """AdamW, the fused kernel (one call for every tensor; CPU and CUDA in torch >= 2.4) where the
    parameters' device has it, else the default implementation. Same update either way."""
    try:
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)


def _bt_row(
    step: int,
    epoch: int,
    loss: torch.Tensor,
    rc: torch.Tensor,
    rr: torch.Tensor,
    gn: torch.Tensor,
    lr: float,
    seconds: float,
) -> dict[str, Any]:
    """One optimizer step's metrics: loss, batch accuracy (chosen above rejected), margin."""
    return {
        "step": step,
        "epoch": epoch,
        "loss": round(float(loss), 5),
        "accuracy": float((rc > rr).float().mean()),
        "margin": round(float((rc - rr).mean()), 4),
        "grad_norm": float(gn),
        "lr": lr,
        "seconds": round(seconds, 4),
    }


def _optimizer_step(model: Any, opt: Any, sched: Any, max_grad_norm: float) -> torch.Tensor:
    """Clip, step the optimizer and the schedule, clear the gradients; the norm before clipping."""
    gn = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
    opt.step()
    sched.step()
    opt.zero_grad(set_to_none=True)
    return gn


def train_bt(
    model: Any,
    tokenizer: Any,
    pairs: Sequence[dict],
    *,
    epochs: int = 1,
    batch: int = 16,
    lr: float = 1e-4,
    final_lr: float = 1e-5,
    max_len: int = 256,
    weight_decay: float = 0.0,
    max_grad_norm: float = 1.0,
    seed: int = 0,
    max_seconds: float = 0.0,
    bucket: bool = True,
    micro_batch: int = 0,
    max_tokens_per_micro: int = 0,
) -> list[dict[str, Any]]:
    """Train `model` in place on `pairs`; returns one metrics row per optimizer step (loss,
    batch accuracy, reward margin, lr, seconds). Cosine LR from `lr` to `final_lr`. `bucket`:
    length-bucketed batches (default) or pairs in random order. `micro_batch` pairs per
    forward (0: the whole step's `batch`), or `max_tokens_per_micro` padded tokens per forward
    when > 0; gradients accumulate to the step (same loss and update)."""
    if not pairs:
        raise ValueError("reward model: no preference pairs to train on")
    torch.manual_seed(seed)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    enc = encode_pairs(tokenizer, pairs, max_len)
    total = epochs * math.ceil(len(enc) / batch)
    opt = make_adamw(list(model.parameters()), lr, weight_decay)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: (final_lr + (lr - final_lr) * 0.5 * (1 + math.cos(math.pi * s / total))) / lr
    )
    model.train()
    hist: list[dict[str, Any]] = []
    t0 = time.perf_counter()
    for ep in range(epochs):
        for idx in length_batches(enc, batch, seed * 1000 + ep, bucket):
            ts = time.perf_counter()
            loss, rc, rr = accumulate_step(
                model, enc, idx, pad_id, micro_batch or batch, max_tokens_per_micro
            )
            gn = _optimizer_step(model, opt, sched, max_grad_norm)
            lr_now, dt = sched.get_last_lr()[0], time.perf_counter() - ts
            hist.append(_bt_row(len(hist) + 1, ep, loss, rc, rr, gn, lr_now, dt))
            tokens = step_tokens(enc, idx, micro_batch or batch, max_tokens_per_micro)
            ledger.trained(*tokens, dt, ledger.n_params(model))
            if max_seconds and time.perf_counter() - t0 >= max_seconds:
                log.warning(
                    "reward model: wall-clock cap %.0f s reached after %d/%d steps",
                    max_seconds,
                    len(hist),
                    total,
                )
                model.eval()
                return hist
    model.eval()
    return hist
