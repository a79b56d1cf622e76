"""Build tests/fixtures/math_answerline.jsonl: the real-gold corpus in other sources' formats.

Every row of tests/fixtures/math_realgold.jsonl whose response commits to one answer in one box
(no second box, no prose after it: those classes test the box rules) becomes a GPT-4-style
solution without a box, in the step-per-line style of OpenAI's PRM800K samples, that ends the
way PRM800K's solutions end: `# Answer`, a blank line, the answer (`answer_line`). The answer
is the old box's content, so the row keeps its gold, its class, its rule and its expected
verdict (decided by the real-gold corpus's written rules, never by a grader). Every eighth item
is also written ending "Final Answer: The final answer is $X$. I hope it is correct."
(`final_answer`, the Minerva/lm-eval style) and `**Answer:** X` (`answer_colon`).

The solution steps are templates (five, chosen by the row's line number): some restate the
problem, some state the answer in a step before the heading as GPT-4 does; the answer line is
written bare (PRM800K's usual form), in `$...$`, or with a final period, in turn.

    PYTHONPATH=$PWD python scripts/math_answerline_corpus.py
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vibethinker.verifiers.extract import after_last_box, all_boxed, answer_part, last_boxed

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "fixtures"
SOURCE = FIXTURES / "math_realgold.jsonl"
OUT = FIXTURES / "math_answerline.jsonl"
SKIP_CLASSES = {"prose_after", "known_limits"}  # box-specific rules and hand-written edge rows

STEPS = (
    "I want to find the value the problem asks for.\nI'll set up the quantities first.\n"
    "Then I simplify step by step.\nThat gives me the final value.",
    "To solve this, I recall the relevant formula.\nPlugging in the given values, I get an "
    "expression I can simplify.\nSimplifying carefully, I get ${a}$.",
    "This problem is about {src}.\nLet me work through it.\nAfter checking my work, the answer "
    "should be ${a}$.",
    "First, I notice the structure of the problem.\nI can use that to reduce the work.\n"
    "Every step checks out.",
    "I'll start by writing down what I know.\nNow I combine the equations.\nSo the result is "
    "${a}$.\nI double-check by substituting back, and it works.",
)


def answer_line(a: str, k: int) -> str:
    """The answer as written after the heading: bare, in `$...$`, or with a period, in turn."""
    return (a, f"${a}$", f"{a}.")[k % 3]


def solution(a: str, k: int, src: str, fmt: str) -> str:
    body = STEPS[k % len(STEPS)].format(a=a, src=src)
    if fmt == "answer_line":
        return f"{body}\n\n# Answer\n\n{answer_line(a, k)}"
    if fmt == "final_answer":
        return f"{body}\nFinal Answer: The final answer is ${a}$. I hope it is correct."
    return f"{body}\n\n**Answer:** ${a}$"


def one_box(response: str) -> str | None:
    """The box content when the response commits to exactly one box and says nothing after."""
    part = answer_part(response)
    if part is None or len(all_boxed(part)) != 1:
        return None
    box = last_boxed(part)
    tail = after_last_box(part).strip().strip("$").replace("\\]", "").strip(" .")
    return box if box and not tail else None


def build(rows: list[dict]) -> list[dict]:
    out, item = [], 0
    for k, row in enumerate(rows):
        if row["class"] in SKIP_CLASSES:
            continue
        a = one_box(row["response"])
        if a is None:
            continue
        fmts = (
            ("answer_line", "final_answer", "answer_colon") if item % 8 == 0 else ("answer_line",)
        )
        item += 1
        for fmt in fmts:
            new = {**row, "format": fmt, "response": solution(a, k, row["source"], fmt)}
            out.append(new)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--source", type=Path, default=SOURCE)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    rows = [json.loads(line) for line in args.source.read_text().splitlines()]
    out = build(rows)
    args.out.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in out))
    print(f"{len(out)} rows -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
