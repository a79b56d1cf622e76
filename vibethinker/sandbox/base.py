"""What every part of the sandbox shares: limits, the in-sandbox set-up, errors, process helpers,
and the cancellation scope a caller uses to stop a check from another thread.

Import-light and free of the other sandbox modules, so bwrap.py, zygote.py and runner.py all
depend on it and on nothing circular.
"""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from vibethinker.log import get_logger

_log = get_logger("sandbox")


class SandboxUnavailable(RuntimeError):
    """No working sandbox for the requested mode (a setup error, not a model failure).

    The verifiers treat it as a setup error by name (verifiers/batch.py SETUP_ERRORS) and the
    code verifier raises a subclass that is also a VerifierUnavailable."""


class SandboxLost(RuntimeError):
    """A reused sandbox (zygote) died before answering; the caller reruns with fresh fds in a
    one-shot sandbox (`run(..., fresh=True)`)."""


class Cancelled(RuntimeError):
    """The check's CancelScope was cancelled (its item ran past the caller's backstop); its
    sandbox was killed and nothing is retried."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed check."""

    timeout: float = 10.0  # wall-clock seconds; the host kills the whole sandbox after this
    # RLIMIT_AS per process (virtual memory); with a cgroup also the whole sandbox's memory
    # (processes, files, kernel objects; TCP buffers too: cgroups.py)
    memory_mb: int = 1024
    nproc: int = 32  # RLIMIT_NPROC: processes + threads of a sandbox uid (cgroup: of all)
    fsize_mb: int = 16  # RLIMIT_FSIZE: largest file (and captured stdout) a process can write
    nofile: int = 64  # RLIMIT_NOFILE
    tmp_mb: int = 64  # size of the private /tmp tmpfs
    cpus: float = 1.0  # CPU bandwidth of the whole check (cgroup cpu quota), in cores
    # IPv4/IPv6 sockets on a private loopback. Off by default: no judge test needs them, and a
    # network namespace is state (ports, TIME_WAIT, counters) and unbounded kernel memory
    # (socket buffers). On: a one-shot sandbox per check (a fresh namespace each time).
    network: bool = False

    @property
    def cpu_s(self) -> int:
        return int(self.timeout) + 1


# The in-sandbox set-up shared by a one-shot sandbox (runner.BOOT) and a zygote's checks
# (zygote_program.ZYGOTE): place the passed fds, apply the rlimits, remember the uids. `lim` is
# (AS bytes, CPU s, NPROC, FSIZE bytes, NOFILE); `fdmap` pairs (fd now, fd wanted), every other
# fd above the highest wanted one is closed. `_drop(i)` switches to the i-th of the random uids
# (only when we are uid 0; a no-op otherwise), so a script can fork first and give its halves
# different uids. Kept import-light (os, resource, sys).
SETUP = r"""
import os, resource, sys

def _setup(lim, uids, fdmap):
    global _UIDS
    top = max([2] + [d for _, d in fdmap]) + 1
    base = max([top] + [s + 1 for s, _ in fdmap])  # above every wanted and every passed fd
    tmp = [(os.dup2(s, base + i), d) for i, (s, d) in enumerate(fdmap)]
    for s, _ in fdmap:
        os.close(s)
    for t, d in tmp:
        os.dup2(t, d)
        os.close(t)
    os.closerange(top, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    for r, v in zip((resource.RLIMIT_AS, resource.RLIMIT_CPU, resource.RLIMIT_NPROC,
                     resource.RLIMIT_FSIZE, resource.RLIMIT_NOFILE), lim):
        resource.setrlimit(r, (int(v), int(v)))
    # no core dumps; no POSIX message queues (they would outlive the process in the ipc ns); no
    # locked memory (mlock and mmap(MAP_LOCKED) move host-wide /proc/vmstat counters: seccomp.py)
    for r in (resource.RLIMIT_CORE, resource.RLIMIT_MSGQUEUE, resource.RLIMIT_MEMLOCK):
        resource.setrlimit(r, (0, 0))
    # a check is the first thing the OOM killer takes, before any host process
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass
    _UIDS = list(uids)

def _drop(i):
    if _UIDS[i] and os.getuid() == 0:
        os.setgroups([])
        os.setgid(_UIDS[i])
        os.setuid(_UIDS[i])
        if os.getuid() == 0 or os.geteuid() == 0:
            os._exit(99)
"""


def limit_args(limits: Limits) -> list[str]:
    """The rlimit values `_setup` expects, as strings."""
    return [
        str(limits.memory_mb * 2**20),
        str(limits.cpu_s),
        str(limits.nproc),
        str(limits.fsize_mb * 2**20),
        str(limits.nofile),
    ]


def random_uids(n: int) -> list[int]:
    """High, unlikely-to-exist uids, fresh per check: each has its own RLIMIT_NPROC budget and
    cannot signal or trace a process of another uid."""
    return random.SystemRandom().sample(range(200_000, 2_000_000), n)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the process group (bwrap or the bare interpreter), reap it, remove its cgroup."""
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:  # pragma: no cover -- SIGKILL is not ignorable
        _log.error("sandbox process %d did not die", proc.pid)
    cg = getattr(proc, "vt_cgroup", None)
    if cg is not None:
        proc.vt_cgroup = None  # type: ignore[attr-defined]
        cg.remove()


def wait(proc: subprocess.Popen, deadline: float) -> int | None:
    """Wait until `deadline` (time.monotonic()); returns the exit code, or None after killing
    the sandbox at the deadline."""
    # Popen.wait(timeout) polls with sleeps of up to 50 ms, longer than a whole check: wait on a
    # pidfd instead, which wakes exactly when the process exits.
    try:
        pidfd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):
        pidfd = -1
    if pidfd >= 0:
        try:
            left = deadline - time.monotonic()
            if left > 0:
                select.select([pidfd], [], [], left)
        finally:
            os.close(pidfd)
    try:
        return proc.wait(timeout=0 if pidfd >= 0 else max(0.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        kill(proc)
        return None


class CancelScope:
    """Lets another thread stop every sandbox of one work item, for real (batch.run_threads:
    an item past its backstop). A sandbox registers how to kill itself for as long as it runs;
    `cancel()` kills the running ones, and any later `sandbox.run` in the scope raises
    Cancelled instead of starting another."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kills: dict[int, Callable[[], None]] = {}
        self._n = 0
        self.cancelled = False

    def cancel(self) -> None:
        with self._lock:
            self.cancelled = True
            kills, self._kills = list(self._kills.values()), {}
        for k in kills:
            try:
                k()
            except Exception as e:  # noqa: BLE001 -- one failed kill must not stop the others
                _log.warning("cancelling a sandbox failed: %s", e)

    @contextmanager
    def running(self, kill: Callable[[], None]) -> Iterator[None]:
        """Register `kill` while the body runs; raises Cancelled before and after when the
        scope is (or became) cancelled."""
        with self._lock:
            cancelled = self.cancelled
            if not cancelled:
                self._n += 1
                key = self._n
                self._kills[key] = kill
        if cancelled:  # e.g. while a zygote was starting: stop it, do not run the check
            kill()
            raise Cancelled("cancelled before start")
        try:
            yield
        except SandboxLost:
            if self.cancelled:
                raise Cancelled("cancelled while running") from None
            raise
        finally:
            with self._lock:
                self._kills.pop(key, None)
        if self.cancelled:
            raise Cancelled("cancelled while running")


_scope = threading.local()


def current_scope() -> CancelScope | None:
    """The CancelScope of this thread's current work item, if any."""
    return getattr(_scope, "value", None)


@contextmanager
def cancel_scope(scope: CancelScope) -> Iterator[CancelScope]:
    """Run the body (on this thread) inside `scope`."""
    old = current_scope()
    _scope.value = scope
    try:
        yield scope
    finally:
        _scope.value = old


def fdmap(fds: Sequence[int]) -> list[tuple[int, int]]:
    """Host fds -> the fd numbers 3, 4, ... they get in the sandbox."""
    return [(fd, 3 + i) for i, fd in enumerate(fds)]
