"""Instruction-following verifier: IFEval rules over the answer part of a response.

`verify_instruct(problem, response)` checks every `{id, kwargs}` of `problem.instructions`
against the answer (the text after `</think>` when the response has a think block; nothing in
the reasoning counts; an unclosed think block scores 0, "no_answer"). Score value = fraction of
instructions followed; correct = all followed; reason "ok" or "failed:<id>,<id>" listing the
ones not followed.

Strict mode is IFEval's "strict" accuracy. `loose=True` is IFEval's "loose" accuracy: an
instruction counts as followed if any of eight variants of the response follows it (the
response, without its first line, without its last line, without both, and each of these with
every `*` removed), which forgives markdown emphasis and a framing first/last line.

Malformed instructions (unknown id, missing or ill-typed kwargs) are data errors, not model
errors: `validate_instructions` raises ValueError naming them, for data loaders to call at load
time; `verify_instruct` itself never raises and returns value 0 with reason
"unknown_instruction:<id>" or "bad_kwargs:<id>" so that one bad row cannot crash a batch.
A problem with no instructions scores 0 ("no_instructions"): a verifier must not hand out reward
for nothing; open prompts without rules belong to the rubric judge (`judge.py`).
"""

from __future__ import annotations

from typing import Any

from vibethinker.log import get_logger
from vibethinker.types import Problem, Score
from vibethinker.verifiers.extract import answer_part
from vibethinker.verifiers.ifeval_rules import RULES, check_following, normalize_kwargs

log = get_logger("verifiers.instruct")


def loose_variants(text: str) -> list[str]:
    """IFEval's eight loose-mode variants of a response (the original first)."""
    lines = text.split("\n")
    base = [
        text,
        "\n".join(lines[1:]).strip(),
        "\n".join(lines[:-1]).strip(),
        "\n".join(lines[1:-1]).strip(),
    ]
    return base + [v.replace("*", "") for v in base]


def validate_instructions(instructions: list[dict[str, Any]] | None) -> list[dict[str, Any]]:
    """Normalized copies of `instructions`; raises ValueError at the first bad one.

    Each entry is `{"id": <IFEval id>, "kwargs": {...}}`; kwargs with null values are dropped."""
    if not instructions:
        raise ValueError("instruct problem has no instructions")
    out = []
    for i, inst in enumerate(instructions):
        if not isinstance(inst, dict) or not isinstance(inst.get("id"), str):
            raise ValueError(f"instructions[{i}]: expected {{'id': str, 'kwargs': dict}}")
        try:
            out.append(
                {"id": inst["id"], "kwargs": normalize_kwargs(inst["id"], inst.get("kwargs"))}
            )
        except ValueError as e:
            raise ValueError(f"instructions[{i}]: {e}") from None
    return out


def instruction_results(
    instructions: list[dict[str, Any]], answer: str, *, loose: bool = False
) -> list[bool]:
    """Per instruction (already validated), whether `answer` follows it."""
    variants = loose_variants(answer) if loose else [answer]
    return [any(check_following(i["id"], i["kwargs"], v) for v in variants) for i in instructions]


def verify_instruct(problem: Problem, response: str, *, loose: bool = False) -> Score:
    """Score = fraction of `problem.instructions` followed by the answer part of `response`."""
    raw = problem.instructions or []
    if not raw:
        return Score(0.0, False, "no_instructions")
    instructions = []
    for inst in raw:
        iid = inst.get("id") if isinstance(inst, dict) else None
        if not isinstance(iid, str) or iid not in RULES:
            return Score(0.0, False, f"unknown_instruction:{iid}")
        try:
            instructions.append({"id": iid, "kwargs": normalize_kwargs(iid, inst.get("kwargs"))})
        except ValueError:
            return Score(0.0, False, f"bad_kwargs:{iid}")
    answer = answer_part(response) if isinstance(response, str) else None
    if answer is None:  # cut off inside <think>: nothing was answered
        return Score(0.0, False, "no_answer")
    try:
        results = instruction_results(instructions, answer, loose=loose)
    except Exception as e:  # a checker bug must not crash a training batch; log it loudly
        log.exception("instruct verifier crashed on problem %s", problem.id)
        return Score(0.0, False, f"error:{type(e).__name__}")
    value = sum(results) / len(results)
    failed = [inst["id"] for inst, ok in zip(instructions, results) if not ok]
    return Score(value, not failed, "ok" if not failed else "failed:" + ",".join(failed))
