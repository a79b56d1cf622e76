"""Ctrl-C / SIGTERM during training: finish the step, save a checkpoint, then stop.

Inside `deferred()` (the training loops run in it: `@deferring`) the first SIGINT or SIGTERM
only sets a flag; the training loop asks `requested()` after each optimizer step, saves a
checkpoint when it is set (whatever `save_every` says) and raises KeyboardInterrupt (its
`saved` names the checkpoint: a signal anywhere else saved nothing, and the CLI says which), so
running the same command again resumes from that step. A second signal raises at once (nothing more is saved). Under torchrun every process
asks `requested()` at the same point and they agree (one process's signal stops them all at the
same step). Outside the main thread the loop behaves as before (KeyboardInterrupt where it
lands); a signal the process ignores (a background job) stays ignored.
"""

from __future__ import annotations

import contextlib
import functools
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

from vibethinker.log import get_logger
from vibethinker.train import dist

log = get_logger("train.interrupt")
_state = {"signal": 0, "depth": 0}


def _handler(signum: int, frame: Any) -> None:
    if _state["signal"]:  # the second signal: stop now
        raise KeyboardInterrupt(f"signal {signum} (again)")
    _state["signal"] = signum
    log.warning("interrupted: finishing this step and saving a checkpoint (again to stop now)")


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Defer SIGINT/SIGTERM to the end of the current training step (re-entrant)."""
    if threading.current_thread() is not threading.main_thread() or _state["depth"]:
        _state["depth"] += 1
        try:
            yield
        finally:
            _state["depth"] -= 1
        return
    old = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    old = {s: h for s, h in old.items() if h is not signal.SIG_IGN}  # ignored stays ignored
    _state.update(signal=0, depth=1)
    for s in old:
        signal.signal(s, _handler)
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)
        _state.update(signal=0, depth=0)


def deferring(fn: Callable) -> Callable:
    """Run `fn` (a training loop that asks `requested()` after each step) inside `deferred()`."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kw: Any) -> Any:
        with deferred():
            return fn(*args, **kw)

    return wrapper


def requested() -> bool:
    """Whether a signal arrived in any process (a collective under torchrun: call it at the same
    point on every process)."""
    return bool(dist.all_max([1.0 if _state["signal"] else 0.0])[0])


def stop(step: int, where: Any = "") -> None:
    """Raise the KeyboardInterrupt the deferred signal stands for, after the checkpoint (in
    `where`). The exception says so (`saved`): a signal that lands anywhere else (loading a
    model, the RL prompt filter) saved nothing, and the CLI must not claim otherwise."""
    saved = f"step {step}" + (f" in {where}" if where else "")
    log.warning("checkpoint saved at %s; run the same command again to resume", saved)
    e = KeyboardInterrupt(f"interrupted after step {step} (checkpoint saved)")
    e.saved = saved  # type: ignore[attr-defined]
    raise e
