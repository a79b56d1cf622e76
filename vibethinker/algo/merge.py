"""Weighted parameter averaging (docs/PAPER.md, Diversity-Exploring Distillation: the
per-domain specialists are merged, equal weights 1/N in the 1.5B report): the arithmetic only.
Reading and writing checkpoints tensor by tensor is train/merge.py.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import torch


def normalise_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    """None -> equal 1/n; otherwise non-negative weights scaled to sum to 1."""
    if n < 1:
        raise ValueError("merge needs at least one checkpoint")
    if weights is None:
        return [1.0 / n] * n
    w = [float(x) for x in weights]
    if len(w) != n:
        raise ValueError(f"{len(w)} weights for {n} checkpoints")
    if any(x < 0 for x in w) or sum(w) <= 0:
        raise ValueError(f"merge weights must be non-negative with a positive sum, got {w}")
    total = sum(w)
    return [x / total for x in w]


def average(tensors: Iterable[torch.Tensor], weights: Sequence[float],
            dtype: torch.dtype | None = None) -> torch.Tensor:  # fmt: skip
    """sum_i w_i * t_i, accumulated in fp32 one input at a time (each may be freed as soon as it
    is added), stored in the first input's dtype or `dtype`."""
    acc: torch.Tensor | None = None
    src_dtype = None
    for t, wi in zip(tensors, weights):
        src_dtype = src_dtype or t.dtype
        acc = t.float() * wi if acc is None else acc.add_(t.float(), alpha=wi)
    if acc is None:
        raise ValueError("average: no tensors")
    return acc.to(dtype or src_dtype).contiguous()
