"""Can the tiny model learn CLR's claim verification from the world's examples?

A cheap test instead of a full demo: continue a finished sft1 model for a few hundred SFT steps
on the world's CLR examples (+ a small replay of the other domains against forgetting), then
judge held-out labelled claims (the eval split's `Problem.claims`) with the `clr` stage's verify
template: the stage's own `claim_eval` (T = 1.0, top-p 0.95) and a greedy pass that says where
the judging fails on arithmetic claims `a op b=c`: does the reply copy the claim's left side,
compute it right, and give the verdict its own computation implies?

    .venv/bin/python scripts/clr_learnability.py --start /tmp/demo3/sft1/final \\
        --train /tmp/demo3/data/train.jsonl --eval /tmp/demo3/data/eval.jsonl --out /tmp/13/e2

`--rebuild` replaces the train file's CLR examples by ones built with the current
`data/world/claims.py` from the same train problems (the world itself is not regenerated).
`--steps 0` measures the start model as it is; `--verify-prompt` judges with another template (a
model trained on an earlier wording is measured with that wording).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def training_set(args: argparse.Namespace, out: Path) -> Path:
    from vibethinker.data.io import load_problems, save_problems
    from vibethinker.data.world.claims import clr_examples

    train = load_problems(args.train)
    rest = [p for p in train if p.domain != "clr"]
    clr = clr_examples(rest, args.seed) if args.rebuild else [p for p in train if p.domain == "clr"]
    replay = random.Random(args.seed).sample(rest, args.replay)
    for p in replay:
        p.traces = p.traces[:1]
    save_problems(out / "data.jsonl", clr + replay)
    print(f"{len(clr)} CLR examples + {len(replay)} replay problems", flush=True)
    return out / "data.jsonl"


def finetune(args: argparse.Namespace, out: Path) -> str:
    from vibethinker.stages import get
    from vibethinker.train.sft_config import SFTConfig

    cfg = SFTConfig(
        model=args.start,
        data=str(training_set(args, out)),
        out=str(out / "sft"),
        epochs=100,
        max_steps=args.steps,
        global_batch=16,
        micro_batch=8,
        max_len=256,
        lr=args.lr,
        final_lr=1e-5,
        save_every=0,
        device="cpu",
    )
    t0 = time.time()
    get("sft").fn(cfg)
    print(f"sft {args.steps} steps: {time.time() - t0:.0f} s", flush=True)
    return str(out / "sft" / "final")


def diagnose(model: str, args: argparse.Namespace) -> dict:
    from vibethinker.algo.clr import parse_verdict
    from vibethinker.data.io import load_problems
    from vibethinker.engines import SamplingParams, make_sampler
    from vibethinker.prompts import fill, load_template, problem_text
    from vibethinker.prompts.paper import paper_prompt
    from vibethinker.stages.clr_phases import claim_eval_phase, labelled_claims

    probs = [p for p in load_problems(args.eval) if p.domain in ("math", "stem")]
    texts = [problem_text(paper_prompt(p)) for p in probs]
    tmpl = load_template(args.verify_prompt, "clr_verify.txt", ("{claim}",))
    s = make_sampler("hf", model=model, device="cpu")
    stage = claim_eval_phase(
        s,
        probs,
        texts,
        tmpl,
        args.claims,
        SamplingParams(1.0, 0.95, 0, args.judge_tokens, seed=3),
        0,
    )
    items = labelled_claims(probs, args.claims, 0)
    out = s.generate(
        [fill(tmpl, problem=texts[i], claim=c) for i, c, _ in items],
        1,
        SamplingParams(0.0, 1.0, 0, args.judge_tokens, seed=3),
    )
    c = Counter()
    for (_, claim, truth), comps in zip(items, out):
        reply = comps[0].text if comps else ""
        v = parse_verdict(reply)
        c["claims"] += 1
        c["right"] += int(v == int(truth))
        c["unparseable"] += int(v is None)
        m = re.match(r"^(\d+)([-+*/])(\d+)=(\d+)$", claim)
        t = re.search(r"<think>(\d+)([-+*/])(\d+)=(\d+)", reply)
        if m and t and v is not None:
            c["arith"] += 1
            copied = (t[1], t[2], t[3]) == (m[1], m[2], m[3])
            c["arith_lhs_copied"] += int(copied)
            if copied and m[2] != "/":
                c["arith_copied_exact_op"] += 1
                true = eval(f"{m[1]}{m[2]}{m[3]}")  # digits and one of + - * only
                c["arith_computed_right"] += int(int(t[4]) == true)
            c["arith_verdict_follows_own_result"] += int(v == int(int(t[4]) == int(m[4])))
    return {
        "model": model,
        "claim_eval_stage": stage,
        "greedy": dict(c),
        "greedy_accuracy": round(c["right"] / max(1, c["claims"]), 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--start", default="/tmp/demo3/sft1/final")
    ap.add_argument("--train", default="/tmp/demo3/data/train.jsonl")
    ap.add_argument("--eval", default="/tmp/demo3/data/eval.jsonl")
    ap.add_argument("--out", default="/tmp/13/learn")
    ap.add_argument("--rebuild", action="store_true", help="CLR examples from current claims.py")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--replay", type=int, default=150)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--claims", type=int, default=200)
    ap.add_argument("--judge-tokens", type=int, default=40)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--verify-prompt", default="", help="verify template (default: the stage's)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = finetune(args, out) if args.steps > 0 else args.start
    res = diagnose(model, args)
    (out / "learnability.json").write_text(json.dumps(res, indent=1))
    print(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
