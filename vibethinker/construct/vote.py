"""Majority vote over the teacher's final answers: the pseudo-label and its margin.

Answers are clustered with the domain's equivalence (the math verifier's, so `1/2` and `0.5` are
one answer; letters for STEM); the largest cluster's representative (its first member) is the
label. margin = (top cluster - runner-up) / n, where n counts every sample including those with no
final answer, so a teacher that mostly fails to answer gives a small margin. Ties: no label.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Vote:
    label: str | None  # the majority answer; None on a tie or when no sample answered
    top: int  # samples in the majority cluster
    n: int  # all samples
    margin: float  # (top - second) / n, in [0, 1]

    @property
    def share(self) -> float:
        return self.top / self.n if self.n else 0.0


def majority_vote(answers: list[str | None], same: Callable[[str, str], bool]) -> Vote:
    """Cluster `answers` (None = no final answer) by `same`; see the module doc."""
    reps: list[str] = []
    counts: list[int] = []
    for a in answers:
        if a is None:
            continue
        for i, r in enumerate(reps):
            if same(r, a):
                counts[i] += 1
                break
        else:
            reps.append(a)
            counts.append(1)
    n = len(answers)
    if not counts:
        return Vote(None, 0, n, 0.0)
    order = sorted(range(len(counts)), key=lambda i: -counts[i])
    top = counts[order[0]]
    second = counts[order[1]] if len(order) > 1 else 0
    label = reps[order[0]] if top > second else None
    return Vote(label, top, n, (top - second) / n if n else 0.0)
