"""The process group: torchrun processes, ranks, barriers, reductions, the work split.

Usable from every layer (training, the rollout engines, stages): nothing here knows about
models. `init(device)` starts the group from torchrun's environment (a no-op without it); files
are written by rank 0 only (`is_main`). Model wrapping (FSDP2 / DDP) and loss scaling are in
train/dist.py, which re-exports these names.
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
from vibethinker.log import progress_bar as log_progress_bar

log = get_logger("dist")
T = TypeVar("T")


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


def progress_bar(total: int, initial: int = 0, desc: str = "") -> Any:
    """log.progress_bar on rank 0; a silent bar on the other processes."""
    from tqdm import tqdm

    return log_progress_bar(total, initial, desc) if is_main() else tqdm(total=total, disable=True)
