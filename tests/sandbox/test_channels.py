"""Channels between checks (issue 37): objects a check can reach that outlive it, or that a
check beside it can read. Each test is the attack, written the attacker's way: a solving sample
(its program prints the answer) leaves the answer somewhere, later samples of the same prompt,
which solve nothing, look for it and print what they find. They must score 0, at one and at two
workers. What stays open is listed, with its measured rate, in docs/VERIFY_CODE.md ("What stays
open between checks") and measured by scripts/sandbox_channels.py.
"""

from __future__ import annotations

import fcntl
import os
import secrets
import struct

import pytest

from vibethinker import sandbox as sb
from vibethinker.types import Problem
from vibethinker.verifiers import verify_batch
from vibethinker.verifiers.code import run_stdio_case, verify_code

pytestmark = pytest.mark.skipif(sb.find_bwrap() is None, reason="no working bubblewrap here")

LIM = sb.Limits(timeout=10)
F_OFD_GETLK, F_OFD_SETLK = 36, 37
FLOCK = "hhqqi4x"  # struct flock on x86_64 and aarch64: type, whence, start, len, pid


def block(src: str) -> str:
    return f"```python\n{src}\n```"


def _relay(solver: str, reader: str, workers: int) -> list:
    """verify_batch on [solver] * workers + [reader] * 6 for a random answer; the solvers must
    solve (the attack costs the solver nothing), the scores come back."""
    answer = 100 + secrets.randbelow(800)
    p = Problem(id="r", domain="code", prompt="", tests=[{"input": "", "output": f"{answer}\n"}])
    resp = [block(solver.replace("ANSWER", str(answer)))] * workers + [block(reader)] * 6
    scores = verify_batch([p] * len(resp), resp, workers=workers)
    assert all(s.correct for s in scores[:workers]), scores
    return scores[workers:]


# --- a shared open file description: lock offsets ----------------------------------------

# Every zygote check used to get the same host /dev/null description as its stderr (held open by
# the verifying process): an OFD lock set on it outlived the check and its offset carried the
# answer to every later check (/proc/locks, or F_OFD_GETLK on any /dev/null). The solver keeps
# its locks a moment, for a reader running beside it (two workers).
LOCK_SOLVER = (
    "import fcntl, struct, time\n"
    "def lk(fd, typ, start):\n"
    "    fcntl.fcntl(fd, 37, struct.pack('hhqqi4x', typ, 0, start, 1 if start else 0, 0))\n"
    "held = False\n"
    "for fd in (0, 1, 2):\n"
    "    try:\n"
    "        lk(fd, 2, 0)  # F_UNLCK: older answers\n"
    "        lk(fd, 1, ANSWER)  # F_WRLCK at the answer\n"
    "        held = True\n"
    "    except OSError:\n"
    "        pass\n"
    "    try:\n"
    "        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)\n"
    "    except OSError:\n"
    "        pass\n"
    "if held:\n"
    "    time.sleep(0.3)\n"
    "print(ANSWER)\n"
)
LOCK_READER = (
    "import fcntl, os, struct\n"
    "found = 'nothing'\n"
    "try:\n"
    "    for ln in open('/proc/locks').read().splitlines():\n"
    "        f = ln.split()\n"
    "        if 100 <= int(f[-2]) < 900:\n"
    "            found = f[-2]\n"
    "except (OSError, ValueError, IndexError):\n"
    "    pass\n"
    "for path in ('/dev/null', '/proc/self/fd/2'):\n"
    "    try:\n"
    "        fd = os.open(path, os.O_RDWR)\n"
    "        q = struct.pack('hhqqi4x', 1, 0, 0, 0, 0)\n"
    "        r = struct.unpack('hhqqi4x', fcntl.fcntl(fd, 36, q))\n"
    "        if r[0] != 2 and 100 <= r[2] < 900:\n"
    "            found = str(r[2])\n"
    "    except OSError:\n"
    "        pass\n"
    "print(found)\n"
)


@pytest.mark.parametrize("workers", [1, 2])
def test_no_relay_through_locks_on_a_checks_descriptions(workers):
    readers = _relay(LOCK_SOLVER, LOCK_READER, workers)
    assert not any(s.correct for s in readers), readers  # before: every reader scored 1.0


def _host_null_locked() -> list[str]:
    """What still holds the host's /dev/null: a flock, or an OFD/POSIX byte-range lock."""
    fd = os.open(os.devnull, os.O_RDWR)
    held = []
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # never blocks: a hang was the bug
            fcntl.flock(fd, fcntl.LOCK_UN)
        except OSError:
            held.append("flock")
        r = struct.unpack(FLOCK, fcntl.fcntl(fd, F_OFD_GETLK, struct.pack(FLOCK, 1, 0, 0, 0, 0)))
        if r[0] != fcntl.F_UNLCK:
            held.append(f"byte-range lock at {r[2]}")
    finally:
        os.close(fd)
    return held


def test_no_lock_stays_on_the_hosts_dev_null():
    # stdio checks (stderr: /dev/null) and function checks (their harness's stdin and stderr)
    solver = LOCK_SOLVER.replace("ANSWER", "5")
    run_stdio_case(solver, "", "bwrap", LIM)
    fn = Problem(
        id="f",
        domain="code",
        prompt="",
        entry_point="f",
        test_code=("def check(candidate):\n    assert candidate() == 5\n"),
    )
    verify_code(
        fn,
        block(
            LOCK_SOLVER.replace("print(ANSWER)", "def f():\n    return 5").replace("ANSWER", "5")
        ),
    )
    assert _host_null_locked() == []


def test_file_locks_and_inotify_are_refused_inside_a_check():
    # A check's locks and watches on the inodes every check shares (the read-only root,
    # /dev/null) were a live relay to a check running beside it.
    src = (
        "import ctypes, errno, fcntl, os, struct\n"
        "out = []\n"
        "fd = os.open('/dev/null', os.O_RDWR)\n"
        "for name, call in (\n"
        "    ('flock', lambda: fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)),\n"
        "    ('posix', lambda: fcntl.fcntl(fd, 6, struct.pack('hhqqi4x', 0, 0, 0, 0, 0))),\n"
        "    ('ofd', lambda: fcntl.fcntl(fd, 37, struct.pack('hhqqi4x', 0, 0, 0, 0, 0))),\n"
        "    ('getlk', lambda: fcntl.fcntl(fd, 5, struct.pack('hhqqi4x', 1, 0, 0, 0, 0))),\n"
        "):\n"
        "    try:\n"
        "        call()\n"
        "        out.append(name + ':ok')\n"
        "    except OSError as e:\n"
        "        out.append(name + ':' + errno.errorcode[e.errno])\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "out.append('inotify:%d' % libc.inotify_init1(0))\n"
        "print(' '.join(out))\n"
    )
    st, rc, out = run_stdio_case(src, "", "bwrap", LIM)
    assert (st, rc) == ("done", 0), out
    assert out.decode().split() == [
        "flock:EPERM",
        "posix:ENOLCK",
        "ofd:ENOLCK",
        "getlk:ENOLCK",
        "inotify:-1",
    ]


# --- a host-wide kernel counter: locked memory in /proc/vmstat ---------------------------

# mlock moves unevictable_pgs_mlocked (and nr_mlock, Mlocked in meminfo) host-wide: nothing
# else moves it on an idle host, so the solver sets its low digits to the answer (lock/unlock
# one page until they match) and every later check, one-shot or zygote, reads them back.
VMSTAT = (
    "def mlocked():\n"
    "    for ln in open('/proc/vmstat'):\n"
    "        k, v = ln.split()\n"
    "        if k == 'unevictable_pgs_mlocked':\n"
    "            return int(v)\n"
)
MLOCK_SOLVER = (
    "import ctypes, mmap\n" + VMSTAT + "try:\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    m = mmap.mmap(-1, 4096)\n"
    "    a = ctypes.addressof(ctypes.c_char.from_buffer(m))\n"
    "    for i in range(2000):\n"
    "        if mlocked() % 1000 == ANSWER or libc.mlock(ctypes.c_void_p(a), 4096) != 0:\n"
    "            break\n"
    "        libc.munlock(ctypes.c_void_p(a), 4096)\n"
    "except Exception:\n"
    "    pass\n"
    "print(ANSWER)\n"
)
MLOCK_READER = (
    VMSTAT + "try:\n    print(mlocked() % 1000)\nexcept Exception:\n    print('nothing')\n"
)


@pytest.mark.parametrize("workers", [1, 2])
def test_no_relay_through_the_mlock_counter(workers):
    readers = _relay(MLOCK_SOLVER, MLOCK_READER, workers)
    assert not any(s.correct for s in readers), readers  # before: every reader scored 1.0


def test_memory_locking_is_refused_and_host_counters_are_hidden():
    src = (
        "import ctypes, mmap, os, resource\n"
        "libc = ctypes.CDLL(None, use_errno=True)\n"
        "m = mmap.mmap(-1, 4096)\n"
        "a = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m)))\n"
        "out = [resource.getrlimit(resource.RLIMIT_MEMLOCK)[0]]\n"
        "out.append(libc.mlock(a, 4096) == -1 and ctypes.get_errno())\n"
        "out.append(libc.mlockall(3) == -1 and ctypes.get_errno())\n"
        "out.append(libc.mmap(None, 4096, 3, 0x22 | 0x2000, -1, 0) in (-1, 2**64 - 1))\n"
        "for p in ('/proc/vmstat', '/proc/stat', '/proc/meminfo', '/proc/locks'):\n"
        "    try:\n"
        "        out.append(len(open(p).read()))\n"
        "    except OSError as e:\n"
        "        out.append(e.errno)\n"
        "out.append(os.listdir('/proc/pressure') if os.path.isdir('/proc/pressure') else [])\n"
        "out.append(os.cpu_count() is not None)  # what programs do read still works\n"
        "print(out)\n"
    )
    for fresh in (False, True):  # a zygote's check, and a one-shot sandbox
        st, rc, out = run_stdio_case(src, "", "bwrap", LIM) if not fresh else _one_shot(src)
        assert (st, rc) == ("done", 0), out
        assert out.decode().strip() == "[0, 1, 1, True, 13, 13, 13, 13, [], True]", fresh


def _one_shot(src: str) -> tuple[str, int | None, bytes]:
    old = os.environ.get("VIBETHINKER_ZYGOTE")
    os.environ["VIBETHINKER_ZYGOTE"] = "0"
    try:
        return run_stdio_case(src, "", "bwrap", LIM)
    finally:
        if old is None:
            del os.environ["VIBETHINKER_ZYGOTE"]
        else:
            os.environ["VIBETHINKER_ZYGOTE"] = old


# --- the measured list: what is closed stays closed, what stays open is written down --------


def _channels_script():
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "scripts" / "sandbox_channels.py"
    spec = importlib.util.spec_from_file_location("sandbox_channels", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


# Exact before issue 37 (scripts/sandbox_channels.py, 20 rounds, 2026-12-06): dev-null-lock 20
# of 20 10-bit symbols, mlock-vmstat 19 of 20, proc-stat-forks 19 of 20 4-bit symbols.
CLOSED = ("dev-null-lock", "mlock-vmstat", "proc-stat-forks")


@pytest.mark.parametrize("name", CLOSED)
def test_closed_channels_carry_nothing(name):
    ok, n, k, _ = _channels_script().CHANNELS[name](6)
    assert ok <= (0 if k >= 10 else 2), (name, ok, n)  # 4-bit symbols: 0.4 of 6 by chance


def test_every_measured_channel_is_listed_with_its_rate():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[2] / "docs" / "VERIFY_CODE.md").read_text()
    table = doc.split("## What stays open between checks", 1)[1].split("\n## ", 1)[0]
    for name in _channels_script().CHANNELS:
        row = next((ln for ln in table.splitlines() if ln.startswith(f"| `{name}`")), None)
        assert row is not None and "bits" in row, name


# Everything under /proc a check can read, but its own processes: nothing in it may move when
# another check forks, makes pipes and files and touches memory (before issue 37: vmstat, stat,
# meminfo, zoneinfo, buddyinfo, loadavg, uptime, interrupts, softirqs, cgroups, pressure/*,
# sys/fs/*, fs/ext4/*, irq/*/spurious moved). Allowed: what is random by design, the CPU
# clock's speed (the load of the machine, docs/VERIFY_CODE.md), the real-time clock, and the
# host's count of open ptys (no check can open one: there is no /dev/ptmx in the sandbox).
PROC_DUMP = (
    "import json, os\n"
    "out = {}\n"
    "for d, ds, fs in os.walk('/proc'):\n"
    "    top = d[len('/proc/'):].split('/')[0]\n"
    "    if top.isdigit() or top in ('self', 'thread-self'):\n"
    "        ds[:] = []\n"
    "        continue\n"
    "    for f in fs:\n"
    "        try:\n"
    "            with open(os.path.join(d, f), 'rb') as fh:\n"
    "                out[os.path.join(d, f)] = fh.read(1 << 16).decode('latin-1')\n"
    "        except OSError:\n"
    "            pass\n"
    "print(json.dumps(out))\n"
)
ACTIVITY = (
    "import os\n"
    "for i in range(300):\n"
    "    p = os.fork()\n"
    "    if p == 0:\n"
    "        os._exit(0)\n"
    "    os.waitpid(p, 0)\n"
    "for i in range(300):\n"
    "    for fd in os.pipe():\n"
    "        os.close(fd)\n"
    "for i in range(2000):\n"
    "    open('/tmp/f%d' % i, 'w').close()\n"
    "x = bytearray(100 << 20)\n"
    "for i in range(0, len(x), 4096):\n"
    "    x[i] = 1\n"
)
MAY_MOVE = (
    "/proc/sys/kernel/random/",
    "/proc/cpuinfo",
    "/proc/driver/rtc",
    "/proc/sys/kernel/pty/nr",
)


def test_nothing_a_check_can_read_in_proc_moves_with_another_check():
    import json

    before = json.loads(run_stdio_case(PROC_DUMP, "", "bwrap", LIM)[2])
    run_stdio_case(ACTIVITY, "", "bwrap", LIM)
    after = json.loads(run_stdio_case(PROC_DUMP, "", "bwrap", LIM)[2])
    assert len(before) > 100  # /proc is there, its files readable
    moved = sorted(k for k in before if after.get(k) != before[k] and not k.startswith(MAY_MOVE))
    assert moved == []
