"""Table for scripts/construct_sft_compare.sh: per arm (world, construct) and seed, the SFT steps
and tokens, and held-out avg@n per domain with 95% bootstrap CIs over eval problems; then both
seeds pooled (per-problem mean over seeds) and the paired difference construct - world.

    python scripts/construct_sft_compare.py OUT_DIR [--reps 2000]

Reads OUT_DIR/s<seed>_<arm>/{sft/stats.json, eval/samples.jsonl}.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from collections import defaultdict
from pathlib import Path

ARMS = ("world", "construct")


def bootstrap_ci(values: list[float], reps: int, seed: int = 0) -> tuple[float, float]:
    """Percentile 95% CI of the mean, resampling the values (eval problems) with replacement."""
    rng = random.Random(seed)
    n = len(values)
    means = sorted(sum(values[rng.randrange(n)] for _ in range(n)) / n for _ in range(reps))
    return means[int(0.025 * reps)], means[min(reps - 1, int(0.975 * reps))]


def per_problem(samples: Path) -> dict[str, tuple[str, float]]:
    """Problem id -> (domain, share of correct samples)."""
    hits: dict[str, list[float]] = defaultdict(list)
    dom: dict[str, str] = {}
    for line in samples.open():
        r = json.loads(line)
        hits[r["id"]].append(1.0 if r["correct"] else 0.0)
        dom[r["id"]] = r["domain"]
    return {k: (dom[k], sum(v) / len(v)) for k, v in hits.items()}


def by_domain(scores: dict[str, tuple[str, float]]) -> dict[str, list[float]]:
    out: dict[str, list[float]] = defaultdict(list)
    for pid in sorted(scores):
        d, s = scores[pid]
        out[d].append(s)
        out["all"].append(s)
    return out


def cell(values: list[float], reps: int) -> str:
    lo, hi = bootstrap_ci(values, reps)
    return f"{sum(values) / len(values):.3f} [{lo:.3f}, {hi:.3f}]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--reps", type=int, default=2000)
    args = ap.parse_args()
    root = Path(args.out)
    runs: dict[tuple[int, str], dict] = {}
    for d in sorted(root.glob("s*_*")):
        m = re.fullmatch(r"s(\d+)_(world|construct)", d.name)
        if m and (d / "eval" / "samples.jsonl").exists():
            stats = json.loads((d / "sft" / "stats.json").read_text())
            runs[(int(m[1]), m[2])] = {
                "stats": stats,
                "scores": per_problem(d / "eval" / "samples.jsonl"),
            }
    if not runs:
        raise SystemExit(f"no finished arm under {root}")
    domains = ["all", "code", "instruct", "math", "stem"]
    print(
        "| seed | arm | steps | train samples | tokens | final loss | " + " | ".join(domains) + " |"
    )
    print("|---|---|---:|---:|---:|---:|" + "---|" * len(domains))
    for (seed, arm), r in sorted(runs.items()):
        s, dd = r["stats"], by_domain(r["scores"])
        print(
            f"| {seed} | {arm} | {s['steps']} | {s['samples']} | {s['tokens']:,} | "
            f"{s['final_loss']:.4f} | " + " | ".join(cell(dd[d], args.reps) for d in domains) + " |"
        )
    seeds = sorted({s for s, _ in runs})
    both = [s for s in seeds if all((s, a) in runs for a in ARMS)]
    if not both:
        return
    pooled: dict[str, dict[str, tuple[str, float]]] = {}
    for arm in ARMS:
        ids = runs[(both[0], arm)]["scores"]
        pooled[arm] = {
            pid: (ids[pid][0], sum(runs[(s, arm)]["scores"][pid][1] for s in both) / len(both))
            for pid in ids
        }
    print(
        f"\nSeeds {', '.join(map(str, both))} pooled (per-problem mean over seeds; CI over "
        f"problems, {args.reps} bootstrap resamples):\n"
    )
    print("| arm | tokens (sum) | " + " | ".join(domains) + " |")
    print("|---|---:|" + "---|" * len(domains))
    for arm in ARMS:
        toks = sum(runs[(s, arm)]["stats"]["tokens"] for s in both)
        dd = by_domain(pooled[arm])
        print(f"| {arm} | {toks:,} | " + " | ".join(cell(dd[d], args.reps) for d in domains) + " |")
    diff = {pid: (d, pooled["construct"][pid][1] - s) for pid, (d, s) in pooled["world"].items()}
    dd = by_domain(diff)
    print(
        "| construct - world (paired) | | "
        + " | ".join(cell(dd[d], args.reps) for d in domains)
        + " |"
    )


if __name__ == "__main__":
    main()
