"""Matched-budget ablations: `vibethinker ablate STUDY.yaml [out=DIR] [--jobs N]`.

A study file names a recipe, the recipe stages an arm re-runs, the arms (overrides in the recipe
override syntax), the seeds, the budget held equal, and the metrics to compare:

    # Run: vibethinker ablate studies/grpo_vs_mgpo.yaml out=runs/ablate/grpo_vs_mgpo
    recipe: recipes/tiny.yaml
    base_run: runs/tiny          # finished upstream stages are read from here, never retrained
    out: runs/ablate/grpo_vs_mgpo
    stages: [rl_math]            # what every arm re-runs (an arm may list its own: `stages:`)
    overrides: {rl_math.steps: 20, rl_math.max_seconds: 0}   # common to all arms
    arms:
      grpo: {rl_math.advantage: grpo}
      mgpo: {rl_math.advantage: mgpo}
    seeds: [0, 1, 2, 3, 4]       # each arm x seed sets <stage>.seed=<seed> on every stage it runs
    budget:
      fixed: [rl_math.steps, rl_math.prompts_per_step, rl_math.group_size]
      consumed:                  # read back from each finished arm x seed
        rollouts: rl_math/metrics.jsonl:rows * rl_math.prompts_per_step * rl_math.group_size
    metrics:
      heldout_math: rl_math/evals.jsonl:-1.accuracy

Upstream stages: every recipe stage an arm does not run keeps its output folder in `base_run`
(its `out` is the one the base run's manifest recorded), so `${sft2.out}` and the like resolve to
the base run's finished outputs; only the arm's own stages write, into OUT/<arm>/seed<k>/, which
is an ordinary run directory (manifest.json, run.log, resume). If the base run lacks a referenced
stage (a fresh clone), the recipe's prefix up to that stage is first run into `base_run` once.

Budget: each `fixed` key must resolve to the same value in every arm (an arm that changes one is
refused before anything runs); each `consumed` expression is evaluated on every finished arm x
seed and shown next to the metrics, and arms whose consumed budgets differ are flagged in the
table. Expressions: terms joined by `+`, factors by `*`; a factor is a number, a resolved config
value `<stage>.<key>`, or `FILE:WHAT` with FILE relative to the arm's run dir and WHAT one of
`rows` (lines of a JSONL), `sum.FIELD` (a JSONL column's sum) or a dotted path (`-1.accuracy`
for a JSONL's last row, `metrics.math.pass@1` in a JSON).

Resume: an arm x seed whose stages are all done with an unchanged config is not started again;
an interrupted one is re-run through the recipe runner, which resumes its checkpoints. Arms run
in parallel processes: `--jobs N` (or `jobs:` in the study); default max(1, cores // 2), each
with cores // jobs torch threads. Output: OUT/ablation.md (means with confidence intervals over
seeds, the paired difference to the first arm, the budget), OUT/ablation.json, OUT/ablation.png.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from vibethinker.ablate.study import (
    Arm,
    Study,
    arm_recipe,
    check_fixed,
    ensure_base,
    is_done,
    load_study,
    retire_stale,
    write_base_stamp,
)
from vibethinker.ablate.table import collect, write_outputs
from vibethinker.log import get_logger

log = get_logger("ablate")
USAGE = """usage: vibethinker ablate STUDY.yaml [out=DIR] [base_run=DIR] [seeds=[0,1]] [--jobs N]
                          [<stage>.<key>=value ...] [--dry-run]

Run every arm x seed of a study (docs/ABLATE.md) that is not finished yet, each in its own run
dir under OUT, reusing the base run's finished upstream stages; then write OUT/ablation.md
(means with confidence intervals over seeds, paired differences, consumed budget), ablation.json
and ablation.png. Running it again resumes. <stage>.<key>= overrides apply to every arm.

  --jobs N    arm x seed runs in parallel processes (default: max(1, cores // 2))
  --inprocess run the arms one after another in this process (no worker start-up per arm)
  --table     only write the table and plot of the arm x seed runs finished so far
  --dry-run   print each arm's stages, overrides and what would run, and run nothing"""


def default_jobs() -> int:
    """max(1, cores // 2): each arm gets at least two torch threads (1 on a 2-core machine)."""
    return max(1, (os.cpu_count() or 1) // 2)


# ----------------------------------------------------------------------------- running


def run_one(study_path: str, cli: dict[str, str], arm_name: str, seed: int) -> None:
    """One arm x seed in this process (what the parallel workers call)."""
    from vibethinker.recipe import execute

    study = load_study(study_path, cli)
    arm = next(a for a in study.arms if a.name == arm_name)
    write_base_stamp(study, arm, seed)  # what it reads from the base run (is_done checks it)
    execute(arm_recipe(study, arm, seed), quiet=True)


_PROCS: list[subprocess.Popen] = []


def spawn_inprocess(study: Study, cli: dict[str, str], arm: Arm, seed: int, threads: int) -> int:
    """One arm x seed in this process (`--inprocess`): no worker start-up (importing torch and
    transformers again costs ~1 min per arm on a loaded 2-core host), no isolation between arms."""
    t0 = time.time()
    try:
        run_one(study.path, cli, arm.name, seed)
    except Exception as e:  # the next arm still runs; the table names the failure
        log.error("%s seed %d failed: %s: %s", arm.name, seed, type(e).__name__, e)
        print(f"{arm.name} seed {seed}: FAILED ({type(e).__name__}: {e})", flush=True)
        return 1
    print(f"{arm.name} seed {seed}: done in {time.time() - t0:.0f} s", flush=True)
    return 0


def _spawn(study: Study, cli: dict[str, str], arm: Arm, seed: int, threads: int) -> int:
    run_dir = Path(study.out) / arm.name / f"seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    args = [f"{k}={v}" for k, v in cli.items()]
    cmd = [
        sys.executable,
        "-m",
        "vibethinker.ablate",
        "--one",
        study.path,
        arm.name,
        str(seed),
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(threads))}
    t0 = time.time()
    with open(run_dir / "ablate.log", "a") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
        _PROCS.append(proc)
        rc = proc.wait()
    log.info(
        "%s seed %d: %s in %.0f s",
        arm.name,
        seed,
        "done" if rc == 0 else f"FAILED rc={rc}",
        time.time() - t0,
    )
    return rc


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_study(
    study: Study, cli: dict[str, str], jobs: int = 0, spawn: Any = None
) -> dict[str, Any]:
    """Every arm x seed not yet done (in parallel processes), then the table and plot.
    `spawn(study, cli, arm, seed, threads) -> exit code` replaces the worker process (tests)."""
    check_fixed(study)
    ensure_base(study)
    jobs = jobs or study.jobs or default_jobs()
    if spawn is spawn_inprocess:
        jobs = 1
    threads = max(1, (os.cpu_count() or 1) // jobs)
    Path(study.out).mkdir(parents=True, exist_ok=True)
    todo = [(a, s) for s in study.seeds for a in study.arms if not is_done(study, a, s)]
    for a, s in todo:
        retire_stale(study, a, s)
    skipped = len(study.arms) * len(study.seeds) - len(todo)
    log.info(
        "study %s: %d arm x seed runs to do, %d already done; %d job(s)",
        study.title,
        len(todo),
        skipped,
        jobs,
    )
    print(f"ablate {study.title}: {len(todo)} to run, {skipped} done already, jobs={jobs}")
    old = signal.signal(signal.SIGTERM, _raise_interrupt)
    ex = ThreadPoolExecutor(max_workers=jobs)
    try:
        if jobs == 1:  # one at a time, from this thread
            rcs = [(spawn or _spawn)(study, cli, a, s, threads) for a, s in todo]
        else:
            futs = [ex.submit(spawn or _spawn, study, cli, a, s, threads) for a, s in todo]
            rcs = [f.result() for f in futs]
    except BaseException:  # Ctrl-C / SIGTERM: stop the workers (each resumes on the next run)
        ex.shutdown(wait=False, cancel_futures=True)
        for p in _PROCS:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in _PROCS:
            p.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    ex.shutdown()
    failed = [f"{a.name}/seed{s}" for (a, s), rc in zip(todo, rcs) if rc != 0]
    res = collect(study)
    res["failed"] = failed
    write_outputs(study, res)
    return res


# ----------------------------------------------------------------------------- reading back
