"""A seccomp filter for the code sandbox: a classic-BPF program, assembled here by hand.

bubblewrap installs it (`bwrap --seccomp FD`) in the sandboxed child right before it execs the
interpreter (after bwrap itself has used mount, pivot_root, unshare, ...), with no_new_privs set;
every process of the sandbox, a zygote's forked checks included, inherits it and cannot drop it.

What it refuses, and why (namespaces and dropped capabilities already stop most of these; the
filter removes the kernel attack surface and the few holes the other layers leave):
- new namespaces: `unshare`, `setns`, `clone` with any CLONE_NEW* flag (a nested user namespace
  gives full capabilities in it: mounting an uncapped tmpfs, a much larger kernel surface).
  `clone3` answers ENOSYS, so the C library falls back to `clone` whose flags we can read
  (clone3 passes them in memory, out of a filter's reach). Threads, fork, vfork,
  posix_spawn and subprocess use clone without those flags and keep working;
- mounts and the new mount API, chroot, pivot_root, swap, reboot, modules, kexec, acct, quotas,
  clocks, host/domain names, syslog, vhangup, I/O ports, modify_ldt, fanotify, handle-based opens;
- kernel keyrings (`add_key`, `request_key`, `keyctl`): keys outlive every process;
- System V IPC (`shmget`, `shmat`, `shmctl`, `msgget`, `semget`): objects outlive processes and
  shared memory is counted by no rlimit. POSIX shm (files in the capped /dev/shm) and
  memfd_create stay allowed (multiprocessing and some libraries use them); their memory is
  counted by the sandbox's cgroup when one exists (cgroups.py);
- `io_uring_*`, `bpf`, `perf_event_open`, `userfaultfd`, `memfd_secret`: large kernel surface;
- `ptrace`, `process_vm_readv/writev`, `kcmp`, `pidfd_getfd`: no process inspects another;
- `personality` except the query and the default personas (as Docker's default profile);
- `socket`/`socketpair` of any family but AF_UNIX (and AF_INET/AF_INET6 when the check asks for
  a network, `Limits.network`): a network namespace is state that outlives a connection
  (TIME_WAIT sockets, port and packet counters in /proc/net) and TCP buffers are kernel memory
  a cgroup v1 does not count; AF_NETLINK would subscribe to the host's device events (uevents
  reach every network namespace of the initial user namespace); AF_VSOCK is not isolated by a
  network namespace at all (a VM's host is reachable through it); AF_ALG, AF_PACKET, AF_KEY;
- `mq_open`: POSIX message queues outlive their processes (RLIMIT_MSGQUEUE=0 refuses them too);
- memory locking (`mlock`, `mlock2`, `mlockall`, `munlock`, `munlockall`; RLIMIT_MEMLOCK=0 also
  refuses `mmap(MAP_LOCKED)`): each call moves host-wide /proc/vmstat counters that no namespace
  separates (an exact relay to any later check, ~1.6M pages/s), and no judge program needs it;
- file locks (`flock`; `fcntl`'s byte-range, OFD, lease and dnotify commands, ENOLCK) and
  inotify: every check sees the same inodes (the read-only root, /dev/null), so a lock or a
  watch on one is read by a check running beside it (F_GETLK, /proc/locks), a live relay
  between two samples graded at once. Within one check a program has no one to lock against.

Two variants: `build(arch)` for checks, and `build(arch, zygote=True)` for a zygote (zygote.py),
which additionally may `unshare` and `mount` to give each check fresh namespaces and tmpfs;
each check then installs the check filter on top of it before anything untrusted runs (stacked
filters: the strictest answer wins), so a check never holds those two.
A syscall from another ABI than the host's (i386 `int 0x80` or x32 on x86_64) kills the process:
a filter written for one table would read the numbers of another wrong.

Only x86_64 and aarch64 tables are here; elsewhere `program()` returns None and the sandbox runs
without a filter (logged once by the caller).
"""

from __future__ import annotations

import os
import platform
import struct

# BPF instruction classes/modes (linux/bpf_common.h) and seccomp return values (linux/seccomp.h)
_LD_W_ABS = 0x00 | 0x00 | 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x05 | 0x10  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x05 | 0x30  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x05 | 0x40  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000
EPERM, ENOLCK, ENOSYS, EAFNOSUPPORT = 1, 37, 38, 97

# offsets in struct seccomp_data {int nr; u32 arch; u64 ip; u64 args[6];} (little endian: the
# low 32 bits of args[i] sit at 16 + 8 i)
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_BIT = 0x40000000  # x86_64: x32 ABI syscalls have this bit in nr

CLONE_NEW_FLAGS = (
    0x00020000  # CLONE_NEWNS
    | 0x02000000  # CLONE_NEWCGROUP
    | 0x04000000  # CLONE_NEWUTS
    | 0x08000000  # CLONE_NEWIPC
    | 0x10000000  # CLONE_NEWUSER
    | 0x20000000  # CLONE_NEWPID
    | 0x40000000  # CLONE_NEWNET
)
SOCKET_FAMILIES = (1,)  # AF_UNIX
NETWORK_FAMILIES = (2, 10)  # AF_INET, AF_INET6 (Limits.network)
ZYGOTE_ALLOWED = ("unshare", "mount")  # a zygote's per-check namespaces and tmpfs
PERSONAS = (0x0, 0x8, 0x20000, 0x20008, 0xFFFFFFFF)  # LINUX, UNAME26, LINUX32(+UNAME26), query

# Denied with EPERM. Numbers from the kernel's uapi headers (asm/unistd_64.h, and
# asm-generic/unistd.h for aarch64); None where the arch has no such syscall.
DENY: dict[str, tuple[int | None, int | None]] = {
    # name: (x86_64, aarch64)
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "keyctl": (250, 219),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "memfd_secret": (447, 447),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "kcmp": (312, 272),
    "pidfd_getfd": (438, 438),
    "shmget": (29, 194),
    "shmat": (30, 196),
    "shmctl": (31, 195),
    "msgget": (68, 186),
    "semget": (64, 190),
    "acct": (163, 89),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "reboot": (169, 142),
    "sethostname": (170, 161),
    "setdomainname": (171, 162),
    "syslog": (103, 116),
    "quotactl": (179, 60),
    "quotactl_fd": (443, 443),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "adjtimex": (159, 171),
    "clock_adjtime": (305, 266),
    "fanotify_init": (300, 262),
    "lookup_dcookie": (212, 18),
    "vhangup": (153, 58),
    # Exact probes of the host's page cache, which every sandbox shares (the read-only stdlib
    # files are the same inodes for all): a check could leave bits in which pages are cached
    # and a later check read them back. preadv2 is only needed for its flags (RWF_NOWAIT fails
    # on an uncached page); plain preadv/pread are allowed. Without fadvise a check can load
    # pages but not evict them. What is left (timing a cold read of a page nobody has read yet)
    # is measured in tests/sandbox/test_redteam.py (a known channel).
    "mincore": (27, 232),
    "fadvise64": (221, 223),  # POSIX_FADV_DONTNEED evicts clean pages of any readable file
    "cachestat": (451, 451),
    "preadv2": (327, 286),
    "pwritev2": (328, 287),
    "nfsservctl": (180, 42),
    "mq_open": (240, 180),
    "mlock": (149, 228),
    "mlock2": (325, 284),
    "mlockall": (151, 230),
    "munlock": (150, 229),
    "munlockall": (152, 231),
    "flock": (73, 32),
    "inotify_init": (253, None),
    "inotify_init1": (294, 26),
    "inotify_add_watch": (254, 27),
    "iopl": (172, None),
    "ioperm": (173, None),
    "modify_ldt": (154, None),
    "uselib": (134, None),
    "_sysctl": (156, None),
    "create_module": (174, None),
    "get_kernel_syms": (177, None),
    "query_module": (178, None),
}
# Inspected arguments: (x86_64, aarch64)
CLONE, CLONE3 = (56, 220), (435, 435)
SOCKET, SOCKETPAIR = (41, 198), (53, 199)
PERSONALITY = (135, 92)
FCNTL = (72, 25)
# fcntl commands refused with ENOLCK (module doc): F_GETLK, F_SETLK, F_SETLKW, F_OFD_GETLK,
# F_OFD_SETLK, F_OFD_SETLKW, F_SETLEASE, F_GETLEASE, F_NOTIFY
FCNTL_LOCKS = (5, 6, 7, 36, 37, 38, 1024, 1025, 1026)


def _ins(code: int, jt: int | str, jf: int | str, k: int) -> tuple:
    return (code, jt, jf, k)


def _assemble(items: list) -> bytes:
    """Resolve label jumps (forward only, < 256 instructions) and pack struct sock_filter
    {u16 code; u8 jt; u8 jf; u32 k} in native byte order."""
    labels, ins = {}, []
    for it in items:
        if isinstance(it, str):
            labels[it] = len(ins)
        else:
            ins.append(it)
    out = []
    for i, (code, jt, jf, k) in enumerate(ins):
        offs = []
        for t in (jt, jf):
            off = labels[t] - i - 1 if isinstance(t, str) else t
            if not 0 <= off < 256:
                raise ValueError(f"jump out of range at {i}: {t}")
            offs.append(off)
        out.append(struct.pack("=HBBI", code, offs[0], offs[1], k & 0xFFFFFFFF))
    return b"".join(out)


def build(arch: str, network: bool = False, zygote: bool = False) -> bytes:
    """The filter program for `arch` ("x86_64" or "aarch64"); `network` allows IPv4/IPv6
    sockets, `zygote` unshare and mount (module doc)."""
    a = {"x86_64": 0, "aarch64": 1}[arch]
    deny = [nrs[a] for n, nrs in DENY.items() if not (zygote and n in ZYGOTE_ALLOWED)]
    families = SOCKET_FAMILIES + (NETWORK_FAMILIES if network else ())
    p: list = [
        _ins(_LD_W_ABS, 0, 0, _ARCH),
        _ins(_JEQ, 1, 0, AUDIT_ARCH[arch]),
        _ins(_RET, 0, 0, RET_KILL_PROCESS),  # another ABI: numbers would mean other syscalls
        _ins(_LD_W_ABS, 0, 0, _NR),
    ]
    if arch == "x86_64":
        p.append(_ins(_JGE, "kill", 0, X32_BIT))
    p += [_ins(_JEQ, "eperm", 0, nr) for nr in deny if nr is not None]
    p += [
        _ins(_JEQ, "clone", 0, CLONE[a]),
        _ins(_JEQ, "enosys", 0, CLONE3[a]),
        _ins(_JEQ, "socket", 0, SOCKET[a]),
        _ins(_JEQ, "socket", 0, SOCKETPAIR[a]),
        _ins(_JEQ, "personality", 0, PERSONALITY[a]),
        _ins(_JEQ, "fcntl", 0, FCNTL[a]),
        _ins(_RET, 0, 0, RET_ALLOW),
        "fcntl",
        _ins(_LD_W_ABS, 0, 0, _ARG1),  # the command
        *[_ins(_JEQ, "enolck", 0, c) for c in FCNTL_LOCKS],
        _ins(_RET, 0, 0, RET_ALLOW),
        "clone",
        _ins(_LD_W_ABS, 0, 0, _ARG0),  # the flags (low 32 bits are all the kernel reads)
        _ins(_JSET, "eperm", 0, CLONE_NEW_FLAGS),
        _ins(_RET, 0, 0, RET_ALLOW),
        "socket",
        _ins(_LD_W_ABS, 0, 0, _ARG0),  # the address family
        *[_ins(_JEQ, "allow", 0, f) for f in families],
        _ins(_RET, 0, 0, RET_ERRNO | EAFNOSUPPORT),
        "personality",
        _ins(_LD_W_ABS, 0, 0, _ARG0),
        *[_ins(_JEQ, "allow", 0, v) for v in PERSONAS],
        "eperm",
        _ins(_RET, 0, 0, RET_ERRNO | EPERM),
        "allow",
        _ins(_RET, 0, 0, RET_ALLOW),
        "enolck",
        _ins(_RET, 0, 0, RET_ERRNO | ENOLCK),
        "enosys",
        _ins(_RET, 0, 0, RET_ERRNO | ENOSYS),
        "kill",
        _ins(_RET, 0, 0, RET_KILL_PROCESS),
    ]
    return _assemble(p)


def program(network: bool = False, zygote: bool = False) -> bytes | None:
    """The filter for this host's architecture, or None when we have no table for it."""
    key = (network, zygote)
    if key not in _CACHE:
        arch = platform.machine()
        _CACHE[key] = build(arch, network, zygote) if arch in AUDIT_ARCH else None
    return _CACHE[key]


def program_fd(network: bool = False, zygote: bool = False) -> int | None:
    """A fresh fd (positioned at 0, not inheritable) holding the program, for `bwrap --seccomp`
    (bwrap reads it to the end, so each bwrap needs its own); None without a filter."""
    prog = program(network, zygote)
    if prog is None:
        return None
    fd = os.memfd_create("vt-seccomp", os.MFD_CLOEXEC)
    os.write(fd, prog)
    os.lseek(fd, 0, os.SEEK_SET)
    return fd


_CACHE: dict[tuple[bool, bool], bytes | None] = {}
