"""Addition problems and a tiny model trained on `7+i` traces (the RL tests)."""

from __future__ import annotations

import pytest

from vibethinker.models.tiny import build_tiny_model
from vibethinker.types import Problem


def _problems(n: int = 12) -> list[Problem]:
    return [
        Problem(
            f"p{i}",
            "math",
            f"Compute {i % 9 + 1}+{(i * 5) % 9}.",
            answer=str(i % 9 + 1 + (i * 5) % 9),
        )
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [
        f"{p.prompt} <think>7+{i}={7 + i}</think>\\boxed{{{7 + i}}}"
        for i, p in enumerate(_problems(40))
    ]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)
