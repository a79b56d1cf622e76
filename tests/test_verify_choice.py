"""Multiple-choice verifier: one committed letter, hedges and prose letters score 0."""

import pytest

from vibethinker.types import Problem
from vibethinker.verifiers import verify
from vibethinker.verifiers.choice import committed_letters, verify_choice

CHOICES = ["1 m/s", "2 m/s", "3 m/s", "4 m/s"]


def sp(answer: str = "B", choices=CHOICES) -> Problem:
    return Problem(id="s", domain="stem", prompt="q", answer=answer, choices=choices)


@pytest.mark.parametrize(
    "response",
    [
        r"<think>compute</think> \boxed{B}",
        r"\boxed{(B)}",
        r"\boxed{\text{B}}",
        r"\boxed{B. 2 m/s}",
        "Answer: B",
        "**Answer:** (B)",
        "Final answer: B.",
        "So the answer is (B).",
        "Therefore, the correct answer is option B",
        "The answer is B, since the speed doubles.",
        r"A first guess would be wrong. The answer is \boxed{B}",  # "A" in prose is no answer
        r"Answer: B. I double-checked, \boxed{B}",  # same letter twice is no hedge
    ],
)
def test_correct_forms(response):
    s = verify_choice(sp("B"), response)
    assert (s.value, s.correct, s.reason) == (1.0, True, "ok"), response


@pytest.mark.parametrize(
    "response,reason",
    [
        ("Answer: C", "wrong_answer"),
        (r"\boxed{A, B}", "hedged_answer"),
        ("The answer is A or B", "hedged_answer"),
        (r"Answer: A. On reflection \boxed{B}", "hedged_answer"),
        ("B is tempting. I think it is B.", "no_answer"),  # letters in prose only
        ("A ball moves. By the formula, v = 2.", "no_answer"),
        (r"<think>the answer is B</think> I don't know", "no_answer"),  # only in reasoning
        (r"<think>the answer is B", "no_answer"),  # cut off while thinking
        (r"\boxed{E}", "invalid_choice"),  # only four choices
        ("Answer: A number of options fit.", "no_answer"),  # the article "A"
        (r"\boxed{2 m/s}", "no_answer"),  # a value, not a letter
    ],
)
def test_rejected_forms(response, reason):
    s = verify_choice(sp("B"), response)
    assert (s.value, s.correct, s.reason) == (0.0, False, reason), response


def test_letters_valid_within_number_of_choices():
    ten = [str(i) for i in range(10)]
    assert verify_choice(sp("J", ten), r"\boxed{J}").correct
    assert verify_choice(sp("B", ["x", "y"]), "Answer: B").correct
    assert verify_choice(sp("B", ["x", "y"]), "Answer: C").reason == "invalid_choice"


def test_committed_letters_order_and_dispatch():
    assert committed_letters(r"Answer: A ... the answer is (C)") == ["A", "C"]
    assert verify(sp("D"), r"\boxed{D}").correct  # dispatch by domain "stem"
    assert verify_choice(sp(""), r"\boxed{D}").reason == "bad_problem:no_answer"
