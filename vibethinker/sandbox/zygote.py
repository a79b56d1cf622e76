"""Reused sandboxes: one long-lived sandboxed zygote per worker forks a fresh child per check.

A one-shot sandbox costs a bwrap set-up plus an interpreter start (~15-40 ms of CPU) per check,
which is most of a HumanEval check. A zygote pays that once: it is a bubblewrap sandbox built
exactly like a one-shot one (bwrap.command: same namespaces, read-only root, private /tmp,
clean environment, capabilities dropped, seccomp filter) whose first process is ZYGOTE below,
plus CAP_KILL and CAP_SYS_ADMIN, and a seccomp filter that lets it (only it) unshare and mount.
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
- Residual (host-wide, no namespace separates them, one-shot sandboxes share them too, so a
  reused zygote makes no difference to them): the inode numbers of pipes, sockets and
  anonymous files (per-CPU batches: a naive code decoded 0-3 of 20 4-bit symbols on a busy
  machine) and the load of the machine. tests/sandbox/test_redteam.py keeps them as known,
  measured channels.
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
from vibethinker.sandbox.bwrap import CGROUP_DIR, SHM_MB, cgroup_limits, command, python_argv

_log = get_logger("sandbox.zygote")

STARTUP_TIMEOUT_S = 30.0  # a loaded machine can take a while to start bwrap + python
MAX_IDLE = 16  # idle zygotes kept per tmpfs size (~10 MB of memory each)
TMP_INODES = 16384  # inodes of a check's /tmp and /dev/shm (bytes are capped by Limits.tmp_mb)

# argv: [-c, control socket fd, check seccomp filter (hex), /tmp mount options, /dev/shm mount
# options]. Runs as uid 0 in the sandbox with CAP_SETUID/SETGID/KILL/SYS_ADMIN.
ZYGOTE = (
    sb.SETUP
    + r"""
import ctypes, signal, socket, time

_ctl = socket.socket(fileno=int(sys.argv[1]))
_FILTER = bytes.fromhex(sys.argv[2])
_TMP_OPTS, _SHM_OPTS = sys.argv[3].encode(), sys.argv[4].encode()
del sys.argv[1:]
resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
_codes = {}
_libc = ctypes.CDLL(None, use_errno=True)
_libc.mount.argtypes = [ctypes.c_char_p] * 3 + [ctypes.c_ulong, ctypes.c_char_p]
_libc.prctl.argtypes = [ctypes.c_int] + [ctypes.c_ulong] * 4
_NS = 0x00020000 | 0x20000000 | 0x08000000 | 0x04000000 | 0x40000000  # mnt pid ipc uts net
_NOSUID, _NODEV, _NOEXEC, _RDONLY = 2, 4, 8, 1
_REMOUNT, _BIND, _REC, _PRIVATE = 32, 4096, 16384, 1 << 18


def _ok(r, what):
    if r != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), what)


def _mount(src, dst, fs, flags, data=None):
    _ok(_libc.mount(src, dst, fs, flags, data), dst)


def _code(status):
    c = os.waitstatus_to_exitcode(status)
    return c if c >= 0 else 128 - c


def _install_filter():
    # The check filter, stacked on the zygote's: no unshare, no mount, no IPv4/IPv6 from here on
    # (no_new_privs is already set by bwrap, so no privilege is needed).
    if not _FILTER:
        return
    class Prog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    buf = ctypes.create_string_buffer(_FILTER, len(_FILTER))
    prog = Prog(len(_FILTER) // 8, ctypes.cast(buf, ctypes.c_void_p))
    _ok(_libc.prctl(22, 2, ctypes.addressof(prog), 0, 0), "seccomp")  # PR_SET_SECCOMP, FILTER


def _isolate():
    # In the check's child: fresh namespaces and tmpfs. Only the check itself returns; the two
    # processes above it (this one, then the namespace's init) pass its exit status up.
    _ok(_libc.unshare(_NS), "unshare")
    pid = os.fork()
    if pid:
        gc.disable()
        os._exit(_code(os.waitpid(pid, 0)[1]))
    # pid 1 of the new pid namespace; its death kills every process left in it
    _mount(None, b"/", None, _REC | _PRIVATE)
    _mount(b"proc", b"/proc", b"proc", _NOSUID | _NODEV | _NOEXEC)
    for d in (b"/proc/sys", b"/proc/sysrq-trigger", b"/proc/irq", b"/proc/bus"):
        if os.path.exists(d):
            _mount(d, d, None, _BIND | _REC)
            _mount(None, d, None, _REMOUNT | _BIND | _RDONLY | _NOSUID | _NODEV | _NOEXEC)
    _mount(b"tmpfs", b"/tmp", b"tmpfs", _NOSUID | _NODEV, _TMP_OPTS)
    _mount(b"tmpfs", b"/dev/shm", b"tmpfs", _NOSUID | _NODEV, _SHM_OPTS)
    # Mounting over /tmp does not move a process that stands in the old one: enter the fresh
    # tmpfs, or "." would still be the zygote's /tmp (wiped between checks, but with an inode
    # counter that carries over: an exact relay between checks through relative paths).
    os.chdir("/tmp")
    if os.listdir("."):
        raise OSError("the fresh /tmp is not empty")
    if _CG:  # the check cgroup's files: the check is in it already, it need not see them
        _mount(b"tmpfs", _CGD.encode(), b"tmpfs", _NOSUID | _NODEV | _NOEXEC | _RDONLY, b"size=4k")
    check = os.fork()
    if check == 0:
        gc.enable()
        _install_filter()
        return
    gc.disable()
    os.closerange(0, resource.getrlimit(resource.RLIMIT_NOFILE)[0])
    u = 200000 + int.from_bytes(os.urandom(4), "little") % 1800000
    os.setgroups([])
    os.setgid(u)
    os.setuid(u)
    while True:  # reap orphans until the check itself is done
        p, st = os.wait()
        if p == check:
            os._exit(_code(st))


# The check cgroup (sandbox.command binds its cgroup.procs files here): each check moves
# itself in before it runs anything, so its processes, files and kernel objects count against
# the check's limit while the zygote, outside, is never the one the OOM killer picks.
_CGD = "CGROUP_DIR"
_CG = [_CGD + "/" + n for n in sorted(os.listdir(_CGD))] if os.path.isdir(_CGD) else []


def _enter_cgroup():
    for p in _CG:
        with open(p, "w") as f:
            f.write("0")


def _cgroup_works():
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            _enter_cgroup()
            code = 0
        finally:
            os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]) == 0


def _rm(p):
    st = os.lstat(p)
    if st.st_mode & 0o170000 == 0o040000:
        os.chmod(p, 0o700)
        for n in os.listdir(p):
            _rm(p + "/" + n)
        os.rmdir(p)
    else:
        os.unlink(p)


def _wipe(uids):
    # Everything a check left in the writable places belongs to one of its uids: remove it as
    # that uid (we have no CAP_DAC_OVERRIDE), then insist the places are empty.
    left = {}
    for d in ("/tmp", "/dev/shm"):
        for n in os.listdir(d):
            left.setdefault(os.lstat(d + "/" + n).st_uid, []).append(d + "/" + n)
    for u, paths in left.items():
        if u not in uids or u == 0:
            return False
        pid = os.fork()
        if pid == 0:
            try:
                os.setgroups([])
                os.setgid(u)
                os.setuid(u)
                for p in paths:
                    _rm(p)
            finally:
                os._exit(0)
        os.waitpid(pid, 0)
    if os.listdir("/tmp") or os.listdir("/dev/shm"):
        return False
    for n in ("shm", "sem", "msg"):  # System V objects outlive their processes
        with open("/proc/sysvipc/" + n) as f:
            if len(f.read().splitlines()) > 1:
                return False
    return True


def _kill_all():
    # SIGKILL every process of the pid namespace but us and its init until none is alive
    # (zombies have released everything they held).
    me = str(os.getpid())
    for _ in range(2000):
        try:
            os.kill(-1, signal.SIGKILL)
        except ProcessLookupError:
            pass
        alive = False
        for p in os.listdir("/proc"):
            if p.isdigit() and p != "1" and p != me:
                try:
                    with open("/proc/" + p + "/stat", "rb") as f:
                        st = f.read()
                except OSError:
                    continue
                if st[st.rindex(b")") + 2 :][:1] not in (b"Z", b"X"):
                    alive = True
                    break
        if not alive:
            return True
        time.sleep(0.0005)
    return False


def _serve():
    _ctl.send(b"ready" if _cgroup_works() else b"no cgroup")
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(_ctl, 1 << 20, 16)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)  # the host is gone
        head, script = msg.split(b"\n\n", 1)
        lim, uids = head.decode().split("\n")
        uids = [int(u) for u in uids.split(",")]
        code = _codes.get(script)
        if code is None:
            code = _codes[script] = compile(script.decode(), "<vibethinker>", "exec")
        pid = os.fork()
        if pid == 0:
            _ctl.detach()  # the fd itself is closed by _setup
            try:
                _enter_cgroup()
                _isolate()
            except BaseException:
                os._exit(97)  # never run a check outside its limits or namespaces
            return lim.split(), uids, fds, code
        for fd in fds:
            os.close(fd)
        rc = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        state = b"alive"
        if _kill_all():
            try:
                state = b"clean" if _wipe(uids) else b"dirty"
            except Exception:
                state = b"dirty"
        _ctl.send(b"%d %s" % (rc, state))
        if state != b"clean":
            os._exit(0)


# Only a check's child returns from _serve: it becomes that check, like a one-shot BOOT (the
# interpreter's normal exit follows the script: non-daemon threads are joined, stdout flushed).
import gc

gc.freeze()  # a fork's collector skips what exists now: far fewer copy-on-write page faults
os.chdir("/")  # the zygote never stands in a writable place a check could reach
_lim, _uids, _fds, _code = _serve()
_setup(_lim, _uids, [(fd, i) for i, fd in enumerate(_fds)])
del _lim, _uids, _fds, _codes
exec(_code, {"__name__": "__vibethinker__", "_drop": _drop, "_UIDS": _UIDS})
"""
).replace("CGROUP_DIR", CGROUP_DIR)

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


def _devnull() -> int:
    with _lock:
        if "null" not in _state:
            _state["null"] = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        return _state["null"]


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
        null = _devnull()
        send = [null if stdin is None else stdin, null if stdout is None else stdout, null]
        deadline = time.monotonic() + limits.timeout
        try:
            if self.cg is not None:
                self.cg.limit(*cgroup_limits(limits))
            socket.send_fds(self.sock, [head.encode() + script.encode()], [*send, *fds])
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
