"""The trusted scripts the code verifier runs inside the sandbox (see code.py for the design).

They are source text, executed by vibethinker/sandbox (runner.BOOT or a zygote's check, after
base.SETUP) with `_drop` and `_UIDS`; the host fds sit at fixed numbers (sandbox.run places them
at 3, 4, ...), so each script is one constant text that a zygote compiles once. Import-light on purpose: os and sys only.
"""

from __future__ import annotations

# Plain data <-> text with type tags, both directions of the function-style channel. Hand-written
# (no json/re import: interpreter start-up dominates the cost of a check) and strict: the decoder
# builds only None/bool/int/float/complex/str/bytes and list/tuple/set/frozenset/dict of them.
CODEC = r"""
import os, sys
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)
_TAGS = {list: "l", tuple: "t", set: "S", frozenset: "z"}
_MAKE = {"l": list, "t": tuple, "S": set, "z": frozenset}

def _enc(v, out, d):
    if d > 200:
        raise ValueError("nested too deep")
    t = type(v)
    if v is None:
        out.append("N")
    elif t is bool:
        out.append("T" if v else "F")
    elif t is int:
        out.append("i%d;" % v)
    elif t is float:
        out.append("f%r;" % v)
    elif t is str:
        out.append("s%d:" % len(v))
        out.append(v)
    elif t in _TAGS:
        out.append("%s%d:" % (_TAGS[t], len(v)))
        for x in v:
            _enc(x, out, d + 1)
    elif t is dict:
        out.append("d%d:" % len(v))
        for k, x in v.items():
            _enc(k, out, d + 1)
            _enc(x, out, d + 1)
    elif t is bytes:
        h = v.hex()
        out.append("b%d:" % len(h))
        out.append(h)
    elif t is complex:
        out.append("c%r;%r;" % (v.real, v.imag))
    else:
        raise TypeError("not plain data: " + t.__name__)

def enc(v):
    out = []
    _enc(v, out, 0)
    return "".join(out)

def _num(s, i):
    j = s.index(";", i)
    return s[i:j], j + 1

def _dec(s, i, d):
    if d > 200:
        raise ValueError("nested too deep")
    c = s[i]
    i += 1
    if c == "N":
        return None, i
    if c == "T":
        return True, i
    if c == "F":
        return False, i
    if c == "i":
        t, i = _num(s, i)
        return int(t), i
    if c == "f":
        t, i = _num(s, i)
        return float(t), i
    if c == "c":
        a, i = _num(s, i)
        b, i = _num(s, i)
        return complex(float(a), float(b)), i
    j = s.index(":", i)
    n = int(s[i:j])
    i = j + 1
    if n < 0 or n > len(s):
        raise ValueError("bad length")
    if c == "s" or c == "b":
        if i + n > len(s):
            raise ValueError("truncated")
        t = s[i:i + n]
        return (t if c == "s" else bytes.fromhex(t)), i + n
    if c in _MAKE:
        items = []
        for _ in range(n):
            x, i = _dec(s, i, d + 1)
            items.append(x)
        return _MAKE[c](items), i
    if c == "d":
        r = {}
        for _ in range(n):
            k, i = _dec(s, i, d + 1)
            x, i = _dec(s, i, d + 1)
            r[k] = x
        return r, i
    raise ValueError("bad tag")

def dec(s):
    v, i = _dec(s, 0, 0)
    if i != len(s):
        raise ValueError("trailing data")
    return v

def send(f, v):
    b = enc(v).encode("utf-8", "surrogatepass")
    f.write(b"%d\n" % len(b) + b)
    f.flush()

def recv(f, limit=64 * 2**20):
    h = f.readline(32)
    if not h.endswith(b"\n"):
        raise EOFError("channel closed")
    n = int(h)
    if n < 0 or n > limit:
        raise ValueError("message too large")
    b = f.read(n)
    if len(b) != n:
        raise EOFError("channel closed")
    return dec(b.decode("utf-8", "surrogatepass"))
"""

# stdin/stdout: read the program from CODE_FD, run it as __main__ with the test's stdin/stdout.
RUNNER = r"""
_drop(0)
import os, sys
f = os.fdopen(CODE_FD, "rb")
src = f.read()
f.close()
sys.argv = ["solution.py"]
g = {"__name__": "__main__", "__builtins__": __builtins__, "__file__": "solution.py"}
del f, os
exec(compile(src, "solution.py", "exec"), g)
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
    src = os.fdopen(CODE_FD, "rb").read()
    req = os.fdopen(REQ_R, "rb")
    rep = os.fdopen(REP_W, "wb")

    def exc(e):
        return ("exc", type(e).__name__, not isinstance(e, Exception), str(e)[:200])

    ns = {"__name__": "solution", "__builtins__": __builtins__}
    try:
        exec(compile(src, "solution.py", "exec"), ns)
    except BaseException as e:
        send(rep, exc(e))
        os._exit(1)
    send(rep, ("ready",))

    def look(n):
        # "Solution.method" (LeetCode / LiveCodeBench style): a fresh instance's method per call
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
        nonce, entry, n, rest = f.read().decode("utf-8", "surrogatepass").split("\n", 3)
    prompt, test_code = rest[:int(n)], rest[int(n):]
    req = os.fdopen(REQ_W, "wb")
    rep = os.fdopen(REP_R, "rb")
    out = os.fdopen(1, "w")
    sys.stdout = sys.stderr = open(os.devnull, "w")
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
            return rpc(("call", name, args, kwargs))
        call.__name__ = name
        return call

    def names(code, acc):
        acc.update(code.co_names)
        for c in code.co_consts:
            if hasattr(c, "co_names"):
                names(c, acc)
        return acc

    first = None
    try:
        first = read()
    except Fatal:
        pass
    if first != ("ready",):
        verdict(False, "runtime_error")
    # The problem's prompt (HumanEval: imports, helpers such as poly or encode_cyclic, the
    # entry point's signature) runs here first when it is code, so the test's helpers are the
    # trusted ones and a submission cannot redefine them; a prose prompt is skipped.
    g = {"__name__": "__test__", "__builtins__": builtins}
    used = set()
    try:
        pcode = compile(prompt, "prompt.py", "exec")
        exec(pcode, g)
        names(pcode, used)
    except BaseException:
        g = {"__name__": "__test__", "__builtins__": builtins}
        used = set()
    try:
        code = compile(test_code, "test.py", "exec")
        exec(code, g)
    except BaseException:
        verdict(False, "sandbox_error")  # broken test code: not the submission's fault
    g[entry] = proxy(entry)  # the prompt's stub is not the function under test
    # Names used but defined by neither the prompt nor the test come from the submission.
    wanted = sorted(
        n for n in names(code, used) if n not in g and n != entry and not hasattr(builtins, n)
    )
    try:
        found = rpc(("names", wanted + [entry]))
        if type(found) is not dict or found.get(entry) != ("fn",):
            verdict(False, "runtime_error")  # the function under test is missing
        for n in wanted:
            f = found.get(n)
            if type(f) is tuple and f == ("fn",):
                g[n] = proxy(n)
            elif type(f) is tuple and len(f) == 2 and f[0] == "val":
                g[n] = f[1]
    except BaseException:
        verdict(False, fatal[0] if fatal else "runtime_error")
    check = g.get("check")
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


def _fill(script: str, **fds: int) -> str:
    for k, v in fds.items():
        script = script.replace(k, str(int(v)))
    return script


# Fixed fd numbers in the sandbox (sandbox.run places the host fds at 3, 4, ...), so each
# script is one constant text (compiled once per zygote).
RUNNER = _fill(RUNNER, CODE_FD=3)
FUNCTION_CHECK = _fill(FUNCTION_CHECK, CODE_FD=3, PAYLOAD_FD=4)
