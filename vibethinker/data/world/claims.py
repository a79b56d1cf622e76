"""The world's CLR skills (docs/PAPER.md, "Test time: CLR"): SFT examples that teach the
tiny model the two judge tasks of the `clr` stage, in exactly the chat format that stage sends.

- extraction: the user turn is `prompts/clr_extract.txt` filled with a train problem and one of
  its traces (correct or labelled wrong: the extractor must copy claims, not correct them); the
  reply lists the trace's claims as `1. <claim>` lines and `Final answer: <answer>`.
- verification: the user turn is `prompts/clr_verify.txt` filled with the problem and one claim;
  the examples come in minimal pairs (a true claim of a trace and its corrupted copy, same
  problem), and the reply re-derives the claim against its own value in a short `<think>`
  (`8*9=72 vs 74`) and gives `\\boxed{1}` or `\\boxed{0}`.

The examples are Problem records of the training-only domain `clr` (types.TRAIN_ONLY_DOMAINS):
SFT trains on them, RL, evaluation and probing never take them as problems. They are built from
train problems only; held-out problems keep their labelled claims (`Problem.claims`: the math
world's own, and the stem ones `label_stem` adds), on which the `clr` stage measures the model's
claim-verification accuracy.

Claims of a world trace (`trace_claims`), M = 5 at most:
- math `<think>3*4=12;12-2=10</think>\\boxed{10}`: each step (`3*4=12`, `12-2=10`);
- stem, direct `v=d/t=24/3=8 m/s; A) 27 no, B) 8 yes, so B`: the formula `v=d/t`, the computation `24/3=8`, the
  option read `B) 8`; back-substitution `try B) 8: 8*3=24 matches the given d, so B`: `B) 8`,
  `8*3=24`, `d=24`; elimination `A) 27 is 24+3; ...: all slips. 24/3=8, so B`: each `A) 27 is
  24+3`, then `24/3=8`, `B) 8`; a wrong trace `v=24*3=72 m/s, so C`: `v=24*3`, `24*3=72`, `C) 72`.
Their truth (`judge`) follows from the problem: arithmetic is evaluated, a formula must be the
question's, an option claim must match the option, a given quantity the question's value.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from fractions import Fraction

from vibethinker.prompts import fill, load_template, problem_text
from vibethinker.prompts.paper import paper_prompt
from vibethinker.types import Problem

TASK_DOMAIN = "clr"  # the training-only domain of these records
M = 5  # claims per extraction (the `clr` stage's default m; the paper's M)
EXTRACT_PER_TRAIN = 0.035  # extraction examples per train problem (math + stem)
VERIFY_PER_TRAIN = 0.14  # verification examples per train problem (half true, half corrupted)
MATH_PART = 0.6  # of each task's examples from math, the rest from stem
# On the tiny recipe's train split: ~107 extraction + ~427 verification examples, ~7.7% of the
# SFT tokens (docs/CLR.md gives the measured figure; we keep it under 8%: sft1's time grows
# with its tokens). Verification gets the larger share: it is what CLR's weights rest on.

_MATH = re.compile(r"<think>([^<]*)</think>\\boxed\{([^{}]*)\}")
_ARITH = re.compile(r"^(\d+)([-+*/])(\d+)=(\d+)$")
_STEM_DIRECT = re.compile(  # v=d/t=24/3=8 m/s; A) 27 no, B) 8 yes, so B
    r"<think>([^=<]+)=([^=<]+)=(\d+[*/]\d+=\d+) ([^;,<]+); (?:[A-D]\) \d+ no, )*[A-D]\) \d+ yes, "
    r"so ([A-D])</think>\\boxed\{[A-D]\}"
)
_STEM_BACK = re.compile(
    r"<think>try ([A-D])\) (\d+): (\d+[*/]\d+=\d+) matches the given (\S+), so ([A-D])</think>"
)
_STEM_ELIM = re.compile(r"<think>(.*): all slips\. (\d+[*/]\d+=\d+), so ([A-D])</think>")
_STEM_SIZE = re.compile(
    r"<think>([^=<]+)=(\S+) is a \w+: the \w+ option, ([A-D])\) (\d+) [^,<]+, so ([A-D])</think>"
)
_STEM_WRONG = re.compile(r"<think>([^=<]+)=([^=<]+)=(\d+) ([^,<]+), so ([A-D])</think>")
_ELIM_ITEM = re.compile(r"^([A-D])\) (\d+) is (\d+[-+*/]\d+)$")
_OPTION = re.compile(r"^([A-D])\) (\d+)$")
_GIVEN = re.compile(r"^([^=\d][^=]*)=(\d+)$")
_FORMULA = re.compile(r"^([^=\d][^=]*)=([^=]+)$")


def _value(expr: str) -> Fraction | None:
    """Exact value of `a op b` over integers; None if it is not that or divides by zero."""
    m = re.fullmatch(r"(\d+)([-+*/])(\d+)", expr)
    if not m:
        return None
    a, op, b = int(m.group(1)), m.group(2), int(m.group(3))
    if op == "/" and b == 0:
        return None
    return {"+": Fraction(a + b), "-": Fraction(a - b), "*": Fraction(a * b)}.get(
        op, Fraction(a, b or 1)
    )


def _num(v: Fraction) -> str:
    return str(v.numerator) if v.denominator == 1 else f"{v.numerator}/{v.denominator}"


@dataclass(frozen=True)
class StemFacts:
    """What a stem question fixes, read from its first (direct) teacher trace."""

    sr: str  # symbol of the result ("v")
    expr: str  # the formula's right side ("d/t")
    sx: str  # symbol of the first given quantity ("d")
    x: int
    op: str  # "*" or "/"
    y: int
    r: int  # the correct value
    options: dict[str, int]  # letter -> the number of its option text


def stem_facts(p: Problem) -> StemFacts | None:
    """The facts of a world stem problem; None when its first trace is not the direct form."""
    m = _STEM_DIRECT.fullmatch(p.traces[0]) if p.traces else None
    if not m or not p.choices:
        return None
    sr, expr, calc = m.group(1), m.group(2), m.group(3)
    c = re.fullmatch(r"(\d+)([*/])(\d+)=(\d+)", calc)
    if not c or c.group(2) not in expr:
        return None
    try:
        options = {L: int(ch.split()[0]) for L, ch in zip("ABCD", p.choices)}
    except (ValueError, IndexError):
        return None
    sx = expr.split(c.group(2), 1)[0]
    x, op, y, r = int(c.group(1)), c.group(2), int(c.group(3)), int(c.group(4))
    return StemFacts(sr, expr, sx, x, op, y, r, options)


def trace_claims(p: Problem, trace: str) -> tuple[list[str], str] | None:
    """The claims (at most M) and final answer a faithful extractor lists for a world trace of
    `p`, correct or wrong; None for a trace in no known form."""
    if p.domain == "math":
        m = _MATH.fullmatch(trace)
        if not m:
            return None
        steps = [s for s in m.group(1).split(";") if s]
        return steps[:M], m.group(2)
    m = _STEM_DIRECT.fullmatch(trace)
    if m:
        shown = m.group(3).split("=")[-1]
        return [f"{m.group(1)}={m.group(2)}", m.group(3), f"{m.group(5)}) {shown}"], m.group(5)
    m = _STEM_BACK.match(trace)
    if m:
        given = m.group(3).split("=")[-1]
        return [f"{m.group(1)}) {m.group(2)}", m.group(3), f"{m.group(4)}={given}"], m.group(5)
    m = _STEM_ELIM.match(trace)
    if m:
        items = [s.strip() for s in m.group(1).split(";") if s.strip()]
        shown = m.group(2).split("=")[-1]
        return (items + [m.group(2), f"{m.group(3)}) {shown}"])[:M], m.group(3)
    m = _STEM_SIZE.match(trace)
    if m:
        return [f"{m.group(1)}={m.group(2)}", f"{m.group(3)}) {m.group(4)}"], m.group(5)
    m = _STEM_WRONG.match(trace)
    if m:
        sr, why, v, letter = m.group(1), m.group(2), m.group(3), m.group(5)
        return [f"{sr}={why}", f"{why}={v}", f"{letter}) {v}"], letter
    return None


def judge(p: Problem, facts: StemFacts | None, claim: str) -> tuple[int, str] | None:
    """(truth 1/0, the check a careful verifier writes) of a world claim; None if unknown.

    The check re-derives what the claim states and sets it against the claim's own value,
    `<derived> vs <claimed>` (`8*9=72 vs 74`, `B) 12 vs 8`, `v=d/t vs d*t`): the verdict is 1
    exactly when both sides of every `vs` are the same, so the last decision is a comparison of
    two adjacent values, not of a derived value with one far back in the prompt."""
    m = _ARITH.match(claim)
    if m:
        true = _value(f"{m.group(1)}{m.group(2)}{m.group(3)}")
        if true is None:
            return None
        lhs = f"{m.group(1)}{m.group(2)}{m.group(3)}"
        return int(true == int(m.group(4))), f"{lhs}={_num(true)} vs {m.group(4)}"
    if p.domain != "stem" or facts is None:
        return None
    f = facts
    m = _ELIM_ITEM.match(claim)
    if m:
        letter, v, expr = m.group(1), int(m.group(2)), m.group(3)
        val = _value(expr)
        if letter not in f.options or val is None:
            return None
        ok = f.options[letter] == v and val == v
        return int(ok), f"{letter}) {f.options[letter]} vs {v}; {expr}={_num(val)} vs {v}"
    m = _OPTION.match(claim)
    if m:
        letter, v = m.group(1), int(m.group(2))
        if letter not in f.options:
            return None
        return int(f.options[letter] == v), f"{letter}) {f.options[letter]} vs {v}"
    m = _GIVEN.match(claim)
    if m:
        sym, v = m.group(1), int(m.group(2))
        said = m.group(2) if sym == f.sx else claim
        return int(sym == f.sx and v == f.x), f"{f.sx}={f.x} vs {said}"
    m = _FORMULA.match(claim)
    if m and m.group(1) == f.sr:
        rhs = m.group(2)
        if re.fullmatch(r"\d+[-+*/]\d+", rhs):  # the formula with values: `v=24*3`
            return int(rhs == f"{f.x}{f.op}{f.y}"), f"{f.sr}={f.x}{f.op}{f.y} vs {rhs}"
        return int(rhs == f.expr), f"{f.sr}={f.expr} vs {rhs}"
    return None


def corrupt(p: Problem, facts: StemFacts | None, claim: str, rng: random.Random) -> str | None:
    """A false copy of a true world claim (the mistake a sampler makes); None if none."""
    m = _ARITH.match(claim)
    if m:
        r = int(m.group(4))
        bad = r + rng.choice([d for d in (-2, -1, 1, 2) if r + d >= 0])
        return f"{m.group(1)}{m.group(2)}{m.group(3)}={bad}"
    if facts is None:
        return None
    f = facts
    others = "/" if f.op == "*" else "*"
    m = _ELIM_ITEM.match(claim) or _OPTION.match(claim)
    if m:  # the same content attributed to another option
        wrong = [L for L, v in f.options.items() if v != int(m.group(2))]
        return f"{rng.choice(wrong)}{claim[1:]}" if wrong else None
    m = _GIVEN.match(claim)
    if m:
        return f"{m.group(1)}={int(m.group(2)) + rng.choice((1, 2))}"
    m = _FORMULA.match(claim)
    if m and m.group(1) == f.sr:
        return f"{f.sr}={m.group(2).replace(f.op, others, 1)}"
    return None


def labelled_claims(p: Problem, trace: str, rng: random.Random) -> list[dict]:
    """A trace's claims labelled by `judge`, then a corrupted copy of each true one (the math
    world's `claims` format: [{"text", "true"}])."""
    facts = stem_facts(p) if p.domain == "stem" else None
    got = trace_claims(p, trace)
    out: list[dict] = []
    for c in got[0] if got else []:
        j = judge(p, facts, c)
        if j is not None:
            out.append({"text": c, "true": bool(j[0])})
    for c in [x["text"] for x in out if x["true"]]:
        bad = corrupt(p, facts, c, rng)
        if bad is not None and (j := judge(p, facts, bad)) is not None and not j[0]:
            out.append({"text": bad, "true": False})
    return out


def label_stem(problems: list[Problem], seed: int) -> None:
    """Give world stem problems labelled claims per trace (in place), as math problems have."""
    rng = random.Random(f"vibethinker-world:{seed}:stem-claims")
    for p in problems:
        if p.domain == "stem" and p.traces and p.claims is None:
            p.claims = [labelled_claims(p, t, rng) for t in p.traces]


def _problem_text(p: Problem) -> str:
    """`{problem}` as the `clr` stage fills it (the paper prompt without its answer request)."""
    return problem_text(paper_prompt(p))


def extraction_example(p: Problem, trace: str, template: str) -> tuple[str, str] | None:
    """(user turn, reply) teaching the extraction of `trace`'s claims."""
    got = trace_claims(p, trace)
    if not got or not got[0]:
        return None
    claims, answer = got
    reply = "\n".join(f"{i + 1}. {c}" for i, c in enumerate(claims)) + f"\nFinal answer: {answer}"
    return fill(template, problem=_problem_text(p), response=trace, m=M), reply


def verification_example(p: Problem, claim: str, template: str) -> tuple[str, str] | None:
    """(user turn, reply) teaching the verification of `claim`."""
    facts = stem_facts(p) if p.domain == "stem" else None
    j = judge(p, facts, claim)
    if j is None:
        return None
    reply = f"<think>{j[1]}</think>\\boxed{{{j[0]}}}"
    return fill(template, problem=_problem_text(p), claim=claim), reply


def clr_examples(train: list[Problem], seed: int, scale: float = 1.0) -> list[Problem]:
    """The CLR skill examples (domain `clr`) built from the math and stem `train` problems."""
    ext_t = load_template("", "clr_extract.txt", ("{response}",))
    ver_t = load_template("", "clr_verify.txt", ("{claim}",))
    rng = random.Random(f"vibethinker-world:{seed}:clr")
    pools = {d: [p for p in train if p.domain == d and p.traces] for d in ("math", "stem")}
    n_train = sum(1 for p in train if p.domain != TASK_DOMAIN)
    out: list[Problem] = []
    for task, per in (("extract", EXTRACT_PER_TRAIN), ("verify", VERIFY_PER_TRAIN)):
        total = round(per * n_train * scale)
        for dom, share in (("math", MATH_PART), ("stem", 1 - MATH_PART)):
            pool, want = pools[dom], round(total * share / 2) * 2  # whole verify pairs
            made, tries = 0, 0
            while pool and made < want and tries < 20 * want + 100:
                tries += 1
                p = rng.choice(pool)
                for prompt, reply in _one(task, p, rng, ext_t, ver_t)[: want - made]:
                    made += 1
                    out.append(
                        Problem(
                            id=f"clr-train-{len(out):05d}",
                            domain=TASK_DOMAIN,
                            subdomain=task,
                            prompt=prompt,
                            traces=[reply],
                            meta={"source": "world", "seed": seed, "split": "train", "of": p.id},
                        )
                    )
    return out


def _one(task, p, rng, ext_t, ver_t) -> list[tuple[str, str]]:
    """The examples one draw makes: one extraction, or a verification minimal pair."""
    if task == "extract":  # correct traces mostly, the world's wrong ones a third of the time
        wrong = p.wrong_traces or []
        trace = rng.choice(wrong) if wrong and rng.random() < 1 / 3 else rng.choice(p.traces)
        ex = extraction_example(p, trace, ext_t)
        return [ex] if ex else []
    # verification: a true claim of a trace AND its corrupted copy, same problem, same check:
    # only the claimed value tells them apart, so the verdict cannot be learned from the
    # problem's wording (with one claim per draw the model memorised verdicts by problem).
    trace = rng.choice(p.traces)
    facts = stem_facts(p) if p.domain == "stem" else None
    got = trace_claims(p, trace)
    true = [c for c in (got[0] if got else []) if (j := judge(p, facts, c)) and j[0]]
    if not true:
        return []
    claim = rng.choice(true)
    bad = corrupt(p, facts, claim, rng)
    if bad is None:
        return []
    pair = [verification_example(p, claim, ver_t), verification_example(p, bad, ver_t)]
    if rng.random() < 0.5:
        pair.reverse()
    return [ex for ex in pair if ex]


def add_clr(splits: dict[str, list[Problem]], seed: int, scale: float = 1.0) -> None:
    """The world hook: stem claims labelled in every split, CLR examples appended to train."""
    for ps in splits.values():
        label_stem(ps, seed)
    splits["train"] += clr_examples(splits["train"], seed, scale)


__all__ = ["add_clr", "clr_examples", "judge", "label_stem", "trace_claims", "stem_facts"]
