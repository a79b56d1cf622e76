"""The math verifier's comparison: behaviours that mutation testing (docs/MUTATION.md) found
untested."""

from fractions import Fraction

import pytest

from vibethinker.verifiers.math import _check_collection, check_answer
from vibethinker.verifiers.math_equiv import repeating as _repeating


@pytest.mark.parametrize(
    "gold, pred",
    [("1, 2", "1, 3"), ("1, 2", "1, 2, 3"), ("(1, 2)", "(2, 1)"), (r"\{1, 2\}", r"\{1, 3\}")],
)
def test_a_wrong_collection_scores_zero(gold, pred):
    """Every refusal of a collection gives the reward 0, not only `correct = False`."""
    for s in (_check_collection(gold, pred), check_answer(gold, pred)):
        assert not s.correct and s.value == 0.0, (gold, pred, s)


def test_finite_decimals_are_not_repeating():
    assert [_repeating(Fraction(1, d)) for d in (2, 5, 8, 10, 20, 25, 40)] == [False] * 7
    assert [_repeating(Fraction(1, d)) for d in (3, 6, 7, 12, 15)] == [True] * 5
    # so a 1/5 gold takes no decimal slack: 0.2000001 is another number
    assert check_answer(r"\frac{1}{5}", "0.2").correct
    assert not check_answer(r"\frac{1}{5}", "0.2000001").correct
