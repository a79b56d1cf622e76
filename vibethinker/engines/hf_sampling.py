"""The hf engine's sampling arithmetic (engines/hf.py runs the decoding loop): batches of rows
under a token budget, one decoding step's draw (temperature, top-k, top-p) with the raw policy's
logprob, the nucleus filter, inverse-CDF sampling, left padding.
"""

from __future__ import annotations

import torch

from vibethinker.engines import (
    SamplingParams,
)


def plan_batches(
    lengths: list[int], n: int, max_new_tokens: int, token_budget: int, max_batch_size: int
) -> list[list[tuple[int, int]]]:
    """Group n samples of each prompt into batches of (prompt index, sample count) chunks.

    Prompts go longest first; a batch's row cost is its longest prompt plus max_new_tokens (left
    padding), and rows x cost stays within token_budget (at least one row per batch). A prompt's
    samples may span batches when n rows do not fit in one.
    """
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    batches: list[list[tuple[int, int]]] = []
    cur: list[tuple[int, int]] = []
    used = cap = 0
    for i in order:
        left = n
        while left > 0:
            if not cur:
                cost = lengths[i] + max_new_tokens
                cap = max(1, min(max_batch_size, token_budget // max(cost, 1)))
                used = 0
            take = min(left, cap - used)
            cur.append((i, take))
            used += take
            left -= take
            if used >= cap:
                batches.append(cur)
                cur = []
    if cur:
        batches.append(cur)
    return batches


def sample_next(
    logits: torch.Tensor, params: SamplingParams, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """One decoding step: [B, V] logits -> ([B] sampled ids, [B] raw-policy logprobs of them)."""
    logits = logits.float()
    logp = torch.log_softmax(logits, dim=-1)
    if params.temperature <= 0:
        tok = logits.argmax(dim=-1)
    else:
        z = logits / params.temperature
        if params.top_k and params.top_k > 0:
            kth = torch.topk(z, min(params.top_k, z.shape[-1]), dim=-1).values[:, -1:]
            z = z.masked_fill(z < kth, float("-inf"))
        probs = torch.softmax(z, dim=-1)
        if params.top_p < 1.0:
            cand, idx = nucleus(probs, params.top_p)
            tok = idx.gather(-1, inverse_cdf(cand, generator)[:, None]).squeeze(-1)
        else:
            tok = inverse_cdf(probs, generator)
    return tok, logp.gather(-1, tok[:, None]).squeeze(-1)


def nucleus(probs: torch.Tensor, top_p: float, k0: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-p filter: ([B, k] kept probabilities, zero outside the nucleus; [B, k] their ids).

    A token is dropped when the mass of the tokens ranked before it already reaches top_p (the
    first always stays). Rather than sorting the whole vocabulary each step, try the top k0: a
    trained model's nucleus is usually a handful of tokens, so a 150K-vocabulary sort becomes a
    small top-k. A full sort when some row's nucleus may be wider (k0 * max prob < top_p proves
    it is, without computing the top-k).
    """
    k = min(k0, probs.shape[-1])
    if k < probs.shape[-1] and bool((probs.amax(-1) * k >= top_p).all()):
        vals, idx = torch.topk(probs, k, dim=-1)  # sorted, descending
        if not bool((vals.sum(-1) >= top_p).all()):
            vals, idx = torch.sort(probs, dim=-1, descending=True)
    else:
        vals, idx = torch.sort(probs, dim=-1, descending=True)
    drop = (torch.cumsum(vals, dim=-1) - vals) >= top_p
    return vals.masked_fill(drop, 0.0), idx


def inverse_cdf(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """Sample one index per row of unnormalised [B, V] probabilities with one uniform per row
    (cheaper than torch.multinomial's per-element randomness; float64 sums stay exact enough
    for 150K-token vocabularies)."""
    cdf = torch.cumsum(probs.double(), dim=-1)
    u = torch.rand(
        (probs.shape[0], 1), generator=generator, device=probs.device, dtype=torch.float64
    )
    # right=True: the first index whose cdf exceeds u, so zero-probability ids are never chosen.
    pos = torch.searchsorted(cdf, u * cdf[:, -1:], right=True).squeeze(-1)
    return pos.clamp_(max=probs.shape[-1] - 1)


def left_pad(prompt_ids: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded token ids and attention mask [P, W] of `prompt_ids` (W = the longest)."""
    width = max(len(p) for p in prompt_ids)
    inp = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for r, p in enumerate(prompt_ids):
        inp[r, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        mask[r, width - len(p) :] = 1
    return inp, mask
