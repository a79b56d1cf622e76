"""STEM world: 4-option multiple choice on one-formula physics and unit conversion.

A question gives two quantities x, y and asks for r = x*y or r = x/y (values chosen so that r is
an integer). Distractors are the results of the wrong operation (the other of * and /, x+y, x-y,
a factor off by one, a power of ten off), each remembered with its mistake, so the teacher can
solve by three different routes: compute directly, back-substitute each option, or eliminate the
mistakes. Options are shuffled by the generator's rng; `choices` holds the texts in A-D order,
`answer` the letter.

Calibration: every distractor of a product is smaller than the product and every
distractor of a quotient larger than the quotient, so knowing which operation the formula uses
(the physics concept) picks the answer by size, without exact long multiplication. With near-miss
distractors (r+1, r-1) the ~1M demo model stayed near chance (0.31 with four options) after SFT:
telling them apart needs exact arithmetic it does not learn in the demo's budget. With these
distractors but only arithmetic routes in the traces it still sat at chance (0.246 held-out
after sft1): nothing showed it the size rule. So a fourth route states it, without arithmetic:
`v=d/t is a quotient: the smallest option, B) 8 m/s, so B`; and the direct route reads the
options in order up to the matching one (`v=d/t=24/3=8 m/s; A) 27 no, B) 8 yes, so B`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from vibethinker.types import Problem

LETTERS = "ABCD"
SUFFIX = "Answer with the letter in \\boxed{}."


@dataclass(frozen=True)
class Formula:
    subdomain: str
    question: str  # .format(x=, y=)
    sx: str  # symbol of x
    sy: str  # symbol of y
    op: str  # "*" or "/"
    sr: str  # symbol of the result
    unit: str  # unit of the result
    fixed_y: int | None = None  # unit conversions: y is the factor


FORMULAS = (
    Formula("kinematics", "A cart moves {x} m in {y} s. What is its speed?", "d", "t", "/", "v", "m/s"),
    Formula("kinematics", "A bike rides at {x} m/s for {y} s. How far does it go?", "v", "t", "*", "d", "m"),
    Formula("dynamics", "A {x} kg box accelerates at {y} m/s^2. What net force acts on it?", "m", "a", "*", "F", "N"),
    Formula("dynamics", "A net force of {x} N pushes a {y} kg cart. What is its acceleration?", "F", "m", "/", "a", "m/s^2"),
    Formula("matter", "A {x} g stone has a volume of {y} cm^3. What is its density?", "m", "V", "/", "rho", "g/cm^3"),
    Formula("matter", "A liquid has density {x} g/cm^3. What is the mass of {y} cm^3 of it?", "rho", "V", "*", "m", "g"),
    Formula("electricity", "A current of {x} A flows through a {y} ohm resistor. What is the voltage?", "I", "R", "*", "V", "V"),
    Formula("electricity", "A {x} V battery drives a {y} ohm resistor. What current flows?", "V", "R", "/", "I", "A"),
    Formula("energy", "A motor does {x} J of work in {y} s. What is its power?", "W", "t", "/", "P", "W"),
    Formula("energy", "A {x} N force pushes a box {y} m. How much work is done?", "F", "d", "*", "W", "J"),
    Formula("units", "How many meters are in {x} km?", "km", "m/km", "*", "m", "m", 1000),
    Formula("units", "How many minutes are in {x} h?", "h", "min/h", "*", "min", "min", 60),
    Formula("units", "How many centimeters are in {x} m?", "m", "cm/m", "*", "cm", "cm", 100),
    Formula("units", "How many grams are in {x} kg?", "kg", "g/kg", "*", "g", "g", 1000),
)  # fmt: skip
SUBDOMAINS = tuple(dict.fromkeys(f.subdomain for f in FORMULAS))


def _values(f: Formula, rng: random.Random) -> tuple[int, int, int]:
    """(x, y, r) with r = x op y an integer."""
    y = f.fixed_y or rng.randint(2, 9)
    if f.op == "/":
        r = rng.randint(2, 12)
        return r * y, y, r
    x = rng.randint(2 if f.fixed_y else 3, 99 if f.fixed_y else 12)
    return x, y, x * y


def _mistakes(x: int, y: int, r: int, op: str) -> list[tuple[int, str]]:
    """Wrong values with the slip that produces them, most plausible first: all below r for a
    product, all above r for a quotient (see the module docstring)."""
    if op == "/":  # x = r*y: multiplied instead, added, subtracted, a power of ten off
        cands = [(x * y, f"{x}*{y}"), (x + y, f"{x}+{y}"), (x - y, f"{x}-{y}")]
        cands += [(r * 10, f"{r}*10"), (x, f"{x}/1")]
        keep = [(v, why) for v, why in cands if v > r]
    else:  # divided instead, added, subtracted, one factor off by one
        cands = [(x // y, f"{x}/{y}")] if x % y == 0 else []
        cands += [(x + y, f"{x}+{y}"), (abs(x - y), f"{max(x, y)}-{min(x, y)}")]
        cands += [(x * (y - 1), f"{x}*{y - 1}"), ((x - 1) * y, f"{x - 1}*{y}")]
        cands += [((x - 1) * (y - 1), f"{x - 1}*{y - 1}"), (x, f"{x}*1")]
        keep = [(v, why) for v, why in cands if 0 < v < r]
    seen, out = {r}, []
    for v, why in keep:
        if v not in seen:
            seen.add(v)
            out.append((v, why))
    return out


def make_stem(rng: random.Random, idx: int, subdomain: str | None = None) -> Problem:
    """One 4-option question (subdomain cycles with idx unless given) with teacher traces."""
    sub = subdomain or SUBDOMAINS[idx % len(SUBDOMAINS)]
    f = rng.choice([f for f in FORMULAS if f.subdomain == sub])
    x, y, r = _values(f, rng)
    wrong = _mistakes(x, y, r, f.op)[:3]
    opts = [(r, "correct")] + wrong
    rng.shuffle(opts)
    choices = [f"{v} {f.unit}" for v, _ in opts]
    gold = LETTERS[[v for v, _ in opts].index(r)]
    shown = f.question.format(x=x, y=y)
    listing = "\n".join(f"{L}) {c}" for L, c in zip(LETTERS, choices))
    calc = f"{x}{f.op}{y}={r}"
    formula = f"{f.sr}={f.sx}{f.op}{f.sy}"
    # The reverse of r = x op y, to back-substitute an option.
    back = f"{r}/{y}={x}" if f.op == "*" else f"{r}*{y}={x}"
    # The direct route reads the options in order up to the one that equals the result
    # (`A) 441 no, B) 9 yes`), so the letter is copied from right beside the value: the demo
    # model computed the value right and still wrote a random letter when it had to look the
    # value up in the listing (held-out 0.225 after sft1, demo4).
    vals = [v for v, _ in opts]
    scan = ", ".join(f"{L}) {v} no" for L, v in zip(LETTERS, vals[: vals.index(r)]))
    scan = f"{scan}, {gold}) {r} yes" if scan else f"{gold}) {r} yes"
    kind, size = ("product", "largest") if f.op == "*" else ("quotient", "smallest")
    elim = "; ".join(f"{L}) {v} is {why}" for L, (v, why) in zip(LETTERS, opts) if v != r)
    traces = [
        f"<think>{formula}={calc} {f.unit}; {scan}, so {gold}</think>\\boxed{{{gold}}}",
        f"<think>try {gold}) {r}: {back} matches the given {f.sx}, so {gold}</think>"
        f"\\boxed{{{gold}}}",
        f"<think>{elim}: all slips. {calc}, so {gold}</think>\\boxed{{{gold}}}",
        f"<think>{formula} is a {kind}: the {size} option, {gold}) {r} {f.unit}, so {gold}"
        f"</think>\\boxed{{{gold}}}",
    ]
    wrong_traces = []
    for L, (v, why) in zip(LETTERS, opts):
        if v != r and len(wrong_traces) < 2:
            wrong_traces.append(f"<think>{f.sr}={why}={v} {f.unit}, so {L}</think>\\boxed{{{L}}}")
    return Problem(
        id="",
        domain="stem",
        subdomain=sub,
        difficulty=1,
        prompt=f"{shown}\n{listing}\n{SUFFIX}",
        answer=gold,
        choices=choices,
        traces=traces,
        wrong_traces=wrong_traces,
    )
