"""Arithmetic problems with two traces each, and a tiny model trained on them (SFT tests)."""

from __future__ import annotations

import random

import pytest

from vibethinker.models.tiny import build_tiny_model
from vibethinker.types import Problem


def _problems(n: int, seed: int = 0) -> list[Problem]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b, c = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
        r = a * b + c
        out.append(
            Problem(
                id=f"m{i}",
                domain="math",
                subdomain="arithmetic" if i % 2 else "algebra",
                prompt=f"Compute {a}*{b}+{c}. Let's think step by step and output the final "
                "answer within \\boxed{}.",
                answer=str(r),
                traces=[
                    f"<think>{a}*{b}={a * b};{a * b}+{c}={r}</think>\\boxed{{{r}}}",
                    f"<think>{b}*{a}={a * b};{c}+{a * b}={r};{r}-{c}={a * b}</think>\\boxed{{{r}}}",
                ],
            )
        )
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [p.prompt + " " + t for p in _problems(64) for t in p.traces]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)
