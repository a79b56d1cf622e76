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
  per-token logprobs of the response tokens; only response positions go through the LM head,
  a chunk at a time; the rows go through the backbone as they are (padded) or packed end to
  end without padding (`packed_inputs`, the RL update's token-budget micro-batches).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from vibethinker.algo.losses import entropy_from_logits
from vibethinker.engines import SamplingParams
from vibethinker.log import get_logger
from vibethinker.train import chunked
from vibethinker.train.sft import backbone_and_head
from vibethinker.types import Completion, Group, Problem, Score
from vibethinker.verifiers.batch import RETRIED

log = get_logger("train.rollout")

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
    # bool, the verifier failed to give a verdict even after its retry (verifiers/batch.py):
    # scored 0, counted per step as `verifier_errors`
    verifier_error: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.bool))
    # bool, the verifier failed once and the item was run again (`verifier_retried` per step)
    verifier_retried: torch.Tensor = field(default_factory=lambda: torch.zeros(0, dtype=torch.bool))


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
    errors = [s.reason.startswith("verifier_error") for s in scores]  # raw: before truncation
    if any(errors):
        log.warning(
            "%d of %d responses got no verdict (verifier errors after a retry), scored 0: %s",
            sum(errors),
            len(scores),
            sorted({s.reason for s, e in zip(scores, errors) if e}),
        )
    retried = [s.detail.startswith(RETRIED) for s in scores]
    k, err, again = 0, [], []
    for g in groups:
        g.scores = [
            rule(s) if c.truncated else s
            for c, s in zip(g.completions, scores[k : k + len(g.completions)])
        ]
        err.append(errors[k : k + len(g.completions)])
        again.append(retried[k : k + len(g.completions)])
        k += len(g.completions)
    return Scored(
        rewards=torch.tensor([g.rewards for g in groups], dtype=torch.float32),
        correct=torch.tensor([[s.correct for s in g.scores] for g in groups], dtype=torch.bool),
        lengths=torch.tensor([[len(c.token_ids) for c in g.completions] for g in groups]),
        truncated=torch.tensor([[c.truncated for c in g.completions] for g in groups]),
        verifier_error=torch.tensor(err, dtype=torch.bool),
        verifier_retried=torch.tensor(again, dtype=torch.bool),
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
        return Batch(
            self.input_ids[idx],
            self.attention_mask[idx],
            self.prompt_lens[idx],
            self.response_ids[idx],
            self.mask[idx],
            e,
        )

    def to(self, device: Any) -> Batch:
        e = self.engine_logp.to(device) if self.engine_logp is not None else None
        return Batch(
            self.input_ids.to(device),
            self.attention_mask.to(device),
            self.prompt_lens.to(device),
            self.response_ids.to(device),
            self.mask.to(device),
            e,
        )


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
    have_lp = all(
        c.logprobs is not None and len(c.logprobs) == len(c.token_ids) for c in completions
    )
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


def packed_inputs(batch: Batch) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The batch's rows packed end to end without padding: [1, L] input ids and position ids
    (restarting at 0 per row, so attention never crosses rows: transformers reads the restarts
    as sequence boundaries, as for SFT packing, train/packing.py), and [N, T] the position in L
    whose hidden state predicts each response token (padding entries point at 0)."""
    lens = batch.attention_mask.sum(1)
    keep = batch.attention_mask.bool()
    ids = batch.input_ids[keep][None]
    start = torch.cumsum(lens, 0) - lens
    pos = torch.arange(ids.shape[1], device=ids.device) - torch.repeat_interleave(start, lens)
    t = torch.arange(batch.response_ids.shape[1], device=ids.device)
    at = (start + batch.prompt_lens - 1)[:, None] + t
    return ids, pos[None], torch.where(batch.mask, at, torch.zeros_like(at))


def _hidden_and_head(model: Any, batch: Batch, packed: bool) -> tuple[torch.Tensor, Any]:
    """[M, H] hidden states that predict the M real response tokens (in mask order) and the LM
    head; or, for a head that is more than a matmul, [N, T, V] logits and None."""
    parts = backbone_and_head(model)
    if packed:
        ids, pos, at = packed_inputs(batch)
        kw = {"input_ids": ids, "position_ids": pos, "use_cache": False}
        rows = torch.zeros_like(at)
    else:  # right-padded rows; response token t of row i is predicted at prompt_len_i + t - 1
        t = torch.arange(batch.response_ids.shape[1], device=batch.input_ids.device)
        at = (batch.prompt_lens[:, None] - 1 + t).clamp(max=batch.input_ids.shape[1] - 1)
        kw = {
            "input_ids": batch.input_ids,
            "attention_mask": batch.attention_mask,
            "use_cache": False,
        }
        rows = torch.arange(at.shape[0], device=at.device)[:, None].expand_as(at)
    if parts is None:  # a head that is more than a matmul: the model's own (whole) logits
        return model(**kw).logits[rows, at], None
    base, head = parts
    return base(**kw).last_hidden_state[rows[batch.mask], at[batch.mask]], head


def response_logprobs(
    model: Any,
    batch: Batch,
    with_entropy: bool = False,
    chunk: int | None = None,
    packed: bool = False,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """([N, T] log pi(y_t | prompt, y_<t) at temperature 1, [N, T] entropy or None); the
    logprobs carry gradients when grad is enabled (padding positions are 0).

    `packed`: the rows go through the backbone packed end to end in one row of their real tokens
    (`packed_inputs`: no padding computed); else right-padded as given. Same values either way.
    Only real response positions go through the LM head, `chunk` positions at a time
    (`chunked.token_logprobs`), so the [positions, vocab] logits are never whole, in forward or
    backward (64K tokens x a 151K vocabulary would be 40 GB in fp32)."""
    h, head = _hidden_and_head(model, batch, packed)
    mask = batch.mask
    if head is None:  # h already holds [N, T, V] logits
        logp = torch.log_softmax(h.float(), dim=-1)
        tok = logp.gather(-1, batch.response_ids[..., None]).squeeze(-1) * mask
        ent = entropy_from_logits(h.detach()) if with_entropy else None
        return tok, ent
    flat, ent = chunked.token_logprobs(h, head, batch.response_ids[mask], chunk, with_entropy)
    out = torch.zeros(mask.shape, dtype=flat.dtype, device=flat.device).masked_scatter(mask, flat)
    if ent is not None:
        ent = torch.zeros(mask.shape, dtype=ent.dtype, device=ent.device).masked_scatter(mask, ent)
    return out, ent
