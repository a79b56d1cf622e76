"""FSDP2 training step time, throughput and MFU on the paper's architectures (random weights).

    torchrun --nproc-per-node 8 benchmarks/gpu_fsdp.py --size 1.5b --seq-len 8192
    python benchmarks/gpu_fsdp.py --size 3b --seq-len 8192            # one GPU, no sharding
    torchrun --nproc-per-node 2 benchmarks/gpu_fsdp.py --size tiny --device cpu   # smoke test

Builds a Qwen2 model of the 1.5B or 3B shape (Qwen2.5-Math-1.5B / Qwen2.5-3B configs, random
weights: nothing to download), shards it with the trainers' own `train/dist.py` (FSDP2 per
decoder layer, fp32 master weights, bf16 compute on CUDA, optional activation checkpointing),
and times full SFT optimizer steps through the trainers' own loss (`train/sft.token_loss_sum`,
AdamW, clipping) on random tokens: `--micro-batch` rows of `--seq-len` tokens per process per
forward, `--accum` forwards per step. Prints one JSON line (rank 0): the config, the median and
range of step seconds over `--steps` (after `--warmup`), tokens/s over all processes, peak GPU
memory per process, and MFU = 6 * N * tokens/s / (processes * peak FLOP/s) with N the
parameter count (plus the attention term 12 * layers * hidden * seq per token), against
`--peak-tflops` per GPU (989: H100/H200 dense bf16).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

SIZES = {  # Qwen2 shapes: hidden, layers, heads, kv heads, MLP, vocab, tied embeddings
    "1.5b": dict(
        hidden_size=1536,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        intermediate_size=8960,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "3b": dict(
        hidden_size=2048,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        intermediate_size=11008,
        vocab_size=151936,
        tie_word_embeddings=True,
    ),
    "tiny": dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        intermediate_size=128,
        vocab_size=512,
        tie_word_embeddings=True,
    ),
}


def build(size: str, seq_len: int, device: str):
    from transformers import AutoModelForCausalLM, Qwen2Config

    cfg = Qwen2Config(
        **SIZES[size],
        max_position_embeddings=max(seq_len, 4096),
        rope_theta=10000.0,
        use_cache=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            cfg, dtype=torch.float32, attn_implementation="sdpa"
        )
    return model.train(), cfg


def flops_per_token(cfg, n_params: int, seq_len: int) -> float:
    """Training FLOPs per token: 6N (dense) + 12 * layers * hidden * seq (causal attention,
    forward + backward, the usual PaLM accounting)."""
    return 6 * n_params + 12 * cfg.num_hidden_layers * cfg.hidden_size * seq_len


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", choices=sorted(SIZES), default="1.5b")
    ap.add_argument("--seq-len", type=int, default=8192)
    ap.add_argument("--micro-batch", type=int, default=1)
    ap.add_argument("--accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--no-ac", action="store_true", help="no activation checkpointing")
    ap.add_argument("--parallel", default="fsdp", choices=["fsdp", "ddp"])
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    a = ap.parse_args()

    from vibethinker.train import dist, policy, sft

    device = dist.init(a.device)
    model, cfg = build(a.size, a.seq_len, device)
    n_params = sum(p.numel() for p in model.parameters())
    if not a.no_ac:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model = dist.wrap(model, a.parallel)
    opt = policy.make_optimizer(model, 1e-5)
    gen = torch.Generator().manual_seed(1 + dist.rank())
    cuda = device.startswith("cuda")

    def batch():
        ids = torch.randint(0, cfg.vocab_size, (a.micro_batch, a.seq_len), generator=gen)
        pos = torch.arange(a.seq_len).expand(a.micro_batch, -1)
        return {
            "input_ids": ids.to(device),
            "labels": ids.to(device),
            "position_ids": pos.to(device),
            "attention_mask": None,
        }

    times = []
    for step in range(a.warmup + a.steps):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        for i in range(a.accum):
            with dist.sync_context(model, last=i == a.accum - 1):
                with policy.autocast_context(device):
                    loss, n = dist.call(model, sft.token_loss_sum, batch())
                (loss / max(n, 1) * dist.grad_scale() / a.accum).backward()
        policy.optimizer_step(model, opt, None, 1.0)
        if cuda:
            torch.cuda.synchronize()
        if step >= a.warmup:
            times.append(time.perf_counter() - t0)
    tok_step = a.micro_batch * a.seq_len * a.accum * dist.world()
    med = statistics.median(times)
    tps = tok_step / med
    mfu = flops_per_token(cfg, n_params, a.seq_len) * tps / (dist.world() * a.peak_tflops * 1e12)
    mem = torch.cuda.max_memory_allocated() / 2**30 if cuda else None
    mems = dist.all_gather_objects(mem)
    if dist.is_main():
        print(
            json.dumps(
                {
                    "size": a.size,
                    "params": n_params,
                    "processes": dist.world(),
                    "device": device,
                    "gpu": torch.cuda.get_device_name() if cuda else "cpu",
                    "parallel": a.parallel,
                    "seq_len": a.seq_len,
                    "micro_batch": a.micro_batch,
                    "accum": a.accum,
                    "activation_checkpointing": not a.no_ac,
                    "steps": a.steps,
                    "step_s_median": round(med, 4),
                    "step_s_range": [round(min(times), 4), round(max(times), 4)],
                    "tokens_per_step": tok_step,
                    "tokens_per_s": round(tps, 1),
                    "mfu": round(mfu, 4) if cuda else None,
                    "peak_mem_gib_per_process": [round(m, 2) if m else None for m in mems],
                    "date": time.strftime("%Y-%m-%d", time.gmtime()),
                }
            ),
            flush=True,
        )
    dist.shutdown()


if __name__ == "__main__":
    main()
