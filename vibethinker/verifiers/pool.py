"""Worker processes and threads that run verifier calls under hard timeouts.

- `WorkerPool`: fresh interpreters (see _BOOT) serving picklable calls; an item that overruns
  its deadline gets its worker killed and replaced, and comes back as ("timeout", None). For
  CPU-bound checks in Python (sympy), which no thread can interrupt.
- `run_threads`: daemon threads, each item in a sandbox CancelScope (its sandbox is killed when
  it overruns); for verifiers that isolate their work in subprocesses or wait on I/O.
- `guarded_call(fn, args, timeout)`: one call in a private worker (the math verifier's path for
  expressions it cannot judge by its fast rules).

Knows nothing of domains: the per-domain dispatch is batch.py, the registry registry.py.
"""

from __future__ import annotations

import atexit
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any

from vibethinker.sandbox.base import CancelScope, cancel_scope
from vibethinker.types import Score
from vibethinker.verifiers.math_equiv import warm_up

log = logging.getLogger(__name__)

CANCEL_GRACE_S = 10.0  # a cancelled item's thread has this long to come back before a new one
STARTUP_TIMEOUT_S = 60.0  # a fresh worker imports sympy and warms up math-verify (~2 s idle)
# A worker that misses its start-up allowance is replaced and its items requeue without a verdict
# (a "timeout" there would score a right answer wrong on a loaded host); each miss doubles the
# allowance, and after this many misses in one map the first item is scored "timeout" as before.
MAX_COLD_MISSES = 3
WORKER_MEMORY_MB = 4096  # address-space cap per worker: a memory bomb fails inside the worker

_STATE = {"guarded": False}


def in_guarded_worker() -> bool:
    """True inside a pool worker: the caller is already under a hard timeout."""
    return _STATE["guarded"]


# A worker is a fresh interpreter, not a fork: it shares no threads, locks or state with the
# caller, and never re-imports the caller's __main__ (as spawn/forkserver children do, which breaks
# scripts without a main guard and re-imports torch in every worker).
_BOOT = "from vibethinker.verifiers.pool import _worker_main; _worker_main()"
# third-party imports paid before the first deadline; the verifiers themselves come with the
# package (_BOOT imports vibethinker.verifiers, whose __init__ imports the registry)
_PRELOAD = ("math_verify", "sympy")


def _die_with_parent() -> None:
    """Linux: SIGKILL this worker when its parent dies, even mid-way through a stuck check."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        if os.getppid() == 1:  # the parent died before prctl took effect
            os._exit(0)
    except (OSError, AttributeError):
        pass  # elsewhere: the worker still exits at EOF on stdin once it is idle


def _worker_main() -> None:
    """Serve (fn, args) requests read from stdin; answer (ok, value) on the original stdout."""
    import importlib
    import logging

    _STATE["guarded"] = True
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's business
    _die_with_parent()
    out_fd = os.dup(1)
    os.dup2(2, 1)  # stray prints from verifier code go to stderr, not into the channel
    rx, tx = Connection(0, writable=False), Connection(out_fd, readable=False)
    memory_mb = int(os.environ.get("VIBETHINKER_WORKER_MEMORY_MB", "0"))
    if memory_mb:
        try:
            import resource

            lim = memory_mb * 2**20
            resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        except (ImportError, ValueError, OSError):
            pass
    for name in ("math_verify", "latex2sympy2_extended"):
        logging.getLogger(name).setLevel(logging.CRITICAL)  # parse failures are verdicts here
    for mod in _PRELOAD:
        try:
            importlib.import_module(mod)
        except ImportError:
            pass
    try:  # the first math-verify call costs ~1.5 s (lazy imports): pay it before any deadline
        warm_up()  # math_equiv: below math.py, which calls this pool
    except Exception:  # noqa: BLE001 -- a cold worker still works, only slower
        pass
    tx.send((None, "ready"))
    while True:
        try:
            msg = rx.recv()
        except (EOFError, OSError):
            return  # parent went away
        if msg is None:
            return
        fn, chunk = msg
        for args in chunk:  # one answer per item, as soon as it is done: the parent's clock
            try:  # for the next item starts at this answer
                out: tuple[bool, Any] = (True, fn(*args))
            except BaseException as e:  # noqa: BLE001 -- a worker reports, never dies, on errors
                out = (False, (type(e).__name__, str(e)[:2000]))
            try:
                tx.send(out)
            except (OSError, ValueError):
                return


class _Worker:
    def __init__(self, memory_mb: int | None):
        env = dict(os.environ)
        # same imports as the caller ('' on sys.path means its working directory)
        env["PYTHONPATH"] = os.pathsep.join(p or os.getcwd() for p in sys.path)
        env["VIBETHINKER_WORKER_MEMORY_MB"] = str(memory_mb or 0)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _BOOT],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            start_new_session=True,  # killpg also takes anything it started
        )
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.tx = Connection(os.dup(self.proc.stdin.fileno()), readable=False)
        self.rx = Connection(os.dup(self.proc.stdout.fileno()), writable=False)
        self.proc.stdin.close()
        self.proc.stdout.close()
        self.ready = False  # set when the worker has imported and warmed up

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.tx.close()
        self.rx.close()


class WorkerPool:
    """A fixed number of worker processes running picklable functions under hard timeouts."""

    def __init__(self, workers: int = 2, memory_mb: int | None = WORKER_MEMORY_MB):
        self.size = max(1, workers)
        self.memory_mb = memory_mb
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()  # one map() at a time per pool

    def map(
        self,
        fn: Callable[..., Any],
        args_list: Sequence[tuple],
        timeout: float | Sequence[float],
        on_done: Callable[[int], None] | None = None,
        chunk: int | None = None,
    ) -> list[tuple[str, Any]]:
        """Run fn(*args) for each args; returns [(status, value)] in input order, status one of
        "ok" (value = result), "error" (value = (exception type name, message)), "timeout", "crash".

        Items go to workers in chunks (fewer round trips); each item still has its own clock,
        started when the previous answer of its chunk arrives. A killed worker's unfinished
        items go back to the queue."""
        n = len(args_list)
        limits = [float(timeout)] * n if isinstance(timeout, (int, float)) else list(timeout)
        chunk = chunk or max(1, min(16, n // (self.size * 4)))
        results: list[tuple[str, Any] | None] = [None] * n

        def finish(i: int, res: tuple[str, Any]) -> None:
            results[i] = res
            if on_done:
                on_done(i)

        with self._lock:
            pending = deque(range(n))
            busy: dict[Connection, list] = {}  # rx -> [worker, deque of item indices, deadline]
            cold_misses = (
                0  # workers that never reported ready (a loaded host): not the items' fault
            )
            while pending or busy:
                while pending and (self._idle or len(busy) < self.size):
                    w = self._idle.pop() if self._idle else _Worker(self.memory_mb)
                    idx = [pending.popleft() for _ in range(min(chunk, len(pending)))]
                    try:
                        w.tx.send((fn, [args_list[i] for i in idx]))
                    except (OSError, ValueError):  # worker died while idle: replace, retry
                        w.kill()
                        pending.extendleft(reversed(idx))
                        continue
                    # a cold worker's clock starts when it reports ready (see below)
                    extra = 0.0 if w.ready else STARTUP_TIMEOUT_S * 2**cold_misses
                    busy[w.rx] = [w, deque(idx), time.monotonic() + limits[idx[0]] + extra]
                nearest = min(job[2] for job in busy.values())
                for conn in wait(list(busy), timeout=max(0.0, nearest - time.monotonic())):
                    job = busy[conn]  # type: ignore[index]
                    w, queue = job[0], job[1]
                    try:
                        ok, val = conn.recv()  # type: ignore[union-attr]
                    except (EOFError, OSError):  # died mid-item: segfault, OOM kill, os._exit
                        del busy[conn]  # type: ignore[arg-type]
                        w.kill()
                        finish(queue.popleft(), ("crash", None))
                        pending.extendleft(reversed(queue))
                        continue
                    if ok is not None:
                        finish(queue.popleft(), ("ok", val) if ok else ("error", val))
                    else:
                        w.ready = True  # "ready": the first item's own clock starts now
                    if queue:
                        job[2] = time.monotonic() + limits[queue[0]]
                    else:
                        del busy[conn]  # type: ignore[arg-type]
                        self._idle.append(w)
                now = time.monotonic()
                for conn, (w, queue, deadline) in list(busy.items()):
                    if now >= deadline:
                        del busy[conn]
                        w.kill()  # the only way to stop a stuck sympy call
                        if not w.ready and cold_misses < MAX_COLD_MISSES:
                            # it never started (imports still running on a loaded host): the
                            # items are requeued uncharged and the next cold worker waits longer
                            cold_misses += 1
                            log.warning(
                                "verifier worker not ready after its start-up allowance; "
                                "retrying with %.0f s",
                                STARTUP_TIMEOUT_S * 2**cold_misses,
                            )
                            pending.extendleft(reversed(queue))
                            continue
                        finish(queue.popleft(), ("timeout", None))
                        pending.extendleft(reversed(queue))
        return results  # type: ignore[return-value]

    def close(self) -> None:
        with self._lock:
            for w in self._idle:
                try:
                    w.tx.send(None)
                except (OSError, ValueError):
                    pass
                w.kill()
            self._idle.clear()


def run_threads(
    fn: Callable[..., Any],
    args_list: Sequence[tuple],
    workers: int,
    timeout: float | Sequence[float],
    on_done: Callable[[int], None] | None = None,
    grace: float = CANCEL_GRACE_S,
) -> list[tuple[str, Any]]:
    """Same contract as WorkerPool.map, with `workers` daemon threads. An overrun item scores
    "timeout" and its CancelScope is cancelled (its sandbox killed): the thread returns and
    goes on with the queue. A thread still busy `grace` s after its cancel is replaced."""
    n = len(args_list)
    limits = [float(timeout)] * n if isinstance(timeout, (int, float)) else list(timeout)
    results: list[tuple[str, Any] | None] = [None] * n
    running: dict[int, tuple[float, CancelScope]] = {}  # item -> (start, scope)
    cancelled: dict[int, float] = {}  # item -> when it was cancelled (thread not back yet)
    queue = deque(range(n))
    cond = threading.Condition()

    def work() -> None:
        while True:
            with cond:
                if not queue:
                    return
                i = queue.popleft()
                scope = CancelScope()
                running[i] = (time.monotonic(), scope)
            try:
                with cancel_scope(scope):
                    res: tuple[str, Any] = ("ok", fn(*args_list[i]))
            except BaseException as e:  # noqa: BLE001
                res = ("error", (type(e).__name__, str(e)[:2000]))
            with cond:
                running.pop(i, None)
                if i in cancelled:  # timed out meanwhile: its result stands as "timeout"
                    replaced = cancelled.pop(i) < 0
                    cond.notify_all()
                    if replaced:
                        return  # another thread took this one's place
                    continue
                results[i] = res
                cond.notify_all()
            if on_done:
                on_done(i)

    def spawn() -> None:
        threading.Thread(target=work, daemon=True, name="verify").start()

    for _ in range(min(max(1, workers), n)):
        spawn()
    with cond:
        while sum(r is not None for r in results) < n:
            now = time.monotonic()
            for i, (t, scope) in list(running.items()):
                if i not in cancelled and now >= t + limits[i]:
                    results[i] = ("timeout", None)
                    cancelled[i] = now
                    cond.release()  # kill outside the lock: the thread needs it to come back
                    try:
                        scope.cancel()
                        if on_done:
                            on_done(i)
                    finally:
                        cond.acquire()
            for i, t in list(cancelled.items()):
                if 0 <= t and now >= t + grace and i in running:
                    cancelled[i] = -1.0  # its thread ignores the cancel: give up on it
                    spawn()
            waits = [t + limits[i] for i, (t, _) in running.items() if i not in cancelled]
            waits += [t + grace for i, t in cancelled.items() if t >= 0]
            cond.wait(timeout=max(0.01, min(waits) - now) if waits else 0.05)
    return results  # type: ignore[return-value]


_POOLS: dict[int, WorkerPool] = {}
_POOLS_LOCK = threading.Lock()


def get_pool(workers: int) -> WorkerPool:
    """A process-wide pool per size, reused across calls (RL verifies every step)."""
    with _POOLS_LOCK:
        if workers not in _POOLS:
            _POOLS[workers] = WorkerPool(workers)
        return _POOLS[workers]


@atexit.register
def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()


# Exceptions that mean the verifier cannot work at all (no sandbox, no verifier module): a setup
# error to report, not a 0 to train on.
SETUP_ERRORS = ("VerifierUnavailable", "SandboxUnavailable")


def to_score(status: str, value: Any) -> Score:
    if status == "ok" and isinstance(value, Score):
        return value
    if status == "timeout":
        return Score(0.0, False, "timeout")
    if status == "crash":
        return Score(0.0, False, "verifier_error:WorkerDied")
    if status == "error":
        return Score(0.0, False, f"verifier_error:{value[0]}")
    return Score(0.0, False, f"verifier_error:{type(value).__name__}")


_GUARD_POOL: list[WorkerPool] = []


def guarded_call(fn: Callable[..., Score], args: tuple, timeout: float) -> Score:
    """fn(*args) in a private worker process, killed after `timeout` s (the single-call path)."""
    with _POOLS_LOCK:
        if not _GUARD_POOL:
            _GUARD_POOL.append(WorkerPool(1))
            atexit.register(_GUARD_POOL[0].close)
    # One guarded call at a time; concurrent callers queue on the pool lock.
    (status, value) = _GUARD_POOL[0].map(fn, [args], timeout)[0]
    return to_score(status, value)
