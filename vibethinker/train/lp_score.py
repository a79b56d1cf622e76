"""Teacher-forced scoring of verified traces under the student: S_LP in batched no-grad forwards.

S_LP(q, y) = -(1/|y|) sum_t log pi_student(y_t | q, y_<t) (PAPER.md stage 4; algo/potential.py)
for many (q, y) at once. Three things make it fast, at equal results:
- **Shared prompts.** The n traces of one prompt share its forward: a *unit* is one prompt
  followed by several of its responses, each response attending to the prompt and to itself only
  (a tree-shaped mask), positions continuing from the prompt's end. In the tiny world the prompt
  is over half of each sample's tokens; in real runs (long traces) it saves less.
- **Packing.** Units pack end to end into rows as wide as the batch's longest unit (longest
  first; `plan_score_batches`), about `score_tokens` tokens per forward. The mask is dense
  ([B, 1, W, W] booleans, sdpa): a row of width W costs W^2, so rows are no wider than needed.
  A forward of a single response in a single row needs no mask (plain causal attention).
- **Response positions only** go through the LM head, a chunk at a time.
bf16 autocast on GPU (policy.autocast_context); fp32 on CPU.
"""

from __future__ import annotations

from typing import Any

import torch

from vibethinker.train import policy
from vibethinker.train.packing import Sample
from vibethinker.train.sft import backbone_and_head

HEAD_CHUNK = 4096  # response positions per LM-head call (bounds the [positions, vocab] logits)


def plan_score_batches(lengths: list[int], score_tokens: int) -> list[list[list[int]]]:
    """Forwards -> rows -> item indices. Longest first; each forward's rows are as wide as its
    longest item and it holds about `score_tokens` tokens; shorter items pack end to end into
    its rows (first fit over the last 8 rows); an item wider than `score_tokens` gets a forward
    of its own."""
    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    batches: list[list[list[int]]] = []
    k = 0
    while k < len(order):
        width = lengths[order[k]]
        max_rows = max(1, score_tokens // max(width, 1))
        rows: list[list[int]] = []
        room: list[int] = []
        while k < len(order):
            n = lengths[order[k]]
            r = next((r for r in range(max(0, len(rows) - 8), len(rows)) if room[r] >= n), None)
            if r is None:
                if len(rows) == max_rows:
                    break
                rows.append([])
                room.append(width)
                r = len(rows) - 1
            rows[r].append(order[k])
            room[r] -= n
            k += 1
        batches.append(rows)
    return batches


def split_sample(s: Sample) -> tuple[list[int], list[int]]:
    """(prompt ids, response ids): the response is the assistant-masked span (its turn end
    included; template text after it, e.g. a newline, is not part of y)."""
    if 1 not in s.mask:
        raise ValueError("score: a sample without response tokens")
    first = s.mask.index(1)
    last = len(s.mask) - 1 - s.mask[::-1].index(1)
    if sum(s.mask[first : last + 1]) != last - first + 1:
        raise ValueError("score: the assistant mask is not one contiguous span")
    return s.ids[:first], s.ids[first : last + 1]


def plan_units(prompts: list[list[int]], resp_lens: list[int],
               score_tokens: int) -> list[tuple[list[int], list[int]]]:  # fmt: skip
    """Group samples by identical prompt ids into units (prompt, [sample indices]), a unit
    holding at most `score_tokens` tokens (but always at least one response)."""
    groups: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        groups.setdefault(tuple(p), []).append(i)
    units = []
    for p, idx in groups.items():
        cur: list[int] = []
        n = len(p)
        for i in idx:
            if cur and n + resp_lens[i] > score_tokens:
                units.append((list(p), cur))
                cur, n = [], len(p)
            cur.append(i)
            n += resp_lens[i]
        units.append((list(p), cur))
    return units


def tree_batch(rows: list[list[int]], units: list, responses: list[list[int]], pad_id: int):
    """Tensors of one forward: input ids and position ids [B, W], the tree mask [B, 1, W, W]
    (True = may attend; padding attends to itself), and for every response token the (row,
    position) whose hidden state predicts it, the token, and its sample index."""
    ulen = [len(p) + sum(len(responses[i]) for i in m) for p, m in units]
    width = max(sum(ulen[u] for u in row) for row in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    pos = torch.zeros((len(rows), width), dtype=torch.long)
    mask = torch.zeros((len(rows), 1, width, width), dtype=torch.bool)
    pb: list[int] = []
    pt: list[int] = []
    tg: list[int] = []
    ow: list[int] = []
    for b, row in enumerate(rows):
        o = 0
        for u in row:
            prompt, members = units[u]
            P = len(prompt)
            ids[b, o : o + P] = torch.tensor(prompt, dtype=torch.long)
            pos[b, o : o + P] = torch.arange(P)
            mask[b, 0, o : o + P, o : o + P] = torch.ones(P, P, dtype=torch.bool).tril()
            q = o + P
            for i in members:
                r = responses[i]
                n = len(r)
                ids[b, q : q + n] = torch.tensor(r, dtype=torch.long)
                pos[b, q : q + n] = torch.arange(P, P + n)
                mask[b, 0, q : q + n, o : o + P] = True  # the prompt
                mask[b, 0, q : q + n, q : q + n] = torch.ones(n, n, dtype=torch.bool).tril()
                # y_0 is predicted at the prompt's last token, y_t at the response's t-1
                pb += [b] * n
                pt += [o + P - 1, *range(q, q + n - 1)]
                tg += r
                ow += [i] * n
                q += n
            o = q
        pad = torch.arange(o, width)
        mask[b, 0, pad, pad] = True
    return ids, pos, mask, (torch.tensor(pb), torch.tensor(pt), torch.tensor(tg), torch.tensor(ow))


def score_samples(model: Any, samples: list[Sample], pad_id: int, device: Any,
                  score_tokens: int = 8192) -> list[tuple[float, int]]:  # fmt: skip
    """(S_LP, |y|) of each Sample (chat ids + assistant mask) under `model`, teacher-forced, no
    grad. The model must use sdpa attention (a tree mask is a 4D boolean mask)."""
    impl = getattr(model.config, "_attn_implementation", "sdpa")
    if impl != "sdpa":
        raise ValueError(f"score_samples: needs attn_implementation='sdpa', got {impl!r}")
    split = [split_sample(s) for s in samples]
    responses = [r for _, r in split]
    units = plan_units([p for p, _ in split], [len(r) for r in responses], score_tokens)
    ulen = [len(p) + sum(len(responses[i]) for i in m) for p, m in units]
    sums = torch.zeros(len(samples), dtype=torch.float64)
    cnt = torch.zeros(len(samples), dtype=torch.long)
    parts = backbone_and_head(model)
    with torch.no_grad():
        for rows in plan_score_batches(ulen, score_tokens):
            ids, pos, mask, (pb, pt, tg, ow) = tree_batch(rows, units, responses, pad_id)
            alone = len(rows) == 1 and len(rows[0]) == 1 and len(units[rows[0][0]][1]) == 1
            kw = {"input_ids": ids.to(device), "position_ids": pos.to(device), "use_cache": False,
                  "attention_mask": None if alone else mask.to(device)}  # fmt: skip
            with policy.autocast_context(device):
                if parts is None:  # a head that is more than a matmul: full logits
                    h, head = model(**kw).logits[pb, pt], None
                else:
                    h, head = parts[0](**kw).last_hidden_state[pb, pt], parts[1]
                for s in range(0, h.shape[0], HEAD_CHUNK):
                    logits = h[s : s + HEAD_CHUNK]
                    logits = logits if head is None else head(logits)
                    lp = torch.log_softmax(logits.float(), -1)
                    lp = lp.gather(-1, tg[s : s + HEAD_CHUNK, None].to(device)).squeeze(-1)
                    own = ow[s : s + HEAD_CHUNK]
                    sums.index_add_(0, own, lp.double().cpu())
                    cnt.index_add_(0, own, torch.ones_like(own))
    return [(-float(sums[i]) / max(int(cnt[i]), 1), int(cnt[i])) for i in range(len(samples))]
