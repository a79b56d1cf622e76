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
  and the optimizer see no difference (tests/test_distributed.py: 2 processes vs 1).
- Collectives need every process to run the same forwards: a process with fewer micro-batches
  than another runs `pad` dummies (a real micro-batch whose loss is multiplied by 0).
"""

from __future__ import annotations

import contextlib
import datetime
import os
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

import torch
import torch.distributed as tdist

from vibethinker.log import get_logger

log = get_logger("train.dist")
T = TypeVar("T")
STRATEGIES = ("auto", "fsdp", "ddp")


# ----------------------------------------------------------------------------- process group


def launched() -> bool:
    """True under torchrun (or any launcher that sets WORLD_SIZE > 1)."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


_ALONE = {"depth": 0}


def active() -> bool:
    if _ALONE["depth"]:
        return False
    return tdist.is_available() and tdist.is_initialized() and tdist.get_world_size() > 1


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Run a block on this process as if it were the only one (rank 0 of 1: no collectives, it
    writes its files): how `vibethinker run` under torchrun runs a stage that is not distributed
    (data, eval, ...) on rank 0 while the other processes wait for it (`run_on_main`)."""
    _ALONE["depth"] += 1
    try:
        yield
    finally:
        _ALONE["depth"] -= 1


def run_on_main(fn: Callable[[], T], distributed: bool) -> T | None:
    """`fn()` on every process (`distributed`) or on rank 0 alone while the others wait; then
    every process learns whether it failed anywhere, and a failure elsewhere raises here too
    (so no process waits forever for one that crashed). Returns fn's result (None where it did
    not run)."""
    if not active():
        return fn()
    result = None
    try:
        if distributed:
            result = fn()
        elif is_main():
            with alone():
                result = fn()
    except BaseException as e:  # every process must reach the exchange below
        all_gather_objects(f"{type(e).__name__}: {e}")
        raise
    failed = all_gather_objects("")
    bad = [(r, msg) for r, msg in enumerate(failed) if msg]
    if bad:
        r, msg = bad[0]
        raise RuntimeError(f"process {r} failed: {msg}")
    return result


def rank() -> int:
    return tdist.get_rank() if active() else 0


def world() -> int:
    return tdist.get_world_size() if active() else 1


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0")) if active() else 0


def is_main() -> bool:
    return rank() == 0


def init(device: str = "cpu", timeout_s: float = 3600.0) -> str:
    """Start the process group from torchrun's environment (idempotent; nothing in one process)
    and return the device this process trains on: cuda:LOCAL_RANK under torchrun on CUDA."""
    if not launched():
        return device
    cuda = str(device).startswith("cuda")
    if cuda:
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    if not tdist.is_initialized():
        tdist.init_process_group(
            "nccl" if cuda else "gloo", timeout=datetime.timedelta(seconds=timeout_s)
        )
        log.info("process %d of %d (%s)", rank(), world(), "nccl" if cuda else "gloo")
        if not is_main():  # rank 0 logs; the others only report errors
            import logging

            logging.getLogger("vibethinker").setLevel(logging.ERROR)
    return f"cuda:{local_rank()}" if cuda else device


def barrier() -> None:
    if active():
        tdist.barrier()


def main_first(fn: Any, *args: Any) -> Any:
    """fn(*args) on rank 0 first, then on the others (which find what rank 0 cached on disk: a
    stage's filtered data set); fn(*args) in one process."""
    if not active():
        return fn(*args)
    out = fn(*args) if is_main() else None
    barrier()
    return out if is_main() else fn(*args)


def shutdown() -> None:
    if tdist.is_available() and tdist.is_initialized():
        tdist.destroy_process_group()


# ----------------------------------------------------------------------------- reductions


def all_sum(values: Sequence[float]) -> list[float]:
    """Element-wise sum of `values` over the processes (float64; the input in one process)."""
    if not active():
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    t = _on_backend(t)
    tdist.all_reduce(t, op=tdist.ReduceOp.SUM)
    return t.cpu().tolist()


def all_max(values: Sequence[float]) -> list[float]:
    """Element-wise max of `values` over the processes."""
    if not active():
        return [float(v) for v in values]
    t = _on_backend(torch.tensor([float(v) for v in values], dtype=torch.float64))
    tdist.all_reduce(t, op=tdist.ReduceOp.MAX)
    return t.cpu().tolist()


def all_gather_objects(obj: T) -> list[T]:
    """Every process's `obj`, in rank order (picklable objects; [obj] in one process)."""
    if not active():
        return [obj]
    out: list[Any] = [None] * world()
    tdist.all_gather_object(out, obj)
    return out


def broadcast_object(obj: T) -> T:
    """Rank 0's `obj` on every process."""
    if not active():
        return obj
    box = [obj]
    tdist.broadcast_object_list(box, src=0)
    return box[0]


def _on_backend(t: torch.Tensor) -> torch.Tensor:
    return t.cuda() if tdist.get_backend() == "nccl" else t


# ----------------------------------------------------------------------------- work split


def shard(items: Sequence[T]) -> list[T]:
    """This process's share of `items`: positions rank, rank + N, ... (contiguous ownership is
    not needed: every reduction is a sum or a mean over all of them)."""
    return list(items[rank() :: world()])


def pad(items: list[T], fallback: T | None = None) -> tuple[list[T], int]:
    """`items` padded to the longest share among processes, and how many are real: every
    process then runs the same number of forwards (FSDP and DDP collectives are per forward).
    The padding copies `items[0]`, or `fallback` when this process's share is empty (a step
    with fewer packed micro-batches than processes). The caller multiplies the padding's loss
    by 0."""
    n = len(items)
    most = int(all_max([n])[0])
    if most > n and not items and fallback is None:
        raise ValueError("dist.pad: a process has no work to pad with (more processes than work)")
    filler = items[0] if items else fallback
    return items + [filler] * (most - n), n  # type: ignore[list-item]


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
        ddp = DistributedDataParallel(model, device_ids=[local_rank()] if cuda else None,
                                      broadcast_buffers=False)  # fmt: skip
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


def sync_context(model: Any, last: bool) -> Any:
    """Skip the gradient reduction on all but the last micro-batch of a step (gradient
    accumulation without a collective per micro-batch); a null context in one process."""
    import contextlib

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


def progress_bar(total: int, initial: int = 0, desc: str = "") -> Any:
    """log.progress_bar on rank 0; a silent bar on the other processes."""
    from tqdm import tqdm

    from vibethinker.log import progress_bar as bar

    return bar(total, initial, desc) if is_main() else tqdm(total=total, disable=True)
