"""Evidence for the RL stages on the embedded world, reproducible with one command.

1. Evaluation noise: the starting (SFT) model's held-out math avg@n under several sampling seeds.
2. Math RL raises accuracy: the `rl` stage (MGPO) for each RL seed, wall-clock capped; each final
   model evaluated with the same sampling seeds. Reported: mean and spread over eval seeds and
   over RL seeds, against the start.
3. Long2Short shortens correct answers: from the first RL seed's final model, a Long2Short math
   stage and a control stage (identical but long2short=false), same steps and seed; mean tokens
   of correct held-out answers and accuracy, over the eval seeds.

Evaluation protocol: the paper's (temperature 1.0, top-p 0.95, top-k off), `--eval-n` samples per
problem on the first `--eval-limit` held-out math problems, `--max-new-tokens` cap.

    python scripts/rl_evidence.py --sft runs/tiny/sft/final --data runs/tiny/data \
        --out runs/rl_evidence --seeds 0 1 --steps 60 --max-seconds 240

Writes OUT/evidence.md and OUT/evidence.json (and each stage's own folder under OUT).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch


def eval_model(path: str, data: str, seeds: list[int], n: int, limit: int, max_new: int) -> dict:
    """Held-out math avg@n and mean correct length for each sampling seed."""
    from vibethinker.engines import SamplingParams, make_sampler
    from vibethinker.prompts.paper import paper_prompt
    from vibethinker.stages.rl import load_domain
    from vibethinker.train.rl_metrics import evaluate_policy

    probs = load_domain(Path(data) / "eval.jsonl", "math", limit)
    sampler = make_sampler("hf", model=path, device="cpu")
    runs = []
    for s in seeds:
        params = SamplingParams(
            temperature=1.0, top_p=0.95, top_k=0, max_new_tokens=max_new, seed=1000 + s
        )
        runs.append(evaluate_policy(sampler, probs, n, params, paper_prompt, workers=2))
    acc = [r["accuracy"] for r in runs]
    lc = [r["len_correct"] for r in runs if r["len_correct"] is not None]
    return {
        "model": path,
        "acc": acc,
        "acc_mean": statistics.mean(acc),
        "acc_spread": max(acc) - min(acc),
        "len_correct": lc,
        "len_correct_mean": statistics.mean(lc) if lc else None,
        "trunc": statistics.mean(r["trunc_rate"] for r in runs),
    }


def run_rl(
    out: Path,
    model: str,
    data: str,
    seed: int,
    steps: int,
    cap: float,
    max_new: int,
    lr: float,
    **kw,
) -> str:
    from vibethinker.stages import get

    spec = get("rl")
    base = dict(
        model=model,
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
        eval_every=max(1, steps // 4),
        eval_n=2,
        eval_limit=60,
        save_every=max(1, steps // 4),
        max_seconds=cap,
        seed=seed,
        device="cpu",
    )
    cfg = spec.config_cls(**{**base, **kw})
    return spec.fn(cfg)["model"]


def _pm(xs: list[float]) -> str:
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):.3f} ± {sd:.3f} (range {min(xs):.3f}-{max(xs):.3f})"


def main(
    sft: str,
    data: str,
    out: str,
    seeds: list[int],
    steps: int,
    max_seconds: float,
    l2s_steps: int,
    eval_seeds: int,
    eval_n: int,
    eval_limit: int,
    max_new: int,
    threads: int,
    lr: float = 3e-4,
) -> dict:
    torch.set_num_threads(threads)
    root = Path(out)
    root.mkdir(parents=True, exist_ok=True)
    es = list(range(eval_seeds))
    ev = lambda p: eval_model(p, data, es, eval_n, eval_limit, max_new)  # noqa: E731
    t0 = time.time()
    res: dict = {
        "start": ev(sft),
        "rl": {},
        "cmd_args": {
            "sft": sft,
            "data": data,
            "seeds": seeds,
            "steps": steps,
            "max_seconds": max_seconds,
            "l2s_steps": l2s_steps,
            "eval_seeds": eval_seeds,
            "eval_n": eval_n,
            "eval_limit": eval_limit,
            "max_new_tokens": max_new,
            "lr": lr,
        },
    }
    for s in seeds:
        final = run_rl(root / f"rl_math_seed{s}", sft, data, s, steps, max_seconds, max_new, lr)
        res["rl"][s] = ev(final)
    first = str(root / f"rl_math_seed{seeds[0]}" / "final")
    l2s_kw = dict(steps=l2s_steps, cap=max_seconds, max_new=max_new, lr=lr / 2)
    res["l2s"] = ev(run_rl(root / "l2s", first, data, seeds[0], long2short=True, **l2s_kw))
    res["control"] = ev(run_rl(root / "l2s_control", first, data, seeds[0], **l2s_kw))
    res["rl_start_for_l2s"] = res["rl"][seeds[0]]
    res["wall_s"] = round(time.time() - t0, 1)
    (root / "evidence.json").write_text(json.dumps(res, indent=2) + "\n")
    (root / "evidence.md").write_text(report(res))
    return res


def report(res: dict) -> str:
    st = res["start"]
    a = res["cmd_args"]
    rl_means = [r["acc_mean"] for r in res["rl"].values()]
    lines = [
        "# RL evidence (embedded world, math)",
        "",
        f"Held-out: first {a['eval_limit']} eval math problems, avg@{a['eval_n']}, temperature "
        f"1.0, top-p 0.95, {a['max_new_tokens']} new tokens max; each model evaluated with "
        f"{a['eval_seeds']} sampling seeds. RL: {a['steps']} steps (cap {a['max_seconds']} s) "
        f"x 16 prompts x G=8, MGPO lambda 1, lr {a['lr']:g} -> {a['lr'] / 10:g} (Long2Short and "
        "its control: half that).",
        "",
        "| model | accuracy over eval seeds (mean ± sd) | mean tokens, correct |",
        "|---|---|---:|",
        f"| start (SFT) | {_pm(st['acc'])} | {st['len_correct_mean']:.1f} |",
    ]
    for s, r in res["rl"].items():
        lines.append(f"| RL math seed {s} | {_pm(r['acc'])} | {r['len_correct_mean']:.1f} |")
    lines += [
        "",
        f"RL math over {len(rl_means)} RL seeds: {_pm(rl_means)}; gain over start "
        f"{statistics.mean(rl_means) - st['acc_mean']:+.3f} (eval-seed spread of the start model "
        f"{st['acc_spread']:.3f}).",
        "",
        "Long2Short (from RL seed "
        f"{a['seeds'][0]}'s final; {a['l2s_steps']} steps each, same seed):",
        "",
        "| model | accuracy | mean tokens, correct |",
        "|---|---|---:|",
    ]
    for name, key in (
        ("RL math (start)", "rl_start_for_l2s"),
        ("control (no shift)", "control"),
        ("Long2Short", "l2s"),
    ):
        r = res[key]
        lines.append(f"| {name} | {_pm(r['acc'])} | {r['len_correct_mean']:.2f} |")
    lines += ["", f"Wall time {res['wall_s']} s."]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sft", required=True, help="starting model (HF folder)")
    ap.add_argument("--data", required=True, help="world data folder (train/eval.jsonl)")
    ap.add_argument("--out", default="runs/rl_evidence")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--steps", type=int, default=60)
    ap.add_argument("--max-seconds", type=float, default=240.0)
    ap.add_argument("--l2s-steps", type=int, default=40)
    ap.add_argument("--eval-seeds", type=int, default=3)
    ap.add_argument("--eval-n", type=int, default=4)
    ap.add_argument("--eval-limit", type=int, default=100)
    ap.add_argument("--max-new-tokens", type=int, default=96)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=1e-4)
    a = ap.parse_args()
    r = main(
        a.sft,
        a.data,
        a.out,
        a.seeds,
        a.steps,
        a.max_seconds,
        a.l2s_steps,
        a.eval_seeds,
        a.eval_n,
        a.eval_limit,
        a.max_new_tokens,
        a.threads,
        a.lr,
    )
    print(report(r))
