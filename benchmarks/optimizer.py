"""AdamW step time on CPU: the fused kernel (what `train.policy.make_optimizer` builds, and
transformers' Trainer default `adamw_torch_fused`) against torch's default implementation, on
the parameters of the random-weight Qwen2 presets.

    .venv/bin/python benchmarks/optimizer.py [--sizes 1m,30m] [--steps 10] [--threads 1]

One process, both variants on the same parameters and gradients, alternating, `--steps` timed
steps each after a warm-up; median and range per variant. Ours only (no peer: TRL steps with the
fused kernel already).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1m,30m")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args(argv)
    import torch
    from transformers import Qwen2ForCausalLM

    from vibethinker.models.tiny import tiny_config

    harness.set_threads(args.threads)
    out = {}
    for size in args.sizes.split(","):
        model = Qwen2ForCausalLM(tiny_config(size, 512))  # the presets' shapes, vocabulary 512
        params = list(model.parameters())
        for p in params:
            p.grad = torch.randn_like(p)
        opts = {
            "fused": torch.optim.AdamW(params, lr=1e-5, fused=True),
            "default": torch.optim.AdamW(params, lr=1e-5),
        }
        ts: dict[str, list[float]] = {k: [] for k in opts}
        for o in opts.values():
            o.step()  # warm-up (state allocation)
        for _ in range(args.steps):
            for k, o in opts.items():
                t0 = time.perf_counter()
                o.step()
                ts[k].append(time.perf_counter() - t0)
        n = sum(p.numel() for p in params)
        out[size] = {"params": n, **{k: harness.summarize(v) for k, v in ts.items()}}
        ratio = out[size]["default"]["median"] / out[size]["fused"]["median"]
        print(
            f"{size} ({n:,} params): AdamW step fused {harness.fmt(out[size]['fused'])} s, "
            f"default {harness.fmt(out[size]['default'])} s; default / fused {ratio:.2f}x",
            flush=True,
        )
    return out


if __name__ == "__main__":
    main()
