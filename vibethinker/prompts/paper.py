"""Evaluation prompts (docs/PAPER.md, Evaluation protocol): the user turn for each domain.

The chat template is the sampler's job; this is only the text of the user turn.
- math: `{problem} Let's think step by step and output the final answer within \\boxed{}.`
  (the paper's prompt; not appended twice when the problem already ends with it);
- stem (multiple choice): the question, the options as `A) ...` lines when the prompt does not
  already show them, and a request for the letter in `\\boxed{}` (the paper says GPQA "asks for
  the letter in \\boxed{}" without giving the wording; ours is below);
- code and instruct: the problem's prompt unchanged (it already says what to output).
A problem with a system message (a chat row's, `meta["system"]`) gets it as the chat's system
turn (`with_system`). `prompt_examples` records the first prompts as the model sees them.
"""

from __future__ import annotations

import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

from vibethinker.types import Problem, as_messages

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


def with_system(style: Callable[[Problem], str]) -> Callable[[Problem], Any]:
    """The style's user turn, preceded by the problem's system message (`meta["system"]`, from a
    chat row) when it has one: a [system, user] chat the engines render through the chat
    template; a plain string otherwise."""

    def prompt(problem: Problem) -> Any:
        text = style(problem)
        system = (problem.meta or {}).get("system")
        if not system:
            return text
        return [{"role": "system", "content": str(system)}, {"role": "user", "content": text}]

    prompt.__name__ = style.__name__
    return prompt


# A style returns the user turn, or a [system, user] chat for a problem with a system message.
PROMPT_STYLES: dict[str, Callable[[Problem], Any]] = {
    "paper": with_system(paper_prompt),
    "raw": with_system(raw_prompt),
}


def prompt_examples(
    problems: list[Problem],
    prompt_fn: Callable[[Problem], Any],
    render: Callable[[Any], str],
    n: int = 3,
) -> list[dict[str, Any]]:
    """The first `n` problems' prompts exactly as the model gets them (`render`: the engine's
    chat template, system message included), beside the stored prompt: what `prompt_style`
    and the template added is visible in the stage's output."""
    return [
        {
            "id": p.id,
            "domain": p.domain,
            "stored_prompt": p.prompt,
            "rendered_prompt": render(prompt_fn(p)),
        }
        for p in problems[:n]
    ]


def sampler_render(sampler: Any) -> Callable[[Any], str]:
    """A prompt as `sampler` gives it to the model: its own encoding decoded back to text
    (chat template included); a sampler without a local tokenizer (an HTTP server applies the
    template) gets the chat it is sent, as JSON."""
    tok = getattr(sampler, "tokenizer", None)
    if tok is not None and hasattr(sampler, "encode"):
        return lambda prompt: tok.decode(sampler.encode(prompt))
    return lambda prompt: json.dumps(as_messages(prompt), ensure_ascii=False)


def write_prompt_examples(out: str | Path, rows: list[dict[str, Any]]) -> Path:
    """`out/prompt_examples.jsonl` (one row per example)."""
    path = Path(out) / "prompt_examples.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path
