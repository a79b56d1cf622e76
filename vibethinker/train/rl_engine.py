"""The RL loop's rollout engine and verifier: hf on the trainer's own module, an unsharded copy
under FSDP2, or vLLM (colocated or a server) with the trainer's weights pushed after each step.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from vibethinker import verifiers
from vibethinker.engines import make_sampler
from vibethinker.engines.vllm import RolloutSpec, rollout_sampler
from vibethinker.train import dist
from vibethinker.train.rl_config import RLConfig
from vibethinker.types import Problem


def vllm_spec(opts: RLConfig) -> Any:
    """The vLLM rollout engine's values from the rl config (engines/vllm.RolloutSpec)."""
    return RolloutSpec(
        model=opts.model,
        seed=opts.seed,
        mode=opts.vllm_mode,
        url=opts.vllm_url,
        sync_dir=opts.vllm_sync_dir or str(Path(opts.out) / "engine_weights"),
        sync=opts.vllm_sync,
        sync_host=opts.vllm_sync_host,
        sync_port=opts.vllm_sync_port,
        device=str(opts.device),
        gpu_memory_utilization=opts.vllm_gpu_memory_utilization,
        sleep=opts.vllm_sleep,
        dtype=opts.vllm_dtype,
        rope_yarn_factor=opts.rope_yarn_factor,
        rope_original_len=opts.rope_original_len,
    )


def rollout_engine(model: Any, tokenizer: Any, opts: RLConfig) -> tuple[Any, Callable | None]:
    """(sampler, sync) for the `engine` option. sync() pushes the trainer's weights to the
    engine; the loop calls it at the start and after every optimizer step.

    - hf, one process or DDP: the sampler runs on the trainer's own module (no sync needed).
    - hf under FSDP2: the sharded model cannot sample alone (each forward is a collective), so
      every process samples with an unsharded copy refreshed from the gathered weights.
    - vllm: engines/vllm.py (colocated LLM, or a server), weights pushed in place."""
    engine = opts.engine
    if engine == "vllm":
        sampler = rollout_sampler(vllm_spec(opts), tokenizer)
        return sampler, lambda: sampler.update_weights(dist.iter_full_params(model))
    if engine != "hf":
        raise ValueError(f"rl: engine={engine!r}: the rollout engine is hf or vllm")
    if not dist.is_fsdp(model):
        return make_sampler("hf", model=dist.inner(model), tokenizer=tokenizer), None
    copy = unsharded_copy(model)
    sampler = make_sampler("hf", model=copy, tokenizer=tokenizer)

    def sync() -> None:
        copy.load_state_dict(dist.full_state_dict(model, to_cpu=False), strict=False)

    return sampler, sync


def unsharded_copy(model: Any) -> Any:
    """A plain (unsharded, eval-mode, no-grad) model of the same architecture on this
    process's device; its weights come from `sync`."""
    from transformers import AutoModelForCausalLM

    hf = dist.inner(model)
    device = next(hf.parameters()).device
    copy = AutoModelForCausalLM.from_config(hf.config, dtype=torch.float32)
    copy.generation_config = hf.generation_config
    return copy.to(device).eval().requires_grad_(False)


def default_verify(workers: int) -> Callable[[list[Problem], list[str]], list]:
    def verify(ps, rs):
        return verifiers.verify_batch(ps, rs, workers=workers)

    return verify
