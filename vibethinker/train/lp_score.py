"""Teacher-forced scoring of verified traces under the student: S_LP in batched no-grad forwards.

S_LP(q, y) = -(1/|y|) sum_t log pi_student(y_t | q, y_<t) (docs/PAPER.md stage 4; algo/potential.py)
for many (q, y) at once. What makes it fast, at equal results (BENCHMARKS.md):
- **Shared prompts.** The n traces of one prompt share its forward: a *unit* is one prompt
  followed by several of its responses, each response attending to the prompt and to itself only
  (a tree-shaped mask), positions continuing from the prompt's end. In the tiny world the prompt
  is over half of each sample's tokens; in real runs (long traces) it saves less.
- **Shared response prefixes.** A unit's responses form a prefix tree (`prefix_tree`): where
  two responses begin with the same tokens, those tokens are one set of positions, scored once
  and counted in both S_LP sums (each node attends to the prompt and its own ancestors; preorder
  keeps a node's subtree contiguous, so the mask is one comparison per unit). Exact: a token's
  log-probability depends only on the prompt and the tokens before it. Saves 5% of positions on
  the world's traces (they open alike); sampled traces share less.
- **Packing.** Units pack end to end into rows as wide as the batch's longest unit (longest
  first; `plan_score_batches`), about `score_tokens` tokens per forward. The mask is dense
  ([B, 1, W, W] booleans, sdpa): a row of width W costs W^2, so rows are no wider than needed.
  A forward of a single response in a single row needs no mask (plain causal attention).
- **Response positions only** go through the LM head, a chunk at a time (`chunked.py`: at
  Qwen2.5's vocabulary 441 positions, 256 MB of fp32 logits, per call).
- **No K/V copies on CPU** (`native_gqa`): sdpa reads grouped key/value heads as they are.
- (Outside this module: the CLI keeps freed memory in the process, vibethinker/malloc.py;
  without it each wide forward page-faults its activations back in.)
bf16 autocast on GPU (policy.autocast_context); fp32 on CPU.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

import numpy as np
import torch

from vibethinker.train import chunked, policy
from vibethinker.train.packing import Sample
from vibethinker.train.sft import backbone_and_head

HEAD_CHUNK = 4096  # positions per log-softmax call when a model's own forward gave the logits
_TRIL = np.tri(1024, dtype=np.bool_)  # causal blocks for prompts up to 1,024 tokens


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
    if first == 0:
        raise ValueError(
            "score: a sample without prompt tokens (y_0 needs a position to predict it)"
        )
    last = len(s.mask) - 1 - s.mask[::-1].index(1)
    if sum(s.mask[first : last + 1]) != last - first + 1:
        raise ValueError("score: the assistant mask is not one contiguous span")
    return s.ids[:first], s.ids[first : last + 1]


def plan_units(
    prompts: list[list[int]], resp_lens: list[int], score_tokens: int
) -> list[tuple[list[int], list[int]]]:
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


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the common prefix of two token lists."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def prefix_tree(
    responses: list[list[int]],
) -> tuple[list[int], list[int], list[int], list[int], list[list[int]]]:
    """The responses of one prompt as a prefix tree (a trie): a token shared by several responses
    at the same place after the same prefix is one node, scored once. Nodes are numbered in
    preorder with the responses taken in sorted order, so a node's subtree is the nodes (k, end).
    Returns, per node: token, parent (-1: the prompt), depth (1 = first response token) and
    subtree end; and per response (in the given order) the node of each of its tokens. A single
    response gives the plain layout: its tokens in order."""
    order = sorted(range(len(responses)), key=lambda j: responses[j])
    token: list[int] = []
    parent: list[int] = []
    depth: list[int] = []
    paths: list[list[int]] = [[] for _ in responses]
    prev: list[int] = []
    prev_path: list[int] = []
    for j in order:
        r = responses[j]
        c = _common_prefix(prev, r)
        n0 = len(token)
        new = range(n0, n0 + len(r) - c)
        path = prev_path[:c] + list(new)
        token += r[c:]
        parent += [path[t - 1] if t else -1 for t in range(c, len(r))]
        depth += range(c + 1, len(r) + 1)
        paths[j] = path
        prev, prev_path = r, path
    size = [1] * len(token)
    for v in range(len(token) - 1, -1, -1):
        if parent[v] >= 0:
            size[parent[v]] += size[v]
    return token, parent, depth, [v + size[v] for v in range(len(token))], paths


def unit_trees(units: list, responses: list[list[int]]) -> list:
    """`prefix_tree` of each unit's responses."""
    return [prefix_tree([responses[i] for i in members]) for _, members in units]


def unit_lengths(units: list, trees: list) -> list[int]:
    """Positions a unit takes in a row: its prompt and its tree's nodes."""
    return [len(p) + len(t[0]) for (p, _), t in zip(units, trees)]


def tree_batch(rows: list[list[int]], units: list, trees: list, pad_id: int):
    """Tensors of one forward: input ids and position ids [B, W], the tree mask [B, 1, W, W]
    (True = may attend: the prompt causally, a node to the prompt, its ancestors and itself;
    padding attends to itself), and, per tree node, the (row, position) whose hidden state
    predicts its token and the token; and the (sample, node row) pairs that sum into each
    sample's S_LP. Built in numpy (one array op per unit), handed to torch without a copy."""
    ulen = unit_lengths(units, trees)
    width = max(sum(ulen[u] for u in row) for row in rows)
    ids = np.full((len(rows), width), pad_id, dtype=np.int64)
    pos = np.zeros((len(rows), width), dtype=np.int64)
    mask = np.zeros((len(rows), 1, width, width), dtype=np.bool_)
    pb: list[np.ndarray] = []
    pt: list[np.ndarray] = []
    tg: list[list[int]] = []
    own: list[int] = []
    at: list[int] = []
    n_nodes = 0
    for b, row in enumerate(rows):
        o = 0
        for u in row:
            prompt, members = units[u]
            token, parent, depth, end, paths = trees[u]
            P, N = len(prompt), len(token)
            q = o + P
            ids[b, o:q] = prompt
            pos[b, o:q] = np.arange(P)
            mask[b, 0, o:q, o:q] = _TRIL[:P, :P] if P <= len(_TRIL) else np.tri(P, dtype=np.bool_)
            ids[b, q : q + N] = token
            pos[b, q : q + N] = np.asarray(depth) + (P - 1)
            mask[b, 0, q : q + N, o:q] = True  # the prompt
            k = np.arange(N)
            # node j sees node k when j is in k's subtree: k <= j < end[k]
            mask[b, 0, q : q + N, q : q + N] = (k[:, None] >= k) & (k[:, None] < np.asarray(end))
            # a node's token is predicted at its parent (the prompt's last token for depth 1)
            par = np.asarray(parent)
            pb.append(np.full(N, b))
            pt.append(np.where(par < 0, q - 1, q + par))
            tg.append(token)
            for i, path in zip(members, paths):
                own += [i] * len(path)
                at += [n_nodes + v for v in path]
            n_nodes += N
            o = q + N
        pad = np.arange(o, width)
        mask[b, 0, pad, pad] = True
    heads = (
        torch.from_numpy(np.concatenate(pb)),
        torch.from_numpy(np.concatenate(pt)),
        torch.tensor([t for toks in tg for t in toks], dtype=torch.long),
    )
    return (
        torch.from_numpy(ids),
        torch.from_numpy(pos),
        torch.from_numpy(mask),
        heads,
        (torch.tensor(own, dtype=torch.long), torch.tensor(at, dtype=torch.long)),
    )


def _node_logprobs(h: torch.Tensor, head: Any, targets: torch.Tensor) -> torch.Tensor:
    """[M] log-probabilities of `targets`: through the head a chunk at a time
    (`chunked.token_logprobs`), or from [M, V] logits already computed (head None)."""
    if head is not None:
        return chunked.token_logprobs(h, head, targets)[0]
    parts = []
    for s in range(0, h.shape[0], HEAD_CHUNK):
        lp = torch.log_softmax(h[s : s + HEAD_CHUNK].float(), -1)
        parts.append(lp.gather(-1, targets[s : s + HEAD_CHUNK, None])[:, 0])
    return torch.cat(parts)


@contextlib.contextmanager
def native_gqa(device: Any) -> Iterator[None]:
    """On CPU, let sdpa read the grouped key/value heads as they are (`enable_gqa`) instead of
    transformers copying them out per query head (`repeat_kv`), which it does whenever a mask is
    given (TRANSFORMERS_SDPA_FORCE_GQA, read per call by transformers 5.x; restored after; a
    version that does not read it copies as before). Same results; 4% faster scoring on the
    tiny model (BENCHMARKS.md). Not on GPU: CUDA's fast kernels take no mask with
    GQA, and transformers' default avoids the slow path there."""
    key = "TRANSFORMERS_SDPA_FORCE_GQA"
    if torch.device(device).type != "cpu" or key in os.environ:
        yield
        return
    os.environ[key] = "1"
    try:
        yield
    finally:
        os.environ.pop(key, None)


def score_samples(
    model: Any, samples: list[Sample], pad_id: int, device: Any, score_tokens: int = 8192
) -> list[tuple[float, int]]:
    """(S_LP, |y|) of each Sample (chat ids + assistant mask) under `model`, teacher-forced, no
    grad. The model must use sdpa attention (a tree mask is a 4D boolean mask)."""
    impl = getattr(model.config, "_attn_implementation", "sdpa")
    if impl != "sdpa":
        raise ValueError(f"score_samples: needs attn_implementation='sdpa', got {impl!r}")
    split = [split_sample(s) for s in samples]
    responses = [r for _, r in split]
    units = plan_units([p for p, _ in split], [len(r) for r in responses], score_tokens)
    trees = unit_trees(units, responses)
    sums = torch.zeros(len(samples), dtype=torch.float64)
    cnt = torch.zeros(len(samples), dtype=torch.long)
    parts = backbone_and_head(model)
    with torch.inference_mode(), native_gqa(device):
        for rows in plan_score_batches(unit_lengths(units, trees), score_tokens):
            ids, pos, mask, (pb, pt, tg), (own, at) = tree_batch(rows, units, trees, pad_id)
            alone = len(rows) == 1 and len(rows[0]) == 1 and len(units[rows[0][0]][1]) == 1
            kw = {
                "input_ids": ids.to(device),
                "position_ids": pos.to(device),
                "use_cache": False,
                "attention_mask": None if alone else mask.to(device),
            }
            with policy.autocast_context(device):
                if parts is None:  # a head that is more than a matmul: full logits
                    h, head = model(**kw).logits[pb, pt], None
                else:
                    h, head = parts[0](**kw).last_hidden_state[pb, pt], parts[1]
                lp_all = _node_logprobs(h, head, tg.to(device)).double().cpu()
            sums.index_add_(0, own, lp_all[at])
            cnt.index_add_(0, own, torch.ones_like(own))
    return [(-float(sums[i]) / max(int(cnt[i]), 1), int(cnt[i])) for i in range(len(samples))]
