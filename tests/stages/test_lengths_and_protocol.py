"""Rules on lengths and the evaluation protocol: over-long SFT samples are dropped
(counted) unless cutting is asked for; truncated reference/filter rollouts are judged by one
rule (`truncated_reward`) with the decisions it made counted; eval's per-domain n and one notion
of correct for avg@n and pass@k."""

from __future__ import annotations

import json

import pytest
import torch

from vibethinker.models.tiny import build_tiny_model
from vibethinker.train import packing, policy
from vibethinker.types import Completion, Problem, Score

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [f"what is {i}+1? <think>{i}+1={i + 1}</think>\\boxed{{{i + 1}}}" for i in range(40)]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)


# ----------------------------------------------------------------------------- item 3


def test_overlong_samples_are_dropped_by_default_cut_on_request(tiny):
    _, tok = policy.load_policy(tiny, "cpu")
    pairs = [
        ("what is 1+1?", "<think>1+1=2</think>\\boxed{2}"),
        ("what is 1+1?", "<think>" + "1+1=2;" * 40 + "</think>\\boxed{2}"),
    ]
    short = len(packing.encode_chat(tok, *pairs[0])[0])
    kept = packing.build_samples(pairs, tok, short + 5)
    assert len(kept) == 1 and not kept[0].truncated
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert kept[0].ids[-2:] == [end, tok("\n", add_special_tokens=False)["input_ids"][0]]
    cut = packing.build_samples(pairs, tok, short + 5, overlong="cut")
    assert [s.truncated for s in cut] == [False, True] and len(cut[1].ids) == short + 5
    trained = [i for i, m in zip(cut[1].ids, cut[1].mask) if m]
    assert end not in trained  # what cutting trains: no final answer, no end token
    with pytest.raises(ValueError, match="overlong"):
        packing.build_samples(pairs, tok, 10, overlong="wrap")


def test_sft_stage_counts_dropped_samples(tiny, tmp_path):
    from vibethinker.data.io import save_problems
    from vibethinker.stages import get
    from vibethinker.stages.sft import SFTConfig

    probs = [
        Problem(
            f"p{i}",
            "math",
            f"what is {i}+1?",
            answer=str(i + 1),
            traces=[
                f"<think>{i}+1={i + 1}</think>\\boxed{{{i + 1}}}",
                "<think>" + "1+1=2;" * 60 + "</think>\\boxed{2}",
            ],
        )
        for i in range(6)
    ]
    save_problems(tmp_path / "train.jsonl", probs)
    cfg = SFTConfig(
        model=tiny,
        data=str(tmp_path / "train.jsonl"),
        out=str(tmp_path / "sft"),
        epochs=1,
        global_batch=4,
        micro_batch=4,
        max_len=96,
        prompt_style="raw",
        device="cpu",
    )
    get("sft").fn(cfg)
    stats = json.loads((tmp_path / "sft" / "stats.json").read_text())
    assert stats["samples"] == 6 and stats["samples_dropped_overlong"] == 6
    assert stats["samples_cut"] == 0
    assert "6 samples over max_len 96 dropped" in (tmp_path / "sft" / "summary.md").read_text()


# ----------------------------------------------------------------------------- item 4


class Canned:
    """A sampler answering each prompt with fixed (text, finish_reason) pairs."""

    def __init__(self, table):
        self.table = table

    def generate(self, prompts, n, params):
        return [[Completion(t, [1] * 3, None, f) for t, f in self.table[p][:n]] for p in prompts]


def _has_answer(problems, texts):
    return [Score(float("\\boxed{2}" in t), "\\boxed{2}" in t, "ok") for t in texts]


def test_reference_filter_judges_truncation_by_one_rule_and_counts_it():
    from vibethinker.stages.sft import filter_easy_prompts

    probs = [Problem("cut", "math", "A", answer="2"), Problem("easy", "math", "B", answer="2")]
    sampler = Canned(
        {"A": [("\\boxed{2} and then on", "length")] * 4, "B": [("\\boxed{2}", "stop")] * 4}
    )
    kw = dict(rollouts=4, min_error=0.75, max_new_tokens=8, seed=0, verify=_has_answer)
    kept, counts = filter_easy_prompts(probs, sampler, **kw)  # default: "zero", as rl
    assert [p.id for p in kept] == ["cut"]  # cut rollouts count as errors: looks hard
    assert counts["ref_truncated_rollouts"] == 4 and counts["truncation_decisions"] == 1
    kept, counts = filter_easy_prompts(probs, sampler, truncated_reward="verify", **kw)
    assert kept == [] and counts["truncation_decisions"] == 1


def test_rl_filter_follows_the_stage_truncated_reward():
    from vibethinker.stages.rl import filter_prompts

    probs = [Problem("a", "math", "A", answer="2"), Problem("b", "math", "B", answer="2")]
    sampler = Canned(
        {
            "A": [("\\boxed{2}", "stop"), ("\\boxed{2} ...", "length")],
            "B": [("\\boxed{3}", "stop"), ("\\boxed{2}", "stop")],
        }
    )
    params = None
    kept, c = filter_prompts(probs, sampler, 2, params, lambda p: p.prompt, _has_answer, "zero")
    assert [p.id for p in kept] == ["a", "b"] and c["truncation_decisions"] == 1
    assert c["truncated_rollouts"] == 1 and c["truncated_reward"] == "zero"
    kept, c = filter_prompts(probs, sampler, 2, params, lambda p: p.prompt, _has_answer, "verify")
    assert [p.id for p in kept] == ["b"] and c["dropped_p1"] == 1  # the cut answer counts


def test_truncation_verdicts_by_hand():
    from vibethinker.evaluate.metrics import truncation_verdicts

    v = truncation_verdicts([True, True, False], [False, True, True])
    assert v == {"zero": [True, False, False], "verify": [True, True, False]}


# ----------------------------------------------------------------------------- item 7


def test_eval_defaults_are_the_paper_profile():
    from vibethinker.stages.eval import PAPER_N, EvalConfig

    cfg = EvalConfig()
    assert cfg.n == 0 and cfg.max_new_tokens == 0  # the paper's n per domain, no extra cap
    assert PAPER_N == {"math": 64, "imo-answerbench": 16, "stem": 16, "code": 8, "instruct": 8}


def test_per_domain_n_and_one_notion_of_correct():
    from vibethinker.evaluate import evaluate, samples_per_problem
    from vibethinker.stages.eval import PAPER_N

    probs = [
        Problem("m", "math", "What is 1+1?", answer="2"),
        Problem("s", "stem", "Pick B", answer="B", choices=["x", "y", "z", "w"]),
        Problem(
            "i",
            "instruct",
            "Write two words",
            instructions=[
                {"id": "punctuation:no_comma", "kwargs": {}},
                {"id": "change_case:english_lowercase", "kwargs": {}},
            ],
        ),
    ]
    code = Problem("c", "code", "f", tests=[{"input": "", "output": ""}])
    assert samples_per_problem([*probs, code], PAPER_N) == [64, 16, 8, 8]

    class Rec:
        calls: list[int] = []

        def generate(self, prompts, n, params):
            self.calls.append(n)
            texts = {"1+1": "\\boxed{2}", "Pick": "\\boxed{B}", "two": "hello, world"}
            return [
                [Completion(next(v for k, v in texts.items() if k in p), [5] * 4)] * n
                for p in prompts
            ]

    rec = Rec()
    res = evaluate(rec, probs, n=PAPER_N, ks=[1, 8, 64], workers=1)
    assert sorted(rec.calls) == [8, 16, 64]
    assert [len(g.completions) for g in res.groups] == [64, 16, 8]
    assert res.n_by_domain == {"math": 64, "stem": 16, "instruct": 8}
    inst = res.metrics["instruct"]
    # "hello, world" follows one of two instructions: partial credit 0.5, but not correct
    assert inst["mean_score"] == 0.5 and inst["avg@n"] == 0.0 == inst["pass@1"]
    assert "pass@64" not in inst and res.metrics["math"]["pass@64"] == 1.0
    assert res.metrics["math"]["avg@n"] == res.metrics["math"]["pass@1"] == 1.0
