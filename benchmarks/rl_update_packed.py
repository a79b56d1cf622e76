"""The RL update on a long-tailed batch: right-padded row micro-batches vs packed token-budget ones.

    flock /tmp/heavy.lock env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/rl_update_packed.py \
        [--vocab 151936] [--hidden 256] [--layers 2] [--rows 16] [--cap 512] [--median 48]
        [--micro-batch 4] [--budget 2048] [--threads 1] [--repeats 3] [--json out.json]

One `rl_update.update` (forward, backward, AdamW step; on-policy, no KL, no TIS) of a random-weight
Qwen2-architecture model (fp32, CPU) over the same rows on both sides: `--rows` prompt +
response rows, prompts of 32-96 tokens, responses log-normal (median `--median`, sigma
`--sigma`) capped at `--cap`, with a tenth of the rows exactly at the cap (the long tail that
decides the padded width); random token ids, every row with a non-zero advantage (all train).
- padded: `micro_batch` rows per forward, right-padded (today's default path, which pads every
  micro-batch to the longest row of the WHOLE batch, as `Batch.rows` slices it);
- packed: `max_tokens_per_micro` = `--budget` tokens per forward, rows packed end to end.
The LM head sees the same response positions on both sides (only those go through it), so the
packed path saves the backbone's padding only; the head's share of the FLOPs bounds the ratio
(at a 151,936 vocabulary and hidden 256 it is most of them; at Qwen2.5-1.5B shapes the backbone
is ~85%). Metrics: tokens_per_s (real prompt+response tokens / update seconds; and per CPU-second of
the process, which a shared host's load does not inflate), the update seconds, and the peak resident memory of each micro-batch (VmHWM reset before each one via
/proc/self/clear_refs): its largest and smallest over the batch.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--vocab", type=int, default=151_936)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--rows", type=int, default=16)
    ap.add_argument("--cap", type=int, default=512, help="response token cap")
    ap.add_argument("--median", type=float, default=48.0, help="median response length")
    ap.add_argument("--sigma", type=float, default=1.0, help="log-normal sigma")
    ap.add_argument("--micro-batch", type=int, default=4, help="padded side: rows per forward")
    ap.add_argument("--budget", type=int, default=2048, help="packed side: tokens per forward")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)


def lengths(args: argparse.Namespace) -> list[tuple[int, int]]:
    """(prompt, response) lengths of the batch's rows: a tenth at the cap, the rest log-normal."""
    rng = random.Random(args.seed)
    n_cap = max(1, args.rows // 10)
    out = []
    for i in range(args.rows):
        r = args.cap if i < n_cap else rng.lognormvariate(math.log(args.median), args.sigma)
        out.append((rng.randint(32, 96), max(1, min(args.cap, int(r)))))
    rng.shuffle(out)
    return out


def hwm_mb() -> float:
    return harness.peak_rss_mb()


def reset_hwm() -> None:
    try:
        Path("/proc/self/clear_refs").write_text("5")  # resets VmHWM to the current RSS
    except OSError:
        pass


def _side(args: argparse.Namespace, packed: bool) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from vibethinker.train import policy, rl, rl_update
    from vibethinker.train.rollout import build_batch
    from vibethinker.types import Completion

    harness.set_threads(args.threads)
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=args.vocab,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        attn_implementation="sdpa",
    )
    model = Qwen2ForCausalLM(cfg).train()
    g = torch.Generator().manual_seed(args.seed)
    prompts, comps = [], []
    for p, r in lengths(args):
        ids = torch.randint(0, args.vocab, (p + r,), generator=g).tolist()
        prompts.append(ids[:p])
        comps.append(Completion("", ids[p:]))
    batch = build_batch(prompts, comps, pad_id=0)
    adv = torch.randn(len(comps), generator=g)
    rows = torch.arange(len(comps))
    opts = rl.RLConfig(
        micro_batch=args.micro_batch,
        tis_cap=0.0,
        kl_coef=0.0,
        max_tokens_per_micro=args.budget if packed else 0,
    )
    optimizer = policy.make_optimizer(model, 1e-6)
    peaks: list[float] = []
    inner = rl_update._micro_loss

    def timed_micro(*a, **k):  # the previous micro-batch's peak (its forward AND backward)
        if peaks or timed_micro.started:
            peaks.append(hwm_mb())
        timed_micro.started = True
        reset_hwm()
        return inner(*a, **k)

    timed_micro.started = False
    rl_update._micro_loss = timed_micro
    t0, c0 = time.perf_counter(), time.process_time()
    u = rl_update.update(model, optimizer, None, batch, adv, rows, opts)
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    peaks.append(hwm_mb())  # the last micro-batch (and the optimizer step)
    n_tok = int(batch.attention_mask.sum())
    plan = rl_update.plan_micro(rows, batch, opts.micro_batch, opts.max_tokens_per_micro, False)
    positions = sum(len(r) * batch.input_ids.shape[1] for r, _ in plan) if not packed else n_tok
    return {
        "metrics": {
            "tokens_per_s": n_tok / dt,
            "update_s": dt,
            "tokens": n_tok,
            "tokens_per_cpu_s": n_tok / cpu,
            "update_cpu_s": cpu,
            "response_tokens": int(batch.mask.sum()),
            "micro_batches": len(plan),
            "backbone_positions": positions,
            "micro_peak_max_mb": max(peaks),
            "micro_peak_min_mb": min(peaks),
            "loss": u["loss"],
            "grad_norm": u["grad_norm"],
        },
        "config": {
            "packed": packed,
            "vocab": args.vocab,
            "hidden": args.hidden,
            "layers": args.layers,
            "rows": args.rows,
            "cap": args.cap,
            "median": args.median,
            "sigma": args.sigma,
            "micro_batch": opts.micro_batch,
            "budget": opts.max_tokens_per_micro,
            "threads": torch.get_num_threads(),
        },
    }


def side_packed(args: argparse.Namespace, shared: dict) -> dict:
    return _side(args, True)


def side_padded(args: argparse.Namespace, shared: dict) -> dict:
    return _side(args, False)


if __name__ == "__main__":
    harness.main(
        __doc__,
        add_args,
        None,
        {"packed": side_packed, "padded": side_padded},
        headline=("tokens_per_s", "higher"),
    )
