"""Code world: tiny Python tasks, function-style (HumanEval-like `check(candidate)`) and
stdin/stdout programs, each with a teacher that writes several different algorithms (a loop, a
builtin, a closed formula, ...) and a few buggy ones (off-by-one, wrong comparison, ...).

The teacher checks itself: every solution is executed against the task's tests here (trusted,
generated code, run in-process) and kept only if it passes; every bug is kept only if it fails.
Traces are `<think>one line</think>` then one fenced python block (the verifier takes the last).
"""

from __future__ import annotations

import contextlib
import io
import random
from collections.abc import Callable
from dataclasses import dataclass

from vibethinker.types import Problem

SUBDOMAINS = ("function", "stdio")


@dataclass
class Task:
    prompt: str
    sols: list[tuple[str, str]]  # (think note, code)
    bugs: list[tuple[str, str]]
    entry: str | None = None  # function-style
    cases: list[tuple[tuple, object]] | None = None  # function-style: (args, expected)
    io: list[tuple[str, str]] | None = None  # stdin/stdout: (input, output)


def _ints(rng: random.Random, lo: int, hi: int, n: int) -> list[int]:
    return [rng.randint(lo, hi) for _ in range(n)]


# ---------------------------------------------------------------- function-style tasks


def _between(rng: random.Random) -> Task:
    k = rng.randint(0, 18)
    m = rng.randint(k + 2, 20)
    lists = [[k, m, k + 1, m + 1]] + [_ints(rng, 0, 22, rng.randint(3, 6)) for _ in range(2)]
    return Task(
        f"Write a Python function between(xs) that returns the sum of the items of xs from {k} "
        f"to {m} inclusive.",
        [
            (
                f"loop and add items with {k}<=x<={m}",
                f"def between(xs):\n    t = 0\n    for x in xs:\n        if {k} <= x <= {m}:\n"
                f"            t += x\n    return t",
            ),
            (
                "sum a filtered generator",
                f"def between(xs):\n    return sum(x for x in xs if {k} <= x <= {m})",
            ),
            (
                "sum all then drop items outside the range",
                f"def between(xs):\n    out = [x for x in xs if x < {k} or x > {m}]\n"
                f"    return sum(xs) - sum(out)",
            ),
        ],
        [
            ("strict bounds", f"def between(xs):\n    return sum(x for x in xs if {k} < x < {m})"),
            ("sum everything", "def between(xs):\n    return sum(xs)"),
        ],
        entry="between",
        cases=[((xs,), sum(x for x in xs if k <= x <= m)) for xs in lists],
    )


def _count_div(rng: random.Random) -> Task:
    k = rng.randint(2, 30)
    lists = [[k, k + 1, 2 * k, 0]] + [_ints(rng, 1, 3 * k, rng.randint(3, 6)) for _ in range(2)]
    return Task(
        f"Write a Python function count_div(xs) that returns how many items of xs are divisible "
        f"by {k}.",
        [
            (
                f"count items with x%{k}==0 in a loop",
                f"def count_div(xs):\n    c = 0\n    for x in xs:\n        if x % {k} == 0:\n"
                f"            c += 1\n    return c",
            ),
            (
                "length of a filtered list",
                f"def count_div(xs):\n    return len([x for x in xs if x % {k} == 0])",
            ),
            (
                "a multiple has no remainder: sum booleans",
                f"def count_div(xs):\n    return sum(not x % {k} for x in xs)",
            ),
        ],
        [
            (
                "counts the wrong items",
                f"def count_div(xs):\n    return sum(1 for x in xs if x % {k})",
            )
        ],
        entry="count_div",
        cases=[((xs,), sum(1 for x in xs if x % k == 0)) for xs in lists],
    )


def _tri(rng: random.Random) -> Task:
    k = rng.randint(1, 99)
    ns = [0, 1, rng.randint(2, 9), rng.randint(10, 30)]
    return Task(
        f"Write a Python function tri(n) that returns {k}*(1+2+...+n).",
        [
            (
                "add i for i up to n then scale",
                f"def tri(n):\n    t = 0\n    for i in range(1, n + 1):\n        t += i\n"
                f"    return {k} * t",
            ),
            ("closed form n(n+1)/2", f"def tri(n):\n    return {k} * n * (n + 1) // 2"),
            ("builtin sum over a range", f"def tri(n):\n    return {k} * sum(range(n + 1))"),
        ],
        [("range stops early", f"def tri(n):\n    return {k} * sum(range(n))")],
        entry="tri",
        cases=[((n,), k * n * (n + 1) // 2) for n in ns],
    )


def _top_plus(rng: random.Random) -> Task:
    k = rng.randint(0, 99)
    lists = [[5, 9, 2], [1]] + [_ints(rng, 0, 50, rng.randint(2, 6)) for _ in range(2)]
    return Task(
        f"Write a Python function top_plus(xs) that returns the largest item of xs plus {k}.",
        [
            ("builtin max", f"def top_plus(xs):\n    return max(xs) + {k}"),
            (
                "scan keeping the best",
                f"def top_plus(xs):\n    best = xs[0]\n    for x in xs:\n        if x > best:\n"
                f"            best = x\n    return best + {k}",
            ),
            ("sort and take the last", f"def top_plus(xs):\n    return sorted(xs)[-1] + {k}"),
        ],
        [("takes the last item", f"def top_plus(xs):\n    return xs[-1] + {k}")],
        entry="top_plus",
        cases=[((xs,), max(xs) + k) for xs in lists],
    )


def _shift_rev(rng: random.Random) -> Task:
    k = rng.randint(1, 99)
    lists = [[1, 2, 3], []] + [_ints(rng, 0, 20, rng.randint(2, 5)) for _ in range(2)]
    return Task(
        f"Write a Python function shift_rev(xs) that returns xs reversed with {k} added to each "
        f"item.",
        [
            (
                "comprehension over xs[::-1]",
                f"def shift_rev(xs):\n    return [x + {k} for x in xs[::-1]]",
            ),
            (
                "walk the indices backwards",
                f"def shift_rev(xs):\n    out = []\n    for i in range(len(xs) - 1, -1, -1):\n"
                f"        out.append(xs[i] + {k})\n    return out",
            ),
            (
                "add first then reverse",
                f"def shift_rev(xs):\n    return list(reversed([x + {k} for x in xs]))",
            ),
        ],
        [("forgets to reverse", f"def shift_rev(xs):\n    return [x + {k} for x in xs]")],
        entry="shift_rev",
        cases=[((xs,), [x + k for x in xs[::-1]]) for xs in lists],
    )


def _count_char(rng: random.Random) -> Task:
    c = rng.choice("abcdefghijklmnopqrstuvwxyz")
    words = [c * 3 + "x", "zz" if c != "z" else "yy", c + "q" + c]
    return Task(
        f"Write a Python function count_char(s) that returns how many times '{c}' occurs in s.",
        [
            ("builtin str.count", f"def count_char(s):\n    return s.count('{c}')"),
            (
                "loop over the characters",
                f"def count_char(s):\n    n = 0\n    for ch in s:\n        if ch == '{c}':\n"
                f"            n += 1\n    return n",
            ),
            ("sum of matches", f"def count_char(s):\n    return sum(ch == '{c}' for ch in s)"),
        ],
        [("only checks presence", f"def count_char(s):\n    return int('{c}' in s)")],
        entry="count_char",
        cases=[((w,), w.count(c)) for w in words],
    )


def _func_test_code(cases: list[tuple[tuple, object]]) -> str:
    lines = ["def check(candidate):"]
    lines += [f"    assert candidate({', '.join(map(repr, a))}) == {e!r}" for a, e in cases]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------- stdin/stdout tasks


def _lin2(rng: random.Random) -> Task:
    k, m = rng.sample(range(1, 10), 2)
    pairs = [(1, 0), (0, 1)] + [tuple(_ints(rng, 0, 20, 2)) for _ in range(2)]
    return Task(
        f"Write a Python program that reads two integers a and b from one line and prints "
        f"{k}*a+{m}*b.",
        [
            (
                "split the line into two ints",
                f"a, b = map(int, input().split())\nprint({k} * a + {m} * b)",
            ),
            (
                "read all of stdin at once",
                f"import sys\na, b = map(int, sys.stdin.read().split())\nprint({k} * a + {m} * b)",
            ),
            (
                "parse a list then index it",
                f"v = [int(t) for t in input().split()]\nprint({k} * v[0] + {m} * v[1])",
            ),
        ],
        [("swaps the weights", f"a, b = map(int, input().split())\nprint({m} * a + {k} * b)")],
        io=[(f"{a} {b}\n", f"{k * a + m * b}\n") for a, b in pairs],
    )


def _sum_mult(rng: random.Random) -> Task:
    k = rng.randint(1, 99)
    ns = [1, rng.randint(2, 9), rng.randint(10, 40)]
    return Task(
        f"Write a Python program that reads n and prints the sum of i*{k} for i from 1 to n.",
        [
            (
                "accumulate in a loop",
                f"n = int(input())\nt = 0\nfor i in range(1, n + 1):\n    t += i * {k}\nprint(t)",
            ),
            ("closed form", f"n = int(input())\nprint({k} * n * (n + 1) // 2)"),
            ("sum a generator", f"n = int(input())\nprint(sum(i * {k} for i in range(1, n + 1)))"),
        ],
        [("range stops early", f"n = int(input())\nprint(sum(i * {k} for i in range(1, n)))")],
        io=[(f"{n}\n", f"{k * n * (n + 1) // 2}\n") for n in ns],
    )


def _count_above(rng: random.Random) -> Task:
    k = rng.randint(0, 99)
    rows = [[k, k + 1, max(k - 1, 0)]] + [_ints(rng, 0, 120, rng.randint(3, 6)) for _ in range(2)]
    return Task(
        f"Write a Python program that reads integers from one line and prints how many are "
        f"greater than {k}.",
        [
            (
                "count in a loop",
                f"c = 0\nfor t in input().split():\n    if int(t) > {k}:\n        c += 1\nprint(c)",
            ),
            ("sum booleans", f"xs = map(int, input().split())\nprint(sum(x > {k} for x in xs))"),
            (
                "sort and count from the end",
                f"xs = sorted(map(int, input().split()))\nprint(len([x for x in xs if x > {k}]))",
            ),
        ],
        [("uses >=", f"xs = map(int, input().split())\nprint(sum(x >= {k} for x in xs))")],
        io=[(" ".join(map(str, r)) + "\n", f"{sum(x > k for x in r)}\n") for r in rows],
    )


def _multiples(rng: random.Random) -> Task:
    k = rng.randint(1, 99)
    ns = [1, rng.randint(2, 5)]
    return Task(
        f"Write a Python program that reads n and prints {k}, 2*{k}, ..., n*{k}, one per line.",
        [
            ("print in a loop", f"n = int(input())\nfor i in range(1, n + 1):\n    print(i * {k})"),
            (
                "join the lines",
                f"n = int(input())\nprint('\\n'.join(str(i * {k}) for i in range(1, n + 1)))",
            ),
            (
                "step through a range",
                f"n = int(input())\nfor v in range({k}, n * {k} + 1, {k}):\n    print(v)",
            ),
        ],
        [("starts at zero", f"n = int(input())\nfor i in range(n):\n    print(i * {k})")],
        io=[(f"{n}\n", "".join(f"{i * k}\n" for i in range(1, n + 1))) for n in ns],
    )


def _spread(rng: random.Random) -> Task:
    k = rng.randint(0, 99)
    rows = [[4, 1, 9], [7]] + [_ints(rng, 0, 60, rng.randint(2, 6)) for _ in range(2)]
    return Task(
        f"Write a Python program that reads integers from one line and prints the largest minus "
        f"the smallest plus {k}.",
        [
            (
                "builtins max and min",
                f"xs = list(map(int, input().split()))\nprint(max(xs) - min(xs) + {k})",
            ),
            (
                "sort then ends",
                f"xs = sorted(map(int, input().split()))\nprint(xs[-1] - xs[0] + {k})",
            ),
        ],
        [
            (
                "assumes sorted input",
                f"xs = list(map(int, input().split()))\nprint(xs[-1] - xs[0] + {k})",
            )
        ],
        io=[(" ".join(map(str, r)) + "\n", f"{max(r) - min(r) + k}\n") for r in rows],
    )


FUNCTION_TASKS: list[Callable[[random.Random], Task]] = [
    _between, _count_div, _tri, _top_plus, _shift_rev, _count_char,
]  # fmt: skip
STDIO_TASKS: list[Callable[[random.Random], Task]] = [
    _lin2, _sum_mult, _count_above, _multiples, _spread,
]  # fmt: skip


# ---------------------------------------------------------------- teacher self-check


def _passes_function(code: str, test_code: str, entry: str) -> bool:
    ns: dict = {}
    try:
        exec(code, ns)  # trusted teacher code, generated above
        exec(test_code, ns)
        ns["check"](ns[entry])
        return True
    except Exception:
        return False


def _passes_io(code: str, cases: list[tuple[str, str]]) -> bool:
    for inp, want in cases:
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out), _stdin(inp):
                exec(code, {"__name__": "__main__"})
        except Exception:
            return False
        if out.getvalue().strip() != want.strip():
            return False
    return True


@contextlib.contextmanager
def _stdin(text: str):
    import sys

    old = sys.stdin
    sys.stdin = io.StringIO(text)
    try:
        yield
    finally:
        sys.stdin = old


def render(think: str, code: str) -> str:
    return f"<think>{think}</think>\n```python\n{code}\n```"


def make_code(rng: random.Random, idx: int, subdomain: str | None = None) -> Problem:
    """One code task (function-style and stdio alternate with idx unless given)."""
    sub = subdomain or SUBDOMAINS[idx % len(SUBDOMAINS)]
    task = rng.choice(FUNCTION_TASKS if sub == "function" else STDIO_TASKS)(rng)
    if sub == "function":
        test_code = _func_test_code(task.cases or [])
        ok = lambda c: _passes_function(c, test_code, task.entry)  # noqa: E731
    else:
        ok = lambda c: _passes_io(c, task.io or [])  # noqa: E731
    sols = [render(t, c) for t, c in task.sols if ok(c)]
    if not sols:
        raise AssertionError(f"world teacher bug: no solution passes for {task.prompt!r}")
    order = rng.sample(range(len(sols)), len(sols))  # no fixed favourite first
    return Problem(
        id="",
        domain="code",
        subdomain=sub,
        prompt=task.prompt,
        tests=[{"input": i, "output": o} for i, o in task.io] if task.io else None,
        test_code=test_code if sub == "function" else None,
        entry_point=task.entry,
        traces=[sols[i] for i in order],
        wrong_traces=[render(t, c) for t, c in task.bugs if not ok(c)],
    )
