"""Measure the channels between sandboxed checks (docs/VERIFY_CODE.md, "What stays open between
checks"; the residual note of vibethinker/sandbox/zygote.py; tests/sandbox/test_channels.py and
tests/sandbox/test_redteam.py hold the attacks).

A sender check encodes a random symbol, a receiver check (the next one) decodes it; the script
prints how many symbols arrived intact and the rate in bits per check: the mutual information of
a symbol channel with that accuracy (errors spread evenly over the other symbols) divided by the
checks one symbol takes. Channels:
- `dev-null-lock`: an OFD lock at offset v (10-bit symbols) on the check's /dev/null (stderr);
  the receiver reads /proc/locks or asks F_OFD_GETLK on its own /dev/null (closed: issue 37).
- `mlock-vmstat`: the sender moves /proc/vmstat's unevictable_pgs_mlocked until its low digits
  are v (10-bit symbols); the receiver reads them (closed: issue 37).
- `proc-stat-forks`: /proc/stat's host-wide fork counter; the sender forks 50 x v times (v in
  0..15), the receiver compares it before and after (closed: /proc/stat hidden).
- `pipe-inode`: the host-wide inode counter of pipes; the sender makes 200 x v pipes (v in
  0..15), the receiver compares pipe inode numbers before and after (open, noisy).
- `cpu-throttle`: the CPU quota of a zygote's check cgroup; the sender spends it (v = 1) or
  not (v = 0) right before it ends, the receiver times its first 30 ms (closed: the quota is
  reset before every check).
- `page-cache`: residency of the first page of files the check sees; the sender reads the first
  page of the files whose bit is 1, the receiver times a read of each (one bit per file, 64 per
  symbol; a bit counts when it arrives right; closed while the root is the resident copy).

    python scripts/sandbox_channels.py [--rounds 20] [--only NAME ...]
    VIBETHINKER_SANDBOX_ROOT=off python scripts/sandbox_channels.py   # the host's /usr bound
"""

from __future__ import annotations

import argparse
import math
import secrets

from vibethinker import sandbox as sb
from vibethinker.sandbox import bwrap, rootfs
from vibethinker.verifiers.code import run_stdio_case

LIM = sb.Limits(timeout=10)
PIPE_READ = "import os\nr, w = os.pipe()\nprint(os.fstat(r).st_ino)\n"
FORKS_READ = (
    "try:\n"
    "    print([ln.split()[1] for ln in open('/proc/stat') if ln.startswith('processes')][0])\n"
    "except OSError:\n"
    "    print(0)\n"
)
LOCK_SEND = (
    "import fcntl, struct\n"
    "try:\n"
    "    fcntl.fcntl(2, 37, struct.pack('hhqqi4x', 2, 0, 0, 0, 0))\n"
    "    fcntl.fcntl(2, 37, struct.pack('hhqqi4x', 1, 0, 1 + V, 1, 0))\n"
    "except OSError:\n"
    "    pass\n"
)
LOCK_READ = (
    "import fcntl, os, struct\n"
    "got = -1\n"
    "try:\n"
    "    fd = os.open('/dev/null', os.O_RDWR)\n"
    "    r = struct.unpack('hhqqi4x', fcntl.fcntl(fd, 36, struct.pack('hhqqi4x', 1, 0, 0, 0, 0)))\n"
    "    got = r[2] - 1 if r[0] != 2 else -1\n"
    "except OSError:\n"
    "    pass\n"
    "print(got)\n"
)
MLOCKED = (
    "def mlocked():\n"
    "    for ln in open('/proc/vmstat'):\n"
    "        k, v = ln.split()\n"
    "        if k == 'unevictable_pgs_mlocked':\n"
    "            return int(v)\n"
)
MLOCK_SEND = (
    "import ctypes, mmap\n" + MLOCKED + "try:\n"
    "    libc = ctypes.CDLL(None, use_errno=True)\n"
    "    m = mmap.mmap(-1, 4096)\n"
    "    a = ctypes.c_void_p(ctypes.addressof(ctypes.c_char.from_buffer(m)))\n"
    "    for i in range(3000):\n"
    "        if mlocked() % 1024 == V or libc.mlock(a, 4096) != 0:\n"
    "            break\n"
    "        libc.munlock(a, 4096)\n"
    "except Exception:\n"
    "    pass\n"
)
MLOCK_READ = MLOCKED + "try:\n    print(mlocked() % 1024)\nexcept Exception:\n    print(-1)\n"
THROTTLE_SEND = (  # spend the quota (two threads spinning) in the check's last 60 ms
    "import threading, time\n"
    "def spin():\n"
    "    end = time.perf_counter() + 0.06\n"
    "    while time.perf_counter() < end:\n"
    "        pass\n"
    "ts = [threading.Thread(target=spin) for _ in range(2 * V)]\n"
    "[t.start() for t in ts]\n"
    "[t.join() for t in ts]\n"
)
THROTTLE_READ = (  # the longest pause in 30 ms of spinning: a throttled cgroup stops us
    "import time\n"
    "t0 = last = time.perf_counter()\n"
    "gap = 0.0\n"
    "while last - t0 < 0.03:\n"
    "    now = time.perf_counter()\n"
    "    gap, last = max(gap, now - last), now\n"
    "print(1 if gap > 0.01 else 0)\n"
)
FILES = (  # 64 files the check can see, chosen by a seed both checks know
    "import os, random, time\n"
    "ALL = sorted(os.path.join(d, f) for d, _, fs in os.walk('/') for f in fs\n"
    "             if not d.startswith(('/proc', '/sys', '/dev', '/tmp'))\n"
    "             and os.path.isfile(os.path.join(d, f))\n"
    "             and not os.path.islink(os.path.join(d, f))\n"
    "             and os.path.getsize(os.path.join(d, f)) > 0)\n"
    "FILES = random.Random(PICK).sample(ALL, min(64, len(ALL)))\n"
)
PAGE_READ = FILES + (
    "ts = []\n"
    "for f in FILES:\n"
    "    fd = os.open(f, os.O_RDONLY)\n"
    "    t = time.perf_counter()\n"
    "    os.pread(fd, 64, 0)\n"
    "    ts.append(time.perf_counter() - t)\n"
    "    os.close(fd)\n"
    "print(''.join('1' if t < 20e-6 else '0' for t in ts))\n"
)


def run(code: str) -> str:
    return run_stdio_case(code, "", "bwrap", LIM)[2].decode().strip()


def bits(p: float, k: float) -> float:
    """Mutual information (bits) of a k-bit symbol that arrives intact with probability p, its
    errors spread over the other symbols; 0 at or below chance."""
    m = 2**k
    if p <= 1 / m:
        return 0.0
    info = k + p * math.log2(p)
    return info + ((1 - p) * math.log2((1 - p) / (m - 1)) if p < 1 else 0.0)


def counter(read: str, send: str, scale: int, rounds: int) -> tuple[int, int, float, int]:
    """A counter channel: read, send v * scale events, read again; 4-bit symbols, 3 checks."""
    ok = 0
    for _ in range(rounds):
        v = secrets.randbelow(16)
        a = int(run(read) or 0)
        run(send.replace("V", str(v)))
        ok += round((int(run(read) or 0) - a) / scale) == v
    return ok, rounds, 4, 3


def symbol(send: str, read: str, k: int, rounds: int) -> tuple[int, int, float, int]:
    """Send a k-bit symbol in one check, read it in the next: 2 checks per symbol."""
    ok = 0
    for _ in range(rounds):
        v = secrets.randbelow(2**k)
        run(send.replace("V", str(v)))
        ok += run(read) == str(v)
    return ok, rounds, k, 2


def page_cache(rounds: int) -> tuple[int, int, float, int]:
    ok = total = 0
    for _ in range(max(1, rounds // 4)):
        pick = secrets.randbits(64)
        bits_ = [secrets.randbelow(2) for _ in range(64)]
        head = FILES.replace("PICK", repr(pick))
        run(
            head
            + f"for f, b in zip(FILES, {bits_!r}):\n    if b:\n        open(f, 'rb').read(64)\n"
        )
        got = run(PAGE_READ.replace("PICK", repr(pick)))
        ok += sum(str(b) == g for b, g in zip(bits_, got))
        total += len(bits_)
    return ok, total, 1, 2 / 64  # one bit per file, 64 files per pair of checks


CHANNELS = {
    "dev-null-lock": lambda n: symbol(LOCK_SEND, LOCK_READ, 10, n),
    "mlock-vmstat": lambda n: symbol(MLOCK_SEND, MLOCK_READ, 10, n),
    "proc-stat-forks": lambda n: counter(
        FORKS_READ,
        "import os\nfor i in range(V * 50):\n    p = os.fork()\n    if p == 0:\n"
        "        os._exit(0)\n    os.waitpid(p, 0)\n",
        50,
        n,
    ),
    "pipe-inode": lambda n: counter(
        PIPE_READ,
        "import os\nfor i in range(V * 200):\n    for fd in os.pipe():\n        os.close(fd)\n",
        400,
        n,
    ),
    "cpu-throttle": lambda n: symbol(THROTTLE_SEND, THROTTLE_READ, 1, n),
    "page-cache": page_cache,
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--only", nargs="*", choices=sorted(CHANNELS))
    a = ap.parse_args()
    root = rootfs.resident_root(bwrap.python_executable())
    print(
        f"read-only view: {root or 'the host /usr (VIBETHINKER_SANDBOX_ROOT=off or unavailable)'}"
    )
    for name in a.only or CHANNELS:
        ok, n, k, checks = CHANNELS[name](a.rounds)
        rate = bits(ok / n, k) / checks
        print(
            f"{name}: {ok} of {n} {k:g}-bit symbols intact ({n / 2**k:.1f} by chance); "
            f"{rate:.2f} bits per check"
        )


if __name__ == "__main__":
    main()
