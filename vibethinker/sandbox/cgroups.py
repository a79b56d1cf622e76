"""Per-sandbox cgroups: a cap on the *total* memory, processes and CPU of one sandbox.

rlimits are per process: RLIMIT_AS does not count System V or POSIX shared memory, memfd files,
tmpfs files or kernel objects (inodes, dentries, pipes, sockets), and N processes may each use
the full RLIMIT_AS. A memory cgroup counts all of that (page cache and tmpfs pages are charged
to the cgroup that touched them first; kernel objects allocated for its processes are charged
too), a pids cgroup caps processes + threads whatever their uids, and a cpu cgroup caps the CPU
bandwidth of all of them together (`Limits.cpus` cores: RLIMIT_CPU is per process, so without it
one check's processes or threads could keep every core of the host busy).

Both versions, since hosts differ (this development machine: v1 for memory, pids and cpu, with a
v2 hierarchy mounted beside it that holds none of them):
- v1: memory.limit_in_bytes (+ memsw), pids.max, cpu.cfs_quota_us / cpu.cfs_period_us, and
  memory.kmem.tcp.limit_in_bytes: v1 does not count TCP socket buffers in the memory limit (a
  check once held ~165 MB of loopback buffers under an 80 MB cap), so they get the same cap of
  their own. (Checks get no IPv4/IPv6 sockets unless they ask for a network: seccomp.py.)
- v2: memory.max (+ memory.swap.max 0), pids.max, cpu.max; v2 charges socket memory to
  memory.max itself.

Each sandbox (a one-shot bwrap, or a zygote and the one check it runs at a time) gets a cgroup
under our own: `<own>/vibethinker-<host pid>/<n>` in every hierarchy that has the memory, pids or
cpu controller (cgroup v1 hierarchies, or v2 for those of them it has). The sandbox is started
through `/bin/sh -c 'echo 0 > .../cgroup.procs && exec bwrap ...'`, so bwrap is inside its
cgroup before it forks anything (no window where a child escapes). The limits are set before
each check; an over-limit sandbox meets the kernel's OOM killer inside its cgroup (a zygote's
check's processes volunteer first: oom_score_adj 1000, base.SETUP). Removed when the sandbox is gone.

Best effort: without a writable hierarchy (no root, read-only /sys/fs/cgroup, no controllers)
`create()` returns None, logs once at INFO, and the sandbox relies on rlimits alone (then
RLIMIT_FSIZE x RLIMIT_NOFILE x RLIMIT_NPROC bounds memfd/tmpfs memory, and the size-capped
/tmp and /dev/shm bound files; System V IPC is refused by the seccomp filter).
"""

from __future__ import annotations

import atexit
import itertools
import os
import threading
import time

from vibethinker.log import get_logger

_log = get_logger("sandbox.cgroups")

_lock = threading.Lock()
_state: dict = {"bases": None, "pid": None, "pending": []}
_ids = itertools.count()
CONTROLLERS = ("memory", "pids", "cpu")
CPU_PERIOD_US = 100_000


def _hierarchies() -> list[tuple[str, str]]:
    """(kind, our cgroup's directory) per usable hierarchy; kind is 'v1' or 'v2'."""
    own: dict[str, str] = {}
    with open("/proc/self/cgroup") as f:
        for ln in f:
            hid, ctrls, path = ln.rstrip("\n").split(":", 2)
            for c in ctrls.split(",") if hid != "0" else ["<v2>"]:
                own[c] = path
    found, v2 = [], None
    with open("/proc/self/mountinfo") as f:
        for ln in f:
            left, right = ln.split(" - ", 1)
            root, mnt = left.split()[3:5]
            fstype, _, opts = right.split()[:3]
            if fstype == "cgroup":
                ctrls = [c for c in CONTROLLERS if c in opts.split(",")]
                for c in ctrls:
                    if c in own:
                        found.append(("v1", c, _join(mnt, root, own[c])))
            elif fstype == "cgroup2" and "<v2>" in own and v2 is None:
                v2 = _join(mnt, root, own["<v2>"])
    kinds = {c for _, c, _ in found}
    if v2 is not None and kinds != set(CONTROLLERS):
        if _v2_controllers(v2) & (set(CONTROLLERS) - kinds):
            found.append(("v2", "v2", v2))
    return [(k, d) for k, _, d in dict.fromkeys(found)]


def _v2_controllers(d: str) -> set[str]:
    try:
        with open(os.path.join(d, "cgroup.controllers")) as f:
            return set(f.read().split()) & set(CONTROLLERS)
    except OSError:
        return set()


def _join(mnt: str, root: str, path: str) -> str:
    if root != "/" and (path == root or path.startswith(root + "/")):
        path = path[len(root) :]
    return os.path.normpath(mnt + "/" + path.lstrip("/"))


def _write(path: str, value: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, value.encode())
    finally:
        os.close(fd)


def _bases() -> list[tuple[str, str]]:
    """Our per-process parent cgroups (made on first use; [] when none can be made)."""
    pid = os.getpid()
    if _state["bases"] is not None and _state["pid"] == pid:
        return _state["bases"]
    bases = []
    try:
        hier = _hierarchies() if os.path.exists("/bin/sh") else []
    except (OSError, ValueError):
        hier = []
    for kind, own in hier:
        base = os.path.join(own, f"vibethinker-{pid}")
        try:
            _sweep_stale(own)
            os.makedirs(base, exist_ok=True)
            if kind == "v2":  # children get the controllers only if we delegate them
                ctrls = " ".join("+" + c for c in sorted(_v2_controllers(own)))
                _write(os.path.join(base, "cgroup.subtree_control"), ctrls)
            _share(base)
            bases.append((kind, base))
        except OSError as e:
            _log.debug("cgroup %s not usable: %s", own, e)
    if not bases:
        _log.info(
            "no writable memory/pids cgroup here: sandboxes are limited by rlimits only "
            "(per-process address space; see vibethinker/sandbox/cgroups.py)"
        )
    _state["bases"], _state["pid"] = bases, pid
    return bases


def _share(base: str) -> None:
    # A cpu cgroup competes with its siblings as one task would (weight 1024 / 100): all our
    # sandboxes together would get one task's share of a busy host. Weigh them like one task per
    # core instead (each check is also capped at Limits.cpus by its quota).
    n = os.cpu_count() or 1
    for f, v in (("cpu.shares", 1024 * n), ("cpu.weight", min(10000, 100 * n))):
        if os.path.exists(os.path.join(base, f)):
            try:
                _write(os.path.join(base, f), str(v))
            except OSError as e:
                _log.debug("could not set %s: %s", f, e)


def _sweep_stale(own: str) -> None:
    # Parents left by processes that died without cleaning up (SIGKILL, crash).
    for n in os.listdir(own):
        if n.startswith("vibethinker-") and n[12:].isdigit():
            p = int(n[12:])
            d = os.path.join(own, n)
            # (not a fresh one: its owner may live in a pid namespace we cannot see)
            if p != os.getpid() and not os.path.exists(f"/proc/{p}"):
                if time.time() - os.stat(d).st_mtime > 60:
                    _rmtree(d)


def _rmtree(d: str) -> None:
    # A cgroup directory holds only control files (removed with it) and child cgroups.
    for c in os.listdir(d):
        if os.path.isdir(os.path.join(d, c)):
            _rmtree(os.path.join(d, c))
    _rmdir(d)


def _rmdir(d: str) -> bool:
    try:
        os.rmdir(d)
        return True
    except FileNotFoundError:
        return True
    except OSError:
        return False


class Cgroup:
    """One sandbox's cgroup (a directory per hierarchy)."""

    def __init__(self, dirs: list[tuple[str, str]]):
        self.dirs = dirs
        self.subs: list[Cgroup] = []
        self._set: tuple[int, int, float] | None = None

    def sub(self, name: str) -> Cgroup:
        """A child cgroup (its usage also counts here), removed with this one."""
        dirs = []
        try:
            for kind, d in self.dirs:
                os.mkdir(os.path.join(d, name))
                dirs.append((kind, os.path.join(d, name)))
        except OSError:
            for _, d in dirs:
                _rmdir(d)
            raise
        self.subs.append(Cgroup(dirs))
        return self.subs[-1]

    def procs_files(self) -> list[str]:
        """The files a process writes "0" to, to move itself in (one per hierarchy)."""
        return [os.path.join(d, "cgroup.procs") for _, d in self.dirs]

    def limit(self, memory_bytes: int, pids: int, cpus: float = 0.0) -> None:
        """Cap total memory (no swap; TCP buffers included), processes + threads and CPU
        bandwidth (`cpus` cores, 0: none); cheap when unchanged."""
        if self._set == (memory_bytes, pids, cpus):
            return
        quota = max(1000, int(cpus * CPU_PERIOD_US)) if cpus > 0 else 0
        for kind, d in self.dirs:
            if kind == "v1":
                if os.path.exists(os.path.join(d, "memory.limit_in_bytes")):
                    _v1_memory(d, memory_bytes)
                _v1_tcp(d, memory_bytes)
                if os.path.exists(os.path.join(d, "cpu.cfs_quota_us")):
                    _write(os.path.join(d, "cpu.cfs_period_us"), str(CPU_PERIOD_US))
                    _write(os.path.join(d, "cpu.cfs_quota_us"), str(quota or -1))
            elif kind == "v2":
                if os.path.exists(os.path.join(d, "memory.max")):
                    _write(os.path.join(d, "memory.max"), str(memory_bytes))
                if os.path.exists(os.path.join(d, "memory.swap.max")):
                    _write(os.path.join(d, "memory.swap.max"), "0")
                if os.path.exists(os.path.join(d, "cpu.max")):
                    _write(os.path.join(d, "cpu.max"), f"{quota or 'max'} {CPU_PERIOD_US}")
            if os.path.exists(os.path.join(d, "pids.max")):
                _write(os.path.join(d, "pids.max"), str(pids))
        self._set = (memory_bytes, pids, cpus)

    def wrap(self, argv: list[str]) -> list[str]:
        """`argv` started inside this cgroup (the shell moves itself in, then execs)."""
        n = len(self.dirs)
        moves = " && ".join(f'echo 0 > "${i + 1}"' for i in range(n))
        script = f'{moves} || exit 125; shift {n}; exec "$@"'
        return ["/bin/sh", "-c", script, "sh", *self.procs_files(), *argv]

    def remove(self) -> None:
        """Remove the directories (now, or later once the last process is gone)."""
        for c in self.subs:
            c.remove()
        left = [d for _, d in self.dirs if not _rmdir(d)]
        if left:
            with _lock:
                _state["pending"].extend(left)


def _v1_tcp(d: str, limit: int) -> None:
    # Best effort: some v1 kernels refuse it (then only seccomp's "no IPv4/IPv6 sockets unless
    # Limits.network" bounds TCP buffers; logged once).
    p = os.path.join(d, "memory.kmem.tcp.limit_in_bytes")
    if os.path.exists(p):
        try:
            _write(p, str(limit))
        except OSError as e:
            if not _state.get("tcp_warned"):
                _state["tcp_warned"] = True
                _log.warning("cgroup v1 refused a TCP buffer limit (%s): sockets unbounded", e)


def _v1_memory(d: str, limit: int) -> None:
    mem = os.path.join(d, "memory.limit_in_bytes")
    sw = os.path.join(d, "memory.memsw.limit_in_bytes")
    # memsw (memory + swap) must stay >= the memory limit: order the two writes accordingly
    if os.path.exists(sw):
        with open(sw) as f:
            cur = int(f.read())
        if limit > cur:
            _write(sw, str(limit))
            _write(mem, str(limit))
        else:
            _write(mem, str(limit))
            _write(sw, str(limit))
    else:
        _write(mem, str(limit))


def create() -> Cgroup | None:
    """A new cgroup for one sandbox, or None when none can be made here."""
    with _lock:
        bases = _bases()
        pending, _state["pending"] = _state["pending"], []
    pending = [d for d in pending if not _rmdir(d)]
    if pending:
        with _lock:
            _state["pending"].extend(pending)
    if not bases:
        return None
    name = str(next(_ids))
    dirs = []
    try:
        for kind, base in bases:
            d = os.path.join(base, name)
            os.mkdir(d)
            dirs.append((kind, d))
    except OSError as e:
        _log.warning("could not create a sandbox cgroup (%s): rlimits only for this one", e)
        for _, d in dirs:
            _rmdir(d)
        return None
    return Cgroup(dirs)


def cleanup(wait_s: float = 1.0) -> None:
    """Remove leftover cgroups of this process (at exit)."""
    if _state["pid"] != os.getpid():
        return
    end = time.monotonic() + wait_s
    while True:
        with _lock:  # children were queued before their parents
            _state["pending"] = [d for d in _state["pending"] if not _rmdir(d)]
            left = bool(_state["pending"])
        if not left or time.monotonic() > end:
            break
        time.sleep(0.02)
    for _, base in _state["bases"] or []:
        _rmdir(base)


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()
    _state.update(bases=None, pid=None, pending=[])


atexit.register(cleanup)
os.register_at_fork(after_in_child=_after_fork_in_child)
