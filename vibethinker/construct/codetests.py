"""Tests for expanded code problems that construction can trust.

A teacher that writes a new problem also proposes test *inputs*, never trusted outputs. Each
of the teacher's independent solutions runs on every input in the sandbox; an input becomes a
test only where at least `min_agree` of the solutions exit cleanly with the same (normalised)
output, and that output is the test's expected output. Solutions then pass or fail these tests
like any other trace.
"""

from __future__ import annotations

from collections import Counter


def norm_output(text: str) -> str:
    """Trailing whitespace per line and at the end ignored (the code verifier's tolerance)."""
    return "\n".join(line.rstrip() for line in text.rstrip().splitlines())


def agreed_tests(
    inputs: list[str], outputs: list[list[str | None]], min_agree: float
) -> list[dict[str, str]]:
    """outputs[s][i]: solution s's stdout on inputs[i] (None = error, timeout, no code).
    Returns [{"input", "output"}] for the inputs whose majority output is shared by at least
    `min_agree` of all solutions (a fraction of len(outputs))."""
    tests = []
    n = len(outputs)
    for i, inp in enumerate(inputs):
        got = Counter(norm_output(o[i]) for o in outputs if i < len(o) and o[i] is not None)
        if not got or not n:
            continue
        out, count = got.most_common(1)[0]
        if count / n >= min_agree:
            tests.append({"input": inp, "output": out})
    return tests
