"""Read the multiple-choice case table with three extractors and print where each agrees.

    PYTHONPATH=$PWD python scripts/choice_table.py [--cases tests/fixtures/choice_cases.jsonl]

Extractors (the two references are re-implemented here from their published rules, for
comparison only; both get the answer part, as an API reasoning model's reply holds no thinking):
- ours: `committed_letters` of the answer part, a single letter within the choices.
- simple-evals: the first match of `(?i)Answer[ \\t]*:[ \\t]*\\$?([A-D])\\$?` (openai/simple-evals
  common.ANSWER_PATTERN_MULTICHOICE, read with re.search in gpqa_eval.py; the letter is compared
  as written, so "b" is not "B").
- lm-eval flexible-extract (lm_eval/tasks/gpqa/*, filter multi_choice_regex, group_select -1):
  the last "(X)" anywhere; else the last option text found in the lower-cased, punctuation-free
  response; else the last ":" followed by a letter among the choices.

Prints a table of agreement per form (markdown) and every disagreement per extractor.
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from vibethinker.verifiers.choice import committed_letters
from vibethinker.verifiers.extract import answer_part

DEFAULT_CHOICES = ["1 m/s", "2 m/s", "3 m/s", "4 m/s"]
_SIMPLE_EVALS = re.compile(r"(?i)Answer[ \t]*:[ \t]*\$?([A-D])\$?")
_PUNCT = dict.fromkeys(
    i for i in range(sys.maxunicode) if unicodedata.category(chr(i)).startswith("P")
)


@dataclass(frozen=True)
class Case:
    """One model-style ending and the letter it commits to."""

    id: str  # "c000": stable name in the printout
    form: str  # the form family the case covers ("hedge", "full-width", ...)
    response: str  # the model's reply
    expected: str | None  # the committed letter, None for no answer / hedge / invalid
    reason: str  # why that is the expected reading
    choices: list[str]  # option texts in display order (A, B, ...)


def load_cases(path: Path) -> list[Case]:
    """The case table; a bad line is an error naming the file, line and field."""
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            out.append(
                Case(
                    id=d["id"],
                    form=d["form"],
                    response=d["response"],
                    expected=d["expected"],
                    reason=d["reason"],
                    choices=d.get("choices") or DEFAULT_CHOICES,
                )
            )
        except (json.JSONDecodeError, KeyError) as e:
            raise ValueError(f"{path}:{n}: bad case ({type(e).__name__}: {e})") from e
    return out


def ours(text: str, choices: Sequence[str]) -> str | None:
    letters = committed_letters(text, choices)
    valid = string.ascii_uppercase[: len(choices)]
    return letters[0] if len(letters) == 1 and letters[0] in valid else None


def simple_evals(text: str, choices: Sequence[str]) -> str | None:
    m = _SIMPLE_EVALS.search(text)
    return m.group(1) if m else None


def lm_eval_flexible(text: str, choices: Sequence[str]) -> str | None:
    found = re.findall(r"\(([A-Z])\)", text)
    if found:
        return found[-1]

    def squash(s: str) -> str:
        return s.lower().translate(_PUNCT)

    keys = [squash(c.strip()) for c in choices]
    hits = re.findall("|".join(re.escape(k) for k in keys), squash(text))
    if hits and hits[-1]:
        return string.ascii_uppercase[keys.index(hits[-1])]
    letters = "|".join(string.ascii_uppercase[: len(choices)])
    found = re.findall(rf":\s*({letters})", text)
    return found[-1] if found else None


EXTRACTORS: dict[str, Callable[[str, Sequence[str]], str | None]] = {
    "ours": ours,
    "simple-evals": simple_evals,
    "lm-eval flexible": lm_eval_flexible,
}


def read(name: str, case: Case) -> str | None:
    """What extractor `name` reads from the case's answer part (None: cut off while thinking)."""
    part = answer_part(case.response)
    return None if part is None else EXTRACTORS[name](part, case.choices)


def table(cases: list[Case]) -> str:
    """Markdown: agreement with the expected reading per form and in all."""
    forms = list(dict.fromkeys(c.form for c in cases))
    head = "| form | cases | " + " | ".join(EXTRACTORS) + " |"
    rows = [head, "|" + "---|" * (2 + len(EXTRACTORS))]
    for form in [*forms, None]:
        group = [c for c in cases if form is None or c.form == form]
        agree = [sum(read(n, c) == c.expected for c in group) for n in EXTRACTORS]
        label = "**all**" if form is None else form
        rows.append(f"| {label} | {len(group)} | " + " | ".join(map(str, agree)) + " |")
    return "\n".join(rows)


def mistakes(cases: list[Case]) -> str:
    lines = []
    for name in EXTRACTORS:
        bad = [(c, read(name, c)) for c in cases if read(name, c) != c.expected]
        lines.append(f"\n{name}: {len(cases) - len(bad)}/{len(cases)} agree")
        for c, got in bad:
            shown = json.dumps(c.response, ensure_ascii=False)[:70]
            lines.append(f"  {c.id} [{c.form}] expected {c.expected} got {got}: {shown}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=Path, default=Path("tests/fixtures/choice_cases.jsonl"))
    args = ap.parse_args(argv)
    cases = load_cases(args.cases)
    print(table(cases))
    print(mistakes(cases))
    return 0


if __name__ == "__main__":
    sys.exit(main())
