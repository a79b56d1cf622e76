"""Instruct RL rewards (train/rewards.py, verifiers/rubric.py): rule forms, rubric mixing, MGPO's
verdict for continuous rewards, per-source metrics, and bad input (judge down / slow / garbage,
malformed instructions, a bad rubric prompt file)."""

from __future__ import annotations

import socket

import pytest

from tests.helpers.stub_openai import StubOpenAI, stub_openai  # noqa: F401  (fixture)
from vibethinker.train.rewards import (
    InstructReward,
    check_instruct_problems,
    instruct_reward,
    mix,
    rule_value,
)
from vibethinker.train.rl_config import RLConfig
from vibethinker.types import Problem, Score
from vibethinker.verifiers import verify_batch
from vibethinker.verifiers.rubric import JudgeRubric, RubricResult, load_rubric_prompt

RULE = Problem(
    "r1",
    "instruct",
    "Write about tea. Use only lowercase letters. Do not use any commas.",
    instructions=[
        {"id": "change_case:english_lowercase", "kwargs": {}},
        {"id": "punctuation:no_comma", "kwargs": {}},
    ],
)
OPEN = Problem("o1", "instruct", "Explain tea in two short sentences.", subdomain="open")
MATH = Problem("m1", "math", "1+1?", answer="2")
GOOD = '{"helpfulness": 8, "coherence": 8, "instruction_adherence": 6, "redundancy": 10}'


def base(ps, rs, **kw):
    return verify_batch(ps, rs, workers=1)


class FakeRubric:
    """value = number of words / 10 (capped at 1); a response containing FAIL fails."""

    def __init__(self):
        self.calls = []

    def score(self, pairs):
        self.calls.append(list(pairs))
        return [
            RubricResult(None, "judge_unparsed")
            if "FAIL" in a
            else RubricResult(min(len(a.split()) / 10, 1.0), "ok")
            for _, a in pairs
        ]


def test_rule_forms_and_mix():
    half = Score(0.5, False, "failed:x")
    assert rule_value(half, "strict") == 0.0 and rule_value(half, "partial") == 0.5
    assert rule_value(Score(1.0, True, "ok"), "strict") == 1.0
    with pytest.raises(ValueError, match="rule_reward"):
        rule_value(half, "lenient")
    assert mix(1.0, 0.2, 0.0) == 1.0 and mix(1.0, None, 0.5) == 1.0
    assert mix(1.0, 0.2, 0.25) == pytest.approx(0.75 + 0.05)


def test_rule_prompts_strict_vs_partial_verdict_is_all_held():
    resp = ["<think>x</think>\ntea is nice, warm", "<think>x</think>\ntea is nice and warm"]
    for form, want in (("strict", [0.0, 1.0]), ("partial", [0.5, 1.0])):
        r = InstructReward(base, None, rule_reward=form)
        s = r([RULE, RULE], resp)
        assert [x.value for x in s] == want
        assert [x.correct for x in s] == [False, True]  # p's verdict: every constraint holds


def test_open_prompts_get_the_rubric_and_threshold_defines_correct():
    rub = FakeRubric()
    r = InstructReward(base, rub, rubric_threshold=0.5)
    resp = [
        "<think>a</think>\none two three",
        "<think>a</think>\n" + "w " * 7,
        "<think>unclosed",
        "no think block at all here",
    ]
    s = r([OPEN] * 4, resp)
    assert [x.value for x in s] == [pytest.approx(0.3), pytest.approx(0.7), 0.0, 0.6]
    assert [x.correct for x in s] == [False, True, False, True]
    assert s[2].reason == "no_answer"
    # only the answer part is judged; the unanswered response costs no call
    assert [a for _, a in rub.calls[0]] == [
        "one two three",
        ("w " * 7).strip(),
        "no think block at all here",
    ]
    m = r.metrics()
    assert m["n_open"] == 4 and m["n_rule"] == 0 and m["reward_open"] == pytest.approx(0.4)
    assert m["accuracy_open"] == 0.5 and m["rubric_fail"] == 0


def test_rubric_weight_mixes_into_rule_prompts_and_metrics_split_by_source():
    rub = FakeRubric()
    r = InstructReward(base, rub, rule_reward="strict", rubric_weight=0.5)
    resp = ["<think>x</think>\ntea is nice and warm", "<think>x</think>\none two", "\\boxed{2}"]
    s = r([RULE, OPEN, MATH], resp)
    assert s[0].value == pytest.approx(0.5 * 1.0 + 0.5 * 0.5) and s[0].correct
    assert s[1].value == pytest.approx(0.2) and not s[1].correct
    assert s[2] == verify_batch([MATH], ["\\boxed{2}"], workers=1)[0]  # other domains untouched
    m = r.metrics()
    assert (m["n_rule"], m["n_open"]) == (1, 1)
    assert m["reward_rule"] == pytest.approx(0.75) and m["rubric_on_rule"] == pytest.approx(0.5)
    assert m["reward_open"] == pytest.approx(0.2)


def test_rubric_failures_score_the_fail_value_and_are_counted(caplog):
    r = InstructReward(base, FakeRubric(), fail_value=0.25)
    s = r([OPEN, OPEN], ["<think>a</think>\nFAIL here", "<think>a</think>\nfine answer"])
    assert s[0].value == 0.25 and not s[0].correct and s[0].reason.startswith("rubric_fail")
    assert s[1].reason == "rubric:ok"
    r([OPEN], ["<think>a</think>\nFAIL again"])
    assert r.metrics()["rubric_fail"] == 1 and r.metrics()["rubric_fail_total"] == 2
    assert "judgements failed" in caplog.text


def test_no_rubric_scores_open_prompts_zero():
    s = InstructReward(base, None)([OPEN], ["<think>a</think>\nanything"])
    assert s[0] == Score(0.0, False, "no_rubric")


def test_bad_options_refused():
    with pytest.raises(ValueError, match="rubric_weight"):
        InstructReward(base, None, rubric_weight=1.5)
    with pytest.raises(ValueError, match="rule_reward"):
        InstructReward(base, None, rule_reward="soft")


def test_malformed_instructions_refused_at_stage_start_naming_the_problem():
    bad = Problem(
        "bad-7",
        "instruct",
        "x",
        instructions=[
            {
                "id": "length_constraints:number_words",
                "kwargs": {"relation": "about", "num_words": 3},
            }
        ],
    )
    assert check_instruct_problems([RULE, OPEN, MATH]) == (1, 1)
    with pytest.raises(ValueError, match="train.jsonl: problem 'bad-7'"):
        check_instruct_problems([RULE, bad], "train.jsonl")
    # during a run the same row is a counted 0, not a crash
    r = InstructReward(base, None)
    s = r([bad], ["<think>x</think>\none two"])
    assert s[0].value == 0.0 and r.metrics()["rule_bad_input"] == 1


# ----------------------------------------------------------------------------- LLM judge back-end


def judge(srv: StubOpenAI, **kw) -> JudgeRubric:
    j = JudgeRubric(f"stub-model@{srv.base_url}", **kw)
    j.judge.sleep = lambda s: None  # no real backoff in tests
    return j


def test_judge_backend_scores_garbage_and_errors_as_failures(stub_openai):  # noqa: F811
    stub_openai.responses = [GOOD]
    j = judge(stub_openai, retries=1)
    assert j.score([("p", "a")]) == [RubricResult(0.8, "ok")]
    sent = stub_openai.requests[0]["body"]["messages"]
    assert "redundancy" in sent[0]["content"] and sent[1]["content"].endswith("RESPONSE:\na")
    stub_openai.responses = ["no numbers, sorry"]
    assert j.score([("p", "b")])[0] == RubricResult(None, "judge_unparsed")
    stub_openai.fail_first, stub_openai.fail_status = 100, 503
    res = j.score([("p", "c")])[0]
    assert res.value is None and res.reason.startswith("judge_error")
    r = InstructReward(base, j, fail_value=0.0)
    s = r([OPEN], ["<think>a</think>\nc"])  # the step goes on with the fail value, counted
    assert s[0].value == 0.0 and r.metrics()["rubric_fail"] == 1


def test_slow_judge_times_out_into_a_counted_failure(stub_openai):  # noqa: F811
    stub_openai.responses = [GOOD]
    stub_openai.delay_s = 2.0
    j = judge(stub_openai, timeout_s=0.2, retries=0)
    res = j.score([("p", "slow")])[0]
    assert res.value is None and res.reason == "judge_error:timeout"


def test_judge_down_fails_the_stage_start(tmp_path):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    cfg = RLConfig(
        domain="instruct",
        data="train.jsonl",
        out=str(tmp_path),
        judge_retries=0,
        judge_timeout_s=1.0,
        rubric_model=f"openai:m@http://127.0.0.1:{port}/v1",
    )
    with pytest.raises(RuntimeError, match="did not answer a test request"):
        instruct_reward(cfg, base, [RULE, OPEN])
    with pytest.raises(ValueError, match="hf:PATH or openai:MODEL@BASE_URL"):
        instruct_reward(RLConfig(rubric_model="judge.example.com"), base, [OPEN])


def test_rubric_prompt_file_is_checked(tmp_path):
    system, user = load_rubric_prompt()
    assert "helpfulness" in system and "{prompt}" in user and "{response}" in user
    f = tmp_path / "p.txt"
    f.write_text("grade it\n=== user ===\n{prompt} {answer}\n")
    with pytest.raises(ValueError, match="p.txt: user template"):
        load_rubric_prompt(f)
    f.write_text("grade it\n{prompt} {response}\n")
    with pytest.raises(ValueError, match="=== user ==="):
        load_rubric_prompt(f)


class TaskJudge:
    """Completion back-end: an answer about tea carries out the task (1.0), any other 0.0."""

    def __init__(self):
        self.calls = []

    def score(self, pairs):
        self.calls.append(list(pairs))
        return [RubricResult(1.0 if "tea" in a else 0.0, "ok") for _, a in pairs]


def test_rule_prompts_get_a_completion_check():
    """Issue 41 item 1: an answer meeting every IFEval constraint while ignoring the task paid 1;
    with the completion check it pays 0 and counts as wrong (MGPO's p)."""
    # off_task meets both rules (lowercase English, no comma) and ignores the task (tea)
    off_task = "<think>x</think>\nbananas are a yellow fruit that grows in warm places"
    on_task = "<think>x</think>\ntea is a warm drink"
    plain = InstructReward(base, None, rule_reward="strict")
    assert [s.value for s in plain([RULE, RULE], [off_task, on_task])] == [1.0, 1.0]  # before
    done = TaskJudge()
    r = InstructReward(base, None, rule_reward="strict", completion=done)
    s = r([RULE, RULE, MATH, RULE], [off_task, on_task, "\\boxed{2}", "<think>unclosed"])
    assert (s[0].value, s[0].correct) == (0.0, False) and s[0].reason.startswith("incomplete")
    assert (s[1].value, s[1].correct) == (1.0, True)
    assert s[2].correct and s[3].value == 0.0  # math untouched; no answer: no judge call
    assert [len(c) for c in done.calls] == [2]
    assert r.metrics()["rule_incomplete"] == 1 and r.metrics()["completion_calls"] == 2


def test_completion_check_config_and_backend(tmp_path, stub_openai):  # noqa: F811
    from vibethinker.config import ConfigError
    from vibethinker.train.rewards import COMPLETION_PROMPT, completion_backend

    with pytest.raises(ConfigError, match="rule_completion"):
        RLConfig(domain="instruct", rule_completion=True)
    assert completion_backend(RLConfig(domain="instruct"), object()) is None
    assert "carries out the task" in load_rubric_prompt(COMPLETION_PROMPT)[0]
    stub_openai.responses = ['{"score": 2}']
    cfg = RLConfig(
        domain="instruct",
        out=str(tmp_path),
        rule_completion=True,
        rubric_model=f"openai:m@{stub_openai.base_url}",
    )
    back = completion_backend(cfg, object())
    assert back.score([("Write about tea.", "bananas")]) == [RubricResult(0.2, "ok")]
    sent = stub_openai.requests[-1]["body"]["messages"]
    assert "carries out the task" in sent[0]["content"]
