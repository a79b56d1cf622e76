"""The LLM query-quality filter (quality control, layer 2): the teacher judges each query.

Template: prompts/construct_judge.txt ({problem}; `judge_prompt=` points at a copy). The reply
must end with `VERDICT: <valid|incomplete|ill-posed|invalid>`; the last such line counts, case and
markdown emphasis ignored, "ill posed"/"ill_posed" and "logically invalid" accepted. No verdict
line: None (the stage counts it as `judge_unparsable` and drops the query).
"""

from __future__ import annotations

import re

from vibethinker.construct.expand import fill
from vibethinker.types import Problem

VERDICTS = ("valid", "incomplete", "ill-posed", "invalid")
_VERDICT = re.compile(
    r"verdict\W{0,4}\s*(valid|incomplete|ill[\s_-]?posed|(?:logically\s+)?invalid)\b", re.I
)


def judge_prompt(template: str, query: Problem) -> str:
    return fill(template, problem=query.prompt)


def parse_verdict(text: str) -> str | None:
    """The last verdict in `text`, normalised to one of VERDICTS, or None."""
    found = _VERDICT.findall(text or "")
    if not found:
        return None
    v = re.sub(r"[\s_-]+", "-", found[-1].lower())
    return "invalid" if v.endswith("invalid") else v
