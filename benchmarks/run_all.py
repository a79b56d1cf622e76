"""`make bench`: every side-by-side benchmark, one after another, each in its own process
(so one's threads, pools and caches do not colour the next). Figures go to BENCHMARKS.md by hand,
with the date and the machine."""

from __future__ import annotations

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BENCHES = ["verifiers.py", "sampling.py", "sft.py", "rl_step.py", "distill_score.py"]


def main() -> int:
    failed = []
    for name in BENCHES:
        path = os.path.join(HERE, name)
        if not os.path.exists(path):
            print(f"== {name}: missing, skipped")
            continue
        print(f"\n== {name} ==", flush=True)
        t0 = time.time()
        rc = subprocess.call([sys.executable, path])
        print(f"== {name}: exit {rc} in {time.time() - t0:.0f} s", flush=True)
        if rc:
            failed.append(name)
    if failed:
        print(f"failed: {', '.join(failed)}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
