"""The cases of the code reference corpus (scripts/code_reference_corpus.py runs the benchmarks'
own graders on them and writes tests/fixtures/code_reference.jsonl).

Each case is a problem in its benchmark's own format plus one response (the code of a model's
answer): LiveCodeBench rows (stdin/stdout and functional) and HumanEval rows. They cover the
output forms a grader must judge (trailing spaces, blank lines, `Yes`/`YES`, float formatting,
tokens across lines), the answer forms that pass the benchmark's grader (`exit()`, missing
standard imports, helpers of the prompt, returned `Counter`/namedtuple/tuple, deep results),
and the programs the graders' in-process harnesses break.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any


@dataclass
class Case:
    """One corpus case: `benchmark` ("lcb" or "humaneval"), its native `row`, the `code`."""

    id: str
    benchmark: str
    row: dict[str, Any]
    code: str
    note: str


# ---- LiveCodeBench stdin/stdout -------------------------------------------------------------
def _stdio_row(qid: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    tests = [{"input": i, "output": o, "testtype": "stdin"} for i, o in pairs]
    return {
        "question_id": qid,
        "question_content": f"Problem {qid}.",
        "starter_code": "",
        "public_test_cases": json.dumps(tests),
        "metadata": "{}",
    }


READ2 = "a, b = map(int, input().split())\n"
STDIO: dict[str, tuple[list[tuple[str, str]], dict[str, str]]] = {
    "sum": (
        [("3 4\n", "7\n"), ("10 -2\n", "8\n")],
        {
            "correct": READ2 + "print(a + b)",
            "trailing-spaces": READ2 + "print(str(a + b) + '   ')",
            "leading-spaces": READ2 + "print('  ' + str(a + b))",
            "blank-lines-after": READ2 + "print(a + b)\nprint()\nprint()",
            "blank-lines-before": READ2 + "print()\nprint(a + b)",
            "float-form": READ2 + "print(float(a + b))",
            "exp-form": READ2 + "print('%e' % (a + b))",
            "wrong": READ2 + "print(a - b)",
            "two-tokens": READ2 + "print(a + b, 0)",
            "exit": READ2 + "print(a + b)\nexit()",
            "quit": READ2 + "print(a + b)\nquit()",
            "sys-exit-1": READ2 + "import sys\nprint(a + b)\nsys.exit(1)",
            "raise-after": READ2 + "print(a + b)\nraise ValueError('late')",
            "raise-before": "raise ValueError('early')",
            "main-guard": "def main():\n    " + READ2 + "    print(a + b)\n"
            "if __name__ == '__main__':\n    main()",
            "stdin-readline": "import sys\na, b = map(int, sys.stdin.readline().split())\n"
            "print(a + b)",
            "stdin-read": "import sys\na, b = map(int, sys.stdin.read().split())\nprint(a + b)",
            "open0": "a, b = map(int, open(0).read().split())\nprint(a + b)",
            "for-line-stdin": "import sys\nfor line in sys.stdin:\n    a, b = map(int, line.split())\n"
            "    print(a + b)",
            "stdout-buffer": "import sys\n" + READ2 + "sys.stdout.buffer.write(b'%d\\n' % (a + b))",
            "global-at-module": READ2 + "s = 0\ndef add():\n    global s\n    s = a + b\n"
            "add()\nprint(s)",
            "future-import": "from __future__ import annotations\n" + READ2 + "print(a + b)",
            "numpy": "import numpy as np\n" + READ2 + "print(int(np.int64(a) + b))",
            "multiprocessing": "import multiprocessing as mp\ndef f(x):\n    return x\n"
            + READ2
            + "with mp.Pool(2) as p:\n    print(sum(p.map(f, [a, b])))",
            "threading-recursion": "import sys, threading\nsys.setrecursionlimit(10**6)\n"
            "threading.stack_size(1 << 26)\ndef go():\n    " + READ2 + "    print(a + b)\n"
            "t = threading.Thread(target=go)\nt.start()\nt.join()",
            "syntax-error": READ2 + "print(a + b",
        },
    ),
    "ratio": (
        [("1 2\n", "0.500000\n"), ("3 4\n", "0.750000\n")],
        {
            "correct": READ2 + "print('%.6f' % (a / b))",
            "short-float": READ2 + "print(a / b)",
            "exp-float": READ2 + "print('%.3e' % (a / b))",
            "more-digits": READ2 + "print('%.10f' % (a / b))",
            "rounded-off": READ2 + "print('%.2f' % (a / b + 0.001))",
            "fraction": READ2 + "print(f'{a}/{b}')",
            "decimal-module": "from decimal import Decimal\n"
            + READ2
            + "print(Decimal(a) / Decimal(b))",
            "comma": READ2 + "print(('%.6f' % (a / b)).replace('.', ','))",
        },
    ),
    "yesno": (
        [("4\n", "Yes\n"), ("7\n", "No\n")],
        {
            "correct": "n = int(input())\nprint('Yes' if n % 2 == 0 else 'No')",
            "upper": "n = int(input())\nprint('YES' if n % 2 == 0 else 'NO')",
            "lower": "n = int(input())\nprint('yes' if n % 2 == 0 else 'no')",
            "trailing-dot": "n = int(input())\nprint('Yes.' if n % 2 == 0 else 'No.')",
            "tab-after": "n = int(input())\nprint(('Yes' if n % 2 == 0 else 'No') + '\\t')",
            "exit-code-3": "import sys\nn = int(input())\nprint('Yes' if n % 2 == 0 else 'No')\n"
            "sys.exit(3)",
            "no-newline": "import sys\nn = int(input())\n"
            "sys.stdout.write('Yes' if n % 2 == 0 else 'No')",
        },
    ),
    "count": (
        [("3\n", "1\n2\n3\n"), ("1\n", "1\n")],
        {
            "correct": "for i in range(1, int(input()) + 1):\n    print(i)",
            "one-line": "print(*range(1, int(input()) + 1))",
            "blank-between": "for i in range(1, int(input()) + 1):\n    print(i)\n    print()",
            "crlf": "import sys\nfor i in range(1, int(input()) + 1):\n"
            "    sys.stdout.write('%d\\r\\n' % i)",
            "float-lines": "for i in range(1, int(input()) + 1):\n    print(float(i))",
            "sep-join": "print('\\n'.join(map(str, range(1, int(input()) + 1))))",
            "missing-last": "n = int(input())\nfor i in range(1, max(n, 2)):\n    print(i)",
            "extra-line": "for i in range(1, int(input()) + 2):\n    print(i)",
            "print-list": "print(list(range(1, int(input()) + 1)))",
        },
    ),
    "grid": (
        [("2\n", "1 0\n0 1\n"), ("3\n", "1 0 0\n0 1 0\n0 0 1\n")],
        {
            "correct": "n = int(input())\nfor i in range(n):\n"
            "    print(' '.join('1' if i == j else '0' for j in range(n)))",
            "double-spaces": "n = int(input())\nfor i in range(n):\n"
            "    print('  '.join('1' if i == j else '0' for j in range(n)))",
            "tabs": "n = int(input())\nfor i in range(n):\n"
            "    print('\\t'.join('1' if i == j else '0' for j in range(n)))",
            "no-spaces": "n = int(input())\nfor i in range(n):\n"
            "    print(''.join('1' if i == j else '0' for j in range(n)))",
            "negative-zero": "n = int(input())\nfor i in range(n):\n"
            "    print(' '.join('1' if i == j else '-0' for j in range(n)))",
            "float-cells": "n = int(input())\nfor i in range(n):\n"
            "    print(' '.join('1.0' if i == j else '0.00' for j in range(n)))",
            "one-line": "n = int(input())\n"
            "print(' '.join('1' if i == j else '0' for i in range(n) for j in range(n)))",
            "nbsp-separator": "n = int(input())\nfor i in range(n):\n"
            "    print('\\u00a0'.join('1' if i == j else '0' for j in range(n)))",
            "fullwidth-digits": "n = int(input())\nfor i in range(n):\n"
            "    print(' '.join('\\uff11' if i == j else '\\uff10' for j in range(n)))",
            "transposed-wrong": "n = int(input())\nfor i in range(n):\n"
            "    print(' '.join('0' if i == j else '1' for j in range(n)))",
        },
    ),
    "stdlib": (
        [("5\n3 1 4 1 5\n", "1 1 3 4 5\n"), ("1\n9\n", "9\n")],
        {
            "correct": "import heapq\ninput()\nh = list(map(int, input().split()))\n"
            "heapq.heapify(h)\nprint(*[heapq.heappop(h) for _ in range(len(h))])",
            "no-import-heapq": "input()\nh = list(map(int, input().split()))\n"
            "heapify(h)\nprint(*[heappop(h) for _ in range(len(h))])",
            "no-import-module": "input()\nh = list(map(int, input().split()))\n"
            "heapq.heapify(h)\nprint(*[heapq.heappop(h) for _ in range(len(h))])",
            "no-import-counter": "input()\nc = Counter(map(int, input().split()))\n"
            "print(*sorted(c.elements()))",
            "no-import-bisect": "input()\nr = []\nfor x in map(int, input().split()):\n"
            "    insort(r, x)\nprint(*r)",
            "no-import-undefined": "input()\nprint(*sortedcontainers_sort(input().split()))",
            "deep-recursion": "import sys\ninput()\nxs = list(map(int, input().split()))\n"
            "def srt(a, d=0):\n    return a if d > 3000 else srt(a, d + 1)\nprint(*sorted(srt(xs)))",
            "deep-recursion-raised": "import sys\nsys.setrecursionlimit(10000)\ninput()\n"
            "xs = list(map(int, input().split()))\n"
            "def srt(a, d=0):\n    return a if d > 3000 else srt(a, d + 1)\nprint(*sorted(srt(xs)))",
        },
    ),
    "bigint": (
        [("5000\n", "1" + "0" * 5000 + "\n")],
        {
            "print-int": "print(10 ** int(input()))",
            "print-str": "print('1' + '0' * int(input()))",
        },
    ),
    "empty": (
        [("0\n", "\n")],
        {
            "print-nothing": "input()",
            "print-blank": "input()\nprint()",
            "print-spaces": "input()\nprint('   ')",
            "print-zero": "input()\nprint(0)",
        },
    ),
}


# ---- LiveCodeBench functional (LeetCode style) --------------------------------------------
def _fn_row(qid: str, starter: str, func: str, pairs: list[tuple[str, str]]) -> dict[str, Any]:
    tests = [{"input": i, "output": o, "testtype": "functional"} for i, o in pairs]
    return {
        "question_id": qid,
        "question_content": f"Problem {qid}.",
        "starter_code": starter,
        "public_test_cases": json.dumps(tests),
        "metadata": json.dumps({"func_name": func}),
    }


def _sol(body: str, sig: str = "def pairSum(self, nums: List[int], target: int) -> List[int]:"):
    return (
        "class Solution:\n    "
        + sig
        + "\n"
        + "".join("        " + ln + "\n" for ln in body.split("\n"))
    )


PAIR = "seen = {}\nfor i, x in enumerate(nums):\n    if target - x in seen:\n"


def _pair(ret: str) -> str:
    return PAIR + f"        return {ret}\n    seen[x] = i"


FUNCTIONAL: dict[str, tuple[str, str, list[tuple[str, str]], dict[str, str]]] = {
    "pairsum": (
        "class Solution:\n    def pairSum(self, nums: List[int], target: int) -> List[int]:\n        ",
        "pairSum",
        [("[2, 7, 11, 15]\n9", "[0, 1]"), ("[3, 2, 4]\n6", "[1, 2]")],
        {
            "correct": _sol(_pair("[seen[target - x], i]")),
            "tuple": _sol(_pair("(seen[target - x], i)")),
            "namedtuple": "from collections import namedtuple\nP = namedtuple('P', 'a b')\n"
            + _sol(_pair("P(seen[target - x], i)")),
            "deque": "from collections import deque\n"
            + _sol(_pair("deque([seen[target - x], i])")),
            "reversed-wrong": _sol(_pair("[i, seen[target - x]]")),
            "no-import-list": _sol(_pair("list((seen[target - x], i))")),
            "top-level-fn": "def pairSum(nums, target):\n"
            + "".join("    " + ln + "\n" for ln in _pair("[seen[target - x], i]").split("\n")),
            "raises": _sol("raise ValueError('no')"),
            "returns-none": _sol("return None"),
            "exit-in-call": _sol("exit()"),
            "exit-at-import": "exit()\n" + _sol(_pair("[seen[target - x], i]")),
            "stateful": _sol(
                "self.n = getattr(self, 'n', 0) + 1\n" + _pair("[seen[target - x], i]")
            ),
            "numpy": "import numpy as np\n" + _sol(_pair("[int(np.int64(seen[target - x])), i]")),
            "numpy-array": "import numpy as np\n" + _sol(_pair("np.array([seen[target - x], i])")),
            "prints": _sol("print('debug')\n" + _pair("[seen[target - x], i]")),
            "infinite": _sol("while True:\n    pass"),
        },
    ),
    "counts": (
        "class Solution:\n    def counts(self, s: str) -> Dict[str, int]:\n        ",
        "counts",
        [('"aab"', '{"a": 2, "b": 1}'), ('"z"', '{"z": 1}')],
        {
            "correct": _sol(
                "d = {}\nfor c in s:\n    d[c] = d.get(c, 0) + 1\nreturn d", "def counts(self, s):"
            ),
            "counter": _sol("return Counter(s)", "def counts(self, s):"),
            "defaultdict": _sol(
                "d = defaultdict(int)\nfor c in s:\n    d[c] += 1\nreturn d", "def counts(self, s):"
            ),
            "ordereddict": "from collections import OrderedDict\n"
            + _sol(
                "d = OrderedDict()\nfor c in s:\n    d[c] = d.get(c, 0) + 1\nreturn d",
                "def counts(self, s):",
            ),
            "items-list": _sol("return sorted(Counter(s).items())", "def counts(self, s):"),
        },
    ),
    "values": (
        "class Solution:\n    def value(self, n: int) -> float:\n        ",
        "value",
        [("4", "2.0"), ("9", "3.0")],
        {
            "correct": _sol("return n ** 0.5", "def value(self, n):"),
            "int": _sol("return int(n ** 0.5)", "def value(self, n):"),
            "decimal": "from decimal import Decimal\n"
            + _sol("return Decimal(n).sqrt()", "def value(self, n):"),
            "string": _sol("return str(n ** 0.5)", "def value(self, n):"),
            "close-float": _sol("return n ** 0.5 + 1e-12", "def value(self, n):"),
            "bool-for-int": _sol("return True if n == 1 else n ** 0.5", "def value(self, n):"),
        },
    ),
    "nest": (
        "class Solution:\n    def nest(self, n: int) -> List:\n        ",
        "nest",
        [("300", "[" * 301 + "]" * 301)],
        {
            "correct": _sol(
                "r = []\nfor _ in range(n):\n    r = [r]\nreturn r", "def nest(self, n):"
            ),
            "recursive": _sol("return [] if n == 0 else [self.nest(n - 1)]", "def nest(self, n):"),
            "too-shallow": _sol(
                "r = []\nfor _ in range(n - 1):\n    r = [r]\nreturn r", "def nest(self, n):"
            ),
        },
    ),
    "check": (
        "class Solution:\n    def check(self, n: int) -> bool:\n        ",
        "check",
        [("4", "true"), ("7", "false")],
        {
            "correct": _sol("return n % 2 == 0", "def check(self, n):"),
            "int-for-bool": _sol("return int(n % 2 == 0)", "def check(self, n):"),
            "wrong": _sol("return n % 2 == 1", "def check(self, n):"),
        },
    ),
    "deep": (
        "class Solution:\n    def depth(self, n: int) -> int:\n        ",
        "depth",
        [("5000", "5000")],
        {
            "recursive": _sol(
                "return 0 if n == 0 else 1 + self.depth(n - 1)", "def depth(self, n):"
            ),
            "iterative": _sol("return n", "def depth(self, n):"),
        },
    ),
}


# ---- HumanEval -------------------------------------------------------------------------------
HUMANEVAL_CANONICAL = [
    0,
    2,
    4,
    7,
    12,
    13,
    23,
    28,
    29,
    34,
    35,
    45,
    48,
    53,
    55,
    60,
    100,
    111,
    120,
    152,
]
# (task, name, code): code is a whole answer, as the model gives it
HUMANEVAL_VARIANTS = [
    (
        10,
        "entry-only-helper",
        "def make_palindrome(string: str) -> str:\n    if not string:\n"
        "        return ''\n    beginning_of_suffix = 0\n"
        "    while not is_palindrome(string[beginning_of_suffix:]):\n        beginning_of_suffix += 1\n"
        "    return string + string[:beginning_of_suffix][::-1]\n",
    ),
    (
        32,
        "entry-only-poly",
        "def find_zero(xs: list):\n    begin, end = -1., 1.\n"
        "    while poly(xs, begin) * poly(xs, end) > 0:\n        begin *= 2.0\n        end *= 2.0\n"
        "    while end - begin > 1e-10:\n        center = (begin + end) / 2.0\n"
        "        if poly(xs, center) * poly(xs, begin) > 0:\n            begin = center\n"
        "        else:\n            end = center\n    return begin\n",
    ),
    (
        32,
        "redefined-poly",
        "def poly(xs, x):\n    return 0\n\ndef find_zero(xs: list):\n    return 0.0\n",
    ),
    (
        38,
        "entry-only-cyclic",
        "def decode_cyclic(s: str):\n    return encode_cyclic(encode_cyclic(s))\n",
    ),
    (
        50,
        "entry-only-shift",
        "def decode_shift(s: str):\n"
        "    return ''.join([chr(((ord(ch) - 5 - ord('a')) % 26) + ord('a')) for ch in s])\n",
    ),
    (
        0,
        "no-typing-import",
        "def has_close_elements(numbers: List[float], threshold: float) -> bool:\n"
        "    return any(abs(a - b) < threshold for i, a in enumerate(numbers)\n"
        "               for j, b in enumerate(numbers) if i != j)\n",
    ),
    (
        111,
        "counter",
        "from collections import Counter\n\ndef histogram(test):\n"
        "    c = Counter(w for w in test.split(' ') if w)\n    m = max(c.values(), default=0)\n"
        "    return Counter({k: v for k, v in c.items() if v == m})\n",
    ),
    (
        111,
        "defaultdict",
        "from collections import defaultdict\n\ndef histogram(test):\n"
        "    c = defaultdict(int)\n    for w in test.split(' '):\n        if w:\n            c[w] += 1\n"
        "    m = max(c.values(), default=0)\n    return {k: v for k, v in c.items() if v == m}\n",
    ),
    (
        107,
        "tuple",
        "def even_odd_palindrome(n):\n    e = o = 0\n    for i in range(1, n + 1):\n"
        "        if str(i) == str(i)[::-1]:\n            e, o = (e + 1, o) if i % 2 == 0 else (e, o + 1)\n"
        "    return (e, o)\n",
    ),
    (
        107,
        "list-for-tuple",
        "def even_odd_palindrome(n):\n    e = o = 0\n    for i in range(1, n + 1):\n"
        "        if str(i) == str(i)[::-1]:\n            e, o = (e + 1, o) if i % 2 == 0 else (e, o + 1)\n"
        "    return [e, o]\n",
    ),
    (53, "exit-at-import", "exit()\n\ndef add(x: int, y: int):\n    return x + y\n"),
    (53, "quit-in-call", "def add(x: int, y: int):\n    quit()\n"),
    (53, "wrong", "def add(x: int, y: int):\n    return x - y\n"),
    (53, "raises", "def add(x: int, y: int):\n    raise ValueError\n"),
    (53, "no-function", "def plus(x, y):\n    return x + y\n"),
    (
        23,
        "numpy",
        "import numpy as np\n\ndef strlen(string: str) -> int:\n    return int(np.size(list(string)))\n",
    ),
    (
        2,
        "decimal",
        "from decimal import Decimal\n\ndef truncate_number(number: float) -> float:\n"
        "    return float(Decimal(str(number)) % 1)\n",
    ),
    (
        4,
        "no-import-math",
        "def mean_absolute_deviation(numbers):\n    m = fsum(numbers) / len(numbers)\n"
        "    return fsum(abs(x - m) for x in numbers) / len(numbers)\n",
    ),
]


def lcb_cases() -> list[Case]:
    out: list[Case] = []
    for pid, (pairs, codes) in STDIO.items():
        for name, code in codes.items():
            out.append(
                Case(f"lcb-stdio/{pid}/{name}", "lcb", _stdio_row(f"s-{pid}", pairs), code, name)
            )
    for pid, (starter, func, pairs, codes) in FUNCTIONAL.items():
        for name, code in codes.items():
            row = _fn_row(f"f-{pid}", starter, func, pairs)
            out.append(Case(f"lcb-fn/{pid}/{name}", "lcb", row, code, name))
    return out


def humaneval_cases(problems: dict[str, dict[str, Any]]) -> list[Case]:
    out: list[Case] = []
    for t in HUMANEVAL_CANONICAL:
        p = problems[f"HumanEval/{t}"]
        for name, code in (
            ("canonical", p["prompt"] + p["canonical_solution"]),
            ("return-none", p["prompt"] + "    return None\n"),
        ):
            out.append(Case(f"humaneval/{t}/{name}", "humaneval", _he_row(p), code, name))
    for t, name, code in HUMANEVAL_VARIANTS:
        p = problems[f"HumanEval/{t}"]
        out.append(Case(f"humaneval/{t}/{name}", "humaneval", _he_row(p), code, name))
    return out


def _he_row(p: dict[str, Any]) -> dict[str, Any]:
    return {k: p[k] for k in ("task_id", "prompt", "test", "entry_point")}
