"""Score our math verifier and plain math-verify on tests/fixtures/math_realgold.jsonl.

With `--corpus tests/fixtures/math_answerline.jsonl` (rows in other sources' formats, each
with its `format`), ours reads each row with that answer-location rule and again with `auto`,
and `--prm800k DIR` adds OpenAI's PRM800K grader (`DIR/grading/grader.py`, from
github.com/openai/prm800k, run from outside this repo; it needs pylatexenc on the path) on the
`answer_line` rows, given the text after the last `# Answer` as PRM800K's samples record it.

Prints, per answer class, each verifier's false rejections (the rule says right, the verifier
says wrong) and false acceptances (the rule says wrong, the verifier says right), then our
mistakes with their reasons. Plain math-verify is `verify(parse(f"${gold}$"), parse(response))`
with its defaults, the way it is used as a reward; a row it raises on is counted as its named
verdict `error:<Exception>` (scored wrong). A corpus row with a missing or mistyped field stops
the run with the file, line and field.

    PYTHONPATH=$PWD python scripts/math_realgold_table.py [--corpus PATH] [--mistakes]
    PYTHONPATH=$PWD:/tmp/prm800k:/tmp/pylib python scripts/math_realgold_table.py \
        --corpus tests/fixtures/math_answerline.jsonl --prm800k /tmp/prm800k
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from math_verify import parse, verify

from vibethinker.types import Problem
from vibethinker.verifiers.math import verify_math

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "math_realgold.jsonl"
_FIELDS = {
    "source": str,
    "id": str,
    "gold": str,
    "response": str,
    "expected": bool,
    "class": str,
    "rule": str,
}


@dataclass(frozen=True)
class Case:
    """One corpus row, checked."""

    line: int  # 1-based line in the corpus file
    source: str  # MATH500, AIME2024, AIME2025, CNMO
    gold: str  # gold answer as written in the public file
    response: str  # model-style response
    expected: bool  # verdict of the written rule
    cls: str  # answer class
    rule: str  # the rule that decided `expected`
    prompt: str  # problem text where the rule reads it, else ""
    format: str = "boxed"  # the answer-location rule of the row's format (extract.py)


def load(path: Path) -> list[Case]:
    """The corpus rows; a bad row raises ValueError naming the file, line and field."""
    cases = []
    for i, text in enumerate(path.read_text().splitlines(), 1):
        try:
            row = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"{path}:{i}: not JSON ({e.msg})") from None
        if not isinstance(row, dict):
            raise ValueError(f"{path}:{i}: not a JSON object")
        for key, typ in _FIELDS.items():
            if not isinstance(row.get(key), typ):
                raise ValueError(f"{path}:{i}: field {key!r} missing or not {typ.__name__}")
        if not isinstance(row.get("prompt", ""), str):
            raise ValueError(f"{path}:{i}: field 'prompt' is not str")
        cases.append(
            Case(
                i,
                row["source"],
                row["gold"],
                row["response"],
                row["expected"],
                row["class"],
                row["rule"],
                row.get("prompt", ""),
                row.get("format", "boxed"),
            )
        )
    return cases


def ours(case: Case, rule: str = "") -> tuple[bool, str]:
    meta = {"answer_format": rule or case.format}
    p = Problem(id=str(case.line), domain="math", prompt=case.prompt or "q", answer=case.gold)
    s = verify_math(dataclasses.replace(p, meta=meta), case.response)
    return s.correct, s.reason


def ours_auto(case: Case) -> tuple[bool, str]:
    return ours(case, "auto")


def prm800k_grader(case: Case) -> tuple[bool, str] | None:
    """OpenAI's PRM800K grader on the text after the last `# Answer` (None: not its format)."""
    if case.format != "answer_line":
        return None
    from grading.grader import grade_answer  # the fetched repo's grader, on PYTHONPATH

    given = case.response.rsplit("# Answer", 1)[-1].strip()
    try:
        ok = bool(grade_answer(given, case.gold))
    except Exception as e:  # noqa: BLE001 -- counted like math-verify's errors
        return False, f"error:{type(e).__name__}"
    return ok, "ok" if ok else "wrong_answer"


def math_verify_plain(case: Case) -> tuple[bool, str]:
    gold = case.gold if case.gold.strip().startswith("$") else f"${case.gold}$"
    try:
        ok = bool(verify(parse(gold), parse(case.response)))
    except Exception as e:  # noqa: BLE001 -- a library failure is a named, counted verdict
        return False, f"error:{type(e).__name__}"
    return ok, "ok" if ok else "wrong_answer"


def group(c: Case) -> str:
    """The table row of a case: its class; rows of the other formats in one row per format."""
    return c.cls if c.format in ("boxed", "answer_line") else f"{c.format} (all classes)"


def verifiers(cases: list[Case], prm800k: bool) -> dict[str, Callable]:
    """The columns: ours, ours with `auto` (a corpus in other formats), math-verify, PRM800K."""
    out: dict[str, Callable] = {"ours": ours}
    if any(c.format != "boxed" for c in cases):
        out["ours auto"] = ours_auto
    out["math-verify"] = math_verify_plain
    if prm800k:
        out["PRM800K"] = prm800k_grader
    return out


def score(cases: list[Case], fns: dict[str, Callable]) -> dict[str, dict[str, Counter]]:
    """{verifier: {group: Counter(fr=, fa=, n=)}} plus each verifier's verdict reasons."""
    out: dict[str, dict[str, Counter]] = {name: defaultdict(Counter) for name in fns}
    for c in cases:
        for name, fn in fns.items():
            verdict = fn(c)
            if verdict is None:
                continue  # not this verifier's format
            got, reason = verdict
            tally = out[name][group(c)]
            tally["n"] += 1
            tally["right" if c.expected else "wrong"] += 1
            if got != c.expected:
                tally["fr" if c.expected else "fa"] += 1
                out[name]["_mistakes"][(c.line, c.cls, c.gold, c.response[-60:], reason)] += 1
            out[name]["_reasons"][reason] += 1
    return out


def table(res: dict[str, dict[str, Counter]]) -> str:
    names = list(res)
    first = res[names[0]]
    groups = sorted(k for k in first if not k.startswith("_"))
    head = " | ".join(f"{n} FR | {n} FA" for n in names)
    lines = [f"| class | rows (right/wrong) | {head} |", "|---|---|" + "---|---|" * len(names)]
    tot: dict[str, Counter] = defaultdict(Counter)
    for g in groups:
        o = first[g]
        cells = []
        for n in names:
            t = res[n].get(g)
            cells.append("-- | --" if t is None else f"{t['fr']} | {t['fa']}")
            if t is not None:
                tot[n].update(fr=t["fr"], fa=t["fa"])
        lines.append(f"| {g} | {o['n']} ({o['right']}/{o['wrong']}) | {' | '.join(cells)} |")
        tot["rows"].update(n=o["n"], right=o["right"], wrong=o["wrong"])
    r = tot["rows"]
    cells = " | ".join(f"{tot[n]['fr']} | {tot[n]['fa']}" for n in names)
    lines.append(f"| **all** | {r['n']} ({r['right']}/{r['wrong']}) | {cells} |")
    scored = {n: sum(t["n"] for k, t in res[n].items() if not k.startswith("_")) for n in names}
    mistakes = ", ".join(f"{n} {tot[n]['fr'] + tot[n]['fa']} (of {scored[n]})" for n in names)
    lines.append(f"\nmistakes: {mistakes}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--mistakes", action="store_true", help="list every mistake of each")
    ap.add_argument("--prm800k", type=Path, help="a folder holding PRM800K's grading/ package")
    args = ap.parse_args(argv)
    if args.prm800k:
        sys.path.insert(0, str(args.prm800k))
    cases = load(args.corpus)
    res = score(cases, verifiers(cases, bool(args.prm800k)))
    print(table(res))
    for name in res:
        print(f"\n{name} verdict reasons:", dict(res[name]["_reasons"].most_common()))
    for name in res if args.mistakes else ("ours",):
        print(f"\n{name} mistakes (line, class, gold, response end, reason):")
        for key in sorted(res[name]["_mistakes"]):
            print("  ", key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
