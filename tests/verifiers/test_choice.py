"""Multiple-choice verifier: the final answer statement's letter; hedges and prose letters score 0."""

import json

import pytest

from tests.helpers.paths import FIXTURES
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
        # Was "hedged_answer" when any two committed letters were a hedge. Changed: the last
        # answer statement counts, so a revision is an answer and a named distractor ("one might
        # think the answer is A") no longer zeroes a right answer; a hedge is two letters in the
        # final statement (test_rejected_forms, test_hedge_is_the_final_statement).
        r"Answer: A. On reflection \boxed{B}",
        # Was "no_answer" (a value, not a letter). Changed: an option's exact text stands for its
        # letter (the rule that reads "Answer: D-mannose" as the option "D-mannose").
        r"\boxed{2 m/s}",
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
        ("B is tempting. I think it is B.", "no_answer"),  # letters in prose only
        ("A ball moves. By the formula, v = 2.", "no_answer"),
        (r"<think>the answer is B</think> I don't know", "no_answer"),  # only in reasoning
        (r"<think>the answer is B", "no_answer"),  # cut off while thinking
        (r"\boxed{E}", "invalid_choice"),  # only four choices
        ("Answer: A number of options fit.", "no_answer"),  # the article "A"
        (r"\boxed{5 m/s}", "no_answer"),  # a value that is no option's text
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


def test_committed_letters_final_statement_and_dispatch():
    # was ["A", "C"] (every statement); now the final statement only: a draft is no commitment
    assert committed_letters(r"Answer: A ... the answer is (C)") == ["C"]
    assert committed_letters(r"Answer: A ... the answer is (C) or (A)") == ["C", "A"]
    assert verify(sp("D"), r"\boxed{D}").correct  # dispatch by domain "stem"
    assert verify_choice(sp(""), r"\boxed{D}").reason == "bad_problem:no_answer"


CASES = [
    json.loads(line)
    for line in (FIXTURES / "choice_cases.jsonl").read_text().splitlines()
    if line.strip()
]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_case_table(case):
    """Every ending of the case table reads as its expected letter (None: no single valid
    letter). The same table feeds scripts/choice_table.py and docs/VERIFY_CHOICE.md."""
    choices = case.get("choices") or CHOICES
    gold = case["expected"] or "A"
    s = verify_choice(sp(gold, choices), case["response"])
    if case["expected"] is None:
        assert not s.correct and s.reason != "wrong_answer", (case, s)
    else:
        assert s.correct, (case, s)


def test_case_table_covers_the_forms():
    assert len(CASES) >= 80
    forms = {c["form"] for c in CASES}
    for form in ("lower-case", "full-width", "dollar", "textbf", "bracket", "option-line"):
        assert form in forms
    for form in ("word-start", "commit", "hedge", "distractor", "existing"):
        assert form in forms


@pytest.mark.parametrize(
    "response,letters",
    [
        ("Answer: B (or possibly C)", ["B", "C"]),
        (r"\boxed{A} or \boxed{B}", ["A", "B"]),  # two statements joined only by "or"
        ("Answer: A\n\nAnswer: B", ["A", "B"]),  # nothing but space between: one statement
        ("Answer: A. Then again, Answer: B", ["B"]),  # text between: the later one counts
        ("Answer: B, not C.", ["B"]),
        ("Answer: B, since C ignores friction.", ["B"]),
    ],
)
def test_hedge_is_the_final_statement(response, letters):
    assert committed_letters(response) == letters


@pytest.mark.parametrize(
    "response,letters",
    [
        ("One might think the answer is A.", []),  # a framed statement is no statement
        ("The answer would be A if there were no friction.", []),
        ("At first glance the answer is A, but the answer is C.", ["C"]),
        ("Answer: C. One might think the answer is A.", ["C"]),
        ("If we use symmetry, the answer is B.", ["B"]),  # a premise is not a frame
        ("I am not sure, but the answer is B.", ["B"]),
    ],
)
def test_framed_statements(response, letters):
    assert committed_letters(response) == letters


def test_option_text_and_word_start():
    sugars = ["L-glucose", "D-mannose", "D-galactose", "L-fructose"]
    assert committed_letters("Answer: D-mannose", sugars) == ["B"]
    assert committed_letters("Answer: D-mannose") == []  # no choices: a word, not D
    assert committed_letters("Answer: D-galactose, the C4 epimer", sugars) == ["C"]
    assert committed_letters("Answer: D-mannose or L-glucose", sugars) == ["B", "A"]  # a hedge
    assert committed_letters("Answer: B, 2 m/s", CHOICES) == ["B"]  # B's own text restated
    # the longest option text wins: "2" is a prefix of "2 m/s"
    assert committed_letters("Answer: 2 m/s", ["2", "2 m/s"]) == ["B"]
    # an option line must carry its own option's text
    assert committed_letters("so\n(C) 3 m/s", CHOICES) == ["C"]
    assert committed_letters("so\n(C) 2 m/s", CHOICES) == []


def test_long_response_reads_the_end():
    """A long answer part (a megabyte of repeated statements) still reads its final one."""
    text = "Answer: A\n" * 50_000 + "Then again, Answer: B"
    assert committed_letters(text) == ["B"]
    assert committed_letters("Answer: B or " * 50_000) == ["B"]


def test_vote_and_answer_keys_read_an_option_text_as_its_letter():
    # majority voting (construct) and answer clustering (evaluate) use the same committed-answer
    # rule as the verifier, with the problem's options
    from vibethinker.construct.pipeline import final_answer
    from vibethinker.evaluate.metrics import answer_key
    from vibethinker.types import Problem

    p = Problem(id="s", domain="stem", prompt="q", answer="B", choices=["1 m/s", "2 m/s", "3 m/s"])
    assert final_answer("stem", "Answer: 2 m/s", p.choices) == "B"
    assert answer_key(p, "Answer: 2 m/s") == "B"
    assert final_answer("stem", "Answer: 2 m/s") is None  # without the options: no letter
