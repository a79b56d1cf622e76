"""The openai sampler against the stub server on 127.0.0.1 (tests/helpers/stub_openai.py)."""

from __future__ import annotations

import threading
import time

import pytest

from tests.helpers.stub_openai import StubOpenAI
from vibethinker.engines import SamplerError, SamplingParams, make_sampler
from vibethinker.engines.openai import OpenAISampler


def sampler(srv: StubOpenAI, **kw) -> OpenAISampler:
    kw.setdefault("backoff", 0.01)
    return make_sampler("openai", base_url=srv.base_url, model="m", **kw)


def test_chat_n_params_and_logprobs():
    def hook(body, path, i):
        return f"{body['messages'][-1]['content']}#{i}"

    with StubOpenAI(hook=hook, default_logprob=-0.25) as srv:
        s = sampler(srv, concurrency=2)
        params = SamplingParams(temperature=0.6, top_p=0.9, top_k=20, max_new_tokens=50, seed=3)
        out = s.generate(["ab", [{"role": "user", "content": "cd"}]], n=3, params=params)
        assert [[c.text for c in g] for g in out] == [
            ["ab#0", "ab#1", "ab#2"],
            ["cd#0", "cd#1", "cd#2"],
        ]
        c = out[0][0]
        assert c.logprobs == [-0.25] * 4 and c.finish_reason == "stop"
        bodies = sorted((r["body"] for r in srv.requests), key=lambda b: b["seed"])
        b = bodies[0]
        assert b["n"] == 3 and b["temperature"] == 0.6 and b["top_p"] == 0.9
        assert b["top_k"] == 20 and b["max_tokens"] == 50 and b["logprobs"] is True
        assert b["messages"] == [{"role": "user", "content": "ab"}]
        assert [x["seed"] for x in bodies] == [3, 4]  # a distinct, reproducible seed per prompt
        assert srv.requests[0]["path"] == "/v1/chat/completions"


def test_top_k_off_is_not_sent_and_length_finish():
    with StubOpenAI(responses=["abcdefgh"]) as srv:
        out = sampler(srv).generate(["x"], 1, SamplingParams(max_new_tokens=3))
        assert out[0][0].text == "abc" and out[0][0].finish_reason == "length"
        assert "top_k" not in srv.requests[0]["body"]


def test_completions_endpoint_stop_and_token_ids():
    with StubOpenAI(responses=["12</a>34"]) as srv:
        s = sampler(srv, endpoint="completions", extra_body={"return_tokens_as_token_ids": True})
        out = s.generate(["q"], 2, SamplingParams(stop=["</a>"]))
        assert [c.text for c in out[0]] == ["12", "12"]
        assert out[0][0].token_ids == [ord("1"), ord("2")]
        assert out[0][0].logprobs == [-0.5, -0.5]
        body = srv.requests[0]["body"]
        assert body["prompt"] == "q" and body["stop"] == ["</a>"] and body["logprobs"] == 1
        with pytest.raises(SamplerError):
            s.generate([[{"role": "user", "content": "chat"}]], 1, SamplingParams())


def test_server_capping_n_is_topped_up():
    class Capped(StubOpenAI):
        def build_response(self, path, body):
            return super().build_response(path, {**body, "n": min(2, body["n"])})

    with Capped(responses=["a", "b", "c"]) as srv:
        out = sampler(srv).generate(["p"], 5, SamplingParams())
        assert len(out[0]) == 5
        assert [r["body"]["n"] for r in srv.requests] == [5, 3, 1]


def test_errors_then_ok_are_retried():
    with StubOpenAI(responses=["fine"], script=[503, "drop", "malformed", None]) as srv:
        out = sampler(srv, max_retries=3).generate(["p"], 1, SamplingParams())
        assert out[0][0].text == "fine"
        assert srv.n_requests == 4


def test_client_error_fails_at_once():
    with StubOpenAI(script=[400]) as srv:
        with pytest.raises(SamplerError, match="HTTP 400"):
            sampler(srv, max_retries=5).generate(["p"], 1, SamplingParams())
        assert srv.n_requests == 1


def test_persistent_errors_raise_after_retries():
    with StubOpenAI(fail_first=100, fail_status=500) as srv:
        with pytest.raises(SamplerError, match="after 3 attempts.*HTTP 500"):
            sampler(srv, max_retries=2).generate(["p"], 1, SamplingParams())
        assert srv.n_requests == 3


def test_timeout_raises_within_bound():
    with StubOpenAI(delay_s=30.0) as srv:
        s = sampler(srv, timeout=0.3, max_retries=1, concurrency=4)
        with pytest.raises(SamplerError, match="attempts"):
            s.generate(["a", "b", "c"], 1, SamplingParams())
        # every request gave up at the client's timeout: none waited for the 30 s reply
        assert srv.n_requests >= 3


def test_unreachable_server_raises():
    with StubOpenAI() as srv:
        url = srv.base_url
    s = OpenAISampler(base_url=url, max_retries=1, backoff=0.01, timeout=1.0)
    with pytest.raises(SamplerError):
        s.generate(["p"], 1, SamplingParams())


def test_concurrency_limit():
    active = {"now": 0, "max": 0}
    lock = threading.Lock()

    def hook(body, path, i):
        with lock:
            active["now"] += 1
            active["max"] = max(active["max"], active["now"])
        time.sleep(0.05)
        with lock:
            active["now"] -= 1
        return "ok"

    with StubOpenAI(hook=hook) as srv:
        out = sampler(srv, concurrency=2).generate([str(i) for i in range(8)], 1, SamplingParams())
        assert len(out) == 8 and active["max"] <= 2


def test_reasoning_content_is_put_back_in_think_tags():
    class Reasoning(StubOpenAI):
        def build_response(self, path, body):
            r = super().build_response(path, body)
            r["choices"][0]["message"]["reasoning_content"] = "2+2=4"
            return r

    with Reasoning(responses=["\\boxed{4}"]) as srv:
        out = sampler(srv, logprobs=False).generate(["p"], 1, SamplingParams())
        assert out[0][0].text == "<think>2+2=4</think>\\boxed{4}"
        assert out[0][0].logprobs is None
        assert "logprobs" not in srv.requests[0]["body"]


def _seeded(body, path, i):
    """A seed-honouring server: the same seed gives the same sample."""
    return f"{body['messages'][-1]['content']}@{body.get('seed')}/{i}"


def test_server_ignoring_n_gets_a_distinct_seed_per_sample():
    with StubOpenAI(hook=_seeded, ignore_n=True, no_logprobs=True) as srv:
        s = sampler(srv, concurrency=3)
        out = s.generate(["a", "b"], 4, SamplingParams(seed=3))
        for group in out:
            assert len(group) == 4 and len({c.text for c in group}) == 4  # no duplicates
        assert s.ignores_n  # detected from the one-choice answer to n=4
        first = len(srv.requests)
        again = s.generate(["a", "b"], 4, SamplingParams(seed=3))
        assert [[c.text for c in g] for g in again] == [[c.text for c in g] for g in out]
        later = srv.requests[first:]
        assert len(later) == 8 and all(r["body"]["n"] == 1 for r in later)  # split up front
        assert len({r["body"]["seed"] for r in later}) == 8


def test_follow_up_requests_never_reuse_the_seed():
    """A server that caps n (here: always one choice) must not be re-asked with the first
    request's seed: a seed-honouring server would return the same sample again."""
    with StubOpenAI(hook=_seeded, ignore_n=True) as srv:
        sampler(srv, concurrency=1).generate(["a"], 3, SamplingParams(seed=0))
        seeds = [r["body"]["seed"] for r in srv.requests]
        assert len(seeds) == 3 and len(set(seeds)) == 3 and seeds[0] == 0


def test_token_counts_from_usage_and_unknown_is_not_zero():
    from vibethinker.evaluate.metrics import n_tokens

    with StubOpenAI(responses=["abcde"], ignore_n=True, no_logprobs=True) as srv:
        (c,) = sampler(srv).generate(["x"], 1, SamplingParams())[0]
        assert c.token_ids == [] and c.logprobs is None
        assert c.num_tokens == 5 and n_tokens(c) == 5  # from usage.completion_tokens
    # several choices in one response without logprobs: usage is their sum, lengths unknown
    with StubOpenAI(responses=["abc", "de"], no_logprobs=True) as srv:
        out = sampler(srv).generate(["x"], 2, SamplingParams())[0]
        assert [n_tokens(c) for c in out] == [None, None]


def test_unknown_lengths_report_none_in_the_metrics():
    from vibethinker.evaluate.metrics import aggregate, group_stats
    from vibethinker.types import Completion, Group, Problem, Score

    p = Problem(id="1", domain="math", prompt="q", answer="1")
    g = Group(
        p,
        [Completion("\\boxed{1}"), Completion("\\boxed{2}")],
        [Score(1.0, True, "ok"), Score(0.0, False, "wrong")],
    )
    m = aggregate([g], [group_stats(g, [1])], [1])["all"]
    assert m["mean_tokens"] is None and m["mean_correct_tokens"] is None
    assert m["tokens_per_correct"] is None and m["avg@n"] == 0.5


def test_tokenizer_adds_the_turn_end_as_a_stop_string(tmp_path):
    from vibethinker.models.tiny import build_tiny_model

    folder = build_tiny_model(tmp_path / "m", ["what is 1+2? <think>3</think>"] * 4, "d1", 300)
    with StubOpenAI(responses=["4<|im_end|>\nmore"]) as srv:
        s = sampler(srv, tokenizer=folder, logprobs=False)
        (c,) = s.generate(["x"], 1, SamplingParams(stop=["</s>"]))[0]
        assert srv.requests[0]["body"]["stop"] == ["</s>", "<|im_end|>"]
        assert c.text == "4" and c.finish_reason == "stop"
    # a server that leaves the turn end in the text (special tokens not skipped) is cut there
    got = s._parse(
        {"choices": [{"message": {"content": "4<|im_end|>x"}, "finish_reason": "length"}]}
    )
    assert got[0].text == "4" and got[0].finish_reason == "stop"
    assert got[0].num_tokens == 1  # counted with the tokenizer (no usage, no logprobs)


def test_the_cost_ledger_counts_requests_and_their_usage():
    from vibethinker import ledger

    with StubOpenAI(responses=["abcde"], ignore_n=True, no_logprobs=True) as srv:
        ledger.start()
        sampler(srv).generate(["x", "y"], 2, SamplingParams())
        rec = ledger.stop(1.0)
    t = rec["teacher"]
    assert t["calls"] == 4 and t["completion"] == 4 * 5  # one request per sample: n ignored
