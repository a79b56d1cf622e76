"""Only an explicit retraction after the box is a second answer (retraction.py): a check after
the box ("Wait, let me verify: 3 + 4 = 7"), whatever numbers it ends on, leaves a correct answer
correct; "Actually, the answer is 5" and "Wait, that's wrong." still take it back."""

from __future__ import annotations

import pytest

from vibethinker.types import Problem
from vibethinker.verifiers.extract import retracted, stated_answer
from vibethinker.verifiers.math import verify_math
from vibethinker.verifiers.retraction import arithmetic, retraction


def _verify(tail: str):
    p = Problem(
        id="t", domain="math", prompt="Sam has 7 apples and eats 4. How many remain?", answer="3"
    )
    return verify_math(p, f"<think>7 - 4 = 3</think>\n\nSo $7 - 4 = \\boxed{{3}}$. {tail}")


# Checks after the box as reasoning models write them; all but the last few were scored as two
# answers (`contradicted_answer`) by the reader before retraction.py, which took the last number.
VERIFICATIONS = [
    "Wait, let me verify: 3+4=7",
    "Wait, let me verify: $3 + 4 = 7$.",
    "Wait, let me verify: 3+4=7, and 7-4=3.",
    "Let me double-check: 7 - 4 = 3. Yes.",
    "Actually, let me double-check by adding back: 3 + 4 = 7. Correct.",
    "Wait, let me double check. We started with 7 apples and ate 4, and 7 - 4 = 3, so 3 remain. "
    "If we add the 4 back, we get 7.",
    "Hmm, wait. Let me confirm: 7 - 4 = 3 and 3 + 4 = 7. Consistent.",
    "Actually, to verify, substitute x = 3: x + 4 = 7. ✓",
    "Wait, is that right? Check: 3 + 4 = 7. Yes, it is.",
    "Actually, yes: 3 + 4 = 7, so the result is consistent.",
    "Wait, let me recheck the arithmetic: 7 - 4 = 3. Good, 3 + 4 gives 7.",
    "Wait, I should double-check. If x = 3, then 3 + 4 = 7, which matches.",
    "Wait, did I get this right? 3 plus 4 is 7. Yes.",
    "Actually, this is a classic problem. Verifying: 3 + 4 = 7.",
    "Wait, let me make sure: 7 - 3 = 4, so 4 + 3 = 7.",
    "Wait, that's right, since 3 + 4 = 7.",
    "Wait, yes, 3 is right.",
    "Actually, that's correct: 7 - 4 = 3.",
    "Wait, no, 3 is right: 3 + 4 = 7.",
    "Let me verify the answer: 4 + 3 = 7.",
    "Verify the answer: $3 + 4 = 7$.",
    "On second thought, let me verify with a different approach: 7 = 4 + 3.",
    "Wait, let me verify: 7 - 4 = 3. Actually no, 7 - 4 = 3 is correct.",
    "Sanity check: 7 - 4 = 3, and 3 + 4 = 7.",
    "Plugging back in: 4 + 3 = 7, which matches the total of 7.",
    "Let me check: 4 + 3 = 7. The answer checks out.",
    "Indeed, 3 + 4 = 7.",
    "Let me verify this. Substituting back: 3 + 4 = 7 ✓. The answer is correct.",
    "Double-checking: 4 + 3 = 7. So the difference 7 - 4 is indeed 3.",
    "Wait, but is 3 reasonable? We had 7 and took 4, leaving 3. And 3 + 4 = 7, good.",
    "Actually, we can also see this as 4 + 3 = 7.",
    "Wait, is it 4? No: the difference is 3, not 4.",
    "Actually, the answer is 3 after all.",
    "Wait, what about 4? 4 doesn't work because 4 + 3 = 7 is the total. So 3 it is.",
    "Wait, could it be 4? No, 4 is too many: only 7 - 4 = 3 remain.",
    "Wait, that's wrong. The answer is $3$ after all.",
]


@pytest.mark.parametrize("tail", VERIFICATIONS)
def test_a_check_after_the_box_is_no_second_answer(tail):
    s = _verify(tail)
    assert (s.correct, s.reason) == (True, "ok")


RETRACTIONS = [
    ("Actually, the answer is 5.", "contradicted_answer"),
    ("On second thought, x = 5.", "contradicted_answer"),
    ("On second thought, $x = 5$.", "contradicted_answer"),
    ("Correction: it should be 5.", "contradicted_answer"),
    ("Correction: 5.", "contradicted_answer"),
    ("Scratch that, it's 5.", "contradicted_answer"),
    ("Hold on, the result should be $5$.", "contradicted_answer"),
    ("Wait, that's wrong; the answer is 5.", "contradicted_answer"),
    ("Wait, that's wrong. The difference is 5.", "contradicted_answer"),
    ("Oops, I made a mistake. It should be 5.", "contradicted_answer"),
    ("Wait, I miscounted: there are **5** of them.", "contradicted_answer"),
    ("Wait, let me verify: 3+4=7. Hmm, that's wrong. The answer is 5.", "contradicted_answer"),
    ("Wait, let me recompute. 7 - 2 = 5, so the difference is 5.", "contradicted_answer"),
    ("Actually, the correct answer is $5$.", "contradicted_answer"),
    ("Actually, the correct value is 5.", "contradicted_answer"),
    (
        "Wait, I think I misread the problem. The question asks for the sum, which is 11.",
        "contradicted_answer",
    ),
    ("Hmm, actually the total should be 5, not 3.", "contradicted_answer"),
    ("Actually, I need to reconsider. Since she ate 2, there are 5 left.", "contradicted_answer"),
    ("Actually, she ate one more, giving 2.", "contradicted_answer"),
    ("Wait, no. The difference is 5.", "contradicted_answer"),
    (
        "Hmm, wait, 3 doesn't work because it is odd. The smallest even count is 4.",
        "contradicted_answer",
    ),
    ("Wait, 3 is not possible since one apple is left. So there are 4.", "contradicted_answer"),
    ("Wait — I forgot to include the last one. That makes 4.", "contradicted_answer"),
    ("Oops! I double counted. The correct count is 2.", "contradicted_answer"),
    ("Wait. I think it should be 4.", "contradicted_answer"),
    ("Actually, the problem asks for $n+1$, which is $4$.", "contradicted_answer"),
    ("Wait, the difference is actually 5.", "contradicted_answer"),
    ("Let me verify: 3 + 4 = 8. Oh wait, the difference is 4.", "contradicted_answer"),
    ("Let me verify the answer: 3 + 4 = 8. So the answer should be 4.", "contradicted_answer"),
    ("Actually, wait: \\boxed{5}.", "wrong_answer"),  # the last box is the answer
    ("Wait, that's wrong.", "retracted_answer"),
    ("Wait, that's not right.", "retracted_answer"),
    ("Actually no, that is incorrect.", "retracted_answer"),
    ("Oops, I made a mistake.", "retracted_answer"),
    ("Wait, I made an arithmetic error.", "retracted_answer"),
    ("Oops, that was wrong.", "retracted_answer"),
    ("Wait, that's wrong. Let me redo it: 7 - 2 = 5.", "retracted_answer"),
]


@pytest.mark.parametrize("tail,reason", RETRACTIONS)
def test_an_explicit_retraction_takes_the_answer_back(tail, reason):
    s = _verify(tail)
    assert (s.correct, s.reason) == (False, reason)


def test_retraction_parts():
    assert retraction("Wait, let me verify: 3 + 4 = 7.") is None
    assert retraction("Actually, the sum is $6$, not $5$.") == (0, "6")
    assert retraction("So. Wait, that's wrong.") == (10, None)
    assert retraction("Actually, this is a classic problem. The count for 6 people is 15.") is None
    assert retraction("Let me see if that is wrong: 3 + 4 = 7.") is None  # a hypothesis
    assert retracted("Wait, that's wrong.") and not retracted("Wait, that's right.")
    assert stated_answer("Let me verify the answer: 4 + 3 = 7.") is None
    assert stated_answer("The answer is 5. Wait, it is 7.") == "7"


@pytest.mark.parametrize(
    "value,after,is_arithmetic",
    [
        ("3 + 4 = 7", "", True),
        ("x + 1 = 6", "", True),
        ("x = 6", "", False),
        ("\\lambda_1 = 6", "", False),
        ("4", " + 3 = 7", True),
        ("4", ". Yes", False),
        ("\\frac{1}{2}", "", False),
    ],
)
def test_arithmetic(value, after, is_arithmetic):
    assert arithmetic(value, after) is is_arithmetic
