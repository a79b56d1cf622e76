"""Peak memory of one SFT step at the real vocabulary: the whole-logits loss vs the chunked one.

    flock /tmp/heavy.lock env OMP_NUM_THREADS=1 .venv/bin/python benchmarks/sft_memory.py \
        [--tokens 2048,4096,8192,16384] [--sides before,after] [--threads 1] [--json out.json]

A random-weight Qwen2-architecture model with Qwen2.5's vocabulary (151,936; tied embeddings as
Qwen2.5-1.5B), hidden 256, 2 layers (`--hidden`, `--layers`), fp32 on CPU; one SFT step
(`sft.train_step`: forward, backward, then the AdamW step) on one sample of N tokens (10% prompt,
90% trained response; random ids: the tokenizer does not matter to memory). Sides:
- before: the earlier loss, `head(hidden[sel])` over every trained position at once, `.float()`,
  `F.cross_entropy` (kept here as `whole_logits_loss_sum`);
- after: today's `sft.token_loss_sum` (train/chunked.py).
Each (side, N) runs in its own fresh process; the figure is that process's peak resident memory
(VmHWM), with its resident memory once the model and optimizer exist (`rss_model_mb`) so the
growth is visible. A single sample per row keeps attention causal without a mask (sdpa's
memory-lean kernel), so what grows with N is the loss and the activations, not a mask.
`--skip-over-gb`: a side predicted to need more than this (the whole logits: ~3 fp32 copies of
[N, vocab]) is not started and its row says so.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

VOCAB = 151_936


def whole_logits_loss_sum(model: Any, batch: dict[str, Any]):
    """The SFT loss before chunking (train/sft.py until this change), for the 'before' side."""
    import torch.nn.functional as F

    from vibethinker.train.packing import IGNORE
    from vibethinker.train.sft import backbone_and_head

    ids, labels = batch["input_ids"], batch["labels"]
    target = labels[:, 1:]
    sel = target != IGNORE
    kw = {"position_ids": batch["position_ids"], "attention_mask": batch["attention_mask"]}
    base, head = backbone_and_head(model)
    hidden = base(input_ids=ids, use_cache=False, **kw).last_hidden_state
    logits = head(hidden[:, :-1][sel])
    return F.cross_entropy(logits.float(), target[sel], reduction="sum"), int(sel.sum())


def rss_mb() -> float:
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def side(args: argparse.Namespace) -> dict:
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from vibethinker.train import policy, sft
    from vibethinker.train.packing import Sample, collate

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=args.hidden,
        intermediate_size=4 * args.hidden,
        num_hidden_layers=args.layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
        max_position_embeddings=32768,
        attn_implementation="sdpa",
    )
    model = Qwen2ForCausalLM(cfg).train()
    opt = policy.make_optimizer(model, 1e-5)
    n = args.n
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, VOCAB, (n,), generator=g).tolist()
    prompt = n // 10
    batch = collate([Sample(ids, [0] * prompt + [1] * (n - prompt))], [[0]], 0, True)
    if args.side == "before":
        sft.token_loss_sum = whole_logits_loss_sum  # train_step calls it through the module
    rss0 = rss_mb()
    t0, c0 = time.perf_counter(), time.process_time()
    loss, n_loss, _ = sft.train_step(model, [batch], "cpu")
    policy.optimizer_step(model, opt, None, 1.0)
    return {
        "metrics": {
            "peak_rss_mb": harness.peak_rss_mb(),
            "rss_model_mb": rss0,
            "step_s": time.perf_counter() - t0,
            "step_cpu_s": time.process_time() - c0,
            "loss": loss,
            "loss_tokens": n_loss,
        },
        "config": {
            "side": args.side,
            "tokens": n,
            "vocab": VOCAB,
            "hidden": args.hidden,
            "layers": args.layers,
            "threads": torch.get_num_threads(),
        },
    }


def predicted_whole_gb(n: int) -> float:
    return 3 * n * VOCAB * 4 / 1e9


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tokens", default="2048,4096,8192,16384")
    ap.add_argument("--sides", default="before,after")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--hidden", type=int, default=256)
    ap.add_argument("--layers", type=int, default=2)
    ap.add_argument("--skip-over-gb", type=float, default=16.0)
    ap.add_argument("--json", default="")
    ap.add_argument("--side", default="", help=argparse.SUPPRESS)
    ap.add_argument("--n", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.side:
        Path(args.result).write_text(json.dumps(side(args)))
        return
    rows = []
    common = [
        "--threads",
        str(args.threads),
        "--hidden",
        str(args.hidden),
        "--layers",
        str(args.layers),
    ]
    for n in [int(x) for x in args.tokens.split(",")]:
        for s in args.sides.split(","):
            if s == "before" and predicted_whole_gb(n) > args.skip_over_gb:
                harness.say(f"{s} N={n}: skipped (whole logits ~{predicted_whole_gb(n):.0f} GB)")
                rows.append({"side": s, "tokens": n, "skipped": True})
                continue
            cmd = [sys.executable, __file__, *common, "--side", s, "--n", str(n)]
            res = harness.run_side(cmd)
            m = res["metrics"]
            harness.say(
                f"{s} N={n}: peak {m['peak_rss_mb']:.0f} MB (model+opt "
                f"{m['rss_model_mb']:.0f} MB), step {m['step_s']:.1f} s ({m['step_cpu_s']:.1f} CPU s), loss "
                f"{m['loss']:.4f}"
            )
            rows.append({"side": s, "tokens": n, **m})
    out = {"machine": harness.machine(), "rows": rows, "command": " ".join(sys.argv[1:])}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
