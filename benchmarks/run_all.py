"""`make bench`: every side-by-side benchmark with repeats, one script after another; inside
each, every side runs in its own fresh process, repeats in rotating order, median and range
reported with each side's configuration (benchmarks/harness.py). Results go to runs/bench/*.json
(decontam.py only prints its table) and the logs to stdout; BENCHMARKS.md is written from them
by hand, with the date and the load. The math verifier runs twice: real AIME/MATH golds and the
synthetic answer-forms mix (benchmarks/verifiers_math.py).

    .venv/bin/python benchmarks/run_all.py [--quick] [--repeats 3] [--out runs/bench]
        [--only sft,verifiers_math:forms] [--dry-run]

Sizes are meant to keep the full run near 20 minutes on 2 free cores (an estimate: the 2026-12-01
runs were made on a loaded machine, 10-50x slower; decontam.py and reward_model.py, added since,
sft_memory.py and rl_update_packed.py are not in it); `--quick` (`make bench QUICK=1`) runs smaller
workloads and the short scaling sweep. The GPU script
(benchmarks/gpu_decode.py) is not part of it: it needs a GPU.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))

# script -> (full args, quick args)
BENCHES: dict[str, tuple[list[str], list[str]]] = {
    "verifiers_math.py": (["--n", "800"], ["--n", "400", "--sides", "ours,peer"]),
    "verifiers_math.py:forms": (
        ["--workload", "forms", "--n", "800"],
        ["--workload", "forms", "--n", "400", "--sides", "ours,peer"],
    ),
    "verifiers_code.py": ([], []),
    "sampling.py": ([], ["--prompts", "16", "--n", "4", "--max-new-tokens", "32"]),
    "sft.py": (["--problems", "300"], ["--problems", "150", "--sides", "ours,trl_packed"]),
    "rl_step.py": ([], ["--prompts", "8", "--g", "4", "--max-new-tokens", "16", "--steps", "4"]),
    "scaling.py": (
        [
            "--lens",
            "256,1024,4096",
            "--batches",
            "1,4,8",
            "--groups",
            "4,8,16",
            "--rl-g",
            "4",
            "--steps",
            "1",
        ],
        ["--quick", "--batches", "1,4", "--groups", "4,16", "--rl-g", "2", "--steps", "1"],
    ),
    "merge_memory.py": ([], []),
    "distill_score.py": ([], ["--problems", "100"]),
    "decontam.py": ([], ["--train", "20000", "--datatrove-train", "2000"]),
    "reward_model.py": ([], ["--problems", "200", "--n-open", "16", "--max-len", "128"]),
    # real-vocabulary memory (one step per token count) and the packed RL update
    "sft_memory.py": (["--skip-over-gb", "10"], ["--tokens", "2048,4096", "--sides", "after"]),
    "rl_update_packed.py": ([], ["--rows", "8"]),
}
NO_REPEATS = {"merge_memory.py", "distill_score.py", "sft_memory.py"}  # own options
NO_JSON = {"decontam.py"}  # takes --repeats, prints its results (no --json)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default="runs/bench")
    ap.add_argument("--only", default="", help="comma list of scripts (default: all)")
    ap.add_argument("--dry-run", action="store_true", help="print the commands, run nothing")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    only = {x.replace(".py", "") for x in a.only.split(",") if x}  # "sft", "verifiers_math:forms"
    failed = []
    t_all = time.time()
    for key, (full, quick) in BENCHES.items():
        name, _, label = key.partition(":")  # "script.py:label": a second workload of a script
        path = os.path.join(HERE, name)
        if (only and not {name[:-3], key.replace(".py", "")} & only) or not os.path.exists(path):
            continue
        cmd = [sys.executable, path, *(quick if a.quick else full)]
        if name not in NO_REPEATS:
            cmd += ["--repeats", str(a.repeats)]
        if name not in NO_REPEATS | NO_JSON:
            stem = name[:-3] + (f"_{label}" if label else "")
            cmd += ["--json", os.path.join(a.out, stem + ".json")]
        print(f"\n== {' '.join(cmd[1:])} ==", flush=True)
        if a.dry_run:
            continue
        t0 = time.time()
        rc = subprocess.call(cmd)
        print(f"== {key}: exit {rc} in {time.time() - t0:.0f} s", flush=True)
        if rc:
            failed.append(key)
    print(
        f"\nall benchmarks: {time.time() - t_all:.0f} s" + (f"; failed: {failed}" if failed else "")
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
