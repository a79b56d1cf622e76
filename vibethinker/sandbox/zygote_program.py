"""The zygote's own program (sandbox/zygote.py is the host side and says why it is safe): the
Python source a zygote sandbox runs as its first process. It answers "ready", then for each
check receives limits, fresh uids, the trusted script and the check's fds over its control
socket, forks a child that enters the check cgroup, unshares fresh namespaces and runs the check
under its own seccomp filter, and after the check sweeps every process and the tmpfs mounts
before it answers. Only a check's child returns from `_serve` and becomes that check.
"""

from __future__ import annotations

from vibethinker.sandbox import base as sb
from vibethinker.sandbox.bwrap import CGROUP_DIR, proc_hidden

# argv: [-c, control socket fd, check seccomp filter (hex), /tmp mount options, /dev/shm mount
# options]. Runs as uid 0 in the sandbox with CAP_SETUID/SETGID/KILL/SYS_ADMIN.
ZYGOTE = (
    (
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
    for f in _HIDDEN_FILES:  # host-wide counters (bwrap.PROC_HIDDEN): unreadable (nodev)
        _mount(b"/dev/null", f, None, _BIND)
        _mount(None, f, None, _REMOUNT | _BIND | _RDONLY | _NOSUID | _NODEV | _NOEXEC)
    for d in _HIDDEN_DIRS:
        _mount(b"tmpfs", d, b"tmpfs", _NOSUID | _NODEV | _NOEXEC | _RDONLY, b"size=4k")
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
_HIDDEN_FILES, _HIDDEN_DIRS = PROC_HIDDEN
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
    )
    .replace("CGROUP_DIR", CGROUP_DIR)
    .replace("PROC_HIDDEN", repr(tuple(tuple(p.encode() for p in ps) for ps in proc_hidden())))
)
