"""The tiny recipe's SFT and an RL stage under `torchrun --nproc-per-node N`, against N = 1.

    python scripts/torchrun_check.py [--start /tmp/demo1] [--out /tmp/15/e2e] [--nproc 2]

Runs `vibethinker sft1 recipes/tiny.yaml ...` (4 steps from the demo's start model) and
`vibethinker rl_math recipes/tiny.yaml ...` (3 steps from the demo's merged model, 48 prompts)
with 1 and with N processes, through the same command line a user types, and prints the
per-step metrics side by side. SFT must match to rounding (same data, same global batch); RL
rollouts are sampled with per-process seeds, so its rows agree in distribution, not exactly
(tests/train/test_dist.py checks the RL update itself on fixed rollouts).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXE = str(Path(sys.executable).with_name("vibethinker"))


def launch(n: int, args: list[str]) -> float:
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(n), EXE, *args]
    print("$", " ".join(cmd[2:]), flush=True)
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def rows(folder: Path) -> list[dict]:
    return [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--start", default="/tmp/demo1", help="a finished tiny demo run")
    ap.add_argument("--out", default="/tmp/15/e2e")
    ap.add_argument("--nproc", type=int, default=2)
    a = ap.parse_args()
    start, out = Path(a.start), Path(a.out)
    sft = [
        "sft1",
        "recipes/tiny.yaml",
        f"model={start}/model",
        f"data={start}/data/train.jsonl",
        "max_steps=4",
        "eval_data=",
    ]
    rl = [
        "rl_math",
        "recipes/tiny.yaml",
        f"model={start}/probe_merge/merged",
        f"data={start}/data",
        "steps=3",
        "max_prompts=48",
        "eval_every=0",
        "max_seconds=0",
    ]
    report = {}
    for name, args, keys in (
        ("sft", sft, ("loss", "grad_norm", "lr", "loss_tokens")),
        ("rl", rl, ("accuracy", "reward", "trained_rows", "loss", "grad_norm", "engine_kl", "lr")),
    ):
        runs = {}
        for n in (1, a.nproc):
            folder = out / f"{name}_{n}"
            secs = launch(n, [*args, f"out={folder}"])
            runs[n] = rows(folder)
            report[f"{name}_{n}_seconds"] = round(secs, 1)
        print(f"\n{name}: step | " + " | ".join(f"{k} (1 vs {a.nproc})" for k in keys))
        for r1, rn in zip(runs[1], runs[a.nproc]):
            vals = " | ".join(f"{r1.get(k)} vs {rn.get(k)}" for k in keys)
            print(f"  {r1['step']} | {vals}")
        report[name] = {n: [{k: r.get(k) for k in keys} for r in v] for n, v in runs.items()}
    (out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    print(
        f"\nwall seconds (process start-up included): "
        f"{ {k: v for k, v in report.items() if k.endswith('seconds')} }"
    )


if __name__ == "__main__":
    main()
