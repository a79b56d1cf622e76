"""Each stage type's memory phases, from its resolved config (recipe.py builds the configs).

A stage runs in phases whose memory is not alive at the same time (the RL loop samples, then
updates; distill samples, scores, then fine-tunes); its peak is the largest phase. Estimators are
named functions in `ESTIMATORS`; a stage type without one needs no accelerator (data, model,
construct, verify).

Choices the stage configs do not fix (our defaults, `Context`): prompts are `prompt_tokens` long
(2K, as the recipes' 64K - 2K caps assume); every SFT token is counted as trained (the upper
bound: the LM head sees at most all positions); a checkpoint we wrote loads in fp32 (saved from
fp32 master weights), a hub model in bf16; a colocated or standalone vLLM takes its
`gpu_memory_utilization` of the device (0.9 where the config has none, vLLM's default).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibethinker.plan.memory import (
    GIB,
    Phase,
    Step,
    activations,
    hf_sampling,
    kv_cache,
    layer_act_bytes,
    train_phase,
    train_state,
)
from vibethinker.plan.shapes import ModelShape, lookup, resolve
from vibethinker.train.chunked import chunk_size

HF_BUDGET = 1 << 17  # engines/hf.py HFSampler's default token budget
VLLM_UTIL = 0.9  # vLLM's default gpu_memory_utilization


@dataclass(frozen=True)
class Context:
    """What the plan is for: the devices, and the recipe's base model as the fallback shape."""

    base: ModelShape | None  # the recipe's `model:` (stages' not-yet-written folders share it)
    gpus: int = 1  # processes (one per GPU) under torchrun for the training stages
    mem: float = 80 * GIB  # bytes per device
    cuda: bool = True  # False: CPU fp32 (what plan_check measures)
    prompt_tokens: int = 2048  # assumed prompt length of sampled / RL rows


def _shape(model: str, ctx: Context, where: str) -> ModelShape:
    return resolve(model, ctx.base, where)


def infer_bytes(model: str, ctx: Context, dtype: str = "auto") -> float:
    """Bytes per weight of a sampling engine: fp32 on CPU; the config's dtype when given; else
    the checkpoint's (config.json), bf16 for a hub id, fp32 for a folder we will write."""
    if not ctx.cuda:
        return 4.0
    if dtype in ("bfloat16", "bf16", "float16", "fp16", "half"):
        return 2.0
    if dtype in ("float32", "fp32"):
        return 4.0
    cfg = Path(model) / "config.json"
    if cfg.is_file():
        saved = json.loads(cfg.read_text())
        saved = str(saved.get("torch_dtype") or saved.get("dtype") or "float32")
        return 4.0 if "32" in saved else 2.0
    return 2.0 if lookup(model) is not None else 4.0


def sampling_phase(
    name: str,
    model: str,
    engine: str,
    max_new: int,
    ctx: Context,
    budget: int = HF_BUDGET,
    dtype: str = "auto",
    where: str = "",
) -> Phase:
    """One engine holding `model` and sampling up to prompt + max_new tokens per row."""
    s = _shape(model, ctx, where)
    if engine == "openai":
        return Phase(f"{name} (remote server)")
    if engine == "vllm":
        return vllm_phase(name, s, max_new, VLLM_UTIL, ctx)
    b = infer_bytes(model, ctx, dtype)
    ph = Phase(name).add(f"weights ({'bf16' if b == 2 else 'fp32'})", b * s.params())
    for t in hf_sampling(s, ctx.prompt_tokens, max_new, budget, b):
        ph.add(t.name, t.bytes)
    return ph


def vllm_phase(name: str, s: ModelShape, max_new: int, util: float, ctx: Context) -> Phase:
    """vLLM takes `util` of the device and sizes its KV cache to the rest; it refuses to start
    when bf16 weights plus one full-length sequence's KV cache exceed that share."""
    ph = Phase(name).add(f"vLLM (gpu_memory_utilization {util})", util * ctx.mem)
    need = 2.0 * s.params() + kv_cache(s, ctx.prompt_tokens + max_new, 2.0)
    return ph.add("vLLM short of weights + one sequence's KV", need - util * ctx.mem)


def _chunk(s: ModelShape) -> int:
    """Positions per LM-head chunk: the trainers always chunk a plain linear head
    (train/chunked.py), `LOGITS_BUDGET // vocab` positions at a time."""
    return chunk_size(s.vocab)


def _train_gpus(cfg: Any, ctx: Context) -> int:
    """FSDP2 shards over the processes unless LoRA (DDP replicas) or parallel=ddp."""
    lora = getattr(cfg, "lora_r", 0)
    return 1 if lora or getattr(cfg, "parallel", "auto") == "ddp" else ctx.gpus


def _sft_step_phase(cfg: Any, s: ModelShape, ctx: Context, name: str = "update") -> Phase:
    rows = cfg.micro_batch
    step = Step(
        rows,
        cfg.max_len,
        rows * cfg.max_len,
        _chunk(s),
        cfg.gradient_checkpointing,
        masked=getattr(cfg, "pack", True),
        lora_r=getattr(cfg, "lora_r", 0),
    )
    return train_phase(s, step, _train_gpus(cfg, ctx), ctx.cuda, name)


def est_sft(cfg: Any, ctx: Context) -> list[Phase]:
    s = _shape(cfg.model, ctx, "sft.model")
    phases = [_sft_step_phase(cfg, s, ctx)]
    if cfg.filter_ref_model:
        phases.append(
            sampling_phase(
                "stage-2 filter rollouts",
                cfg.filter_ref_model,
                cfg.filter_engine,
                cfg.filter_max_new_tokens,
                ctx,
                where="sft.filter_ref_model",
            )
        )
    return phases


def rl_micro_rows(cfg: Any, seq: int, gpus: int) -> int:
    """Rows per RL forward: `max_tokens_per_micro` tokens of rows when the config has it (at
    least one row), else `micro_batch`; never more than the device's share of the step."""
    per_device = max(1, cfg.prompts_per_step * cfg.group_size // gpus)
    budget = int(getattr(cfg, "max_tokens_per_micro", 0) or 0)
    rows = max(1, budget // seq) if budget else cfg.micro_batch
    return min(rows, per_device)


def est_rl(cfg: Any, ctx: Context) -> list[Phase]:
    s = _shape(cfg.model, ctx, "rl.model")
    gpus = _train_gpus(cfg, ctx)
    seq = ctx.prompt_tokens + cfg.max_new_tokens
    rows = rl_micro_rows(cfg, seq, gpus)
    step = Step(
        rows,
        seq,
        rows * cfg.max_new_tokens,
        _chunk(s),
        cfg.gradient_checkpointing,
        gather=True,
        lora_r=cfg.lora_r,
    )
    upd = train_phase(s, step, gpus, ctx.cuda)
    if cfg.kl_coef or cfg.log_ref_kl:
        upd.add("frozen reference model (fp32)", 4.0 * s.params())
    roll = Phase("rollout", train_state(s, gpus, False, cfg.lora_r, grads="none"))
    colocated = cfg.engine == "vllm" and cfg.vllm_mode == "colocate"
    if cfg.engine == "hf":
        if gpus > 1:
            roll.add("unsharded fp32 copy for sampling", 4.0 * s.params())
        for t in hf_sampling(s, ctx.prompt_tokens, cfg.max_new_tokens, HF_BUDGET, 4.0):
            roll.add(t.name, t.bytes)
    elif colocated:
        util = cfg.vllm_gpu_memory_utilization
        vllm = vllm_phase("", s, cfg.max_new_tokens, util, ctx)
        roll.terms += vllm.terms
        if not (cfg.vllm_sleep and ctx.cuda):
            upd.add("vLLM, awake during the update (vllm_sleep off)", util * ctx.mem)
    return [roll, upd]


def est_distill(cfg: Any, ctx: Context) -> list[Phase]:
    s = _shape(cfg.student, ctx, "distill.student")
    phases = [
        sampling_phase(
            f"sample ({t.get('domain', '?')})",
            t.get("model", ""),
            cfg.engine,
            cfg.max_new_tokens,
            ctx,
            where="distill.teachers",
        )
        for t in cfg.teachers
    ]
    n = cfg.score_tokens
    score = Phase("S_LP scoring").add("student weights (fp32)", 4.0 * s.params())
    score.add(f"dense tree mask ({n}^2, bool)", float(n) * n)
    score.add("one layer's activations (no grad)", layer_act_bytes(s, ctx.cuda) * n)
    score.add("LM head chunk (no grad)", 8.0 * min(n, _chunk(s)) * s.vocab)
    phases.append(score)
    phases.append(_sft_step_phase(cfg, s, ctx, "student SFT"))
    return phases


def rm_micro_pairs(cfg: Any) -> int:
    """Pairs per reward-model forward: `max_tokens_per_micro` padded tokens of max_len-long
    chosen + rejected rows when the config has it (at least one pair), else `micro_batch`
    (an older config without it: the whole `batch`); never more than the step's `batch`."""
    budget = int(getattr(cfg, "max_tokens_per_micro", 0) or 0)
    pairs = max(1, budget // (2 * cfg.max_len)) if budget else getattr(cfg, "micro_batch", 0)
    return min(pairs or cfg.batch, cfg.batch)


def est_reward_model(cfg: Any, ctx: Context) -> list[Phase]:
    """One micro-batch's chosen and rejected rows in one forward ([2 x pairs, max_len]), with or
    without checkpointing, in one process (no FSDP), one-logit head (no vocabulary term). All
    gradients count: from the second micro-batch of a step on, the earlier ones' are held."""
    s = _shape(cfg.model, ctx, "reward_model.model")
    rows = 2 * rm_micro_pairs(cfg)
    ckpt = bool(getattr(cfg, "gradient_checkpointing", False))
    ph = Phase("update", train_state(s, 1, ctx.cuda, ckpt=ckpt))
    kept = ", checkpointed" if ckpt else ""
    ph.add(
        f"activations ({rows} x {cfg.max_len} tok{kept})",
        activations(s, rows * cfg.max_len, ckpt, ctx.cuda),
    )
    return [ph]


def est_probe_merge(cfg: Any, ctx: Context) -> list[Phase]:
    folder = cfg.checkpoints[0] if cfg.checkpoints else (cfg.sft[0] if cfg.sft else "")
    return [
        sampling_phase("probe sampling", folder, "hf", cfg.max_new_tokens, ctx, where="probe_merge")
    ]


def est_eval(cfg: Any, ctx: Context) -> list[Phase]:
    return [
        sampling_phase(
            "sampling",
            cfg.model,
            cfg.engine,
            cfg.max_new_tokens or 32768,
            ctx,
            cfg.token_budget,
            cfg.dtype,
            "eval.model",
        )
    ]


def est_headline(cfg: Any, ctx: Context) -> list[Phase]:
    model = cfg.models[0].get("model", "") if cfg.models else ""
    return [
        sampling_phase(
            "sampling (per model)",
            model,
            cfg.engine,
            cfg.max_new_tokens,
            ctx,
            cfg.token_budget,
            cfg.dtype,
            "headline.models",
        )
    ]


def est_clr(cfg: Any, ctx: Context) -> list[Phase]:
    return [
        sampling_phase(
            "sampling",
            cfg.model,
            cfg.engine,
            cfg.max_new_tokens,
            ctx,
            getattr(cfg, "token_budget", HF_BUDGET),
            "auto",
            "clr.model",
        )
    ]


ESTIMATORS: dict[str, Callable[[Any, Context], list[Phase]]] = {
    "sft": est_sft,
    "rl": est_rl,
    "distill": est_distill,
    "reward_model": est_reward_model,
    "probe_merge": est_probe_merge,
    "eval": est_eval,
    "headline": est_headline,
    "clr": est_clr,
}
