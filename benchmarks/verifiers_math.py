"""Math verification throughput: our batch verifier vs math-verify in a process pool of the same
size (issue 16: the fair peer of a 2-worker pool is a 2-worker pool, not one process).

    .venv/bin/python benchmarks/verifiers_math.py [--n 2000] [--workers 2] [--repeats 3]

Both sides check the same (gold, response) pairs: AIME-style integers (some with leading zeros),
fractions, decimals, radicals, multiples of pi, intervals, tuples, polynomials and equations,
each correct or wrong, plus hedges and responses without a box. The peer is what a reward
function usually does, `verify(parse(gold), parse(response))` per pair with math-verify's
defaults, spread over a `multiprocessing.Pool(workers)` (chunks of 50 pairs; each worker warmed up
first: math-verify's first call costs ~1.5 s of imports). Ours is `verify_batch` (worker
processes, hard timeouts, false-positive checks), also warmed up. Each side in its own process,
rotating repeats (benchmarks/harness.py); figures are checks/s with a warm pool, plus the pool's
start-up (`pool_start_s`) and the verdict agreement. Target (issue 3): >= 1.5x.
"""

from __future__ import annotations

import logging
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


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


def _chunk_verify(chunk: list[tuple[str, str]]) -> list[bool]:
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    return baseline(chunk)


def add_args(ap) -> None:
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=50, help="pairs per peer pool task")


def side_peer(args, shared: dict) -> dict:
    import multiprocessing as mp

    pairs = make_pairs(args.n)
    t = time.perf_counter()
    pool = mp.get_context("fork").Pool(args.workers)
    pool.map(_chunk_verify, [make_pairs(20, seed=1)] * args.workers)  # warm every worker
    t_start = time.perf_counter() - t
    chunks = [pairs[i : i + args.chunk] for i in range(0, len(pairs), args.chunk)]
    t = time.perf_counter()
    verdicts = [v for part in pool.map(_chunk_verify, chunks) for v in part]
    dt = time.perf_counter() - t
    pool.close()
    pool.join()
    from importlib.metadata import version

    ver = version("math-verify")
    cfg = {"peer": f"math-verify {ver} verify(parse(f'${{gold}}$'), parse(response)), defaults",
           "pool": f"multiprocessing.Pool({args.workers}), fork, chunks of {args.chunk}",
           "pairs": args.n}  # fmt: skip
    return {"config": cfg, "metrics": {"checks_per_s": args.n / dt, "pool_start_s": t_start,
                                       "accuracy": sum(verdicts) / args.n}}  # fmt: skip


def side_ours(args, shared: dict) -> dict:
    from vibethinker.types import Problem
    from vibethinker.verifiers import verify_batch
    from vibethinker.verifiers.batch import get_pool

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    pairs = make_pairs(args.n)
    problems = [Problem(id=str(i), domain="math", prompt="", answer=g)
                for i, (g, _) in enumerate(pairs)]  # fmt: skip
    responses = [r for _, r in pairs]
    t = time.perf_counter()
    get_pool(args.workers).map(abs, [(1,)] * args.workers, timeout=60)  # spawn + warm workers
    verify_batch(problems[:20], responses[:20], workers=args.workers)  # warm the grammar
    t_start = time.perf_counter() - t
    t = time.perf_counter()
    ours = verify_batch(problems, responses, workers=args.workers)
    dt = time.perf_counter() - t
    base = baseline(pairs[:400])  # agreement with plain math-verify on a subset, in-process
    agree = sum(b == s.correct for b, s in zip(base, ours)) / len(base)
    diff = Counter(f"{'mv=1' if b else 'mv=0'} ours={s.reason}"
                   for b, s in zip(base, ours) if b != s.correct)  # fmt: skip
    m = {"checks_per_s": args.n / dt, "pool_start_s": t_start,
         "accuracy": sum(s.correct for s in ours) / args.n, "agreement_first400": agree}  # fmt: skip
    m.update(micro())
    cfg = {"ours": "vibethinker.verifiers.verify_batch", "workers": args.workers, "pairs": args.n,
           "disagreements_first400": dict(diff.most_common())}  # fmt: skip
    return {"config": cfg, "metrics": m}


def main(argv: list[str] | None = None) -> dict:
    return harness.main(__doc__, add_args, None, {"ours": side_ours, "peer": side_peer},
                        headline=("checks_per_s", "higher"), argv=argv, script=__file__)  # fmt: skip


if __name__ == "__main__":
    main()
