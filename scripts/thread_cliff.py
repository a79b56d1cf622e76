"""SFT step time vs torch threads, OpenMP wait policy and one competing busy process.

    python scripts/thread_cliff.py [--work /tmp/thread_cliff] [--steps 12] [--repeats 3]
        [--threads-list 1,2] [--waits default,PASSIVE,spin10000]

Builds the tiny world and model once (data + model stages), then trains sft1's shape (global
batch 64, micro 8, max_len 256, lr 2e-3) for `--steps` steps in a fresh process per setting:
torch threads 1 or 2 (OMP_NUM_THREADS and torch.set_num_threads), OMP_WAIT_POLICY unset or
PASSIVE (`spinN`: GOMP_SPINCOUNT=N, libgomp's spin before sleeping), with or without one other process spinning (`python -c 'while True: pass'`). Settings
run in rotating order, `--repeats` times; the figure is the median over repeats of each run's
median step time (the first 2 steps, warm-up, left out). Prints a markdown table and writes
results.json in `--work`.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def setup(work: Path) -> None:
    from vibethinker.stages import get, load_all

    load_all()
    if not (work / "data" / "train.jsonl").exists():
        get("data").fn(get("data").config_cls(kind="tiny", out=str(work / "data"), seed=0))
    if not (work / "model" / "config.json").exists():
        cfg = get("model").config_cls(
            kind="tiny", data=str(work / "data"), out=str(work / "model"), size="1m", seed=0
        )
        get("model").fn(cfg)


def child(work: Path, threads: int, steps: int, out: Path) -> None:
    import torch

    from vibethinker.stages import get, load_all

    torch.set_num_threads(threads)
    load_all()
    spec = get("sft")
    cfg = spec.config_cls(
        model=str(work / "model"),
        data=str(work / "data" / "train.jsonl"),
        out=str(out),
        max_steps=steps,
        global_batch=64,
        micro_batch=8,
        max_len=256,
        lr=2e-3,
        final_lr=2e-5,
        save_every=0,
        eval_data="",
    )
    spec.fn(cfg)


def measure(work: Path, threads: int, policy: str, busy: bool, steps: int, i: int) -> float:
    out = work / f"run_t{threads}_{policy}_{'busy' if busy else 'idle'}_{i}"
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "PYTHONPATH": str(ROOT)}
    env.pop("OMP_WAIT_POLICY", None)
    env.pop("GOMP_SPINCOUNT", None)
    if policy.startswith("spin"):
        env["GOMP_SPINCOUNT"] = policy[4:]
    elif policy != "default":
        env["OMP_WAIT_POLICY"] = policy
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        subprocess.run(
            [
                sys.executable,
                __file__,
                "--child",
                "--work",
                str(work),
                "--threads",
                str(threads),
                "--steps",
                str(steps),
                "--out",
                str(out),
            ],
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    return statistics.median(r["seconds"] for r in rows[2:])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default="/tmp/thread_cliff")
    ap.add_argument("--steps", type=int, default=12)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--out", default="")
    ap.add_argument("--threads-list", default="1,2")
    ap.add_argument("--waits", default="default,PASSIVE")
    a = ap.parse_args()
    work = Path(a.work)
    if a.child:
        child(work, a.threads, a.steps, Path(a.out))
        return
    setup(work)
    threads = [int(t) for t in a.threads_list.split(",")]
    settings = list(itertools.product(threads, a.waits.split(","), (False, True)))
    times: dict[str, list[float]] = {}
    for r in range(a.repeats):
        order = settings[r % len(settings) :] + settings[: r % len(settings)]
        for t, pol, busy in order:
            key = f"threads={t} wait={pol} busy={busy}"
            times.setdefault(key, []).append(measure(work, t, pol, busy, a.steps, r))
            print(key, f"{times[key][-1]:.3f} s/step", flush=True)
    (work / "results.json").write_text(json.dumps(times, indent=1) + "\n")
    print("\n| threads | OMP_WAIT_POLICY | one busy process | s/step (median) | runs |")
    print("|---:|---|---|---:|---|")
    for t, pol, busy in settings:
        v = times[f"threads={t} wait={pol} busy={busy}"]
        runs = ", ".join(f"{x:.3f}" for x in v)
        print(f"| {t} | {pol} | {'yes' if busy else 'no'} | {statistics.median(v):.3f} | {runs} |")


if __name__ == "__main__":
    main()
