"""Answer-location rules (extract.locate_answer) and their path through the math verifier and
the eval/verify stages' `answer_format` key."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from vibethinker.types import Problem
from vibethinker.verifiers.extract import (
    ANSWER_FORMATS,
    clean_answer,
    final_answer,
    locate_answer,
)
from vibethinker.verifiers.math import verify_math, with_answer_format

PRM = "We add them: $2 + 3 = 5$, so the sum is $5$.\n\n# Answer\n\n{ans}"
MINERVA = "So $x = 4$.\nFinal Answer: The final answer is ${ans}$. I hope it is correct."
COLON = "Adding gives the result.\n\n**Answer:** ${ans}$"


@pytest.mark.parametrize(
    "rule,text,want",
    [
        ("answer_line", PRM.format(ans="\\frac{1}{2}"), "\\frac{1}{2}"),
        ("answer_line", "work\n## Answer:\n\n$(1, 2)$\n", "(1, 2)"),
        ("answer_line", "x\n# Answer\n\n\\boxed{7}\n", "7"),
        ("final_answer", MINERVA.format(ans="3.5"), "3.5"),
        ("final_answer", "Final Answer: The final answer is 12. I hope it is correct.", "12"),
        ("final_answer", "the final answer is $\\pi$.", "\\pi"),
        ("answer_colon", COLON.format(ans="12"), "12"),
        ("answer_colon", "Answer: 4.\n", "4"),
        ("last_line", "blah\nThe answer is $12$.\n\n", "12"),
        ("last_line", "blah\n\\[\\frac{3}{4}\\]\n", "\\frac{3}{4}"),
        ("boxed", "so \\boxed{9} and more", "9"),
        ("auto", PRM.format(ans="6"), "6"),
        ("auto", MINERVA.format(ans="3.5"), "3.5"),  # before answer_colon's "The final ..."
        ("auto", "$\\boxed{2}$\n# Answer\n\n3", "2"),  # boxed comes first
    ],
)
def test_each_rule_finds_its_answer(rule, text, want):
    assert locate_answer(text, rule)[0] == want


@pytest.mark.parametrize(
    "rule,text",
    [
        ("answer_line", "The answer is 5."),  # no heading
        ("answer_line", "# Answer\n\n   \n"),  # a heading with nothing after it
        ("answer_line", "the # Answer is 5"),  # not a heading line
        ("final_answer", "the answer is 5"),
        ("answer_colon", "My answer: 5"),  # not at a line start
        ("boxed", "# Answer\n\n5"),
        ("auto", "The sum is 5."),  # auto never reads a plain last line
        ("last_line", "   \n\n"),
    ],
)
def test_each_rule_finds_nothing_where_it_should(rule, text):
    assert locate_answer(text, rule) is None


def test_unknown_rule():
    with pytest.raises(ValueError, match="unknown answer format"):
        locate_answer("x", "headline")
    assert final_answer("x", "headline") is None
    with pytest.raises(ValueError, match="answer_format"):
        with_answer_format([], "headline")


def test_clean_answer():
    assert clean_answer("$5$.") == "5"
    assert clean_answer("**12**") == "12"
    assert clean_answer("$x$ and $y$") == "$x$ and $y$"  # two spans: left as is (wrong later)
    assert clean_answer("\\(\\sqrt{2}\\)") == "\\sqrt{2}"
    # an escaped dollar inside the span is content (the corpus's `\$32,\!348` rows)
    assert clean_answer("$\\$32,\\!348$.") == "\\$32,\\!348"
    assert clean_answer("\\$18.90") == "\\$18.90"


def _p(gold: str, rule: str | None) -> Problem:
    meta = {"answer_format": rule} if rule else {}
    return Problem(id="x", domain="math", prompt="", answer=gold, meta=meta)


def test_a_prm800k_answer_needs_its_rule():
    """The reported fault: a correct GPT-4 answer after `# Answer` was `no_boxed_answer`."""
    resp = PRM.format(ans="\\dfrac{1}{2}")
    assert verify_math(_p("\\frac{1}{2}", None), resp).reason == "no_boxed_answer"
    assert verify_math(_p("\\frac{1}{2}", "answer_line"), resp).correct
    assert verify_math(_p("\\frac{1}{2}", "auto"), resp).correct
    wrong = verify_math(_p("\\frac{1}{3}", "answer_line"), resp)
    assert not wrong.correct and wrong.reason == "wrong_answer"
    assert verify_math(_p("1", "answer_line"), "no heading here").reason == "no_answer"


def test_rules_keep_the_hedge_and_prose_checks():
    """A box elsewhere that is not the gold is still a hedge; a different final answer stated
    in prose after the located answer is still two answers."""
    hedge = "First \\boxed{4}.\n\n# Answer\n\n5"
    assert verify_math(_p("5", "answer_line"), hedge).reason == "hedged_answer"
    prose = "# Answer\n\n5\n\nActually the final answer is $6$."
    assert verify_math(_p("5", "answer_line"), prose).reason == "contradicted_answer"
    assert verify_math(_p("5", "bogus"), "5").reason == "bad_problem:answer_format"


def test_with_answer_format_touches_math_rows_only():
    rows = [_p("1", None), Problem(id="c", domain="stem", prompt="", answer="A")]
    out = with_answer_format(rows, "answer_line")
    assert out[0].meta == {"answer_format": "answer_line"} and rows[0].meta == {}
    assert out[1] is rows[1]
    assert set(ANSWER_FORMATS) >= {"boxed", "answer_line", "final_answer", "answer_colon"}


def test_verify_stage_reads_the_key(tmp_path):
    from vibethinker.stages.verify import VerifyConfig, run

    src = tmp_path / "in.jsonl"
    row = {
        "id": "a",
        "domain": "math",
        "prompt": "Add.",
        "answer": "6",
        "response": PRM.format(ans="6"),
    }
    src.write_text(json.dumps(row) + "\n")
    for rule, ok in (("boxed", False), ("answer_line", True)):
        out = tmp_path / f"{rule}.jsonl"
        run(VerifyConfig(input=str(src), out=str(out), workers=1, answer_format=rule))
        assert json.loads(out.read_text())["correct"] is ok


def test_eval_config_checks_the_key():
    from vibethinker.stages.eval import EvalConfig

    with pytest.raises(ValueError, match="answer_format"):
        EvalConfig(answer_format="headline")
    assert EvalConfig(answer_format="auto").answer_format == "auto"


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ANSWERLINE = [
    json.loads(line) for line in (FIXTURES / "math_answerline.jsonl").read_text().splitlines()
]


def test_answerline_corpus_is_the_generators_output(tmp_path):
    """The fixture is scripts/math_answerline_corpus.py's output on the real-gold corpus."""
    spec = importlib.util.spec_from_file_location(
        "math_answerline_corpus", FIXTURES.parents[1] / "scripts" / "math_answerline_corpus.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    out = tmp_path / "c.jsonl"
    mod.main(["--out", str(out)])
    assert out.read_text() == (FIXTURES / "math_answerline.jsonl").read_text()
    assert {r["format"] for r in ANSWERLINE} == {"answer_line", "final_answer", "answer_colon"}


@pytest.mark.timeout(300)
def test_answerline_corpus_verdicts():
    """Every row in a non-boxed format gets the written rule's verdict, read with its own rule
    and with `auto` (docs/VERIFY_MATH.md's table)."""
    wrong = []
    for r in ANSWERLINE:
        for rule in (r["format"], "auto"):
            p = Problem(
                id="m",
                domain="math",
                prompt=r.get("prompt") or "q",
                answer=r["gold"],
                meta={"answer_format": rule},
            )
            if verify_math(p, r["response"]).correct is not r["expected"]:
                wrong.append((rule, r["class"], r["gold"], r["response"][-40:]))
    assert wrong == []
