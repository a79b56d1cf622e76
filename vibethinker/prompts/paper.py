"""Evaluation prompts (docs/PAPER.md, Evaluation protocol): the user turn for each domain.

The chat template is the sampler's job; this is only the text of the user turn.
- math: `{problem} Let's think step by step and output the final answer within \\boxed{}.`
  (the paper's prompt; not appended twice when the problem already ends with it);
- stem (multiple choice): the question, the options as `A) ...` lines when the prompt does not
  already show them, and a request for the letter in `\\boxed{}` (the paper says GPQA "asks for
  the letter in \\boxed{}" without giving the wording; ours is below);
- code and instruct: the problem's prompt unchanged (it already says what to output).
"""

from __future__ import annotations

import string
from collections.abc import Callable

from vibethinker.types import Problem

MATH_SUFFIX = "Let's think step by step and output the final answer within \\boxed{}."
CHOICE_SUFFIX = (
    "Please reason step by step, and output the letter of the correct option "
    "(only the letter) within \\boxed{}."
)


def math_prompt(text: str) -> str:
    if text.rstrip().endswith(MATH_SUFFIX):
        return text
    return f"{text.rstrip()} {MATH_SUFFIX}"


def choice_prompt(question: str, choices: list[str] | None) -> str:
    body = question.rstrip()
    if choices and not all(c in body for c in choices):
        letters = string.ascii_uppercase
        body += "\n\n" + "\n".join(f"{letters[i]}) {c}" for i, c in enumerate(choices))
    if "\\boxed" in body:  # already asks for a boxed letter
        return body
    return f"{body}\n\n{CHOICE_SUFFIX}"


def paper_prompt(problem: Problem) -> str:
    """The paper's evaluation prompt for this problem's domain."""
    if problem.domain == "math":
        return math_prompt(problem.prompt)
    if problem.domain == "stem":
        return choice_prompt(problem.prompt, problem.choices)
    return problem.prompt


def raw_prompt(problem: Problem) -> str:
    """The problem's prompt as stored (for models trained on another prompt format)."""
    return problem.prompt


PROMPT_STYLES: dict[str, Callable[[Problem], str]] = {"paper": paper_prompt, "raw": raw_prompt}
