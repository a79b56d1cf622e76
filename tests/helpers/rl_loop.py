"""The RL loop tests' problems, stand-in verifier and options (also used by the run-folder
tests' Ctrl-C check)."""

from __future__ import annotations

from tests.helpers.loop_options import rl_options
from vibethinker.train.rl_config import RLConfig
from vibethinker.types import Problem, Score


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


def has_digit(problems, responses):
    return [Score(float(ok), ok, "ok") for ok in (any(ch.isdigit() for ch in r) for r in responses)]


def _opts(**kw) -> RLConfig:
    base = dict(
        steps=2,
        prompts_per_step=4,
        group_size=4,
        lr=1e-2,
        final_lr=1e-2,
        max_new_tokens=8,
        save_every=0,
        seed=1,
        advantage="mgpo",
        lambda_mgpo=1.0,
        truncated_reward="verify",
        tis_cap=0.0,
        max_grad_norm=0.0,
    )
    return rl_options(**{**base, **kw})
