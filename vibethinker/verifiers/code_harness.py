"""The trusted scripts the code verifier runs inside the sandbox (see code.py for the design).

They are source text, executed by vibethinker/sandbox (runner.BOOT or a zygote's check, after
base.SETUP) with `_drop` and `_UIDS`; the host fds sit at fixed numbers (sandbox.run places them
at 3, 4, ...), so each script is one constant text that a zygote compiles once. Import-light on purpose: os and sys only.
"""

from __future__ import annotations

import builtins
import importlib

from vibethinker.verifiers.code_codec import CODEC

# What every submission's interpreter gets before the submission runs (the sandbox's python runs
# with -S, so `site` never adds exit/quit; both are the usual SystemExit raisers here), and the
# LiveCodeBench rules a problem graded "lcb" gets: LCB's grader puts its standard imports
# (LCB_IMPORTS) in front of every program and raises the recursion limit. Importing them costs
# ~20 ms, so they run only when the program names one of their names (LCB_NAMES: the names they
# bind, builtins excepted), which gives the program the same namespace as LCB's.
PRELUDE = r"""
import builtins as _bi
LCB_NAMES = frozenset(@LCB_NAMES@.split())
LCB_IMPORTS = @LCB_IMPORTS@

class _Quitter:
    def __init__(self, name):
        self.name = name

    def __repr__(self):
        return "Use %s() or Ctrl-D (i.e. EOF) to exit" % self.name

    def __call__(self, code=None):
        try:
            sys.stdin.close()
        except Exception:
            pass
        raise SystemExit(code)

_bi.exit, _bi.quit = _Quitter("exit"), _Quitter("quit")

def _names(code, acc):
    acc.update(code.co_names)
    for c in code.co_consts:
        if hasattr(c, "co_names"):
            _names(c, acc)
    return acc

def _prepare(g, code, lcb):
    if lcb:
        sys.setrecursionlimit(max(sys.getrecursionlimit(), 50000))
        if not _names(code, set()).isdisjoint(LCB_NAMES):
            exec(LCB_IMPORTS, g)
"""

# stdin/stdout: read "flags\n" + the program from CODE_FD, run it as a real __main__ module (so
# multiprocessing can pickle its functions) with the test's stdin/stdout. Flag "L": LCB rules
# (LCB_IMPORTS when named, recursion limit). A SystemExit of nonzero code stays a nonzero exit
# status (a runtime error, as judges count it), although LCB's grader swallows it.
RUNNER = r"""
_drop(0)
import os, sys
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)
f = os.fdopen(CODE_FD, "rb")
flags, _, src = f.read().partition(b"\n")
f.close()
del f, os
@PRELUDE@
sys.argv = ["solution.py"]
_m = type(sys)("__main__")
_m.__file__ = "solution.py"
_m.__builtins__ = _bi
sys.modules["__main__"] = _m
_code = compile(src, "solution.py", "exec")
_prepare(_m.__dict__, _code, b"L" in flags)
exec(_code, _m.__dict__)
"""

# Function-style, submission side (the forked child): import the program, then answer requests.
# Everything here can be patched by the submission; nothing here is trusted.
SERVER = r"""
def _server():
    for fd in (PAYLOAD_FD, REQ_W, REP_R):
        os.close(fd)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)  # fd 1 was the harness's verdict channel: gone before _drop
    os.close(null)
    _drop(1)
    flags, n, rest = os.fdopen(CODE_FD, "rb").read().decode("utf-8", "surrogatepass").split("\n", 2)
    prompt, src = rest[:int(n)], rest[int(n):]
    lcb = "L" in flags
    req = os.fdopen(REQ_R, "rb")
    rep = os.fdopen(REP_W, "wb")

    def exc(e):
        return ("exc", type(e).__name__, not isinstance(e, Exception), str(e)[:200])

    # a real module (multiprocessing pickles the submission's functions by module and name)
    mod = type(sys)("solution")
    mod.__builtins__ = _bi
    sys.modules["solution"] = mod
    ns = mod.__dict__
    # the problem's own code first (HumanEval's helpers such as is_palindrome, which an answer
    # that gives only the entry function calls), then the submission on top of it
    try:
        exec(compile(prompt, "prompt.py", "exec"), ns)
    except BaseException:
        pass
    try:
        code = compile(src, "solution.py", "exec")
        _prepare(ns, code, lcb)
        exec(code, ns)
    except BaseException as e:
        send(rep, exc(e))
        os._exit(1)
    send(rep, ("ready",))
    inst = []

    def solution():
        # LiveCodeBench: one Solution() for all cases, and a top-level function when the
        # submission has no Solution class (whatever the starter code had)
        S = ns.get("Solution")
        if not isinstance(S, type):
            return None
        if not inst:
            inst.append(S())
        return inst[0]

    def look(n):
        if lcb:
            name = n.partition(".")[2] or n
            obj = solution()
            return getattr(obj, name) if obj is not None else ns[name]
        # "Solution.method" (LeetCode style): a fresh instance's method per call
        if n in ns:
            return ns[n]
        head, _, attr = n.partition(".")
        if attr and isinstance(ns.get(head), type):
            return getattr(ns[head](), attr)
        raise KeyError(n)

    while True:
        try:
            m = recv(req)
        except BaseException:
            os._exit(0)
        try:
            if m[0] == "names":
                found = {}
                for n in m[1]:
                    try:
                        v = look(n)
                    except Exception:
                        continue
                    if callable(v):
                        found[n] = ("fn",)
                    else:
                        try:
                            enc(v)
                            found[n] = ("val", v)
                        except Exception:
                            pass
                send(rep, ("ok", found))
            else:
                send(rep, ("ok", look(m[1])(*m[2], **m[3])))
        except BaseException as e:
            try:
                send(rep, exc(e))
            except BaseException:
                os._exit(1)
"""

# Function-style, grader side (the parent): never holds a submission object, only plain data it
# decoded itself. Reads the test code only after the fork, so the submission's memory never has it.
HARNESS = r"""
def _harness():
    import builtins
    for fd in (CODE_FD, REQ_R, REP_W):
        os.close(fd)
    _drop(0)
    if not _UIDS[0]:
        try:  # same uid as the server (no root to split uids): forbid ptrace / /proc/pid/mem
            import ctypes
            ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE = 4
        except Exception:
            pass
    with os.fdopen(PAYLOAD_FD, "rb") as f:
        nonce, entry, flags, n, rest = f.read().decode("utf-8", "surrogatepass").split("\n", 4)
    prompt, test_code = rest[:int(n)], rest[int(n):]
    req = os.fdopen(REQ_W, "wb")
    rep = os.fdopen(REP_R, "rb")
    out = os.fdopen(1, "w")
    sys.stdout = sys.stderr = open(os.devnull, "w")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 2 * MAXD + 1000))  # deep results compare
    lcb = "L" in flags
    fatal = []

    class CandidateError(Exception):
        pass

    class Fatal(BaseException):
        pass

    def verdict(passed, reason):
        out.write("%s %d %s" % (nonce, passed, reason))
        out.flush()
        os._exit(0)

    def read():
        try:
            return recv(rep)
        except EOFError:
            fatal.append("runtime_error")  # the submission died
        except BaseException:
            fatal.append("wrong_answer")  # garbage on the channel
        raise Fatal()

    def rpc(msg):
        if fatal:
            raise Fatal()
        try:
            send(req, msg)
        except OSError:
            fatal.append("runtime_error")
            raise Fatal()
        m = read()
        if type(m) is tuple and len(m) == 2 and m[0] == "ok":
            return m[1]
        if type(m) is tuple and len(m) == 4 and m[0] == "exc" and m[2] is False:
            if m[1] == "TypeError" and str(m[3]).startswith("not plain data"):
                fatal.append("wrong_answer")  # e.g. an always-equal object
                raise Fatal()
            # Re-raise plain builtin exception types so tests expecting e.g. ValueError still
            # work; any other name (StopIteration would silently end a map() or generator in
            # the test) becomes a CandidateError.
            err = CandidateError(str(m[1]))
            if m[1] in SAFE_EXC:
                try:
                    err = getattr(builtins, m[1])(str(m[3]))
                except Exception:
                    pass
            err.from_candidate = True
            raise err
        fatal.append("runtime_error")  # SystemExit & co, or garbage: never catchable by tests
        raise Fatal()

    def proxy(name):
        def call(*args, **kwargs):
            try:
                enc((args, kwargs))
            except (TypeError, ValueError):
                raise CandidateError("arguments are not plain data")
            r = rpc(("call", name, args, kwargs))
            if lcb and type(r) is tuple:  # LiveCodeBench compares a returned tuple as a list
                r = list(r)
            return r
        call.__name__ = name
        return call

    first = None
    try:
        first = read()
    except Fatal:
        pass
    if first != ("ready",):
        verdict(False, "runtime_error")
    # The problem's prompt (HumanEval: imports, helpers such as poly or encode_cyclic, the
    # entry point's signature) runs here first when it is code, so the test's helpers are the
    # trusted ones and a submission cannot redefine them. Every other name the test reads is
    # defined by the prompt or the test (the host refuses the problem otherwise): nothing but
    # the entry point comes from the submission.
    g = {"__name__": "__test__", "__builtins__": builtins}
    try:
        exec(compile(prompt, "prompt.py", "exec"), g)
    except BaseException:
        g = {"__name__": "__test__", "__builtins__": builtins}
    try:
        exec(compile(test_code, "test.py", "exec"), g)
    except BaseException:
        verdict(False, "sandbox_error")  # broken test code: not the submission's fault
    check = g.get("check")  # before the entry point's proxy, which may be named `check` too
    g[entry] = proxy(entry)  # the prompt's stub is not the function under test
    try:
        found = rpc(("names", [entry]))
        if type(found) is not dict or found.get(entry) != ("fn",):
            verdict(False, "runtime_error")  # the function under test is missing
    except BaseException:
        verdict(False, fatal[0] if fatal else "runtime_error")
    if not callable(check):
        verdict(False, "sandbox_error")
    try:
        check(proxy(entry))
    except BaseException as e:
        if fatal:
            verdict(False, fatal[0])
        candidate = isinstance(e, CandidateError) or getattr(e, "from_candidate", False)
        verdict(False, "runtime_error" if candidate else "wrong_answer")
    verdict(not fatal, fatal[0] if fatal else "ok")
"""

# Exception types a candidate's failure is re-raised as in the test code (builtins by name).
# Not StopIteration / StopAsyncIteration (they end an iteration silently) nor BaseExceptions.
SAFE_EXC = r"""
SAFE_EXC = frozenset((
    "Exception", "ArithmeticError", "AssertionError", "AttributeError", "BufferError",
    "EOFError", "FloatingPointError", "ImportError", "IndexError", "KeyError", "LookupError",
    "MemoryError", "ModuleNotFoundError", "NameError", "NotImplementedError", "OSError",
    "FileNotFoundError", "OverflowError", "RecursionError", "RuntimeError", "TypeError",
    "UnboundLocalError", "UnicodeError", "ValueError", "ZeroDivisionError",
))
"""

# Fork first: the child becomes the server (its own uid), the parent the harness (another uid).
FUNCTION_CHECK = (
    CODEC
    + PRELUDE
    + SAFE_EXC
    + SERVER
    + HARNESS
    + r"""
REQ_R, REQ_W = os.pipe()  # made in here: no process outside the two below holds an end,
REP_R, REP_W = os.pipe()  # so either side dying gives the other EOF / EPIPE
if os.fork() == 0:
    try:
        _server()
    finally:
        os._exit(1)
_harness()
"""
)


# LiveCodeBench's standard imports (lcb_runner/evaluation/testing_util.py, `import_string`),
# put in front of every program its grader runs; copied as text (facts, not its code).
LCB_MODULES = (
    "string re datetime collections heapq bisect copy math random statistics itertools "
    "functools operator io sys json builtins typing"
).split()
LCB_IMPORTS = (
    "".join(f"from {m} import *\n" for m in LCB_MODULES)
    + "".join(f"import {m}\n" for m in LCB_MODULES if m not in ("builtins", "typing"))
    + "sys.setrecursionlimit(50000)\n"
)


def lcb_names() -> frozenset[str]:
    """Names LCB_IMPORTS binds that are not builtins anyway (each module's public names)."""
    names = set(LCB_MODULES) - {"builtins", "typing"}
    for m in LCB_MODULES:
        mod = importlib.import_module(m)
        public = getattr(mod, "__all__", None)
        names.update(public if public is not None else (n for n in vars(mod) if n[0] != "_"))
    return frozenset(names - set(dir(builtins)))


def _fill(script: str, **fds: int) -> str:
    for k, v in fds.items():
        script = script.replace(k, str(int(v)))
    return script


# Fixed fd numbers in the sandbox (sandbox.run places the host fds at 3, 4, ...), so each
# script is one constant text (compiled once per zygote).
_LCB = {"@LCB_NAMES@": repr(" ".join(sorted(lcb_names()))), "@LCB_IMPORTS@": repr(LCB_IMPORTS)}
for _k, _v in _LCB.items():
    PRELUDE = PRELUDE.replace(_k, _v)
    FUNCTION_CHECK = FUNCTION_CHECK.replace(_k, _v)
RUNNER = _fill(RUNNER.replace("@PRELUDE@", PRELUDE), CODE_FD=3)
FUNCTION_CHECK = _fill(FUNCTION_CHECK, CODE_FD=3, PAYLOAD_FD=4)
