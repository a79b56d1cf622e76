"""RL rollouts as tensors: draw prompts, sample groups, score them, and run the trainer's forward.

- `prompt_order` / `draw_prompts`: the seeded, resumable data order. Epoch e is a permutation of
  the prompts seeded by (seed, e); step s takes the next `per_step` prompts of that stream, so
  the prompts of a step depend only on (seed, s): a resumed run draws exactly what a straight
  run would have drawn.
- `rollout`: G samples per prompt from the Sampler (on the live policy for the hf engine).
- `score_groups`: verify every response; rewards, verdicts, lengths and truncation flags as
  [B, G] tensors. A response cut at `max_new_tokens` is scored by `truncated_reward`
  (TRUNCATED_REWARDS): "zero" (reward 0, incorrect; our default: a cut response has not given
  its final answer) or "verify" (score whatever text is there). The paper only says that
  truncating long traces hurt; it does not say how cut responses are rewarded.
- `build_batch` + `response_logprobs`: prompt + response rows (right-padded) and the trainer's
  per-token logprobs of the response tokens; only response positions go through the LM head.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from vibethinker.algo.losses import entropy_from_logits
from vibethinker.engines import SamplingParams
from vibethinker.types import Completion, Group, Problem, Score

# ----------------------------------------------------------------------------- data order


def prompt_order(n: int, epoch: int, seed: int) -> list[int]:
    """The permutation of n prompts used in `epoch` (seeded by seed and epoch only)."""
    order = list(range(n))
    random.Random(seed * 1_000_003 + epoch).shuffle(order)
    return order


def draw_prompts(n: int, step: int, per_step: int, seed: int) -> list[int]:
    """Indices of the prompts of RL step `step` (0-based): positions step*per_step ... of the
    concatenated epoch permutations."""
    if n <= 0:
        raise ValueError("no prompts to draw from")
    out = []
    for pos in range(step * per_step, (step + 1) * per_step):
        epoch, i = divmod(pos, n)
        out.append(prompt_order(n, epoch, seed)[i])
    return out


# ----------------------------------------------------------------------------- rollouts


def rollout(
    sampler: Any,
    problems: Sequence[Problem],
    prompt_fn: Callable[[Problem], str],
    group_size: int,
    params: SamplingParams,
) -> list[Group]:
    """G completions per problem (scores empty until `score_groups`)."""
    outs = sampler.generate([prompt_fn(p) for p in problems], group_size, params)
    return [Group(p, list(cs)) for p, cs in zip(problems, outs)]


def _truncated_zero(score: Score) -> Score:
    return Score(0.0, False, "truncated")


def _truncated_verify(score: Score) -> Score:
    return score


TRUNCATED_REWARDS: dict[str, Callable[[Score], Score]] = {
    "zero": _truncated_zero,
    "verify": _truncated_verify,
}


@dataclass
class Scored:
    """[B, G] tensors of one step's groups."""

    rewards: torch.Tensor  # float, verifier value after the truncation rule
    correct: torch.Tensor  # bool
    lengths: torch.Tensor  # long, response tokens (EOS included)
    truncated: torch.Tensor  # bool, hit max_new_tokens


def score_groups(
    groups: list[Group],
    verify: Callable[[list[Problem], list[str]], list[Score]],
    truncated_reward: str = "zero",
) -> Scored:
    """Verify all responses of all groups (one batch call) and fill `group.scores`."""
    rule = TRUNCATED_REWARDS[truncated_reward]
    flat_p = [g.problem for g in groups for _ in g.completions]
    flat_r = [c.text for g in groups for c in g.completions]
    scores = verify(flat_p, flat_r) if flat_p else []
    k = 0
    for g in groups:
        g.scores = [rule(s) if c.truncated else s
                    for c, s in zip(g.completions, scores[k : k + len(g.completions)])]  # fmt: skip
        k += len(g.completions)
    return Scored(
        rewards=torch.tensor([g.rewards for g in groups], dtype=torch.float32),
        correct=torch.tensor([[s.correct for s in g.scores] for g in groups], dtype=torch.bool),
        lengths=torch.tensor([[len(c.token_ids) for c in g.completions] for g in groups]),
        truncated=torch.tensor([[c.truncated for c in g.completions] for g in groups]),
    )


# ----------------------------------------------------------------------------- tensors


@dataclass
class Batch:
    """N = B*G rows of prompt + response, right-padded to S; T = the longest response."""

    input_ids: torch.Tensor  # [N, S]
    attention_mask: torch.Tensor  # [N, S]
    prompt_lens: torch.Tensor  # [N]
    response_ids: torch.Tensor  # [N, T] (pad 0)
    mask: torch.Tensor  # [N, T] bool, real response tokens
    engine_logp: torch.Tensor | None  # [N, T] the sampler's logprobs, when it returned them

    def rows(self, idx: slice) -> Batch:
        e = self.engine_logp[idx] if self.engine_logp is not None else None
        return Batch(self.input_ids[idx], self.attention_mask[idx], self.prompt_lens[idx],
                     self.response_ids[idx], self.mask[idx], e)  # fmt: skip

    def to(self, device: Any) -> Batch:
        e = self.engine_logp.to(device) if self.engine_logp is not None else None
        return Batch(self.input_ids.to(device), self.attention_mask.to(device),
                     self.prompt_lens.to(device), self.response_ids.to(device),
                     self.mask.to(device), e)  # fmt: skip


def build_batch(prompt_ids: list[list[int]], completions: list[Completion], pad_id: int) -> Batch:
    """One row per completion: prompt_ids[i] + completions[i].token_ids."""
    n = len(completions)
    seqs = [p + c.token_ids for p, c in zip(prompt_ids, completions)]
    s_len = max(len(x) for x in seqs)
    t_len = max(1, max(len(c.token_ids) for c in completions))
    inp = torch.full((n, s_len), pad_id, dtype=torch.long)
    att = torch.zeros((n, s_len), dtype=torch.long)
    resp = torch.zeros((n, t_len), dtype=torch.long)
    mask = torch.zeros((n, t_len), dtype=torch.bool)
    have_lp = all(c.logprobs is not None and len(c.logprobs) == len(c.token_ids)
                  for c in completions)  # fmt: skip
    elp = torch.zeros((n, t_len)) if have_lp else None
    for i, (x, c) in enumerate(zip(seqs, completions)):
        inp[i, : len(x)] = torch.tensor(x)
        att[i, : len(x)] = 1
        k = len(c.token_ids)
        if k:
            resp[i, :k] = torch.tensor(c.token_ids)
            mask[i, :k] = True
            if elp is not None:
                elp[i, :k] = torch.tensor(c.logprobs, dtype=torch.float32)
    plens = torch.tensor([len(p) for p in prompt_ids])
    return Batch(inp, att, plens, resp, mask, elp)


def _hidden_and_head(model: Any, batch: Batch) -> tuple[torch.Tensor, Any]:
    """[N, T, H] hidden states that predict each response token, and the LM head."""
    from vibethinker.train.sft import backbone_and_head

    parts = backbone_and_head(model)
    t_len = batch.response_ids.shape[1]
    s_len = batch.input_ids.shape[1]
    # response token t of row i sits at prompt_len_i + t and is predicted at prompt_len_i + t - 1
    idx = batch.prompt_lens[:, None] - 1 + torch.arange(t_len, device=batch.input_ids.device)
    idx = idx.clamp(max=s_len - 1)
    if parts is None:  # a head that is more than a matmul: full logits, then select
        logits = model(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                       use_cache=False).logits  # fmt: skip
        return logits.gather(1, idx[..., None].expand(-1, -1, logits.shape[-1])), None
    base, head = parts
    hidden = base(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                  use_cache=False).last_hidden_state  # fmt: skip
    return hidden.gather(1, idx[..., None].expand(-1, -1, hidden.shape[-1])), head


def _chunk_logp(head: Any, h: torch.Tensor, targets: torch.Tensor, want_ent: bool):
    """Logprobs of `targets` (and detached entropies) for [M, H] hidden states."""
    logits = head(h).float()
    logp = torch.log_softmax(logits, dim=-1)
    tok = logp.gather(-1, targets[:, None]).squeeze(-1)
    if not want_ent:
        return tok, None
    with torch.no_grad():
        return tok, -(logp.exp() * logp).sum(-1)


def response_logprobs(
    model: Any, batch: Batch, with_entropy: bool = False, chunk: int = 8192
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """([N, T] log pi(y_t | prompt, y_<t) at temperature 1, [N, T] entropy or None); the
    logprobs carry gradients when grad is enabled (padding positions are 0).

    Only real response positions go through the LM head, `chunk` positions at a time; with
    gradients on, each chunk is checkpointed, so the [positions, vocab] logits are never all
    alive at once (64K tokens x a 151K vocabulary would be 40 GB in fp32)."""
    h, head = _hidden_and_head(model, batch)
    mask = batch.mask
    if head is None:  # h already holds logits
        logp = torch.log_softmax(h.float(), dim=-1)
        tok = logp.gather(-1, batch.response_ids[..., None]).squeeze(-1) * mask
        ent = entropy_from_logits(h.detach()) if with_entropy else None
        return tok, ent
    hs, tg = h[mask], batch.response_ids[mask]  # [M, H], [M]
    parts, ents = [], []
    for s in range(0, max(hs.shape[0], 1), chunk):
        args = (head, hs[s : s + chunk], tg[s : s + chunk], with_entropy)
        if torch.is_grad_enabled() and hs.shape[0] > chunk:
            from torch.utils.checkpoint import checkpoint

            tok, ent = checkpoint(_chunk_logp, *args, use_reentrant=False)
        else:
            tok, ent = _chunk_logp(*args)
        parts.append(tok)
        ents.append(ent)
    flat = torch.cat(parts) if parts else hs.new_zeros(0)
    out = torch.zeros(mask.shape, dtype=flat.dtype, device=flat.device).masked_scatter(mask, flat)
    ent_out = None
    if with_entropy:
        e = torch.cat(ents) if ents else flat.new_zeros(0)
        ent_out = torch.zeros(mask.shape, dtype=e.dtype, device=e.device).masked_scatter(mask, e)
    return out, ent_out
