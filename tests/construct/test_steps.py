"""The construct stage's pure steps (vibethinker/construct/), against hand-computed values."""

from __future__ import annotations

import random

import pytest

from vibethinker.construct.codetests import agreed_tests
from vibethinker.construct.decontam import EvalIndex, max_df
from vibethinker.construct.evalsets import load_eval, parse_spec
from vibethinker.construct.expand import ParseError, fill, parse_expansion, supervision_error
from vibethinker.construct.multipath import select_paths
from vibethinker.construct.ngram import repetition_reason, words
from vibethinker.construct.pipeline import SAME, final_answer
from vibethinker.construct.quality import parse_verdict
from vibethinker.construct.vote import majority_vote
from vibethinker.types import Problem

TEN = "alpha beta gamma delta epsilon zeta eta theta iota kappa"


def test_words_lowercase_and_strip_symbols():
    assert words("Compute 9*5-8. Let's GO!") == ["compute", "9", "5", "8", "let", "s", "go"]


def test_repetition_flags_a_loop_not_a_normal_trace():
    normal = " ".join(f"step {i} uses {i * 3} and gives {i * 7} then" for i in range(8))
    loop = "we add the two numbers and check again " * 12
    assert repetition_reason(normal, 30, 0.3, 0.4, 0.6) is None
    assert repetition_reason(loop, 30, 0.3, 0.4, 0.6) is not None
    assert repetition_reason("short " * 5, 30, 0.3, 0.4, 0.6) is None  # too short to judge


def test_select_paths_keeps_distinct_paths_up_to_m():
    a = "first multiply three by four to get twelve then subtract two to get ten"
    a2 = "first multiply three by four to get twelve then subtract two to get ten ."  # reworded
    b = "guess ten and check that ten plus two is twelve which is three times four"
    c = "write twelve minus two directly as the answer ten after computing the product"
    assert select_paths([a, a2, b], 4, 0.8) == [a, b]
    assert select_paths([a, a, b, c], 2, 0.8) == [a, b]
    assert select_paths([a, b, c], 4, 1.01) == [a, b, c]


def test_majority_vote_clusters_by_equivalence():
    # 1/2 and 0.5 are one answer: 3 of 5, runner-up 1, one sample without an answer
    v = majority_vote(["\\frac{1}{2}", "0.5", "3", None, "1/2"], SAME["math"])
    assert v.label == "\\frac{1}{2}" and v.top == 3 and v.n == 5
    assert v.margin == pytest.approx((3 - 1) / 5)
    tie = majority_vote(["A", "B", None], SAME["stem"])
    assert tie.label is None and tie.margin == 0.0
    assert majority_vote([None, None], SAME["stem"]).label is None


def test_final_answer_per_domain():
    assert final_answer("math", "<think>x</think>\\boxed{12}") == "12"
    assert final_answer("stem", "<think>x</think>\\boxed{B}") == "B"
    assert final_answer("math", "no box") is None


def test_agreed_tests_need_min_agree_of_all_solutions():
    outs = [["1\n", "5", None], ["1", "6", None], ["1 ", "5", "x"], [None, None, None]]
    # input 0: "1" x3 of 4 = 0.75; input 1: "5" x2 = 0.5; input 2: "x" x1 = 0.25
    assert agreed_tests(["a", "b", "c"], outs, 0.5) == [
        {"input": "a", "output": "1"},
        {"input": "b", "output": "5"},
    ]
    assert agreed_tests(["a", "b", "c"], outs, 0.6) == [{"input": "a", "output": "1"}]


def test_eval_index_exact_after_normalisation():
    ix = EvalIndex([("e1", TEN + " lambda"), ("e2", "x y z")], n=10, template_share=1.0)
    assert ix.hits(["Zero ALPHA, beta; gamma delta epsilon zeta eta theta iota kappa!"]) == [["e1"]]
    assert ix.hits([TEN.rsplit(" ", 1)[0]]) == [[]]  # a 9-gram is no hit
    assert ix.hits(["", "x y z", TEN]) == [[], [], ["e1"]]
    assert ix.hits(["Ünï " + TEN, "é"]) == [["e1"], []]  # non-ASCII batch: the regex path
    # no n-gram spans two texts of one batch
    half = TEN.split()
    assert ix.hits([" ".join(half[:5]), " ".join(half[5:])]) == [[], []]


def test_eval_index_leaves_template_ngrams_out():
    items = [(f"e{i}", f"{TEN} item{i} q{i}") for i in range(10)]
    ix = EvalIndex(items, n=10, template_share=0.2, template_min=3)
    assert max_df(10, 0.2, 3) == 2 and ix.template_grams == 1
    assert ix.hits([TEN]) == [[]]  # the shared template alone
    assert ix.hits([f"{TEN} item3"]) == [["e3"]]  # template + content
    assert EvalIndex(items, n=10, template_share=1.0).hits([TEN]) == [[f"e{i}" for i in range(10)]]


def test_eval_index_matches_a_plain_set_of_ngrams():
    rng = random.Random(0)
    vocab = [f"w{i}" for i in range(12)]
    evals = [(f"e{i}", " ".join(rng.choices(vocab, k=14))) for i in range(30)]
    train = [" ".join(rng.choices(vocab, k=rng.randint(0, 40))) for _ in range(300)]
    ref: dict[tuple, set] = {}
    for eid, t in evals:
        ws = words(t)
        for i in range(len(ws) - 3):
            ref.setdefault(tuple(ws[i : i + 4]), set()).add(eid)
    want = []
    for t in train:
        ws, got = words(t), set()
        for i in range(len(ws) - 3):
            got |= ref.get(tuple(ws[i : i + 4]), set())
        want.append(sorted(got))
    assert EvalIndex(evals, n=4, template_share=1.0).hits(train) == want
    assert any(want) and not all(want)


def test_parse_expansion_per_domain_and_failures():
    seed = Problem(id="s1", domain="code", prompt="p", tests=[{"input": "1", "output": "1"}])
    p = parse_expansion(
        'ok\n```json\n{"problem": "Sum it.", "test_inputs": ["1 2", "3 4"]}\n```',
        seed,
        "constraints",
    )
    assert p.id == "s1~constraints" and p.tests == [
        {"input": "1 2", "output": ""},
        {"input": "3 4", "output": ""},
    ]
    assert p.meta == {"source_seed": "s1", "axis": "constraints"}
    math = Problem(id="m", domain="math", prompt="p", answer="1")
    assert parse_expansion('text {"problem": "New?"} more', math, "constraints").prompt == "New?"
    for text, reason in [
        ("", "empty"),
        ("no json here", "no_json"),
        ('{"problem": 3}', "bad_field"),
    ]:
        with pytest.raises(ParseError) as e:
            parse_expansion(text, math, "constraints")
        assert e.value.reason == reason
    with pytest.raises(ParseError):
        parse_expansion('{"problem": "x", "test_inputs": "1 2"}', seed, "constraints")
    inst = Problem(id="i", domain="instruct", prompt="p", instructions=[{"id": "a", "kwargs": {}}])
    with pytest.raises(ParseError):
        parse_expansion('{"problem": "x", "instructions": [{"kwargs": {}}]}', inst, "constraints")


def test_fill_leaves_other_braces():
    assert fill("\\boxed{} {problem} {x}", problem="P") == "\\boxed{} P {x}"


def test_parse_verdict_variants():
    assert parse_verdict("VERDICT: valid") == "valid"
    assert parse_verdict("**Verdict:** Ill posed") == "ill-posed"
    assert parse_verdict("Verdict: logically invalid") == "invalid"
    assert parse_verdict("VERDICT: valid\n...\nVERDICT: incomplete") == "incomplete"
    assert parse_verdict("looks fine") is None and parse_verdict("") is None


def test_supervision_error_names_the_missing_field():
    assert supervision_error(Problem(id="a", domain="math", prompt="p")) == "answer"
    assert supervision_error(Problem(id="a", domain="code", prompt="p")) == "tests"
    assert supervision_error(Problem(id="a", domain="instruct", prompt="p")) == "instructions"
    assert supervision_error(Problem(id="a", domain="math", prompt="p", answer="3")) is None


def test_eval_specs(tmp_path):
    assert parse_spec("humaneval") == ("humaneval", None)
    assert parse_spec("math:pkg:mmath/x.json") == ("math", "pkg:mmath/x.json")
    assert parse_spec("runs/x/eval.jsonl") == ("problems", "runs/x/eval.jsonl")
    with pytest.raises(ValueError, match="unknown format 'nope'"):
        parse_spec("nope:file.jsonl")
    bad = tmp_path / "weird.jsonl"
    bad.write_text('{"question": "q"}\n')
    with pytest.raises(ValueError, match="cannot read it as 'problems'"):
        load_eval(str(bad))
    assert len(load_eval("humaneval")) == 164
