"""Rubric judge: reply parsing, the endpoint backend against a stub server, the local RM."""

from __future__ import annotations

import json
import os

import pytest
import torch

from tests.helpers.stub_openai import StubOpenAI, stub_openai  # noqa: F401  (fixture)
from vibethinker.types import Score
from vibethinker.verifiers.judge import (
    JUDGES,
    EndpointJudge,
    RewardModelJudge,
    make_judge,
    parse_rubric_reply,
)

GOOD = '{"helpfulness": 8, "coherence": 9, "instruction_adherence": 7, "redundancy": 8}'


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "reply,expected",
    [
        (GOOD, 0.8),  # (8 + 9 + 7 + 8) / 40
        ("Here you go:\n```json\n" + GOOD + "\n```\nThanks", 0.8),
        (
            '{"Helpfulness": 10, "Coherence": 10, "Instruction_Following": 10, "Redundancy": 0}',
            0.75,
        ),
        ('{"overall": 6}', 0.6),
        ("The answer is decent.\nScore: 7/10", 0.7),
        ("Score: 3/10 at first... on reflection Score: 9 / 10", 0.9),
        ('{"helpfulness": 8} then Score: 5/10', 0.5),  # incomplete JSON falls back to the line
    ],
)
def test_parse_rubric_reply(reply, expected):
    assert parse_rubric_reply(reply) == pytest.approx(expected)


@pytest.mark.parametrize(
    "reply",
    [
        "I think it is good.",
        '{"helpfulness": 11, "coherence": 9, "instruction_adherence": 7, "redundancy": 8}',
        '{"helpfulness": "lots"}',
        "Score: 12/10",
        "{not json",
        "",
    ],
)
def test_parse_rubric_reply_rejects(reply):
    assert parse_rubric_reply(reply) is None


# --------------------------------------------------------------------------------------------
# Endpoint backend against the stub server
# --------------------------------------------------------------------------------------------
def endpoint(srv: StubOpenAI, **kw) -> EndpointJudge:
    kw.setdefault("backoff_s", 0.01)
    kw.setdefault("timeout_s", 5.0)
    return EndpointJudge(base_url=srv.base_url, model="judge-m", **kw)


def test_good_reply_and_request_format(stub_openai, monkeypatch):  # noqa: F811
    monkeypatch.setenv("MY_JUDGE_KEY", "sekret")
    stub_openai.responses = [GOOD]
    judge = endpoint(stub_openai, api_key_env="MY_JUDGE_KEY", pass_threshold=0.75)
    s = judge.score("What is 2+2?", "4")
    assert s == Score(pytest.approx(0.8), True, "ok")
    req = stub_openai.requests[0]
    assert req["path"] == "/v1/chat/completions"
    assert req["headers"]["Authorization"] == "Bearer sekret"
    body = req["body"]
    assert body["model"] == "judge-m"
    assert [m["role"] for m in body["messages"]] == ["system", "user"]
    assert "What is 2+2?" in body["messages"][1]["content"]
    assert "instruction_adherence" in body["messages"][0]["content"]


def test_malformed_reply_is_unparsed_not_an_exception(stub_openai):  # noqa: F811
    stub_openai.responses = ["I refuse to give numbers."]
    s = endpoint(stub_openai).score("p", "r")
    assert s == Score(0.0, False, "judge_unparsed")


def test_server_error_then_success_retries(stub_openai):  # noqa: F811
    stub_openai.responses = [GOOD]
    stub_openai.script = [500, 503, "malformed", None]
    judge = endpoint(stub_openai, max_retries=4)
    sleeps = []
    judge.sleep = sleeps.append
    s = judge.score("p", "r")
    assert s.reason == "ok" and s.value == pytest.approx(0.8)
    assert stub_openai.n_requests == 4
    # exponential backoff: each wait (with jitter in [0.5, 1]) at least the previous base
    assert len(sleeps) == 3
    for i, d in enumerate(sleeps):
        assert 0.01 * 2**i * 0.5 <= d <= 0.01 * 2**i


def test_retries_exhausted_and_client_errors(stub_openai):  # noqa: F811
    stub_openai.fail_first = 10
    s = endpoint(stub_openai, max_retries=2).score("p", "r")
    assert s == Score(0.0, False, "judge_error:http_500")
    assert stub_openai.n_requests == 3
    stub_openai.fail_first, stub_openai.requests = 0, []
    stub_openai.script = [401]
    s = endpoint(stub_openai, max_retries=3).score("p", "r")
    assert s == Score(0.0, False, "judge_error:http_401")
    assert stub_openai.n_requests == 1  # a 4xx is not retried


@pytest.mark.timeout(60)  # a hang guard, not a speed threshold
def test_timeout_gives_judge_error_without_hanging(stub_openai):  # noqa: F811
    stub_openai.responses = [GOOD]
    stub_openai.delay_s = 3.0
    judge = endpoint(stub_openai, timeout_s=0.3, max_retries=1)
    s = judge.score("p", "r")
    assert s == Score(0.0, False, "judge_error:timeout")
    assert stub_openai.n_requests == 2


def test_dropped_connection_is_retried(stub_openai):  # noqa: F811
    stub_openai.responses = [GOOD]
    stub_openai.script = ["drop", None]
    judge = endpoint(stub_openai)
    judge.sleep = lambda s: None
    assert judge.score("p", "r").reason == "ok"
    assert stub_openai.n_requests == 2


def test_cache_hit_makes_no_second_request(stub_openai, tmp_path):  # noqa: F811
    stub_openai.responses = [GOOD]
    cache = tmp_path / "judge_cache.json"
    judge = endpoint(stub_openai, cache_path=str(cache))
    first = judge.score("p", "r")
    assert judge.score("p", "r") == first
    assert stub_openai.n_requests == 1
    judge.score("p", "other response")
    assert stub_openai.n_requests == 2
    # The on-disk cache serves a fresh judge (a new process) too.
    assert len(json.loads(cache.read_text())) == 2
    again = endpoint(stub_openai, cache_path=str(cache)).score("p", "r")
    assert again == first and stub_openai.n_requests == 2
    # A different judge model is a different key.
    EndpointJudge(base_url=stub_openai.base_url, model="other", cache_path=str(cache)).score(
        "p", "r"
    )
    assert stub_openai.n_requests == 3


def test_errors_are_not_cached(stub_openai):  # noqa: F811
    stub_openai.responses = [GOOD]
    stub_openai.script = [500]
    judge = endpoint(stub_openai, max_retries=0)
    assert judge.score("p", "r").reason == "judge_error:http_500"
    assert judge.score("p", "r").reason == "ok"


def test_batch_keeps_order_and_dedupes(stub_openai):  # noqa: F811
    def hook(body, path, i):
        # Grade by the response text embedded in the user message: "r<k>" -> k/10 overall.
        user = body["messages"][1]["content"]
        k = int(user.rsplit("RESPONSE:\nr", 1)[1])
        return json.dumps({"overall": k})

    stub_openai.hook = hook
    judge = endpoint(stub_openai, workers=4)
    pairs = [("p", f"r{k}") for k in (3, 9, 1, 3, 7)]
    scores = judge.score_batch(pairs)
    assert [s.value for s in scores] == pytest.approx([0.3, 0.9, 0.1, 0.3, 0.7])
    assert stub_openai.n_requests == 4


def test_make_judge_registry(stub_openai):  # noqa: F811
    assert set(JUDGES) == {"openai", "hf_rm"}
    judge = make_judge("openai", base_url=stub_openai.base_url, model="m")
    assert isinstance(judge, EndpointJudge)
    with pytest.raises(ValueError, match="unknown judge kind"):
        make_judge("nope")


def test_stub_completions_logprobs_n_and_length():
    # The stub serves sampler tests too: /v1/completions with n, logprobs and max_tokens.
    import urllib.request

    with StubOpenAI(responses=["abcdef", "xy"], default_logprob=-0.25) as srv:
        body = {"model": "m", "prompt": "q", "n": 2, "max_tokens": 4, "logprobs": 1}
        req = urllib.request.Request(
            srv.base_url + "/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            out = json.loads(resp.read())
    c0, c1 = out["choices"]
    assert (c0["text"], c0["finish_reason"]) == ("abcd", "length")
    assert (c1["text"], c1["finish_reason"]) == ("xy", "stop")
    assert c0["logprobs"]["tokens"] == list("abcd")
    assert c0["logprobs"]["token_logprobs"] == [-0.25] * 4


# --------------------------------------------------------------------------------------------
# Local reward model backend (tiny random Qwen2, local tokenizer; nothing downloaded)
# --------------------------------------------------------------------------------------------
def tiny_reward_model(pad: bool = True):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForSequenceClassification

    words = "what is two plus four the answer six i do not know <pad> <unk> <eos>".split()
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=tok, unk_token="<unk>", eos_token="<eos>", pad_token="<pad>"
    )
    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=len(words),
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        num_labels=1,
        pad_token_id=tokenizer.pad_token_id if pad else None,
    )
    return Qwen2ForSequenceClassification(cfg), tokenizer


def test_local_reward_model_scores_in_unit_interval():
    torch.set_num_threads(1)
    model, tok = tiny_reward_model()
    judge = make_judge("hf_rm", model=model, tokenizer=tok, batch_size=4)
    pairs = [
        ("what is two plus four", "the answer is six"),
        ("what is two plus four", "i do not know"),
    ]
    scores = judge.score_batch(pairs * 3)
    assert len(scores) == 6
    for s in scores:
        assert 0.0 <= s.value <= 1.0 and s.reason == "ok" and s.correct == (s.value >= 0.5)
    # Batching with padding must not change a row's score; logit -> sigmoid by hand.
    single = judge.score(*pairs[1])
    assert single.value == pytest.approx(scores[1].value, abs=1e-5)
    enc = tok("what is two plus four\n\ni do not know", return_tensors="pt")
    with torch.no_grad():
        z = model(**enc).logits[0, 0].item()
    assert single.value == pytest.approx(torch.sigmoid(torch.tensor(z)).item(), abs=1e-5)
    assert scores[0].value != scores[1].value  # the response matters


def test_local_reward_model_from_folder_and_without_pad(tmp_path):
    torch.set_num_threads(1)
    model, tok = tiny_reward_model(pad=False)
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    judge = RewardModelJudge(model_path=str(tmp_path), batch_size=8)
    assert judge.batch_size == 1  # no pad id: rows scored one by one
    s = judge.score_batch([("what is two", "six"), ("plus", "four four")])
    assert all(0.0 <= x.value <= 1.0 for x in s)
    assert os.path.exists(tmp_path / "config.json")


def test_local_reward_model_uses_chat_template():
    model, tok = tiny_reward_model()
    tok.chat_template = (
        "{% for m in messages %}{{ m['role'] }} {{ m['content'] }} <eos> {% endfor %}"
    )
    judge = RewardModelJudge(model=model, tokenizer=tok)
    assert judge.format("what is two", "six") == "user what is two <eos> assistant six <eos> "
    assert 0.0 <= judge.score("what is two", "six").value <= 1.0


def test_stub_chat_logprobs_token_ids_stop_and_hook():
    import urllib.request

    def hook(body, path, i):
        return {
            "text": f"ab{i}STOPzz",
            "logprobs": [-1.0, -2.0, -3.0, -4.0, -5.0, -6.0, -7.0, -8.0],
        }

    with StubOpenAI(hook=hook) as srv:
        body = {
            "model": "m",
            "messages": [{"role": "user", "content": "hi"}],
            "n": 2,
            "logprobs": True,
            "stop": ["STOP"],
            "return_tokens_as_token_ids": True,
        }
        req = urllib.request.Request(
            srv.base_url + "/chat/completions",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            out = json.loads(resp.read())
    texts = [c["message"]["content"] for c in out["choices"]]
    assert texts == ["ab0", "ab1"]
    lp = out["choices"][1]["logprobs"]["content"]
    assert [t["token"] for t in lp] == [f"token_id:{ord(c)}" for c in "ab1"]
    assert [t["logprob"] for t in lp] == [-1.0, -2.0, -3.0]
    assert out["choices"][0]["finish_reason"] == "stop"


# --------------------------------------------------------------------------------------------
# The math judge: a second opinion where the rules cannot decide or say wrong
# --------------------------------------------------------------------------------------------
def _math(answer: str, i: int = 0):
    from vibethinker.types import Problem

    return Problem(id=f"m{i}", domain="math", prompt=f"Problem {i}?", answer=answer)


def _equivalence_hook(body, path, index):
    """A stub judge: equivalent iff the student's answer is in a small table of true matches."""
    user = body["messages"][1]["content"]
    ref = user.split("REFERENCE ANSWER:\n")[1].split("\n")[0]
    student = user.split("STUDENT'S FINAL ANSWER:\n")[1]
    ok = {("12", r"\text{twelve}"), (r"\frac{1}{2}", r"\tfrac12 \text{ of it}")}
    return '{"score": 10}' if (ref, student) in ok else '{"score": 0}'


def test_math_judge_second_opinion_only_where_rules_fail(stub_openai, tmp_path):  # noqa: F811
    from vibethinker.verifiers.math_judge import JudgeStats, make_math_judge, second_opinion

    stub_openai.hook = _equivalence_hook
    problems = [_math("12", 0), _math("12", 1), _math("12", 2), _math("12", 3), _math("12", 4)]
    responses = [
        r"<think>x</think> \boxed{12}",  # rules: correct -> judge not asked
        r"<think>x</think> \boxed{\text{twelve}}",  # rules: wrong -> judge overturns
        r"<think>x</think> \boxed{13}",  # rules: wrong -> judge agrees
        r"<think>x</think> \boxed{11} or \boxed{12}",  # a hedge: policy, judge not asked
        "<think>x</think> twelve",  # no boxed answer: judge not asked
    ]
    from vibethinker.verifiers import verify

    scores = [verify(p, r) for p, r in zip(problems, responses)]
    assert [s.correct for s in scores] == [True, False, False, False, False]
    judge = make_math_judge(f"judge-m@{stub_openai.base_url}", str(tmp_path / "c.json"))
    stats = JudgeStats()
    out = second_opinion(problems, responses, scores, judge, stats)
    assert [s.correct for s in out] == [True, True, False, False, False]
    assert out[1].reason == "ok:judge(wrong_answer)" and out[2].reason == scores[2].reason
    assert stub_openai.n_requests == 2  # only items 1 and 2
    body = stub_openai.requests[0]["body"]
    assert "<think>" not in body["messages"][1]["content"]  # the boxed answer only
    assert stats.as_dict() == {
        "math_verdicts": 5,
        "consulted": 2,
        "overturned": 1,
        "errors": 0,
        "share": 0.2,
    }
    # cached: the same (problem, answer) again costs no request, also from the file
    second_opinion(problems, responses, scores, judge, stats)
    again = make_math_judge(f"judge-m@{stub_openai.base_url}", str(tmp_path / "c.json"))
    second_opinion(problems, responses, scores, again)
    assert stub_openai.n_requests == 2


def test_math_judge_failure_keeps_the_rule_verdict(stub_openai):  # noqa: F811
    from vibethinker.verifiers.math_judge import JudgeStats, make_math_judge, second_opinion

    stub_openai.fail_first = 100
    judge = make_math_judge(f"judge-m@{stub_openai.base_url}")
    judge.sleep = lambda s: None
    stats = JudgeStats()
    p = [_math("12")]
    r = [r"\boxed{\text{twelve}}"]
    scores = [Score(0.0, False, "wrong_answer")]
    assert second_opinion(p, r, scores, judge, stats) == scores
    assert (stats.consulted, stats.overturned, stats.errors) == (1, 0, 1)


def test_judged_verify_is_a_drop_in_for_verify_batch(stub_openai, tmp_path):  # noqa: F811
    from vibethinker.verifiers.math_judge import judged_verify

    stub_openai.hook = _equivalence_hook
    verify = judged_verify(f"judge-m@{stub_openai.base_url}", tmp_path)
    scores = verify(
        [_math("12"), _math("12")], [r"\boxed{\text{twelve}}", r"\boxed{12}"], workers=1
    )
    assert [s.correct for s in scores] == [True, True]
    assert verify.stats.overturned == 1 and verify.stats.math_verdicts == 2
    assert (tmp_path / "math_judge_cache.json").exists()


def test_math_judge_spec_is_checked():
    from vibethinker.verifiers.math_judge import make_math_judge

    with pytest.raises(ValueError):
        make_math_judge("no-url-here")


def test_eval_passes_the_math_judge_through(stub_openai, tmp_path):  # noqa: F811
    """The eval and RL stages take `math_judge`; `evaluate` verifies through it."""
    from dataclasses import fields

    from vibethinker.evaluate import evaluate
    from vibethinker.stages.eval import EvalConfig
    from vibethinker.stages.rl import RLConfig
    from vibethinker.types import Completion
    from vibethinker.verifiers.math_judge import judged_verify

    assert {f.name: f.default for f in fields(EvalConfig)}["math_judge"] == ""
    assert {f.name: f.default for f in fields(RLConfig)}["math_judge"] == ""

    class Canned:
        def generate(self, prompts, n, params):
            texts = [r"\boxed{12}", r"\boxed{\text{twelve}}", r"\boxed{13}"]
            return [[Completion(t, [0], None, "stop") for t in texts[:n]] for _ in prompts]

    stub_openai.hook = _equivalence_hook
    verify = judged_verify(f"judge-m@{stub_openai.base_url}", tmp_path)
    res = evaluate(Canned(), [_math("12")], n=3, ks=[1], workers=1, verify_fn=verify)
    assert [s.correct for s in res.groups[0].scores] == [True, True, False]
    assert verify.stats.as_dict()["share"] == pytest.approx(1 / 3)


def test_math_judge_reads_the_rows_answer_format(stub_openai):  # noqa: F811
    """A `# Answer` row (answer_format=answer_line) gives the judge the answer line, not nothing
    (before the rules it looked for a box only and never asked)."""
    import dataclasses

    from vibethinker.verifiers.math_judge import make_math_judge, second_opinion

    stub_openai.hook = _equivalence_hook
    p = dataclasses.replace(_math("12"), meta={"answer_format": "answer_line"})
    r = ["Twelve of them.\n\n# Answer\n\n\\text{twelve}"]
    from vibethinker.verifiers import verify

    scores = [verify(p, r[0])]
    assert scores[0].reason == "wrong_answer"  # the rules read the line, and cannot decide
    out = second_opinion([p], r, scores, make_math_judge(f"judge-m@{stub_openai.base_url}"))
    assert out[0].correct and stub_openai.n_requests == 1


def test_maj_at_k_keys_read_the_rows_answer_format():
    import dataclasses

    from vibethinker.evaluate.metrics import answer_key

    p = dataclasses.replace(_math("12"), meta={"answer_format": "answer_line"})
    assert answer_key(p, "so\n\n# Answer\n\n$12$") == answer_key(_math("12"), r"\boxed{12}")
    assert answer_key(_math("12"), "so\n\n# Answer\n\n12") is None  # boxed: no box, no key
