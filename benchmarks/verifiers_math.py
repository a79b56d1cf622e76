"""Math verification throughput: our batch verifier vs a plain single-process math-verify loop.

    python benchmarks/verifiers_math.py [--n 2000] [--workers 2]

Both sides check the same (gold, response) pairs: AIME-style integers (some with leading zeros),
fractions, decimals, radicals, multiples of pi, intervals, tuples, polynomials and equations,
each correct or wrong, plus hedges and responses without a box. The baseline is what a reward
function usually does: `verify(parse(gold), parse(response))` per pair, math-verify defaults. Ours
is `verify_batch` (worker processes, hard timeouts, false-positive checks). Both are warmed up
first (math-verify's first call costs ~1.5 s of imports); our pool's cold start is reported too.
Target (issue 3): ratio >= 1.5x with both cores.
"""

from __future__ import annotations

import argparse
import logging
import random
import time
from collections import Counter

from vibethinker.types import Problem


def _forms(rng: random.Random) -> tuple[str, str, str]:
    """(gold, correct prediction, wrong prediction) in one of the answer families."""
    a, b, c = rng.randint(1, 99), rng.randint(2, 19), rng.randint(2, 9)
    kind = rng.choice(
        ["int"] * 6 + ["frac", "dec", "sqrt", "pi", "interval", "tuple", "poly", "eq"]
    )
    if kind == "int":
        n = rng.randint(0, 999)
        pred = f"{n:03d}" if rng.random() < 0.3 else str(n)
        return str(n), pred, str(n + rng.randint(1, 9))
    if kind == "frac":
        return (
            f"\\frac{{{a}}}{{{b}}}",
            rng.choice([f"\\dfrac{{{a}}}{{{b}}}", f"{a}/{b}", f"\\frac{{{2 * a}}}{{{2 * b}}}"]),
            f"\\frac{{{a + 1}}}{{{b}}}",
        )
    if kind == "dec":
        return f"\\frac{{{a}}}{{4}}", str(a / 4), str(a / 4 + 0.5)
    if kind == "sqrt":
        return f"{c}\\sqrt{{{b}}}", f"\\sqrt{{{c * c * b}}}", f"{c + 1}\\sqrt{{{b}}}"
    if kind == "pi":
        return (
            f"\\frac{{{a}\\pi}}{{{b}}}",
            f"\\frac{{{a}}}{{{b}}}\\pi",
            f"\\frac{{{a}\\pi}}{{{b + 1}}}",
        )
    if kind == "interval":
        return f"[{a}, {a + b})", f"[{a},{a + b})", f"({a}, {a + b}]"
    if kind == "tuple":
        return f"({a}, {b})", f"\\left({a},{b}\\right)", f"({b}, {a + 1})"
    if kind == "poly":
        return f"x^2+{a}x+{b}", f"{b}+{a}x+x^2", f"x^2+{a}x-{b}"
    return f"y={a}x+{b}", f"y={b}+{a}x", f"y={a}x-{b}"


def make_pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    pairs = []
    for i in range(n):
        gold, good, bad = _forms(rng)
        r = rng.random()
        if r < 0.5:
            pred = f"\\boxed{{{good}}}"
        elif r < 0.85:
            pred = f"\\boxed{{{bad}}}"
        elif r < 0.92:
            pred = f"\\boxed{{\\pm {good}}}"  # a hedge
        else:
            pred = f"{good}"  # no box: an answer stated in prose
        think = f"<think>Step {i}: try {rng.randint(1, 50)}, then {rng.randint(1, 50)}.</think>"
        pairs.append(
            (
                gold,
                f"{think}\nSo the final answer is ${pred}$."
                if "boxed" in pred
                else f"{think}\nThe answer is {pred}.",
            )
        )
    return pairs


def baseline(pairs: list[tuple[str, str]]) -> list[bool]:
    from math_verify import parse, verify

    # the gold is bare LaTeX: wrapped in $...$ as reward functions do (bare, math-verify's
    # expression parser misreads most of these golds)
    return [bool(verify(parse(f"${g}$"), parse(r))) for g, r in pairs]


def micro(reps: int = 3) -> dict:
    """In-process cost of the cheap steps every check pays: the fast path (plain numbers, no
    sympy) and the parser-bomb screen on a long ordinary answer; microseconds per call."""
    from vibethinker.verifiers.math import check_answer, screen

    fast = [("25", "025"), (r"\frac{3}{4}", "0.75"), ("12345678901234567890", "12345678901234567891"),
            (r"\frac{1}{3}", "0.33"), ("7", "x = 7"), ("42", "41")] * 200  # fmt: skip
    long_answer = "+".join(f"x_{{{i}}}^{{2}}" for i in range(80))  # ~900 characters
    out = {}
    for name, fn, args in (("fast_path_us", check_answer, fast),
                           ("screen_us", screen, [(long_answer,)] * 1000)):  # fmt: skip
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            for a in args:
                fn(*a)
            best = min(best, (time.perf_counter() - t) / len(args) * 1e6)
        out[name] = best
    print(f"  fast path: {out['fast_path_us']:.1f} us/check; screen (900 chars): "
          f"{out['screen_us']:.1f} us")  # fmt: skip
    return out


def main(n: int = 2000, workers: int = 2) -> dict:
    from vibethinker.verifiers import verify_batch
    from vibethinker.verifiers.batch import get_pool

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    pairs = make_pairs(n)
    problems = [
        Problem(id=str(i), domain="math", prompt="", answer=g) for i, (g, _) in enumerate(pairs)
    ]
    responses = [r for _, r in pairs]

    baseline(make_pairs(20, seed=1))  # warm-up: imports and grammar
    t = time.perf_counter()
    base = baseline(pairs)
    t_base = time.perf_counter() - t

    t = time.perf_counter()
    get_pool(workers).map(abs, [(1,)] * workers, timeout=60)  # cold start: spawn + warm workers
    t_start = time.perf_counter() - t
    t = time.perf_counter()
    ours = verify_batch(problems, responses, workers=workers)
    t_ours = time.perf_counter() - t

    diff = Counter(
        f"{'mv=1' if b else 'mv=0'} ours={s.reason}" for b, s in zip(base, ours) if b != s.correct
    )
    out = {
        "pairs": n,
        "workers": workers,
        "baseline_checks_per_s": n / t_base,
        "ours_checks_per_s": n / t_ours,
        "ours_cold_checks_per_s": n / (t_ours + t_start),
        "ratio": t_base / t_ours,
        "ratio_cold": t_base / (t_ours + t_start),
        "pool_start_s": t_start,
        "agreement": sum(b == s.correct for b, s in zip(base, ours)) / n,
        "accuracy_baseline": sum(base) / n,
        "accuracy_ours": sum(s.correct for s in ours) / n,
        "disagreements": dict(diff.most_common()),
    }
    print(f"math verification, {n} pairs, {workers} workers")
    print(f"  math-verify loop (1 process): {out['baseline_checks_per_s']:8.1f} checks/s")
    print(f"  verify_batch (warm pool):     {out['ours_checks_per_s']:8.1f} checks/s")
    print(f"  verify_batch (incl. start):   {out['ours_cold_checks_per_s']:8.1f} checks/s")
    print(f"  ratio: {out['ratio']:.2f}x warm, {out['ratio_cold']:.2f}x cold (target >= 1.5x)")
    print(f"  verdicts agree on {out['agreement']:.1%}; where they differ: {out['disagreements']}")
    out.update(micro())
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    main(args.n, args.workers)
