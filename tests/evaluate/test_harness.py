"""The evaluation harness: metrics by hand on a fake sampler, the tiny model end to end through
the `eval` stage, and HumanEval's canonical solutions scoring 100%."""

from __future__ import annotations

import json

import pytest

from vibethinker.engines import SamplingParams
from vibethinker.evaluate import evaluate
from vibethinker.evaluate.metrics import answer_key, cluster_keys, normalize_answer
from vibethinker.prompts.paper import MATH_SUFFIX, choice_prompt, math_prompt, paper_prompt
from vibethinker.reports.eval import write_outputs
from vibethinker.types import Completion, Problem


class FakeSampler:
    """Returns canned responses per prompt substring; records what it was asked."""

    def __init__(self, table: dict[str, list[tuple[str, str]]]):
        self.table, self.calls = table, []

    def generate(self, prompts, n, params):
        self.calls.append((list(prompts), n, params))
        out = []
        for p in prompts:
            key = next(k for k in self.table if k in p)
            rows = self.table[key][:n]
            out.append([Completion(t, list(range(len(t))), None, f) for t, f in rows])
        return out


def problems() -> list[Problem]:
    return [
        Problem("m1", "math", "What is 2+2?", subdomain="arith", answer="4"),
        Problem("m2", "math", "Half of one?", subdomain="frac", answer="\\frac{1}{2}"),
        Problem(
            "s1", "stem", "Which is a noble gas?", answer="B", choices=["N2", "Ne", "O2", "H2"]
        ),
    ]


TABLE = {
    "2+2": [("\\boxed{4}", "stop")] * 3 + [("\\boxed{5}", "stop")],
    "Half": [
        ("\\boxed{\\frac{1}{2}}", "stop"),
        ("\\boxed{0.5}", "stop"),
        ("\\boxed{3}", "stop"),
        ("\\boxed{ 3 }", "stop"),
    ],
    "noble": [
        ("\\boxed{B}", "stop"),
        ("\\boxed{A}", "stop"),
        ("\\boxed{A}", "stop"),
        ("I think", "length"),
    ],
}


def test_metrics_by_hand(tmp_path):
    fake = FakeSampler(TABLE)
    res = evaluate(fake, problems(), n=4, ks=[1, 4, 8], params=SamplingParams(), workers=1)
    m = res.metrics
    assert list(m) == ["all", "math", "stem", "math/arith", "math/frac"]
    # m1: 3/4 correct; m2: 2/4 (1/2 and 0.5 both right); s1: 1/4
    assert m["math/arith"]["avg@n"] == pytest.approx(0.75)
    assert m["math/frac"]["avg@n"] == pytest.approx(0.5)
    assert m["stem"]["avg@n"] == pytest.approx(0.25)
    assert m["all"]["avg@n"] == pytest.approx(0.5)
    assert m["all"]["pass@1"] == pytest.approx(0.5) and m["all"]["pass@4"] == 1.0
    assert "pass@8" not in m["all"]  # k > n dropped
    # maj@4: m1 "4" x3 beats "5" -> 1; m2 {1/2, 0.5} x2 ties "3" x2 -> 1/2; s1 A x2 beats B -> 0
    assert m["math/arith"]["maj@4"] == 1.0
    assert m["math/frac"]["maj@4"] == pytest.approx(0.5)
    assert m["stem"]["maj@4"] == 0.0
    assert m["all"]["maj@4"] == pytest.approx(0.5)
    # maj@1 equals avg@n (one vote is one sample; the no-answer sample abstains and loses)
    assert m["all"]["maj@1"] == pytest.approx(0.5)
    # tokens: fake token count = characters
    lens = [len(t) for rows in TABLE.values() for t, _ in rows]
    assert m["all"]["mean_tokens"] == pytest.approx(sum(lens) / 12)
    correct_lens = [9, 9, 9, len("\\boxed{\\frac{1}{2}}"), len("\\boxed{0.5}"), 9]
    assert m["all"]["tokens_per_correct"] == pytest.approx(sum(lens) / 6)
    assert m["all"]["mean_correct_tokens"] == pytest.approx(sum(correct_lens) / 6)
    assert m["stem"]["truncation_rate"] == 0.25 and m["all"]["truncation_rate"] == pytest.approx(
        1 / 12
    )
    # the paper's prompts went to the sampler
    sent = fake.calls[0][0]
    assert sent[0] == f"What is 2+2? {MATH_SUFFIX}"
    assert "B) Ne" in sent[2] and "\\boxed{}" in sent[2]
    # outputs
    paths = write_outputs(res, tmp_path / "ev", model="fake", data="mem")
    rows = [json.loads(x) for x in open(paths["samples"])]
    assert len(rows) == 12 and {"score", "correct", "reason", "response"} <= set(rows[0])
    assert rows[3]["reason"] != "ok" and rows[0]["reason"] == "ok"
    summary = json.load(open(paths["summary"]))
    assert summary["metrics"]["all"]["pass@4"] == 1.0 and summary["params"]["top_p"] == 0.95
    md = open(paths["table"]).read()
    assert "| slice |" in md and "| math/frac |" in md and "maj@4" in md
    with open(paths["plot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_prompts_not_double_appended():
    once = math_prompt("1+1?")
    assert math_prompt(once) == once and once.endswith(MATH_SUFFIX)
    shown = "Pick one.\nA) x\nB) y"
    assert choice_prompt(shown, ["x", "y"]).count("A) x") == 1
    p = Problem("c", "code", "Write f.", tests=[{"input": "", "output": ""}])
    assert paper_prompt(p) == "Write f."


def test_answer_keys_and_clusters():
    math = Problem("m", "math", "q", answer="2")
    assert answer_key(math, "<think>\\boxed{9}</think>so \\boxed{ 2 }") == "2"
    assert answer_key(math, "<think>unfinished \\boxed{2}") is None
    assert normalize_answer("\\dfrac{2}{4}") == normalize_answer("0.5") == "1/2"
    assert normalize_answer("025") == "25"
    stem = Problem("s", "stem", "q", answer="A", choices=["a", "b"])
    assert answer_key(stem, "\\boxed{B}") == "B"
    # correct answers cluster together whatever their spelling; wrong ones by value
    ids = cluster_keys(["x", "y", "3", "3.0", None], [True, True, False, False, False])
    assert ids[0] == ids[1] and ids[2] == "3" and ids[3] == "3.0" and ids[4] is None
    ids = cluster_keys(["3", "3.0"], [False, False], equivalent=lambda a, b: float(a) == float(b))
    assert ids[0] == ids[1]


def test_cli_values_parse_into_the_config():
    from vibethinker.config import make_config
    from vibethinker.stages.eval import EvalConfig

    cfg = make_config(EvalConfig, {"model": "m", "data": "d.jsonl", "n": "8", "k": "1,4,8"})
    assert cfg.k == [1, 4, 8] and cfg.n == 8
    assert (cfg.temperature, cfg.top_p, cfg.top_k) == (1.0, 0.95, 0)  # the paper's protocol


def _tiny_model_dir(tmp_path, texts):
    try:
        from vibethinker.models.tiny import build_tiny_model

        return build_tiny_model(tmp_path / "model", texts, size="1m", vocab_size=300, seed=0)
    except ImportError:
        from tests.helpers.tiny_qwen2 import tiny_qwen2

        model, tok = tiny_qwen2()
        model.save_pretrained(tmp_path / "model")
        tok.save_pretrained(tmp_path / "model")
        return str(tmp_path / "model")


def test_tiny_model_end_to_end_through_the_stage(tmp_path):
    """The `eval` stage on the embedded world's eval split with a (random) tiny model."""
    from vibethinker.data import world
    from vibethinker.data.io import save_problems
    from vibethinker.stages import get
    from vibethinker.stages.eval import EvalConfig

    splits = world.generate(seed=0, n_train=40, n_probe=1, n_eval=8, domains=("math", "stem"))
    data = tmp_path / "eval.jsonl"
    save_problems(data, splits["eval"])
    model_dir = _tiny_model_dir(tmp_path, [p.prompt for p in splits["train"]])
    cfg = EvalConfig(
        model=model_dir,
        data=str(data),
        n=4,
        k=[1, 2, 4],
        out=str(tmp_path / "eval"),
        max_new_tokens=12,
        device="cpu",
        workers=1,
    )
    outputs = get("eval").fn(cfg)
    assert set(outputs) == {"samples", "summary", "table", "plot"}
    summary = json.load(open(outputs["summary"]))
    all_ = summary["metrics"]["all"]
    assert all_["problems"] == 8 and all_["samples"] == 32
    assert 0.0 <= all_["avg@n"] <= all_["pass@2"] <= all_["pass@4"] <= 1.0
    assert 0 < all_["mean_tokens"] <= 12
    assert {"math", "stem"} <= set(summary["metrics"])
    rows = [json.loads(x) for x in open(outputs["samples"])]
    assert len(rows) == 32 and all(r["tokens"] <= 12 for r in rows)


def _humaneval_check(limit: int | None):
    from vibethinker.data.adapters import load_adapter

    probs = load_adapter("humaneval")[:limit]
    table = {
        p.prompt: [(f"```python\n{p.meta['code_prompt']}{p.meta['canonical_solution']}```", "stop")]
        for p in probs
    }
    res = evaluate(FakeSampler(table), probs, n=1, ks=[1], params=SamplingParams(), workers=2)
    bad = [(g.problem.id, g.scores[0].reason) for g in res.groups if not g.scores[0].correct]
    assert not bad, bad
    assert res.metrics["all"]["pass@1"] == 1.0


def test_humaneval_canonical_solutions_first_10():
    _humaneval_check(10)


@pytest.mark.slow
def test_humaneval_canonical_solutions_all():
    _humaneval_check(None)
