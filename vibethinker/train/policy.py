"""The training core shared by SFT, RL and self-distillation: load, optimise, schedule, checkpoint.

- `load_policy`: a causal LM + tokenizer from a local folder or hub id, in train mode. Weights are
  fp32 everywhere; on GPU the forward runs under bf16 autocast (`autocast_context`), which keeps
  fp32 master weights so that the paper's tiny final LR (8e-8) still moves them (pure bf16
  weights would round such updates away). fp32 on CPU: bf16 was ~2x slower there (our calibration).
- `lr_at`: linear warm-up over a fraction of the steps, then cosine decay from the peak to a final
  LR (the paper: 5e-5 -> 8e-8 with 5% warm-up). A pure function; `make_scheduler` wraps it.
- `optimizer_step`: clip the global grad norm, step AdamW and the schedule, zero the grads.
- Checkpoints (saving, pruning, resuming, `start_or_resume`) are in `train/checkpoints.py`.
- `apply_lora` (an option; full fine-tuning is the default, as in the paper): peft LoRA adapters;
  checkpoints and `final` are then saved merged (plain HF folders) with the adapter in `adapter/`
  (`checkpoints.save_hf`).
"""

from __future__ import annotations

import contextlib
import math
import os
import random
from typing import Any

import numpy as np
import torch

from vibethinker.log import get_logger
from vibethinker.models import load_model_and_tokenizer
from vibethinker.train import dist

log = get_logger("train.policy")


# ----------------------------------------------------------------------------- loading


def default_device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def resolve_device(device: str | None) -> str:
    """A stage's `device` option: "auto" (or empty) -> cuda when available, else cpu. Under
    torchrun this is where the process group starts (`dist.init`): every process then trains on
    its own device (cuda:LOCAL_RANK), and the stages need no code of their own for it."""
    return dist.init(default_device() if device in (None, "", "auto") else device)


def load_policy(
    name_or_path: str | os.PathLike,
    device: str | None = None,
    gradient_checkpointing: bool = False,
    attn_implementation: str | None = None,
    **load_kw: Any,
) -> tuple[Any, Any]:
    """(model, tokenizer) ready to train: fp32 weights on `device`, train mode, no KV cache.
    `load_kw` go to the loader (e.g. rope_yarn_factor, rope_original_len)."""
    device = device or default_device()
    kw = {"attn_implementation": attn_implementation} if attn_implementation else {}
    kw.update(load_kw)
    model, tokenizer = load_model_and_tokenizer(name_or_path, device=device, dtype="float32", **kw)
    model.config.use_cache = False  # a training forward never needs the KV cache
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    model.train()
    return model, tokenizer


def autocast_context(device: str | torch.device) -> contextlib.AbstractContextManager:
    """bf16 autocast on CUDA (fp32 master weights), nothing on CPU."""
    if str(device).startswith("cuda"):
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


# ----------------------------------------------------------------------------- LoRA (option)


def apply_lora(model: Any, r: int, alpha: float, targets: str = "all-linear") -> Any:
    """Wrap `model` in peft LoRA adapters of rank `r` (only they train); r=0 (full fine-tuning,
    the paper's setting) returns it unchanged. `targets`: "all-linear" or a comma list of module
    names (q_proj,v_proj,...)."""
    if r <= 0:
        return model
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError as e:
        raise ImportError("lora_r > 0 needs peft: pip install 'vibethinker[lora]'") from e
    names = targets if targets == "all-linear" else [t.strip() for t in targets.split(",")]
    conf = LoraConfig(r=r, lora_alpha=alpha, target_modules=names, task_type="CAUSAL_LM")
    model = get_peft_model(model, conf)
    n_train = sum(p.numel() for p in model.parameters() if p.requires_grad)
    n_all = sum(p.numel() for p in model.parameters())
    log.info(
        "LoRA r=%d alpha=%g on %s: %d of %d parameters train", r, alpha, targets, n_train, n_all
    )
    return model


def is_lora(model: Any) -> bool:
    return hasattr(model, "peft_config") and hasattr(model, "merge_and_unload")


# ----------------------------------------------------------------------------- schedule


def lr_at(step: int, total: int, peak: float, final: float, warmup_frac: float) -> float:
    """LR for optimizer step `step` (0-based) of `total`.

    Warm-up: steps 0..W-1 rise linearly to the peak, step i gets peak*(i+1)/W, W =
    ceil(warmup_frac*total) (so the first step already trains). Then cosine from the peak at step
    W down to `final` at the last step (total-1). The paper: peak 5e-5, final 8e-8, 5% warm-up.
    """
    if total <= 0:
        raise ValueError(f"total steps must be positive, got {total}")
    warm = math.ceil(warmup_frac * total) if warmup_frac > 0 else 0
    if step < warm:
        return peak * (step + 1) / warm
    decay = total - 1 - warm
    if decay <= 0:
        return peak
    t = min(max(step - warm, 0), decay) / decay
    return final + 0.5 * (peak - final) * (1.0 + math.cos(math.pi * t))


def make_optimizer(
    model: Any,
    lr: float,
    weight_decay: float = 0.0,
    betas: tuple[float, float] = (0.9, 0.999),
    eps: float = 1e-8,
) -> torch.optim.AdamW:
    """AdamW over the trainable parameters. The paper does not give betas or weight decay; these
    are PyTorch's defaults with no decay (a common SFT choice)."""
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.optim.AdamW(
        params, lr=lr, weight_decay=weight_decay, betas=betas, eps=eps, fused=_fused_ok(params)
    )


def _fused_ok(params: list[torch.Tensor]) -> bool | None:
    """True where AdamW's fused kernel (one call for every tensor) applies: parameters all on
    CUDA or all on the CPU (torch >= 2.4 has the CPU kernel: 3-4x the default's speed there, and
    it is transformers' Trainer default `adamw_torch_fused`, so TRL steps with it; FSDP2's shards
    take it too). Same update either way, to rounding."""
    kinds = {p.device.type for p in params}
    return True if kinds in ({"cuda"}, {"cpu"}) else None


def make_scheduler(
    optimizer: torch.optim.Optimizer, total: int, peak: float, final: float, warmup_frac: float
) -> torch.optim.lr_scheduler.LambdaLR:
    """A LambdaLR whose LR at step s is `lr_at(s, ...)` (the optimizer's base LR must be `peak`)."""
    for g in optimizer.param_groups:
        g["lr"] = g["initial_lr"] = peak
    return torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: lr_at(s, total, peak, final, warmup_frac) / peak if peak else 0.0
    )


def optimizer_step(
    model: Any,
    optimizer: torch.optim.Optimizer,
    scheduler: Any | None = None,
    max_grad_norm: float | None = 1.0,
) -> float:
    """Clip the global grad norm, step, advance the schedule, zero grads; the pre-clip norm.
    A NaN or infinite norm raises `NonFiniteError` BEFORE the step: the weights stay those of
    the step before (a diverged update would make every later step NaN, silently)."""
    params = [p for p in model.parameters() if p.grad is not None]
    if max_grad_norm and max_grad_norm > 0:
        norm = torch.nn.utils.clip_grad_norm_(params, max_grad_norm)
    else:
        norm = (
            torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
            if params
            else torch.tensor(0.0)
        )
    if not math.isfinite(float(norm)):  # the norm is global: every process agrees
        optimizer.zero_grad(set_to_none=True)
        raise NonFiniteError(f"the gradient norm is {float(norm)}")
    optimizer.step()
    if scheduler is not None:
        scheduler.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)


class NonFiniteError(ValueError):
    """A NaN or infinite loss or gradient norm: training stops rather than go on with NaN."""


def check_finite(what: str, value: float) -> None:
    """Raise `NonFiniteError` when `value` (a step's loss) is NaN or infinite."""
    if not math.isfinite(value):
        raise NonFiniteError(f"the {what} is {value}")


def diverged(e: NonFiniteError, stage: str, step: int, lr: float, out: Any) -> NonFiniteError:
    """`e` with what a person needs: the stage, the step, the advice, what stays on disk."""
    return NonFiniteError(
        f"{stage}: training diverged at step {step}: {e}; that step's update was not applied "
        f"and nothing after it was saved (the last good checkpoint stays in {out}/checkpoints). "
        f"Lower the learning rate (lr={lr:g}) or set max_grad_norm, and run again with a new "
        "out= (a resume with the same options diverges again)"
    )


def current_lr(optimizer: torch.optim.Optimizer) -> float:
    return float(optimizer.param_groups[0]["lr"])


# ----------------------------------------------------------------------------- RNG


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def rng_state() -> dict[str, Any]:
    state = {
        "python": random.getstate(),
        "numpy": np.random.get_state(),
        "torch": torch.get_rng_state(),
    }
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])
