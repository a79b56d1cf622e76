"""Measure the known host-wide channels between two sandboxed checks (the residual note of
vibethinker/sandbox/zygote.py; the xfail tests of tests/sandbox/test_redteam.py).

A sender check encodes a random symbol, a receiver check (the next one) decodes it; the script
prints how many symbols arrived intact. Channels:
- `pipe-inode`: the host-wide inode counter of pipes; the sender makes 200 x v pipes (v in 0..15),
  the receiver compares pipe inode numbers before and after.
- `page-cache`: residency of the first page of files the check sees; the sender
  reads the first page of the files whose bit is 1, the receiver times a read of each (one bit per
  file, 64 per symbol; a bit counts when it arrives right).

    python scripts/sandbox_channels.py [--rounds 20]
    VIBETHINKER_SANDBOX_ROOT=off python scripts/sandbox_channels.py   # the host's /usr bound
"""

from __future__ import annotations

import argparse
import secrets

from vibethinker import sandbox as sb
from vibethinker.sandbox import bwrap, rootfs
from vibethinker.verifiers.code import run_stdio_case

LIM = sb.Limits(timeout=10)
PIPE_READ = "import os\nr, w = os.pipe()\nprint(os.fstat(r).st_ino)\n"
FILES = (  # 64 files the check can see, chosen by a seed both checks know
    "import os, random, time\n"
    "ALL = sorted(os.path.join(d, f) for d, _, fs in os.walk('/') for f in fs\n"
    "             if not d.startswith(('/proc', '/sys', '/dev', '/tmp'))\n"
    "             and os.path.isfile(os.path.join(d, f)) and not os.path.islink(os.path.join(d, f))\n"
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


def pipe_inode(rounds: int) -> tuple[int, int]:
    ok = 0
    for _ in range(rounds):
        v = secrets.randbelow(16)
        a = int(run(PIPE_READ))
        run(
            f"import os\nfor i in range({v * 200}):\n    for fd in os.pipe():\n        os.close(fd)\n"
        )
        ok += round((int(run(PIPE_READ)) - a) / 400) == v
    return ok, rounds


def page_cache(rounds: int) -> tuple[int, int]:
    ok = total = 0
    for _ in range(rounds):
        pick = secrets.randbits(64)
        bits = [secrets.randbelow(2) for _ in range(64)]
        head = FILES.replace("PICK", repr(pick))
        run(
            head + f"for f, b in zip(FILES, {bits!r}):\n    if b:\n        open(f, 'rb').read(64)\n"
        )
        got = run(PAGE_READ.replace("PICK", repr(pick)))
        ok += sum(str(b) == g for b, g in zip(bits, got))
        total += len(bits)
    return ok, total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=20)
    a = ap.parse_args()
    root = rootfs.resident_root(bwrap.python_executable())
    print(
        f"read-only view: {root or 'the host /usr (VIBETHINKER_SANDBOX_ROOT=off or unavailable)'}"
    )
    ok, n = pipe_inode(a.rounds)
    print(f"pipe-inode: {ok} of {n} 4-bit symbols intact (1 in 16 by chance)")
    ok, n = page_cache(max(1, a.rounds // 4))
    print(f"page-cache: {ok} of {n} bits intact (half by chance)")


if __name__ == "__main__":
    main()
