"""One timed pass of `verify_math` over a benchmarks/verifiers_math.py workload, in this process.

Run it once per source tree, alternating, to compare two versions of the verifier's hot path on
the same pairs (the pairs come from this checkout's benchmark; the verifier from PYTHONPATH):

    for r in 1 2 3; do for t in /work/main $PWD; do
        PYTHONPATH=$t python scripts/math_hotpath_ab.py --workload aime; done; done

Prints one JSON line: the tree, wall seconds (sympy checks run in the guarded worker process),
this process's CPU seconds (the string work: extraction, answer forms, the prose check), and the
number of responses scored correct.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from pathlib import Path

import vibethinker
from vibethinker.types import Problem
from vibethinker.verifiers.math import verify_math

try:  # the sympy path's home since the math <-> pool circle was broken
    from vibethinker.verifiers.math_equiv import warm_up
except ImportError:  # an older tree (the A side of an A/B)
    from vibethinker.verifiers.math import warm_up

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "verifiers_math.py"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="aime", choices=["aime", "forms"])
    ap.add_argument("--n", type=int, default=800)
    args = ap.parse_args(argv)
    spec = importlib.util.spec_from_file_location("verifiers_math_bench", BENCH)
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    warm_up()
    pairs = bench.make_pairs(args.n, seed=0, workload=args.workload)
    problems = [
        Problem(id=str(i), domain="math", prompt="", answer=g) for i, (g, _) in enumerate(pairs)
    ]
    wall, cpu = time.perf_counter(), time.process_time()
    ok = sum(verify_math(p, r).correct for p, (_, r) in zip(problems, pairs))
    out = {
        "tree": str(Path(vibethinker.__file__).parents[1]),
        "workload": args.workload,
        "wall_s": round(time.perf_counter() - wall, 4),
        "cpu_s": round(time.process_time() - cpu, 4),
        "correct": ok,
    }
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
