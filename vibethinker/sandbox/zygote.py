"""Reused sandboxes: one long-lived sandboxed zygote per worker forks a fresh child per check.

A one-shot sandbox costs a bwrap set-up plus an interpreter start (~15-40 ms of CPU) per check,
which is most of a HumanEval check. A zygote pays that once: it is a bubblewrap sandbox built
exactly like a one-shot one (bwrap.command: same namespaces, read-only root, private /tmp,
clean environment, capabilities dropped, seccomp filter) whose first process is ZYGOTE
(zygote_program.py), plus CAP_KILL and CAP_SYS_ADMIN, and a seccomp filter that lets it (only
it) unshare and mount.
It never runs untrusted code itself: for each check it receives (over a socketpair only it
holds) the limits, fresh random uids, the trusted script and the check's fds, and forks. The
child moves itself into the zygote's "check" cgroup (when the host gives us cgroups: the zygote
itself stays outside the check's limits, so the OOM killer only ever picks a check's process),
then unshares fresh pid, mount, ipc, uts and network namespaces and forks their init, which
mounts a fresh /proc (with /proc/sys read-only), /tmp and /dev/shm (size- and inode-capped) and
hides the cgroup files, forks the check, drops to a uid of its own and reaps. The check installs
the check seccomp filter on top of the zygote's (no unshare, no mount, no IPv4/IPv6), applies
the rlimits, places the fds and runs the script exactly as a one-shot BOOT would (the script
drops to the fresh uids, which clears every capability, before anything untrusted runs). Used
only as root, where each check gets uids of its own; without root (one shared uid) every check
gets a one-shot sandbox, as does a check that asks for a network. The host sets the check
cgroup's limits before each check.

Why a submission cannot influence a later check (or the zygote):
- Kernel state: everything namespace-scoped is the check's own and dies with it. Its pid
  namespace starts at 1 each time (no pid counter carries over) and ends when its init exits:
  the kernel then kills every process left in it before the zygote sees the exit. Its network
  namespace has only a loopback that is down, and the check may not open an IPv4/IPv6 or
  netlink socket anyway (no ports, TIME_WAIT entries or packet counters in /proc/net to leave
  or read). Its ipc namespace (System V objects and POSIX queues; both refused by the filter
  and RLIMIT_MSGQUEUE too), uts namespace, /proc, /tmp and /dev/shm (fresh tmpfs: fresh inode
  numbers, nothing to wipe) are new. There are no ptys (bwrap.py) and no keyrings (seccomp).
- Memory: a child is a fork, a copy; nothing flows back. The zygote never reads a check's data
  (code, inputs, test code, nonce): they travel as fds that only the child reads, so no later
  child inherits them; it holds only our scripts and old uids.
- Processes: the zygote is uid 0 in a pid namespace the checks cannot see; the check's
  processes run under fresh uids without capabilities, so they cannot signal, trace or read it;
  they never hold the control socket (the child closes every fd but its own before the script
  runs). After each check the zygote still kill(-1)s with CAP_KILL and checks /proc until none
  is alive, and that its own /tmp and /dev/shm are empty and no System V object exists; only
  then does it answer, so the host reads a check's stdout after every possible writer is dead.
- The working directory: a check starts in its own fresh /tmp (the init enters it after the
  mount; a process that stood in the zygote's /tmp would stay there, and that directory, wiped
  between checks, keeps its inode counter: it was an exact relay between checks through
  relative paths). The zygote itself stands in /, which is read-only.
- The page cache: every file a check can read is a copy kept in memory (rootfs.py), so which
  pages are cached never changes and a check cannot leave a bit in it; the exact probes
  (mincore, cachestat, preadv2's RWF_NOWAIT) and eviction (fadvise) are refused by the seccomp
  filter as well. With the host's /usr bound instead (VIBETHINKER_SANDBOX_ROOT=off, or a host
  without a tmpfs for the copy) a later check can time its reads: 64 bits per pair of checks
  (scripts/sandbox_channels.py), a relay from a solving sample to the ones graded after it.
- Open file descriptions: a check's /dev/null (its stderr, and stdin/stdout when none is
  given) is opened afresh for it and closed by us once sent, so it dies with the check; one
  description shared by every check carried its locks (an OFD lock's offset, a flock) to every
  later check and left the host's /dev/null locked (issue 37). Locks and inotify on the inodes
  all checks share are refused by the seccomp filter, memory locking too (it moves host-wide
  /proc/vmstat counters), and the host-wide counters of /proc are hidden (bwrap.PROC_HIDDEN).
- Residual (host-wide, no namespace separates them, one-shot sandboxes share them too, so a
  reused zygote makes no difference to them): the inode numbers of pipes, sockets and
  anonymous files (per-CPU batches: a naive code decoded 0-6 of 20 4-bit symbols, ~0.1 bit
  per check) and the load of the machine. docs/VERIFY_CODE.md ("What stays open between
  checks") lists each channel with its measured rate (scripts/sandbox_channels.py).
- Anything unexpected (a leftover, a failed sweep, a malformed reply, the zygote dying) discards
  the zygote: the host SIGKILLs it (the whole sandbox goes with bwrap's --die-with-parent) and
  starts a new one. Dying before answering raises SandboxLost and the check is rerun in a
  one-shot sandbox with fresh fds; a check past its wall clock scores a timeout as before.

bwrap's --die-with-parent follows the thread that started it, so zygotes are started from one
long-lived thread of our own (batch.py's verification threads come and go). Set
VIBETHINKER_ZYGOTE=0 to use one-shot sandboxes only.
"""

from __future__ import annotations

import atexit
import os
import socket
import subprocess
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

from vibethinker.log import get_logger
from vibethinker.sandbox import base as sb
from vibethinker.sandbox import seccomp
from vibethinker.sandbox.bwrap import SHM_MB, cgroup_limits, command, python_argv
from vibethinker.sandbox.zygote_program import ZYGOTE

_log = get_logger("sandbox.zygote")

STARTUP_TIMEOUT_S = 30.0  # a loaded machine can take a while to start bwrap + python
MAX_IDLE = 16  # idle zygotes kept per tmpfs size (~10 MB of memory each)
TMP_INODES = 16384  # inodes of a check's /tmp and /dev/shm (bytes are capped by Limits.tmp_mb)


_lock = threading.Lock()
_idle: dict[int, list[Zygote]] = {}
_live: set[Zygote] = set()  # every open zygote, idle or not, closed at exit
_state: dict = {"broken": False, "spawner": None}


def enabled() -> bool:
    """Zygotes are used as root (fresh uids per check) unless disabled or found not to work."""
    return (
        os.getuid() == 0
        and not _state["broken"]
        and os.environ.get("VIBETHINKER_ZYGOTE", "1") != "0"
    )


def _spawner() -> ThreadPoolExecutor:
    with _lock:
        if _state["spawner"] is None:
            _state["spawner"] = ThreadPoolExecutor(1, thread_name_prefix="vt-zygote")
        return _state["spawner"]


class Zygote:
    """Host side of one zygote: used by one thread at a time (acquire -> run -> back to pool)."""

    def __init__(self, bwrap: str, tmp_mb: int):
        self.tmp_mb = tmp_mb
        self._closed = False
        host, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        lim = sb.Limits(tmp_mb=tmp_mb)
        strict = seccomp.program() or b""
        opts = [f"size={mb * 2**20},nr_inodes={TMP_INODES},mode=1777" for mb in (tmp_mb, SHM_MB)]
        argv = python_argv(ZYGOTE, str(child.fileno()), strict.hex(), *opts)
        cmd = command(bwrap, lim, argv, zygote=True)
        self.cg = cmd.cgroup.subs[0] if cmd.cgroup is not None else None  # the check cgroup
        dn = subprocess.DEVNULL
        try:
            self.proc = (
                _spawner()
                .submit(
                    subprocess.Popen,
                    cmd.argv,
                    stdin=dn,
                    stdout=dn,
                    stderr=dn,
                    pass_fds=(child.fileno(), *cmd.fds),
                    start_new_session=True,
                    env={},
                )
                .result()
            )
        except BaseException:
            host.close()
            if cmd.cgroup is not None:
                cmd.cgroup.remove()
            raise
        finally:
            child.close()
            cmd.started()
        self.proc.vt_cgroup = cmd.cgroup  # removed by sb.kill once the sandbox is gone
        self.sock = host
        with _lock:
            _live.add(self)
        try:
            host.settimeout(STARTUP_TIMEOUT_S)
            if host.recv(16) != b"ready":
                raise OSError("the zygote did not start")
        except BaseException:
            self.close()
            raise

    def close(self) -> None:
        """SIGKILL the sandbox (bwrap's group; its pid namespace goes with it). Safe from any
        thread, also while another one waits in run() (a cancelled check: it wakes at once)."""
        with _lock:
            _live.discard(self)
            first, self._closed = not self._closed, True
        if first:
            try:
                self.sock.shutdown(socket.SHUT_RDWR)  # wakes a recv() blocked in run()
            except OSError:
                pass
        sb.kill(self.proc)
        self.sock.close()

    def run(
        self,
        script: str,
        limits: sb.Limits,
        uids: Sequence[int],
        fds: Sequence[int],
        stdin: int | None,
        stdout: int | None,
    ) -> int | None:
        """One check (see sandbox.run); returns this zygote to the pool when it stays clean."""
        head = " ".join(sb.limit_args(limits)) + "\n" + ",".join(str(u) for u in uids) + "\n\n"
        deadline = time.monotonic() + limits.timeout
        try:
            if self.cg is not None:
                self.cg.limit(*cgroup_limits(limits))
            # A /dev/null of the check's own (a fresh open file description): one shared by every
            # check carried its locks (flock, OFD byte-range locks) and status flags from one check
            # to the next, an exact relay (tests/sandbox/test_channels.py); this one dies with the
            # check, since we close our copy as soon as the zygote holds its own.
            null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
            send = [null if stdin is None else stdin, null if stdout is None else stdout, null]
            try:
                socket.send_fds(self.sock, [head.encode() + script.encode()], [*send, *fds])
            finally:
                os.close(null)
            self.sock.settimeout(max(0.001, deadline - time.monotonic()))  # 0 = non-blocking
            reply = self.sock.recv(64).split()
        except TimeoutError:
            self.close()
            return None
        except OSError as e:
            self.close()
            raise sb.SandboxLost(f"zygote lost: {e}") from e
        if self._closed or len(reply) != 2 or reply[1] not in (b"clean", b"dirty"):
            self.close()  # died, or some process of the check could not be killed
            raise sb.SandboxLost(f"zygote answered {reply!r}")
        if reply[1] == b"clean":
            _release(self)
        else:  # the check's processes are dead, so its result stands; the zygote does not
            self.close()
        return int(reply[0])


def acquire(bwrap: str, tmp_mb: int) -> Zygote | None:
    """An idle zygote for this tmpfs size, or a new one; None (and one-shot sandboxes from now
    on) if zygotes do not work here."""
    dead = []
    try:
        with _lock:
            pool = _idle.get(tmp_mb, [])
            while pool:
                z = pool.pop()
                if z.proc.poll() is None:
                    return z
                dead.append(z)
    finally:
        for z in dead:  # outside the lock: close() takes it (a deadlock otherwise)
            z.close()
    try:
        return Zygote(bwrap, tmp_mb)
    except Exception as e:  # noqa: BLE001 -- fall back to the one-shot sandbox, loudly
        _log.warning("zygote sandbox failed to start (%s): one sandbox per check from now on", e)
        _state["broken"] = True
        return None


def _release(z: Zygote) -> None:
    with _lock:
        pool = _idle.setdefault(z.tmp_mb, [])
        if len(pool) < MAX_IDLE:
            pool.append(z)
            return
    z.close()


def shutdown() -> None:
    """Close every zygote (also at exit): the idle ones and any a caller never gave back."""
    with _lock:
        zs = [z for pool in _idle.values() for z in pool] + list(_live)
        _idle.clear()
    for z in dict.fromkeys(zs):
        z.close()


def _after_fork_in_child() -> None:
    # The zygotes belong to the parent: forget them (closing our copies of their sockets only).
    global _lock
    _lock = threading.Lock()
    for z in _live:
        z.sock.close()
    _live.clear()
    _idle.clear()
    _state["spawner"] = None


atexit.register(shutdown)
os.register_at_fork(after_in_child=_after_fork_in_child)
