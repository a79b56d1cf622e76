"""Score our math verifier and plain math-verify on tests/fixtures/math_realgold.jsonl.

Prints, per answer class, each verifier's false rejections (the rule says right, the verifier
says wrong) and false acceptances (the rule says wrong, the verifier says right), then our
mistakes with their reasons. Plain math-verify is `verify(parse(f"${gold}$"), parse(response))`
with its defaults, the way it is used as a reward; a row it raises on is counted as its named
verdict `error:<Exception>` (scored wrong). A corpus row with a missing or mistyped field stops
the run with the file, line and field.

    PYTHONPATH=$PWD python scripts/math_realgold_table.py [--corpus PATH] [--mistakes]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter, defaultdict
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
            )
        )
    return cases


def ours(case: Case) -> tuple[bool, str]:
    s = verify_math(
        Problem(id=str(case.line), domain="math", prompt=case.prompt or "q", answer=case.gold),
        case.response,
    )
    return s.correct, s.reason


def math_verify_plain(case: Case) -> tuple[bool, str]:
    gold = case.gold if case.gold.strip().startswith("$") else f"${case.gold}$"
    try:
        ok = bool(verify(parse(gold), parse(case.response)))
    except Exception as e:  # noqa: BLE001 -- a library failure is a named, counted verdict
        return False, f"error:{type(e).__name__}"
    return ok, "ok" if ok else "wrong_answer"


def score(cases: list[Case]) -> dict[str, dict[str, Counter]]:
    """{verifier: {class: Counter(fr=, fa=, n=)}} plus each verifier's verdict reasons."""
    out: dict[str, dict[str, Counter]] = {
        "ours": defaultdict(Counter),
        "math-verify": defaultdict(Counter),
    }
    for c in cases:
        for name, fn in (("ours", ours), ("math-verify", math_verify_plain)):
            got, reason = fn(c)
            tally = out[name][c.cls]
            tally["n"] += 1
            tally["right" if c.expected else "wrong"] += 1
            if got != c.expected:
                tally["fr" if c.expected else "fa"] += 1
                out[name]["_mistakes"][(c.line, c.cls, c.gold, c.response[-60:], reason)] += 1
            out[name]["_reasons"][reason] += 1
    return out


def table(res: dict[str, dict[str, Counter]]) -> str:
    classes = sorted(k for k in res["ours"] if not k.startswith("_"))
    lines = [
        "| class | rows (right/wrong) | ours FR | ours FA | math-verify FR | math-verify FA |",
        "|---|---|---|---|---|---|",
    ]
    tot = Counter()
    for cls in classes:
        o, m = res["ours"][cls], res["math-verify"][cls]
        lines.append(
            f"| {cls} | {o['n']} ({o['right']}/{o['wrong']}) | {o['fr']} | {o['fa']} | "
            f"{m['fr']} | {m['fa']} |"
        )
        for k in ("n", "right", "wrong"):
            tot[k] += o[k]
        tot["ofr"] += o["fr"]
        tot["ofa"] += o["fa"]
        tot["mfr"] += m["fr"]
        tot["mfa"] += m["fa"]
    lines.append(
        f"| **all** | {tot['n']} ({tot['right']}/{tot['wrong']}) | {tot['ofr']} | "
        f"{tot['ofa']} | {tot['mfr']} | {tot['mfa']} |"
    )
    lines.append(
        f"\nmistakes: ours {tot['ofr'] + tot['ofa']}, math-verify {tot['mfr'] + tot['mfa']}"
    )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, default=CORPUS)
    ap.add_argument("--mistakes", action="store_true", help="list every mistake of both")
    args = ap.parse_args(argv)
    res = score(load(args.corpus))
    print(table(res))
    for name in ("ours", "math-verify"):
        print(f"\n{name} verdict reasons:", dict(res[name]["_reasons"].most_common()))
    for name in ("ours", "math-verify") if args.mistakes else ("ours",):
        print(f"\n{name} mistakes (line, class, gold, response end, reason):")
        for key in sorted(res[name]["_mistakes"]):
            print("  ", key)
    return 0


if __name__ == "__main__":
    sys.exit(main())
