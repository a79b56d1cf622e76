"""Chunked LM head + log-softmax: per-token logprobs (and entropies) of many positions without
ever holding the whole [positions, vocab] logits tensor.

`token_logprobs(h, head, targets)` -> ([M] log p(target | h), [M] entropy or None) for [M, H]
hidden states. The SFT loss (its negative sum), the RL surrogate, the reference model's KL
logprobs and S_LP scoring all go through it.

How (a plain `nn.Linear` head): `ChunkedLogprob`, a custom autograd Function. Forward computes
the logits a chunk of positions at a time and keeps, besides its inputs (h, W, b, targets), only
each position's log-sum-exp ([M] floats). Backward recomputes each chunk's logits from those and
forms d logits = g * (onehot(target) - softmax) in place, then accumulates dH (the chunk's rows)
and dW, db (summed over chunks, fp32). So at most one chunk's [chunk, V] logits (and their
softmax) is alive in forward or in backward, and none is kept between them (as Liger's and
torchtune's chunked cross-entropy do). The price: one more head matmul per chunk in backward
(the logits are recomputed), as activation checkpointing of the head would cost. Chosen over
"backward per chunk through a detached hidden state" because the callers need ONE differentiable
output that composes with the rest of their loss (the RL surrogate is not a plain sum of token
terms, and the backbone's backward must run once).

A head that is something else (a LoRA-wrapped `lm_head`) goes chunk by chunk through
`torch.utils.checkpoint` instead: the same memory bound, autograd through the module.

Precision: under autocast (bf16 on GPU) the head matmuls run in the autocast dtype, as
`head(h)` would; log-softmax, the log-sum-exp and the gradient of the logits are fp32.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch.utils.checkpoint import checkpoint

LOGITS_BUDGET = 2**26
"""Logits elements per chunk (256 MB in fp32): chunk = LOGITS_BUDGET // vocab positions (441 at
Qwen2.5's 151,936), at least MIN_CHUNK. Our choice: a chunk's logits cost about what a few
layers' activations do at 1-2K hidden; larger chunks do not make the matmuls faster."""
MIN_CHUNK = 64


def chunk_size(vocab: int) -> int:
    """Positions per LM-head chunk for a `vocab`-sized head."""
    return max(MIN_CHUNK, LOGITS_BUDGET // max(vocab, 1))


def _compute_dtype(h: torch.Tensor, w: torch.Tensor) -> torch.dtype:
    """The dtype `F.linear(h, w)` runs in here: autocast's when it is on, else the inputs'."""
    kind = h.device.type
    if torch.is_autocast_enabled(kind):
        return torch.get_autocast_dtype(kind)
    return torch.promote_types(h.dtype, w.dtype)


def _logits(h: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, dt: torch.dtype):
    """fp32 logits of one chunk, the matmul in `dt` (autocast off: the cast is explicit)."""
    with torch.autocast(h.device.type, enabled=False):
        bias = b.to(dt) if b is not None else None
        return F.linear(h.to(dt), w.to(dt), bias).float()


class ChunkedLogprob(torch.autograd.Function):
    """(h [M, H], W [V, H], b [V] or None, targets [M], chunk, with_entropy) -> ([M] logprob of
    the target, [M] entropy (empty unless with_entropy; not differentiable))."""

    @staticmethod
    def forward(ctx, h, w, b, targets, chunk, with_entropy):
        dt = _compute_dtype(h, w)
        m = h.shape[0]
        tok = torch.empty(m, dtype=torch.float32, device=h.device)
        lse = torch.empty(m, dtype=torch.float32, device=h.device)
        ent = torch.empty(m if with_entropy else 0, dtype=torch.float32, device=h.device)
        for s in range(0, m, chunk):
            z = _logits(h[s : s + chunk], w, b, dt)
            lse_c = torch.logsumexp(z, -1)
            lse[s : s + chunk] = lse_c
            tok[s : s + chunk] = z.gather(-1, targets[s : s + chunk, None])[:, 0] - lse_c
            if with_entropy:  # H = lse - sum_v p_v z_v
                p = torch.softmax(z, -1)
                ent[s : s + chunk] = lse_c - (p * z).sum(-1)
        ctx.save_for_backward(h, w, b, targets, lse)
        ctx.chunk, ctx.dt = chunk, dt
        ctx.mark_non_differentiable(ent)
        return tok, ent

    @staticmethod
    def backward(ctx, g_tok, _g_ent):
        h, w, b, targets, lse = ctx.saved_tensors
        need_h, need_w, need_b = ctx.needs_input_grad[:3]
        dh = torch.empty_like(h) if need_h else None
        dw = torch.zeros(w.shape, dtype=torch.float32, device=w.device) if need_w else None
        db = torch.zeros(b.shape, dtype=torch.float32, device=b.device) if need_b else None
        g_tok = g_tok.float()
        for s in range(0, h.shape[0], ctx.chunk):
            hc, g = h[s : s + ctx.chunk], g_tok[s : s + ctx.chunk]
            # d logp_target / d z = onehot(target) - softmax(z), times the incoming gradient
            dz = _logits(hc, w, b, ctx.dt).sub_(lse[s : s + ctx.chunk, None]).exp_()
            dz.mul_(-g[:, None])
            dz.scatter_add_(1, targets[s : s + ctx.chunk, None], g[:, None])
            with torch.autocast(h.device.type, enabled=False):
                dzt = dz.to(ctx.dt)
                if need_h:
                    dh[s : s + ctx.chunk] = (dzt @ w.to(ctx.dt)).to(h.dtype)
                if need_w:
                    dw.add_((dzt.t() @ hc.to(ctx.dt)).float())
            if need_b:
                db.add_(dz.sum(0))
        dw = dw.to(w.dtype) if dw is not None else None
        db = db.to(b.dtype) if db is not None else None
        return dh, dw, db, None, None, None


def _module_chunk(head: Any, h: torch.Tensor, targets: torch.Tensor, want_ent: bool):
    """Logprobs of `targets` (and detached entropies) for one chunk, through the head module."""
    z = head(h).float()
    logp = torch.log_softmax(z, dim=-1)
    tok = logp.gather(-1, targets[:, None])[:, 0]
    if not want_ent:
        return tok, None
    with torch.no_grad():
        return tok, -(logp.exp() * logp).sum(-1)


def _by_module(head: Any, h, targets, chunk: int, with_entropy: bool):
    """`token_logprobs` for a head that is not a plain Linear: checkpointed chunks."""
    toks, ents = [], []
    grad = torch.is_grad_enabled() and h.shape[0] > chunk
    for s in range(0, h.shape[0], chunk):
        args = (head, h[s : s + chunk], targets[s : s + chunk], with_entropy)
        tok, ent = (
            checkpoint(_module_chunk, *args, use_reentrant=False) if grad else _module_chunk(*args)
        )
        toks.append(tok)
        ents.append(ent)
    tok = torch.cat(toks) if toks else h.new_zeros(0, dtype=torch.float32)
    if not with_entropy:
        return tok, None
    return tok, torch.cat(ents) if ents else tok.detach().clone()


def token_logprobs(
    h: torch.Tensor,
    head: Any,
    targets: torch.Tensor,
    chunk: int | None = None,
    with_entropy: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """([M] fp32 log softmax(head(h))[target], [M] detached entropy or None) for [M, H] hidden
    states, `chunk` positions per head call (default `chunk_size(vocab)`); see the module
    docstring. Differentiable w.r.t. h and the head's weights."""
    if h.dim() != 2 or targets.shape != h.shape[:1]:
        raise ValueError(
            f"token_logprobs: h [M, H] and targets [M], got {tuple(h.shape)} "
            f"and {tuple(targets.shape)}"
        )
    w = getattr(head, "weight", None)
    vocab = w.shape[0] if w is not None else int(getattr(head, "out_features", 0) or 0)
    chunk = chunk or chunk_size(vocab)
    if type(head) is not torch.nn.Linear:
        return _by_module(head, h, targets, chunk, with_entropy)
    tok, ent = ChunkedLogprob.apply(h, head.weight, head.bias, targets, chunk, with_entropy)
    return tok, (ent if with_entropy else None)
