"""The channel codec of the function-style check (see code.py): plain data <-> type-tagged text.

Source text run inside the sandbox by both sides of the check (code_harness.FUNCTION_CHECK):
the server encodes its answers, the harness decodes them and builds every value itself.
"""

from __future__ import annotations

MAX_DEPTH = 10_000  # nesting a result may have on the channel (LCB compares any depth)

# Plain data <-> text with type tags, both directions of the function-style channel. Hand-written
# (no json/re import: interpreter start-up dominates the cost of a check) and strict: the decoder
# builds only None/bool/int/float/complex/str/bytes, deque/Decimal and list/tuple/set/frozenset/
# dict of them. Subclasses of these (Counter, OrderedDict, defaultdict, namedtuple, IntEnum)
# cross as their base type, read from the base's own slots.
CODEC = r"""
import os, sys
if hasattr(sys, "set_int_max_str_digits"):
    sys.set_int_max_str_digits(0)
MAXD = MAX_DEPTH
_TAGS = {list: "l", tuple: "t", set: "S", frozenset: "z"}
_MAKE = {"l": list, "t": tuple, "S": set, "z": frozenset}

def _deep(f, *a):
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(max(old, 2 * MAXD + 1000))
    try:
        return f(*a)
    finally:
        sys.setrecursionlimit(old)

def _kind(t):
    # the plain base of a value's real type (subclasses such as Counter, OrderedDict,
    # defaultdict, namedtuple or IntEnum cross as their base: only the base's own slots are
    # read below, so no method of the subclass runs); deque and Decimal keep their type
    for b in (int, float, str, list, tuple, dict, set, frozenset, bytes, complex):
        if issubclass(t, b):
            return b
    for mod, name in (("collections", "deque"), ("decimal", "Decimal")):
        m = sys.modules.get(mod)
        c = getattr(m, name, None) if m is not None else None
        if type(c) is type and issubclass(t, c):
            return c
    return None

def _enc(v, out, d):
    if d > MAXD:
        raise ValueError("nested too deep")
    t = type(v)
    b = t if t in (int, float, str, list, tuple, dict) else _kind(t)
    if v is None:
        out.append("N")
    elif t is bool:
        out.append("T" if v else "F")
    elif b is int:
        out.append("i%s;" % int.__repr__(v))
    elif b is float:
        out.append("f%s;" % float.__repr__(v))
    elif b is str:
        v = str.__str__(v)
        out.append("s%d:" % len(v))
        out.append(v)
    elif b in _TAGS:
        items = list(b.__iter__(v))
        out.append("%s%d:" % (_TAGS[b], len(items)))
        for x in items:
            _enc(x, out, d + 1)
    elif b is dict:
        items = list(dict.items(v))
        out.append("d%d:" % len(items))
        for k, x in items:
            _enc(k, out, d + 1)
            _enc(x, out, d + 1)
    elif b is bytes:
        h = bytes.hex(v)
        out.append("b%d:" % len(h))
        out.append(h)
    elif b is complex:
        out.append("c%s;%s;" % (float.__repr__(complex.real.__get__(v)),
                                 float.__repr__(complex.imag.__get__(v))))
    elif b is not None and b.__name__ == "deque":
        items = list(b.__iter__(v))
        out.append("q%d:" % len(items))
        for x in items:
            _enc(x, out, d + 1)
    elif b is not None and b.__name__ == "Decimal":
        out.append("D%s;" % b.__str__(v))
    else:
        raise TypeError("not plain data: " + t.__name__)

def enc(v):
    out = []
    _deep(_enc, v, out, 0)
    return "".join(out)

def _num(s, i):
    j = s.index(";", i)
    return s[i:j], j + 1

def _dec(s, i, d):
    if d > MAXD:
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
    if c == "D":
        t, i = _num(s, i)
        if len(t) > 100000:
            raise ValueError("decimal too long")
        import decimal
        return decimal.Decimal(t), i
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
    if c in _MAKE or c == "q":
        items = []
        for _ in range(n):
            x, i = _dec(s, i, d + 1)
            items.append(x)
        if c == "q":
            import collections
            return collections.deque(items), i
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
    v, i = _deep(_dec, s, 0, 0)
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

CODEC = CODEC.replace("MAX_DEPTH", str(MAX_DEPTH))
