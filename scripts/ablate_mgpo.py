"""GRPO (lambda = 0) vs MGPO under the same rollout budget, on the embedded world's math.

Superseded for the matched-budget table (means, CIs over seeds, budget read back) by
`vibethinker ablate studies/grpo_vs_mgpo.yaml` (docs/ABLATE.md); kept for its per-step
training-curve plot of every arm and seed.

Both arms run the `rl` stage from the same starting model with the same seeds, prompts per step,
G, steps (no wall-clock cap, so each arm samples exactly steps x prompts x G responses), LR and
evaluation; only `advantage` differs. Reported whatever they show: per arm and seed, the training
accuracy curve and the held-out avg@n at every evaluation, and a plot of both.
Our calibration found run-to-run noise of ~7 points, so one seed per arm cannot separate
them; use several seeds (--seeds) when time allows.

    python scripts/ablate_mgpo.py --sft runs/tiny/sft/final --data runs/tiny/data \
        --out runs/ablate_mgpo --steps 40 --seeds 0 --lambda-mgpo 2.0

Writes OUT/ablation.md, OUT/ablation.json and OUT/ablation.png.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch


def run_arm(
    out: Path,
    sft: str,
    data: str,
    advantage: str,
    lam: float,
    seed: int,
    steps: int,
    max_new: int,
    eval_every: int,
    eval_n: int,
    eval_limit: int,
    lr: float,
) -> dict:
    from vibethinker.stages import get

    spec = get("rl")
    cfg = spec.config_cls(
        model=sft,
        data=data,
        domain="math",
        out=str(out),
        steps=steps,
        prompts_per_step=16,
        group_size=8,
        lr=lr,
        final_lr=lr / 10,
        max_new_tokens=max_new,
        filter_rollouts=4,
        max_prompts=400,
        eval_every=eval_every,
        eval_n=eval_n,
        eval_limit=eval_limit,
        advantage=advantage,
        lambda_mgpo=lam,
        seed=seed,
        device="cpu",
    )
    spec.fn(cfg)
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    evals = [json.loads(x) for x in (out / "evals.jsonl").read_text().splitlines()]
    return {
        "train_acc": [r["accuracy"] for r in rows],
        "mgpo_weight": [r["mgpo_weight"] for r in rows],
        "evals": [(e["step"], e["accuracy"]) for e in evals],
        "rollouts": sum(16 * 8 for _ in rows),
    }


def plot(res: dict, png: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 3.3), dpi=110)
    for i, (arm, seeds) in enumerate(res["arms"].items()):
        for s, r in seeds.items():
            acc = r["train_acc"]
            sm = [statistics.mean(acc[max(0, j - 9) : j + 1]) for j in range(len(acc))]
            axes[0].plot(range(1, len(acc) + 1), sm, color=f"C{i}", lw=1.2, label=f"{arm} s{s}")
            axes[1].plot(*zip(*r["evals"]), "o-", color=f"C{i}", label=f"{arm} s{s}")
    axes[0].set(xlabel="step", ylabel="train accuracy (10-step mean)", title="training batches")
    axes[1].set(xlabel="step", ylabel="held-out avg@n", title="held-out math")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)


def main(
    sft: str,
    data: str,
    out: str,
    seeds: list[int],
    steps: int,
    lam: float,
    max_new: int,
    eval_every: int,
    eval_n: int,
    eval_limit: int,
    threads: int,
    lr: float = 3e-4,
) -> dict:
    torch.set_num_threads(threads)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    arms = {"grpo": 0.0, f"mgpo(lambda={lam:g})": lam}
    res: dict = {
        "arms": {},
        "args": {
            "sft": sft,
            "steps": steps,
            "seeds": seeds,
            "lambda": lam,
            "eval_n": eval_n,
            "eval_limit": eval_limit,
            "lr": lr,
        },
    }
    for arm, lam_arm in arms.items():
        adv = "grpo" if lam_arm == 0 else "mgpo"
        res["arms"][arm] = {
            s: run_arm(
                root / f"{adv}_seed{s}",
                sft,
                data,
                adv,
                lam_arm,
                s,
                steps,
                max_new,
                eval_every,
                eval_n,
                eval_limit,
                lr,
            )
            for s in seeds
        }
    (root / "ablation.json").write_text(json.dumps(res, indent=2) + "\n")
    plot(res, root / "ablation.png")
    lines = [
        "# GRPO vs MGPO (same rollout budget)",
        "",
        f"{steps} steps x 16 prompts x G=8 per arm and seed (seeds {seeds}), lr {lr:g} -> "
        f"{lr / 10:g}; held-out avg@{eval_n}"
        f" on {eval_limit} math problems.",
        "",
        "| arm | seed | rollouts | held-out avg@n at each eval (step: acc) | last-10 train acc |",
        "|---|---|---:|---|---:|",
    ]
    for arm, seeds_res in res["arms"].items():
        for s, r in seeds_res.items():
            ev = ", ".join(f"{st}: {a:.3f}" for st, a in r["evals"])
            tail = statistics.mean(r["train_acc"][-10:])
            lines.append(f"| {arm} | {s} | {r['rollouts']} | {ev} | {tail:.3f} |")
    (root / "ablation.md").write_text("\n".join(lines) + "\n")
    return res


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sft", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--out", default="runs/ablate_mgpo")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--lambda-mgpo", type=float, default=2.0)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--eval-every", type=int, default=20)
    ap.add_argument("--eval-n", type=int, default=4)
    ap.add_argument("--eval-limit", type=int, default=100)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    a = ap.parse_args()
    main(
        a.sft,
        a.data,
        a.out,
        a.seeds,
        a.steps,
        a.lambda_mgpo,
        a.max_new_tokens,
        a.eval_every,
        a.eval_n,
        a.eval_limit,
        a.threads,
        a.lr,
    )
    print(Path(a.out, "ablation.md").read_text())
