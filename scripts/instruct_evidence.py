"""Evidence for Instruct RL (docs/PAPER.md stage 5): does control return without losing
reasoning, and does the policy game the tiny reward model?

    .venv/bin/python scripts/instruct_evidence.py [--run-dir /tmp/demo1] [--out /tmp/12/evidence]
        [--seeds 0,1,2] [--rm PATH] [--steps 6] [--max-new-tokens 96] [--collect A.json,...]

From a finished tiny-recipe run (`--run-dir`: its data/, sft1/final, rl_stem/final, or the
`--start` model; the recipe's rl_instruct starts from RUN_DIR/distill/sft/final, and
`--n-open 48 --max-new-tokens 128 --steps 10` are its settings): the world's train split plus
`--n-open` open prompts (data/world/instruct_open.py) is the RL data; a reward model is trained
by the `reward_model` stage from sft1/final unless `--rm` gives one. For each seed the `rl` stage
runs on the instruct domain (strict rule reward, rubric = the reward model) from the start model,
then both models are evaluated with that seed's sampling:
- IFEval-style strict and loose prompt-level accuracy on the held-out rule prompts (eval split);
- the rubric reward (normalised reward-model value) on held-out open prompts (never trained on);
- held-out avg@n on math, code and STEM (eval split);
- a reward-hacking probe on the open and rule answers: mean answer words and the repeated-3-gram
  rate (share of word 3-grams that already occurred in the same answer).
Prints a markdown table (mean +- sd over seeds; how many seeds went up / down) and the training
batches' trend (first vs last steps of the rl stage's metrics.jsonl: rule and rubric reward, open
answer words, rollout tokens, entropy, rubric failures); writes out/evidence.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

MAX_NEW = 96  # --max-new-tokens: RL rollouts and every held-out sample


def repeat_rate(text: str) -> float:
    """Share of word 3-grams already seen earlier in the text (0: no repetition)."""
    w = text.lower().split()
    grams = [tuple(w[i : i + 3]) for i in range(len(w) - 2)]
    seen, rep = set(), 0
    for g in grams:
        rep += g in seen
        seen.add(g)
    return rep / len(grams) if grams else 0.0


def prepare(args: argparse.Namespace, out: Path) -> tuple[Path, list, list, dict]:
    """RL data folder (train + open prompts), held-out rule / open / reasoning problems."""
    from vibethinker.data.io import load_problems, save_problems
    from vibethinker.data.world.instruct_open import open_problems

    data = out / "data"
    data.mkdir(parents=True, exist_ok=True)
    train = load_problems(Path(args.run_dir) / "data" / "train.jsonl")
    train = [p for p in train if p.subdomain != "open"]
    opened = open_problems(0, args.n_open)
    save_problems(data / "train.jsonl", train + opened)
    keys = {" ".join(p.prompt.lower().split()) for p in opened}
    held_open = open_problems(0, args.n_eval, "heldout", exclude=keys)
    ev = load_problems(Path(args.run_dir) / "data" / "eval.jsonl")
    save_problems(data / "eval.jsonl", ev)
    rule = [p for p in ev if p.domain == "instruct" and p.instructions][: args.n_eval]
    other = {d: [p for p in ev if p.domain == d][: args.n_eval] for d in ("math", "code", "stem")}
    return data, rule, held_open, other


def evaluate_model(
    model_dir: str, rm, rule, held_open, other, n: int, seed: int, max_new: int = MAX_NEW
) -> dict:
    from vibethinker.engines import SamplingParams, make_sampler
    from vibethinker.evaluate import evaluate, paper_prompt
    from vibethinker.train import policy
    from vibethinker.verifiers.extract import answer_part
    from vibethinker.verifiers.instruct import verify_instruct

    model, tok = policy.load_policy(model_dir, "cpu")
    model.eval()
    sampler = make_sampler("hf", model=model, tokenizer=tok)
    params = SamplingParams(temperature=1.0, top_p=0.95, top_k=0, max_new_tokens=max_new, seed=seed)
    row: dict = {}
    res = evaluate(sampler, rule, n, [1], params, workers=1, prompt_fn=paper_prompt)
    texts = [(g.problem, c.text) for g in res.groups for c in g.completions]
    row["ifeval_strict"] = statistics.mean(s.correct for g in res.groups for s in g.scores)
    row["ifeval_loose"] = statistics.mean(
        verify_instruct(p, t, loose=True).correct for p, t in texts
    )
    rule_ans = [(answer_part(t) or "").strip() for _, t in texts]
    outs = sampler.generate([p.prompt for p in held_open], n, params)
    pairs = [
        (p.prompt, (answer_part(c.text) or "").strip())
        for p, cs in zip(held_open, outs)
        for c in cs
    ]
    vals = [r.value if r.value is not None else 0.0 for r in rm.score(pairs)]
    vals = [v if a else 0.0 for v, (_, a) in zip(vals, pairs)]  # unanswered: 0, as in training
    row["rubric_open"] = statistics.mean(vals)
    row["open_words"] = statistics.mean(len(a.split()) for _, a in pairs)
    row["open_repeat"] = statistics.mean(repeat_rate(a) for _, a in pairs)
    row["rule_words"] = statistics.mean(len(a.split()) for a in rule_ans)
    row["rule_repeat"] = statistics.mean(repeat_rate(a) for a in rule_ans)
    for d, probs in other.items():
        r = evaluate(sampler, probs, n, [1], params, workers=1, prompt_fn=paper_prompt)
        row[f"{d}_acc"] = statistics.mean(s.correct for g in r.groups for s in g.scores)
    return row


def run_rl(
    args: argparse.Namespace, data: Path, rm_dir: str, start: str, seed: int, out: Path
) -> str:
    from vibethinker.stages.rl import run
    from vibethinker.train.rl_config import RLConfig

    cfg = RLConfig(
        model=start,
        data=str(data),
        domain="instruct",
        out=str(out),
        seed=seed,
        steps=args.steps,
        prompts_per_step=8,
        group_size=8,
        lr=1e-4,
        final_lr=1e-5,
        max_new_tokens=args.max_new_tokens,
        filter_rollouts=4,
        max_prompts=args.max_prompts,
        rule_reward="strict",
        rubric_model=f"hf:{rm_dir}",
        rubric_threshold=0.5,
        max_seconds=args.max_seconds,
        save_every=0,
        eval_every=0,
        device="cpu",
        verify_workers=1,
    )
    return run(cfg)["model"]


def table(res: dict) -> None:
    """The markdown table: mean +- sd over seeds, before / after / paired change."""
    rows, sizes, args = res["rows"], res["sizes"], res["args"]

    def sd(xs: list[float]) -> float:
        return statistics.stdev(xs) if len(xs) > 1 else 0.0

    print(
        f"\n{len(rows)} seeds {[r['seed'] for r in rows]}, RL steps {[r['steps'] for r in rows]}; "
        f"held-out: {sizes}; n={args['n']} samples each\n"
    )
    print("| metric | before (start model) | after Instruct RL | change (paired) | seeds up/down |")
    print("|---|---:|---:|---:|---:|")
    for k in rows[0]["before"]:
        b = [r["before"][k] for r in rows]
        a = [r["after"][k] for r in rows]
        d = [x - y for x, y in zip(a, b)]
        ud = f"{sum(x > 0 for x in d)}/{sum(x < 0 for x in d)}"
        print(
            f"| {k} | {statistics.mean(b):.3f} +- {sd(b):.3f} | {statistics.mean(a):.3f} +- "
            f"{sd(a):.3f} | {statistics.mean(d):+.3f} +- {sd(d):.3f} | {ud} |"
        )
    trends = [r["trend"] for r in rows if r.get("trend")]
    if not trends:
        return
    print(
        f"\nTraining batches (the rl stage's metrics.jsonl): mean of the first vs the last "
        f"{trends[0]['k']} steps, mean +- sd over seeds\n"
    )
    print("| metric | first steps | last steps |")
    print("|---|---:|---:|")
    for k in TREND_KEYS:
        f = [t["first"][k] for t in trends if t["first"].get(k) is not None]
        la = [t["last"][k] for t in trends if t["last"].get(k) is not None]
        if f and la:
            print(
                f"| {k} | {statistics.mean(f):.3f} +- {sd(f):.3f} | {statistics.mean(la):.3f} +- "
                f"{sd(la):.3f} |"
            )


TREND_KEYS = (
    "reward_rule",
    "reward_open",
    "open_answer_words",
    "tokens_per_rollout",
    "entropy",
    "rubric_fail",
)


def trend(metrics: Path) -> dict | None:
    """Training-batch metrics of one RL run: mean over its first and last k steps (k = a quarter
    of the steps, at least 2); tokens_per_rollout = gen_tokens / rollouts of the step."""
    if not metrics.is_file():
        return None
    rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    for r in rows:
        n = (r.get("n_rule") or 0) + (r.get("n_open") or 0)
        r["tokens_per_rollout"] = r.get("gen_tokens", 0) / n if n else None
    k = max(2, len(rows) // 4)

    def mean(part: list[dict]) -> dict:
        out = {}
        for key in TREND_KEYS:
            v = [r[key] for r in part if r.get(key) is not None]
            out[key] = statistics.mean(v) if v else None
        return out

    return {"k": k, "first": mean(rows[:k]), "last": mean(rows[-k:])} if rows else None


def collect(paths: list[str]) -> int:
    """One table from several runs' evidence.json (seeds run as separate processes)."""
    parts = [json.loads(Path(p).read_text()) for p in paths]
    for part in parts:  # training trends from each run's rl_seed<S>/metrics.jsonl
        for r in part["rows"]:
            r.setdefault(
                "trend", trend(Path(part["args"]["out"]) / f"rl_seed{r['seed']}" / "metrics.jsonl")
            )
    res = {**parts[0], "rows": [r for p in parts for r in p["rows"]]}
    table(res)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run-dir", default="/tmp/demo1")
    ap.add_argument("--start", default="", help="start model (default RUN_DIR/rl_stem/final)")
    ap.add_argument("--out", default="/tmp/12/evidence")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--rm", default="", help="reward model folder (default: train one)")
    ap.add_argument("--n-open", type=int, default=60)
    ap.add_argument("--n-eval", type=int, default=20, help="held-out problems per group")
    ap.add_argument("--n", type=int, default=2, help="samples per held-out problem")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument(
        "--max-new-tokens",
        type=int,
        default=MAX_NEW,
        help="rollout and held-out sample length (tiny.yaml's rl_instruct: 128)",
    )
    ap.add_argument("--max-prompts", type=int, default=64)
    ap.add_argument("--max-seconds", type=float, default=0, help="RL wall cap (0: none)")
    ap.add_argument("--collect", default="", help="comma list of evidence.json: print one table")
    args = ap.parse_args()
    if args.collect:
        return collect(args.collect.split(","))
    from vibethinker.log import setup_logging
    from vibethinker.verifiers.rubric import RewardModelRubric

    setup_logging(quiet=True)
    out = Path(args.out)
    start = args.start or str(Path(args.run_dir) / "rl_stem" / "final")
    data, rule, held_open, other = prepare(args, out)
    rm_dir = args.rm
    if not rm_dir:
        from vibethinker.stages.reward_model import RewardModelConfig
        from vibethinker.stages.reward_model import run as run_rm

        rm_dir = run_rm(
            RewardModelConfig(
                model=str(Path(args.run_dir) / "sft1" / "final"),
                data=str(data),
                out=str(out / "rm"),
                epochs=1,
                max_problems=200,
                max_len=192,
                device="cpu",
            )
        )["model"]
    rm = RewardModelRubric(rm_dir)
    rows = []
    for seed in [int(s) for s in args.seeds.split(",")]:
        t0 = time.time()
        final = run_rl(args, data, rm_dir, start, seed, out / f"rl_seed{seed}")
        steps = sum(1 for _ in open(out / f"rl_seed{seed}" / "metrics.jsonl"))
        before = evaluate_model(
            start, rm, rule, held_open, other, args.n, 1000 + seed, args.max_new_tokens
        )
        after = evaluate_model(
            final, rm, rule, held_open, other, args.n, 1000 + seed, args.max_new_tokens
        )
        rows.append(
            {
                "seed": seed,
                "steps": steps,
                "before": before,
                "after": after,
                "seconds": round(time.time() - t0, 1),
                "trend": trend(out / f"rl_seed{seed}" / "metrics.jsonl"),
            }
        )
        print(json.dumps(rows[-1]), flush=True)
    sizes = {"rule": len(rule), "open": len(held_open), **{d: len(v) for d, v in other.items()}}
    res = {"args": vars(args), "rm": rm_dir, "sizes": sizes, "rows": rows}
    (out / "evidence.json").write_text(json.dumps(res, indent=1) + "\n")
    table(res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
