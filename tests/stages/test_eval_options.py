"""Eval options a first-time user trips on: k follows n, a limit balanced over domains,
a domain filter, and the eval-only failure detail written to samples.jsonl."""

import json

from vibethinker.engines import SamplingParams
from vibethinker.evaluate import EvalResult
from vibethinker.stages.eval import EvalConfig, default_ks, load_eval_problems
from vibethinker.types import Completion, Group, Problem, Score, case_detail


def test_default_k_follows_n():
    assert default_ks(4) == [1, 2, 4] and default_ks(1) == [1] and default_ks(6) == [1, 2, 4, 6]
    assert default_ks({"math": 64, "code": 8}) == [1, 2, 4, 8, 16, 32, 64]
    assert EvalConfig().k == []  # empty = follow n


def test_limit_is_balanced_over_domains_and_domains_filter(tmp_path):
    rows = [{"id": f"m{i}", "domain": "math", "prompt": "p", "answer": "1"} for i in range(10)]
    rows += [
        {"id": f"s{i}", "domain": "stem", "prompt": "p", "answer": "A", "choices": ["x"]}
        for i in range(10)
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_eval_problems(EvalConfig(data=str(path), limit=4))
    assert [p.id for p in got] == ["m0", "m1", "s0", "s1"]
    got = load_eval_problems(EvalConfig(data=str(path), domains=["stem"], limit=3))
    assert [p.id for p in got] == ["s0", "s1", "s2"]


def test_failure_detail_reaches_eval_samples_only():
    p = Problem("c", "code", "p", tests=[{"input": "1\n", "output": "2\n"}])
    detail = case_detail("1\n", "2\n", "3\n" + "x" * 500, limit=10)
    assert detail.startswith("input '1\\n'; expected '2\\n'; got '3\\nxxxxxxxx'...[+492 chars]")
    g = Group(
        p,
        [Completion("a"), Completion("b")],
        [Score(0.0, False, "wrong_answer", detail), Score(1.0, True, "ok")],
    )
    res = EvalResult([g], {}, [], 2, [1], SamplingParams(), prompts=["p"])
    rows = res.sample_rows()
    assert rows[0]["detail"] == detail and "detail" not in rows[1]


def test_passk_axis_ticks_are_the_integer_ks():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vibethinker.reports.eval import integer_k_axis

    fig, ax = plt.subplots()
    ax.plot([1, 2, 4, 8], [0.1, 0.2, 0.3, 0.4])
    ax.set_xscale("log", base=2)
    integer_k_axis(ax, [1, 2, 4, 8])
    fig.canvas.draw()
    assert [t.get_text() for t in ax.get_xticklabels()] == ["1", "2", "4", "8"]
    plt.close(fig)


def test_code_wrong_answer_says_which_test():
    from vibethinker.verifiers.code import verify_code

    p = Problem(
        "c",
        "code",
        "p",
        tests=[{"input": "1 2\n", "output": "3\n"}, {"input": "2 2\n", "output": "4\n"}],
    )
    s = verify_code(p, "```python\na, b = map(int, input().split())\nprint(a * b + 1)\n```")
    assert (s.reason, s.detail) == ("wrong_answer", "input '2 2\\n'; expected '4\\n'; got '5\\n'")
    assert verify_code(p, "```python\nprint(3)\n```").detail.startswith("input '2 2")


def test_plan_line_says_samples_and_tokens_before_the_run():
    from vibethinker.stages.eval import PAPER_N, plan_line

    probs = [Problem(f"m{i}", "math", "p", answer="1") for i in range(3)]
    probs += [Problem(f"c{i}", "code", "p") for i in range(2)]
    line = plan_line(EvalConfig(), probs, PAPER_N)
    assert "5 problems (code 2 x 8, math 3 x 64) = 208 samples" in line
    assert "n=0: the paper's per-domain profile" in line and "no token cap" in line
    assert "--quick (n=4, max_new_tokens=2048, limit=64)" in line
    line = plan_line(EvalConfig(n=2, max_new_tokens=100), probs, 2)
    assert "= 10 samples, up to 100 new tokens each (at most 1,000 in all)" in line
    assert "--quick" not in line


def test_quick_profile_fills_only_keys_left_at_zero():
    from vibethinker.stages.eval import apply_quick

    cfg = apply_quick(EvalConfig(quick=True, n=8))
    assert (cfg.n, cfg.max_new_tokens, cfg.limit) == (8, 2048, 64)
    assert apply_quick(EvalConfig()) == EvalConfig()


def test_quick_flag_and_trl_rows_and_a_domain_that_is_not_there(tmp_path, capsys):
    from vibethinker.cli import main

    rows = [{"question": f"{i}+1?", "gold": i + 1} for i in range(3)]
    path = tmp_path / "q.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    got = load_eval_problems(EvalConfig(data=str(path), domains=["math"]), answer_key="gold")
    assert [(p.id, p.answer) for p in got] == [
        ("q.jsonl-1", "1"),
        ("q.jsonl-2", "2"),
        ("q.jsonl-3", "3"),
    ]
    mixed = tmp_path / "m.jsonl"
    mixed.write_text(json.dumps({"id": "a", "domain": "math", "prompt": "p", "answer": "1"}))
    assert main(["eval", "--quick", "model=m", f"data={mixed}", "domains=code"]) == 2
    err = capsys.readouterr().err
    assert "no problems of domains=code" in err and "(it has math 1)" in err, err


def test_math_judge_changes_are_counted_in_summary_json(tmp_path, monkeypatch):
    """Issue 41 item 5: the judge's changed verdicts are a count in the eval's summary.json."""
    import json

    from vibethinker.data.io import save_problems
    from vibethinker.stages import eval as eval_stage
    from vibethinker.types import Completion, Problem, Score
    from vibethinker.verifiers import math_judge

    class Canned:
        def generate(self, prompts, n, params):
            texts = ["\\boxed{10}", "\\boxed{11}"]
            return [
                [Completion(texts[j % 2], [1, 2], None, "stop") for j in range(n)] for _ in prompts
            ]

    class YesJudge:
        def score_batch(self, pairs):
            return [Score(1.0, True, "ok") for _ in pairs]

    monkeypatch.setattr(eval_stage.EvalConfig, "make_engine", lambda self, m, s: Canned())
    monkeypatch.setattr(
        eval_stage,
        "judged_verify",
        lambda spec, out: math_judge.judged_verify(spec, out, judge=YesJudge()),
    )
    save_problems(tmp_path / "p.jsonl", [Problem("m1", "math", "3*4-2?", answer="10")])
    base = {"model": "fake", "data": str(tmp_path / "p.jsonl"), "n": 4, "workers": 1}
    out = eval_stage.run(
        eval_stage.EvalConfig(**base, out=str(tmp_path / "j"), math_judge="j@http://x/v1")
    )
    s = json.loads(open(out["summary"]).read())
    assert s["math_judge"]["overturned"] == s["math_judge"]["consulted"] == 2
    assert s["metrics"]["all"]["avg@n"] == 1.0
    plain = eval_stage.run(eval_stage.EvalConfig(**base, out=str(tmp_path / "r")))
    s0 = json.loads(open(plain["summary"]).read())
    assert "math_judge" not in s0 and s0["metrics"]["all"]["avg@n"] == 0.5
