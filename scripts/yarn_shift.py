"""How far switching YaRN on moves a checkpoint: per-token KL(plain || YaRN) on held-out traces.

The SFT stages train without RoPE scaling and the RL stages load the merged SFT model with YaRN
(recipes/vibethinker-3b.yaml), so RL's first policy is not the model SFT produced. This measures
the gap teacher-forced on reference traces (the first trace of each held-out problem, assistant
tokens only), with the same weights loaded both ways:

    python scripts/yarn_shift.py --model runs/tiny/probe_merge/merged \
        --data runs/tiny/data/eval.jsonl --factor 2 --limit 300

Prints one JSON line: mean per-token KL (nats), its standard error over sequences, the share of
tokens whose argmax changes, and the mean log-likelihood of the traces both ways.
"""

from __future__ import annotations

import argparse
import json
import statistics

import torch

from vibethinker.data.io import load_problems
from vibethinker.train import packing, policy


def per_sequence(plain, yarn, sample: packing.Sample) -> tuple[float, float, float, float, int]:
    """(sum KL, argmax changes, sum log p plain, sum log p yarn, tokens) over the trained tokens."""
    ids = torch.tensor([sample.ids])
    mask = torch.tensor(sample.mask[1:], dtype=torch.bool)
    target = ids[0, 1:][mask]
    with torch.no_grad():
        lp = torch.log_softmax(plain(ids).logits[0, :-1][mask].double(), -1)
        lq = torch.log_softmax(yarn(ids).logits[0, :-1][mask].double(), -1)
    kl = (lp.exp() * (lp - lq)).sum(-1)
    flips = (lp.argmax(-1) != lq.argmax(-1)).sum()
    ll_p = lp.gather(-1, target[:, None]).sum()
    ll_q = lq.gather(-1, target[:, None]).sum()
    return float(kl.sum()), float(flips), float(ll_p), float(ll_q), int(mask.sum())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--data", required=True, help="Problem JSONL with traces (held-out split)")
    ap.add_argument("--factor", type=float, default=2.0)
    ap.add_argument("--original", type=int, default=0, help="YaRN original length (0: config's)")
    ap.add_argument("--limit", type=int, default=300)
    ap.add_argument("--max-len", type=int, default=512)
    a = ap.parse_args()
    torch.set_num_threads(1)
    plain, tok = policy.load_policy(a.model, "cpu")
    yarn, _ = policy.load_policy(
        a.model, "cpu", rope_yarn_factor=a.factor, rope_original_len=a.original
    )
    plain.eval(), yarn.eval()
    probs = [p for p in load_problems(a.data) if p.traces][: a.limit]
    samples = packing.build_samples([(p.prompt, p.traces[0]) for p in probs], tok, a.max_len)
    rows = [per_sequence(plain, yarn, s) for s in samples]
    toks = sum(r[4] for r in rows)
    per_seq = [r[0] / r[4] for r in rows if r[4]]
    print(
        json.dumps(
            {
                "model": a.model,
                "data": a.data,
                "factor": a.factor,
                "sequences": len(rows),
                "tokens": toks,
                "kl_per_token": sum(r[0] for r in rows) / toks,
                "kl_stderr": statistics.stdev(per_seq) / len(per_seq) ** 0.5,
                "argmax_changed": sum(r[1] for r in rows) / toks,
                "loglik_plain": sum(r[2] for r in rows) / toks,
                "loglik_yarn": sum(r[3] for r in rows) / toks,
            }
        )
    )


if __name__ == "__main__":
    main()
