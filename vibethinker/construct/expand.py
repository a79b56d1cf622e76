"""Query expansion: seed problem + axis -> teacher prompt; teacher reply -> new Problem.

The four axes are the paper's (docs/PAPER.md stage 0). The template (prompts/construct_expand.txt,
editable: `expand_prompt=` points at a copy) receives {axis}, {axis_text}, {domain}, {problem},
{domain_rules}, {fields}; it must keep `<axis>..</axis>` and `<problem>..</problem>` around the
inserted values when the simulated world teacher answers it (construct/world_teacher.py). The reply
is one JSON object (the last ```json block, else the last parseable {...}); per domain:
- math: {"problem"}; the answer is never taken from the writer: majority vote labels it.
- stem: {"problem" (with the lettered options), "choices"}; the gold letter comes from the vote.
- code: {"problem" (a stdin/stdout program task), "test_inputs"}: inputs only; expected outputs
  come from agreeing teacher solutions run in the sandbox (codetests.py).
- instruct: {"problem", "instructions": [{"id", "kwargs"}]} in IFEval's instruction ids.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from vibethinker.types import Problem

PROMPTS = Path(__file__).resolve().parent.parent / "prompts"
AXES: dict[str, str] = {
    "concept_composition": "combine the seed's concept with a second concept so that the new "
    "problem needs both",
    "solving_skeleton": "keep the topic but change the solution skeleton: the new problem is "
    "solved by a different method or sequence of steps",
    "constraints": "add or tighten constraints so that the new problem needs more reasoning "
    "steps than the seed",
    "evaluation_objective": "change what is asked: another quantity to find or another output "
    "to produce from a similar setting",
}
DOMAIN_RULES: dict[str, tuple[str, str]] = {
    "math": ("The answer must be a single exact value.", '{"problem": "<the problem text>"}'),
    "stem": (
        "Multiple choice with four options A-D listed in the problem text, exactly one correct.",
        '{"problem": "<question with lines A) .. D) ..>", "choices": ["<A>", "<B>", "<C>", "<D>"]}',
    ),
    "code": (
        "A program that reads standard input and writes standard output. Give 3-8 test inputs "
        "(stdin text), including edge cases; do not give the outputs.",
        '{"problem": "<the task>", "test_inputs": ["<stdin 1>", "<stdin 2>", "..."]}',
    ),
    "instruct": (
        "A writing request with 1-3 verifiable constraints, each an IFEval instruction id.",
        '{"problem": "<the request>", "instructions": [{"id": "<ifeval id>", "kwargs": {}}]}',
    ),
}


class ParseError(ValueError):
    """A teacher reply we cannot use; `reason` is the funnel's drop reason."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(f"{reason}: {detail}" if detail else reason)
        self.reason = reason


def load_template(path: str | None, default: str) -> str:
    """The template at `path`, else the packaged prompts/<default>."""
    return Path(path or PROMPTS / default).read_text(encoding="utf-8")


def fill(template: str, **values: str) -> str:
    """Replace `{name}` for the given names only, in one pass (LaTeX braces elsewhere survive)."""
    pat = re.compile("|".join(re.escape("{" + k + "}") for k in values))
    return pat.sub(lambda m: values[m.group(0)[1:-1]], template)


def expand_prompt(template: str, seed: Problem, axis: str) -> str:
    rules, fields = DOMAIN_RULES[seed.domain]
    return fill(
        template,
        axis=axis,
        axis_text=AXES[axis],
        domain=seed.domain,
        problem=seed.prompt,
        domain_rules=rules,
        fields=fields,
    )


def last_json_object(text: str) -> dict[str, Any] | None:
    """The last ```json block that parses to an object, else the last parseable {...}."""
    blocks = re.findall(r"```(?:json)?\s*\n(.*?)```", text, flags=re.DOTALL)
    for b in reversed(blocks):
        try:
            v = json.loads(b)
        except json.JSONDecodeError:
            continue
        if isinstance(v, dict):
            return v
    dec = json.JSONDecoder()
    best = None
    for i in [m.start() for m in re.finditer(r"\{", text)]:
        try:
            v, _ = dec.raw_decode(text, i)
        except json.JSONDecodeError:
            continue
        if isinstance(v, dict):
            best = v
    return best


def _str_list(v: Any, field: str, lo: int, hi: int) -> list[str]:
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        raise ParseError("bad_field", f"{field} must be a list of strings")
    if not lo <= len(v) <= hi:
        raise ParseError("bad_field", f"{field} needs {lo}-{hi} items, got {len(v)}")
    return v


def parse_expansion(text: str, seed: Problem, axis: str) -> Problem:
    """The new Problem in the teacher's reply; raises ParseError("empty" | "no_json" |
    "bad_field") otherwise. Its id is `<seed id>~<axis>`; meta records seed and axis."""
    if not text or not text.strip():
        raise ParseError("empty")
    obj = last_json_object(text)
    if obj is None:
        raise ParseError("no_json")
    prompt = obj.get("problem")
    if not isinstance(prompt, str) or not prompt.strip():
        raise ParseError("bad_field", "problem must be a non-empty string")
    p = Problem(
        id=f"{seed.id}~{axis}",
        domain=seed.domain,
        prompt=prompt.strip(),
        subdomain=seed.subdomain,
        meta={"source_seed": seed.id, "axis": axis},
    )
    if seed.domain == "stem":
        p.choices = _str_list(obj.get("choices"), "choices", 2, 26)
    elif seed.domain == "code":
        p.tests = [
            {"input": x, "output": ""}
            for x in _str_list(obj.get("test_inputs"), "test_inputs", 1, 50)
        ]
        p.subdomain = "stdio"
    elif seed.domain == "instruct":
        inst = obj.get("instructions")
        ok = (
            isinstance(inst, list)
            and inst
            and all(
                isinstance(i, dict)
                and isinstance(i.get("id"), str)
                and isinstance(i.get("kwargs", {}), dict)
                for i in inst
            )
        )
        if not ok:
            raise ParseError("bad_field", "instructions must be a list of {id, kwargs}")
        p.instructions = [{"id": i["id"], "kwargs": dict(i.get("kwargs") or {})} for i in inst]
    return p


def supervision_error(p: Problem) -> str | None:
    """Why a seed lacks reliable supervision (the field missing), or None."""
    if p.domain == "math" and not (p.answer or "").strip():
        return "answer"
    if p.domain == "stem" and not ((p.answer or "").strip() and p.choices):
        return "answer" if not (p.answer or "").strip() else "choices"
    if p.domain == "code" and not (p.tests or (p.test_code and p.entry_point)):
        return "tests"
    if p.domain == "instruct" and not p.instructions:
        return "instructions"
    return None
