"""Weight sync into a colocated vLLM engine: the old path (the trainer's full state dict gathered
and copied to the CPU, then handed over as one list) against the stream (`dist.iter_full_params`:
each tensor straight from the trainer's parameter into vLLM's, on its own device).

    .venv-vllm/bin/python benchmarks/weight_sync.py [--model tiny|qwen0.5b] [--dtype float32]
        [--syncs 5] [--threads 2] [--repeats 3] [--sides gather,stream]

Run it with the vLLM environment's python (`make vllm-env`). `qwen0.5b` is a random-weight model
of Qwen2.5-0.5B's shape (24 layers, hidden 896, 14/2 heads, FFN 4864, vocabulary 151,936, tied
embeddings; 494M parameters), `tiny` the 1M demo model. Each side builds the engine as the rl
stage does (in-process engine core, eager on CPU), perturbs the trainer, syncs `--syncs` times
and reports the median seconds per sync, then checks that the engine's sampled-token logprobs
equal the trainer's (the sync really happened). On this CPU both paths read the same memory (a
`.cpu()` of a CPU tensor is free), so the difference here is the full-list materialisation only;
on a GPU the old path also copied every tensor to the host and back, which this machine cannot
show.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

QWEN05 = dict(
    hidden_size=896,
    intermediate_size=4864,
    num_hidden_layers=24,
    num_attention_heads=14,
    num_key_value_heads=2,
    vocab_size=151936,
    tie_word_embeddings=True,
    max_position_embeddings=4096,
    rope_theta=1000000.0,
)


def add_args(ap) -> None:
    ap.add_argument("--model", default="tiny", choices=("tiny", "qwen0.5b"))
    ap.add_argument("--dtype", default="float32")
    ap.add_argument("--syncs", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)


def prepare(args, work: Path) -> dict:
    import torch
    from transformers import AutoTokenizer, Qwen2Config, Qwen2ForCausalLM

    from vibethinker.models.tiny import build_tiny_model

    texts = [f"Compute {i}+{i}. <think>{i}+{i}={2 * i}</think>\\boxed{{{2 * i}}}" for i in range(8)]
    tiny = build_tiny_model(work / "tiny", texts * 4, "1m", 300, 0)
    if args.model == "tiny":
        return {"model": tiny}
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**QWEN05))
    model.save_pretrained(work / "qwen05")
    AutoTokenizer.from_pretrained(tiny).save_pretrained(work / "qwen05")
    return {"model": str(work / "qwen05")}


def _side(args, shared: dict, stream: bool) -> dict:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
    harness.set_threads(args.threads)
    import torch

    from vibethinker.engines import SamplingParams
    from vibethinker.engines.vllm import VLLMSampler
    from vibethinker.train import dist, policy
    from vibethinker.train.rollout import build_batch, response_logprobs

    model, tok = policy.load_policy(shared["model"], "cpu")
    model.eval()
    engine = VLLMSampler(shared["model"], dtype=args.dtype, seed=0, enforce_eager=True)
    torch.manual_seed(1)
    times = []
    for _ in range(args.syncs):
        with torch.no_grad():
            for p in model.parameters():
                p.add_(1e-3 * torch.randn_like(p))
        t0 = time.perf_counter()
        if stream:
            engine.update_weights(dist.iter_full_params(model))
        else:  # the old path: full state dict, copied to the CPU, one list
            engine.update_weights(list(dist.full_state_dict(model).items()))
        times.append(time.perf_counter() - t0)
    prompts = ["Compute 3+3.", "Compute 5+5."]
    outs = engine.generate(prompts, 2, SamplingParams(max_new_tokens=8, seed=0, top_p=1.0))
    comps = [c for cs in outs for c in cs]
    b = build_batch([engine.encode(p) for p in prompts for _ in range(2)], comps, 0)
    with torch.no_grad():
        lp, _ = response_logprobs(model, b)
    gap = float((b.engine_logp - lp)[b.mask].abs().max())
    n_params = sum(p.numel() for p in model.parameters())
    cfg = {"path": "stream" if stream else "gather", "dtype": args.dtype, "model": args.model}
    cfg.update(params=n_params, threads=args.threads)
    metrics = {"sync_s": statistics.median(times), "max_logp_gap_after": gap}
    return {"config": cfg, "metrics": metrics}


def side_gather(args, shared: dict) -> dict:
    return _side(args, shared, False)


def side_stream(args, shared: dict) -> dict:
    return _side(args, shared, True)


if __name__ == "__main__":
    harness.main(
        __doc__,
        add_args,
        prepare,
        {"gather": side_gather, "stream": side_stream},
        headline=("sync_s", "lower"),
    )
