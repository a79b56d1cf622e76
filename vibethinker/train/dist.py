"""Distribution in one place: torchrun processes, FSDP2 / DDP wrapping, rank-0 IO, reductions.

Every trainer reads the same with one process or N: it calls `init(device)` (a no-op without
torchrun), `wrap(model, ...)` (returns the model unchanged in one process), takes its share of
the step's work with `shard`, multiplies its loss by `grad_scale()` and sums its logged numbers
with `all_sum`. Files are written by rank 0 only (`is_main`).

- Launch: `torchrun --nproc-per-node N $(which vibethinker) sft ...` (multi-node: torchrun's
  rendezvous, docs/SCALING.md). torchrun sets RANK / WORLD_SIZE / LOCAL_RANK / MASTER_ADDR;
  `init` starts the process group from them: nccl on CUDA (each process on cuda:LOCAL_RANK),
  gloo on CPU (what the tests use).
- Sharding: FSDP2 (`torch.distributed.fsdp.fully_shard`) per decoder layer, then the root;
  parameters stay fp32 (master weights), and on CUDA the compute runs in bf16 with fp32
  gradient reduction (`MixedPrecisionPolicy(bf16, fp32)`); `gradient_checkpointing` recomputes
  each layer's activations. "ddp" (DistributedDataParallel, full replicas) is the fallback for
  what FSDP2 does not apply to (a peft LoRA wrapper: only its adapters train).
- Normalisation: FSDP2 and DDP AVERAGE gradients over the N processes, while our losses are
  sums over the GLOBAL batch divided by its global count (SFT: all assistant tokens of the step;
  MGPO: all N = B x G sequences). Each process therefore scales its loss by N (`grad_scale`), so
  the reduced gradient is exactly the one-process gradient; the global batch, the LR schedule
  and the optimizer see no difference (tests/train/test_dist.py: 2 processes vs 1).
- Collectives need every process to run the same forwards: a process with fewer micro-batches
  than another runs `pad` dummies (a real micro-batch whose loss is multiplied by 0).
"""

from __future__ import annotations

import contextlib
from typing import Any, TypeVar

import torch

from vibethinker.dist import (  # noqa: F401 (the process group, re-exported for the trainers)
    active,
    all_gather_objects,
    all_max,
    all_sum,
    alone,
    barrier,
    broadcast_object,
    init,
    is_main,
    launched,
    local_rank,
    main_first,
    pad,
    progress_bar,
    rank,
    run_on_main,
    shard,
    shutdown,
    world,
)
from vibethinker.log import get_logger

log = get_logger("train.dist")
T = TypeVar("T")
STRATEGIES = ("auto", "fsdp", "ddp")


def grad_scale() -> float:
    """Loss multiplier that turns the processes' averaged gradient back into the sum."""
    return float(world())


# ----------------------------------------------------------------------------- wrapping


def resolve_strategy(strategy: str, model: Any) -> str:
    """The strategy to use: "auto" is FSDP2, or DDP for a peft (LoRA) model."""
    if strategy not in STRATEGIES:
        raise ValueError(f"parallel={strategy!r}: one of {', '.join(STRATEGIES)}")
    if strategy == "auto":
        return "ddp" if hasattr(model, "peft_config") else "fsdp"
    return strategy


def wrap(model: Any, strategy: str = "auto", gradient_checkpointing: bool = False) -> Any:
    """The model ready for N processes: FSDP2-sharded in place (per decoder layer, then the root;
    bf16 compute with fp32 reduction on CUDA) or a DDP replica; unchanged in one process."""
    if not active() or is_wrapped(model):
        return model
    kind = resolve_strategy(strategy, model)
    if gradient_checkpointing and hasattr(model, "gradient_checkpointing_enable"):
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if kind == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        cuda = next(model.parameters()).is_cuda
        ddp = DistributedDataParallel(
            model, device_ids=[local_rank()] if cuda else None, broadcast_buffers=False
        )
        ddp.vt_inner = model
        return ddp
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    cuda = next(model.parameters()).is_cuda
    mp = MixedPrecisionPolicy(torch.bfloat16, torch.float32) if cuda else MixedPrecisionPolicy()
    for layer in decoder_layers(model):
        fully_shard(layer, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    model.vt_fsdp = True
    return model


def decoder_layers(model: Any) -> list[torch.nn.Module]:
    """The repeated blocks to shard one by one (a HF model's `_no_split_modules` classes)."""
    names = set(getattr(model, "_no_split_modules", None) or [])
    found = [m for m in model.modules() if type(m).__name__ in names]
    if not found:  # fall back: the children of the first ModuleList
        lists = [m for m in model.modules() if isinstance(m, torch.nn.ModuleList)]
        found = list(lists[0]) if lists else []
    return found


def is_wrapped(model: Any) -> bool:
    return hasattr(model, "vt_inner") or bool(getattr(model, "vt_fsdp", False))


def is_fsdp(model: Any) -> bool:
    return bool(getattr(model, "vt_fsdp", False))


def inner(model: Any) -> Any:
    """The HF model behind a DDP wrapper (an FSDP2 model is its own inner model)."""
    return getattr(model, "vt_inner", model)


def full_state_dict(model: Any, to_cpu: bool = True) -> dict[str, torch.Tensor]:
    """The whole model's weights on EVERY process (all ranks must call it: it all-gathers the
    FSDP2 shards), plain tensors; the model's own state_dict in one process."""
    m = inner(model)
    if not is_fsdp(m):
        sd = m.state_dict()
        return {k: v.detach().cpu() for k, v in sd.items()} if to_cpu else sd
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    sd = get_model_state_dict(m, options=StateDictOptions(full_state_dict=True))
    return {k: v.detach().cpu() if to_cpu else v.detach() for k, v in sd.items()}


def iter_full_params(model: Any) -> Any:
    """(name, full tensor) of the whole model, one tensor at a time, on the model's own device:
    the stream a rollout engine's weight sync reads. In one process the tensors are the model's
    own (no copy); under FSDP2 each is all-gathered on its own as it is asked for (every process
    must iterate to the end, in the same order), so the peak extra memory is one tensor, not
    the full state dict, and nothing goes through the CPU."""
    m = inner(model)
    for name, t in m.state_dict().items():
        t = t.detach()
        yield name, (t.full_tensor() if hasattr(t, "full_tensor") else t)


def sync_context(model: Any, last: bool) -> Any:
    """Skip the gradient reduction on all but the last micro-batch of a step (gradient
    accumulation without a collective per micro-batch); a null context in one process."""

    if is_fsdp(model):
        model.set_requires_gradient_sync(last)
        return contextlib.nullcontext()
    if hasattr(model, "vt_inner") and not last:
        return model.no_sync()
    return contextlib.nullcontext()


def call(model: Any, fn: Any, *args: Any, **kw: Any) -> Any:
    """`fn(hf_model, *args, **kw)` run INSIDE the model's forward call, so that FSDP2's root
    hooks (all-gather of the embeddings, final norm and LM head; gradient reduction after
    backward) and DDP's reducer fire even though `fn` calls the backbone and the head itself
    (the trainers only send the trained positions through the head). In one process: fn(model)."""
    if not is_wrapped(model):
        return fn(model, *args, **kw)
    hf = inner(model)

    def run(*a: Any, **k: Any) -> Any:
        hf.__dict__.pop("forward", None)  # a nested model(...) inside fn is the real forward
        return fn(hf, *a, **k)

    hf.forward = run  # an instance attribute shadows the method for this one call
    try:
        return model(*args, **kw)
    finally:
        hf.__dict__.pop("forward", None)
