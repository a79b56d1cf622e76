"""SFT samples: chat-formatted tokenisation with an assistant-only mask, packing, collation.

A *sample* is one (prompt, trace) pair: every trace of a problem is its own sample, so multi-path
data trains every path (docs/PAPER.md, multi-path distillation). A *row* is what one sequence of the
batch holds: one sample, or several packed end to end.

Packing without cross-contamination: in a packed row the position ids restart at 0 for each
sample, and the model gets `position_ids` with no 2D attention mask. transformers (>= 4.56, in
`masking_utils.find_packed_sequence_indices`) reads the restarts as sequence boundaries and builds
a block-diagonal causal mask for sdpa/eager, and flash-attention takes the same position ids as
varlen boundaries, so attention never crosses samples on CPU or GPU. The tail padding of a row is
one more "sequence" (positions 0..p-1) with no loss. `tests/train/test_sft.py` checks that the
packed loss equals the per-sample loss.
"""

from __future__ import annotations

import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from vibethinker.engines import as_messages, chat_end_token

IGNORE = -100


@dataclass
class Sample:
    ids: list[int]  # [T] prompt + response tokens (chat-formatted)
    mask: list[int]  # [T] 1 where the token is trained on (assistant turn), else 0
    truncated: bool = False  # cut to max_len (only with overlong="cut")


def encode_chat(tokenizer: Any, prompt: Any, response: str) -> tuple[list[int], list[int]]:
    """Token ids of the chat [user: prompt, assistant: response] and the assistant-token mask.
    `prompt` is the user text, or a chat ([system, user]) that the response follows.

    Uses the template's `{% generation %}` block when it has one; otherwise (e.g. Qwen2.5's own
    template) the mask is everything after the rendered prompt with the generation prompt, which
    must be a prefix of the full conversation (checked).
    """
    msgs = [*as_messages(prompt), {"role": "assistant", "content": response}]
    if re.search(r"{%-?\s*generation\s*-?%}", getattr(tokenizer, "chat_template", None) or ""):
        enc = tokenizer.apply_chat_template(
            msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
        )
        ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
        if any(mask):
            return ids, mask
    head = tokenizer.apply_chat_template(msgs[:-1], tokenize=False, add_generation_prompt=True)
    full = tokenizer.apply_chat_template(msgs, tokenize=False)
    if not full.startswith(head):
        raise ValueError("chat template: the prompt with generation prompt is not a prefix")
    head_ids = tokenizer(head, add_special_tokens=False)["input_ids"]
    tail = full[len(head) :]
    # The trained part ends with the turn's end token (`<|im_end|>`; a base model's EOS such as
    # `<|endoftext|>` is not in the template); text after it (a newline) is not trained.

    end = chat_end_token(tokenizer)
    eos = tokenizer.convert_ids_to_tokens(end) if end is not None else (tokenizer.eos_token or "")
    cut = tail.find(eos) + len(eos) if eos and eos in tail else len(tail)
    body_ids = tokenizer(tail[:cut], add_special_tokens=False)["input_ids"]
    rest_ids = tokenizer(tail[cut:], add_special_tokens=False)["input_ids"] if tail[cut:] else []
    ids = list(head_ids) + list(body_ids) + list(rest_ids)
    return ids, [0] * len(head_ids) + [1] * len(body_ids) + [0] * len(rest_ids)


OVERLONG = ("drop", "cut")


def build_samples(
    pairs: Sequence[tuple[str, str]], tokenizer: Any, max_len: int, overlong: str = "drop"
) -> list[Sample]:
    """One Sample per (prompt, response) of at most max_len tokens.

    `overlong`: "drop" (the default) leaves a longer sample out (the caller counts them as
    len(pairs) - len(samples)): cut, it would train a trace without its final answer and without
    the end token, teaching the model to ramble to the cap (stage 2 is exactly the long traces).
    "cut" keeps its first max_len tokens (flagged `truncated`)."""
    if overlong not in OVERLONG:
        raise ValueError(f"overlong must be one of {OVERLONG}, got {overlong!r}")
    out = []
    for prompt, response in pairs:
        ids, mask = encode_chat(tokenizer, prompt, response)
        if len(ids) <= max_len:
            out.append(Sample(ids, mask, False))
        elif overlong == "cut":
            out.append(Sample(ids[:max_len], mask[:max_len], True))
    return out


def pack(lengths: Sequence[int], max_len: int, open_rows: int = 8) -> list[list[int]]:
    """Pack items (in the given order) into rows of at most max_len tokens.

    First fit over a window of `open_rows` open rows: an item goes to the oldest open row with
    room, else opens a row; when more than `open_rows` are open the oldest is closed. The window
    keeps the shuffled order roughly intact while filling rows well. Rows are returned in the
    order they were opened. An item longer than max_len gets a row of its own.
    """
    rows: list[list[int]] = []
    room: list[int] = []
    open_idx: list[int] = []  # indices into rows, oldest first
    for i, n in enumerate(lengths):
        for r in open_idx:
            if room[r] >= n:
                rows[r].append(i)
                room[r] -= n
                break
        else:
            rows.append([i])
            room.append(max_len - n)
            open_idx.append(len(rows) - 1)
            if len(open_idx) > open_rows:
                open_idx.pop(0)
        open_idx = [r for r in open_idx if room[r] > 0]
    return rows


def plan_steps(
    lengths: Sequence[int],
    max_len: int,
    packed: bool,
    global_batch: int,
    micro_batch: int,
    seed: int,
    epochs: int,
) -> list[list[list[list[int]]]]:
    """The whole run's data order: steps -> micro-batches -> rows -> sample indices.

    Each epoch is a seeded shuffle of all samples cut into global batches of `global_batch`
    SAMPLES (the last one may be smaller); a step's samples are packed into rows of max_len
    tokens (or one sample per row), and `micro_batch` rows go through one forward. Counting the
    global batch in samples, not rows, makes packing a pure speed-up: packed and unpacked runs
    take the same optimizer steps on the same data. (The paper's "global batch 128" does not say
    which it counts.) Deterministic in `seed`, so a resumed run replays the same order.
    """
    steps: list[list[list[list[int]]]] = []
    for epoch in range(epochs):
        order = list(range(len(lengths)))
        random.Random(seed * 1_000_003 + epoch).shuffle(order)
        for start in range(0, len(order), global_batch):
            chunk = order[start : start + global_batch]
            if packed:
                rows = [[chunk[j] for j in r] for r in pack([lengths[i] for i in chunk], max_len)]
            else:
                rows = [[i] for i in chunk]
            steps.append([rows[k : k + micro_batch] for k in range(0, len(rows), micro_batch)])
    return steps


def collate(
    samples: Sequence[Sample], rows: Sequence[Sequence[int]], pad_id: int, packed: bool
) -> dict[str, torch.Tensor | None]:
    """Rows -> batch tensors [B, L] (L = longest row): input_ids, labels (IGNORE where untrained),
    position_ids (restarting per sample), attention_mask (None when packed: the position ids
    carry the boundaries; [B, L] 0/1 for padded unpacked rows)."""
    width = max(sum(len(samples[i].ids) for i in row) for row in rows)
    B = len(rows)
    ids = torch.full((B, width), pad_id, dtype=torch.long)
    labels = torch.full((B, width), IGNORE, dtype=torch.long)
    pos = torch.zeros((B, width), dtype=torch.long)
    attn = torch.zeros((B, width), dtype=torch.long)
    for b, row in enumerate(rows):
        t = 0
        for i in row:
            s = samples[i]
            n = len(s.ids)
            x = torch.tensor(s.ids, dtype=torch.long)
            m = torch.tensor(s.mask, dtype=torch.bool)
            ids[b, t : t + n] = x
            labels[b, t : t + n] = torch.where(m, x, torch.full_like(x, IGNORE))
            labels[b, t] = IGNORE  # never predicted from the previous sample's last token
            pos[b, t : t + n] = torch.arange(n)
            attn[b, t : t + n] = 1
            t += n
        pos[b, t:] = torch.arange(width - t)  # padding: its own segment, no loss
    # Labels are next-token targets: position t predicts token t+1 (shifted in the loss).
    return {
        "input_ids": ids,
        "labels": labels,
        "position_ids": pos,
        "attention_mask": None if packed else attn,
        "n_tokens": int(attn.sum()),
    }
