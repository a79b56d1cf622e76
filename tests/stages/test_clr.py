"""CLR (docs/PAPER.md, "Test time: CLR"): the pure functions against hand-computed values, the parse
rules on malformed replies, the symbolic claim verifier, and the `clr` stage on a fake sampler
(exact counters, one call per phase, token accounting) and on a tiny random model."""

from __future__ import annotations

import json
import re

import pytest

from vibethinker.algo.clr import (
    clr_select,
    cluster_answers,
    majority_select,
    parse_claims,
    parse_verdict,
    reliability,
    verdict_or_zero,
)
from vibethinker.types import Completion, Problem
from vibethinker.verifiers.claims import symbolic_verdict

# ---------------------------------------------------------------- pure functions


def test_reliability_by_hand():
    # one failed claim of 5: (4/5)^5 = 1024/3125 = 0.32768 (the paper's 0.328)
    assert reliability([1, 1, 1, 1, 0], 5) == pytest.approx(0.32768)
    # 2 of 3 with M = 5, fewer than M: the paper's mean over M (absent claims unverified),
    # (2/5)^5; the `present` rule takes the mean over those there are, (2/3)^5 = 32/243
    assert reliability([1, 0, 1], 5) == pytest.approx(0.4**5)
    assert reliability([1, 0, 1], 5, "present") == pytest.approx(32 / 243)
    assert reliability([1], 5) == pytest.approx(0.2**5) and reliability([1], 5, "present") == 1
    assert reliability([1] * 7, 5) == 1.0  # more verdicts than M (a caller's list): mean of them
    with pytest.raises(ValueError, match="short_claims"):
        reliability([1], 5, "absent")
    assert reliability([1, 1, 1, 1, 1], 5) == 1.0
    assert reliability([0, 0], 5) == 0.0
    assert reliability([], 5) == 0.0  # no claims: no weight


def test_clr_select_by_hand():
    # clusters  A  B  A  B  B ; r = 1, 0.03125, 0.32768, 0.03125, 0
    # Score(A) = 1 + 0.32768 = 1.32768; Score(B) = 0.0625 -> A although B has more members
    sel = clr_select([0, 1, 0, 1, 1], [1.0, 0.03125, 0.32768, 0.03125, 0.0])
    assert sel.winner == 0 and sel.index == 0 and not sel.tie_broken
    assert sel.scores[0] == pytest.approx(1.32768) and sel.scores[1] == pytest.approx(0.0625)
    assert majority_select([0, 1, 0, 1, 1]).winner == 1  # majority: B (3 vs 2)


def test_tie_rule_larger_cluster_then_first_seen():
    # all r = 0 (a model that never validates): Score ties at 0 -> the larger cluster (1)
    sel = clr_select([0, 1, 1, None], [0.0, 0.0, 0.0, 0.0])
    assert sel.winner == 1 and sel.index == 1 and sel.tie_broken
    # equal Score and equal size: the cluster seen first
    sel = clr_select([1, 0], [0.5, 0.5])
    assert sel.winner == 1 and sel.index == 0
    # nothing answered: abstain
    assert clr_select([None, None], [1.0, 1.0]).winner is None


def test_cluster_answers_uses_the_equivalence_once_per_new_answer():
    calls = []

    def eq(a, b):
        calls.append((a, b))
        return float(a) == float(b)

    ids = cluster_answers(["0.5", "3", None, "0.50", "0.5", "3"], eq)
    assert ids == [0, 1, None, 0, 0, 1]
    # "3" vs "0.5"; "0.50" vs "0.5" (first match stops); identical strings never call eq
    assert calls == [("0.5", "3"), ("0.5", "0.50")]


def test_parse_claims_rules():
    text = "Sure.\n1. 3*4=12\n2) 12-2=10\n(3) \n- bullet claim\nClaim 4: four\nFinal answer: 10"
    cl = parse_claims(text, 3)
    assert cl.claims == ["3*4=12", "12-2=10", "bullet claim"]  # first M kept, prose ignored
    assert cl.answer == "10" and not cl.malformed
    assert cl.dropped_extra == 1 and cl.dropped_empty == 1  # "four" dropped; "(3)" empty
    # malformed: no list lines -> split on newlines and ';', boxes are the answer, not claims
    cl = parse_claims("<think>ignored;claims</think>3*4=12;12-2=10\\boxed{10}", 5)
    assert cl.claims == ["3*4=12", "12-2=10"] and cl.answer == "10" and cl.malformed
    assert parse_claims("Final answer: \\boxed{\\frac{1}{2}}", 5).answer == "\\frac{1}{2}"
    cut = parse_claims("<think>1. 3*4=12\n2. 12-2", 5)  # cut inside its reasoning
    assert cut.claims == [] and cut.unfinished and not cut.malformed
    assert parse_verdict("<think>true... \\boxed{1") is None
    empty = parse_claims("", 5)
    assert empty.claims == [] and empty.answer is None and empty.malformed


def test_parse_verdict_rules():
    assert parse_verdict("checking... \\boxed{1}") == 1
    assert parse_verdict("\\boxed{0}") == 0
    assert parse_verdict("\\boxed{\\text{False}}") == 0
    assert parse_verdict("<think>true</think> The claim is incorrect.") == 0  # after </think>
    assert parse_verdict("valid at first, but in the end: false") == 0  # the last word counts
    assert parse_verdict("Verdict: 1. It holds, no doubt.") == 1
    assert parse_verdict("So the claim is not correct.") == 0  # a `not` flips the word
    assert parse_verdict("It is not false") == 1
    assert parse_verdict("no idea; step 0 of 1") is None  # prose yes/no and digits never count
    assert parse_verdict("hmm") is None and parse_verdict("") is None
    assert verdict_or_zero(None) == 0 and verdict_or_zero(1) == 1


@pytest.mark.parametrize(
    "claim, verdict",
    [
        ("3*4=12", 1),
        ("12-2=11", 0),
        ("7 % 3 = 1", 1),
        ("2^{10} > 1000", 1),
        ("\\frac{3}{4} = 0.75", 1),
        ("1/3 = 0.333", 1),  # a decimal side is read at its stated precision
        ("1/3 = 0.3", 1),  # |1/3 - 3/10| = 1/30 <= 1/20: equal at the one place stated
        ("1 = 1 = 2", 0),
        ("9/0 = 1", 0),  # undefined: false (the math verifier's sympy path calls it equal)
        ("6 \\times 7 = 42", 1),
        ("x = 3", None),  # a variable: not checkable on its own
        ("the sum is 12", None),
        ("", None),
    ],
)
def test_symbolic_verdict(claim, verdict):
    assert symbolic_verdict(claim) == verdict


# ---------------------------------------------------------------- the stage, fake sampler

GOOD = "<think>3*4=12;12-2=10</think>\\boxed{10}"
BAD = "<think>3*4=13;13-2=11</think>\\boxed{11}"


class FakeModel:
    """Samples canned trajectories; extracts the steps of a trajectory as claims; judges a
    claim by arithmetic (a perfect judge) or never gives a verdict (`mute`)."""

    def __init__(self, mute: bool = False):
        self.calls: list[tuple[list[str], int]] = []
        self.mute = mute

    def encode(self, prompt):  # one token per character, as the completions below
        return list(range(len(prompt)))

    def generate(self, prompts, n, params):
        self.calls.append((list(prompts), n))
        return [[self._one(p, j) for j in range(n)] for p in prompts]

    def _one(self, prompt: str, j: int) -> Completion:
        if "\nSolution: " in prompt:
            attempt = prompt.split("\nSolution: ")[1]
            steps = re.sub(r"<think>|</think>.*", "", attempt).split(";")
            text = "\n".join(f"{i + 1}. {s}" for i, s in enumerate(steps)) + "\nFinal answer: x"
        elif "Claim:" in prompt:
            claim = prompt.split("\nClaim: ")[1].strip()
            v = symbolic_verdict(claim)
            text = "no idea" if self.mute else f"\\boxed{{{1 if v is None else v}}}"
        elif "3*4-2" in prompt:
            text = [GOOD, BAD, BAD, ""][j % 4]
        else:  # multiple choice
            text = ["\\boxed{B}", "\\boxed{A}", "I am not sure", "\\boxed{A}"][j % 4]
        return Completion(text, list(range(len(text))), None, "stop")


def _problems():
    return [
        Problem("m1", "math", "What is 3*4-2?", answer="10"),
        Problem("s1", "stem", "Which is a noble gas?", answer="B", choices=["N2", "Ne", "O", "H"]),
        Problem("c1", "code", "print 1", tests=[{"input": "", "output": "1"}]),
    ]


def _run(tmp_path, model, **kw):
    from vibethinker.data.io import save_problems
    from vibethinker.stages import get
    from vibethinker.stages.clr import ClrConfig

    save_problems(tmp_path / "p.jsonl", _problems())
    cfg = ClrConfig(model="fake", data=str(tmp_path / "p.jsonl"), out=str(tmp_path / "out"), **kw)
    cfg.workers = 1
    outputs = get("clr").fn(cfg, sampler=model)
    summary = json.load(open(outputs["summary"]))
    rows = [json.loads(x) for x in open(outputs["samples"])]
    return outputs, summary, rows


def test_stage_by_hand_one_call_per_phase_and_token_accounting(tmp_path):
    model = FakeModel()
    outputs, s, rows = _run(tmp_path, model, k=4, repeats=1, m=5, short_claims="present")
    # one call per phase, batched over both problems: 8 samples, 6 extractions
    # (math: GOOD, BAD, BAD; stem: B, A, A), 9 claims (math: 2 steps x 3; stem: 1 x 3)
    assert [(len(p), n) for p, n in model.calls] == [(2, 4), (6, 1), (6 + 3, 1)]
    c = s["counters"]
    assert c["skipped_problems"] == 1  # code has no votable answer
    assert c["ok"] == 6 and c["empty_response"] == 1 and c["no_final_answer"] == 1
    assert c["extractions"] == 6 and c["claims"] == 9 and c["decided_by_model"] == 9
    assert c["malformed_lists"] == 0 and c.get("verdicts_unparseable", 0) == 0
    # math: r(GOOD) = 1; r(BAD) = (1/2)^5 = 0.03125 -> Score(10) = 1 > Score(11) = 0.0625
    # stem: the one claim of each is its boxed letter, judged 1 (not arithmetic) -> r = 1 each;
    # Score(A) = 2 > Score(B) = 1
    m1 = [r for r in rows if r["id"] == "m1"]
    assert [r["r"] for r in m1] == pytest.approx([1.0, 0.03125, 0.03125, 0.0])
    top = s["comparison"]["rows"][-1]
    assert top["k"] == 4
    assert top["clr"] == pytest.approx(0.5)  # math right, stem wrong (A)
    assert top["maj"] == pytest.approx(0.0)  # math 11 (2 vs 1), stem A (2 vs 1)
    # tokens: every character sampled, extracted, judged, and the judge prompts
    sampled = 2 * len(BAD) + len(GOOD) + len("\\boxed{B}") + 2 * len("\\boxed{A}")
    sampled += len("I am not sure")
    assert s["tokens"]["tokens"] == sampled == sum(r["tokens"] for r in rows)
    # the judge prompts show the problem without its answer-format request
    assert "Let's think" in model.calls[0][0][0]
    assert not any("Let's think" in p or "letter" in p for p in model.calls[1][0])
    extract_prompts = sum(len(p) for p in model.calls[1][0])
    verify_prompts = sum(len(p) for p in model.calls[2][0])
    assert s["tokens"]["extract_prompt_tokens"] == extract_prompts
    assert s["tokens"]["verify_prompt_tokens"] == verify_prompts
    total = sum(
        r["tokens"]
        + r["extract_tokens"]
        + r["extract_prompt_tokens"]
        + r["verify_tokens"]
        + r["verify_prompt_tokens"]
        for r in rows
    )
    assert s["tokens"]["all"] == total
    # CLR@4 costs every token of the 2 problems, per problem
    assert top["clr_tokens"] == pytest.approx(total / 2)
    generated = sum(r["tokens"] + r["extract_tokens"] + r["verify_tokens"] for r in rows)
    assert top["clr_generated_tokens"] == pytest.approx(generated / 2)
    assert "| 4 |" in open(outputs["table"]).read()
    assert open(outputs["plot"], "rb").read(4) == b"\x89PNG"


def test_symbolic_mode_skips_the_model_for_checkable_claims(tmp_path):
    model = FakeModel(mute=True)  # the model never gives a verdict
    _, s, rows = _run(tmp_path, model, k=4, repeats=1, m=5, claim_verifier="symbolic")
    # the 6 arithmetic claims are decided symbolically; only the 3 stem claims go to the model
    assert len(model.calls[2][0]) == 3
    c = s["counters"]
    assert c["decided_by_symbolic"] == 6 and c["decided_by_model"] == 3
    assert c["verdicts_unparseable"] == 3  # -> 0 each: stem r = 0, ties -> majority (A)
    assert s["domains"]["math"]["clr@4"] == 1.0 and s["domains"]["stem"]["clr@4"] == 0.0


def test_a_model_that_never_gives_a_verdict_falls_back_to_majority(tmp_path):
    _, s, _ = _run(tmp_path, FakeModel(mute=True), k=4, repeats=1, m=5)
    c = s["counters"]
    assert c["verdicts_unparseable"] == 9 and c["verdicts_0"] == 9
    top = s["comparison"]["rows"][-1]
    assert top["clr"] == top["maj"] == 0.0 and top["clr_ties"] == 2


def test_both_mode_and_repeats(tmp_path):
    model = FakeModel()
    _, s, rows = _run(tmp_path, model, k=2, repeats=2, m=5, claim_verifier="both")
    assert [n for _, n in model.calls] == [4, 1, 1]  # still one call per phase
    c = s["counters"]
    assert c["decided_by_both"] == 6 and c["model_symbolic_disagree"] == 0
    # repeat 0 = samples 0,1 (math: GOOD r=1 vs BAD -> right); repeat 1 = 2,3 (BAD, empty)
    assert sorted({r["repeat"] for r in rows}) == [0, 1]
    math = s["domains"]["math"]
    assert math["clr@2"] == pytest.approx(0.5)


# ---------------------------------------------------------------- the stage, tiny model


def _tiny_model_dir(tmp_path, texts):  # as tests/evaluate/test_harness.py
    try:
        from vibethinker.models.tiny import build_tiny_model

        return build_tiny_model(tmp_path / "model", texts, size="1m", vocab_size=300, seed=0)
    except ImportError:
        from tests.helpers.tiny_qwen2 import tiny_qwen2

        model, tok = tiny_qwen2()
        model.save_pretrained(tmp_path / "model")
        tok.save_pretrained(tmp_path / "model")
        return str(tmp_path / "model")


def test_tiny_model_through_the_stage(tmp_path):
    """The `clr` stage on the embedded world with a random tiny model: nothing raises, one
    sampler call per phase, token counts add up and respect the caps."""
    from vibethinker.data import world
    from vibethinker.data.io import save_problems
    from vibethinker.stages import get
    from vibethinker.stages.clr import ClrConfig

    splits = world.generate(seed=0, n_train=30, n_probe=1, n_eval=4, domains=("math", "stem"))
    save_problems(tmp_path / "eval.jsonl", splits["eval"])
    cfg = ClrConfig(
        model=_tiny_model_dir(tmp_path, [p.prompt for p in splits["train"]]),
        data=str(tmp_path / "eval.jsonl"),
        out=str(tmp_path / "clr"),
        k=2,
        repeats=2,
        m=3,
        max_new_tokens=16,
        judge_max_new_tokens=8,
        device="cpu",
        workers=1,
        claim_verifier="both",
    )

    class Counting:
        def __init__(self, inner):
            self.inner, self.calls = inner, []

        def __getattr__(self, name):
            return getattr(self.inner, name)

        def generate(self, prompts, n, params):
            self.calls.append((len(prompts), n))
            return self.inner.generate(prompts, n, params)

    sampler = Counting(cfg.make_engine(cfg.model, cfg.seed))
    outputs = get("clr").fn(cfg, sampler=sampler)
    s = json.load(open(outputs["summary"]))
    rows = [json.loads(x) for x in open(outputs["samples"])]
    c = s["counters"]
    assert len(rows) == 4 * 4 and sampler.calls[0] == (4, 4)
    assert c.get("ok", 0) + c.get("empty_response", 0) + c.get("no_final_answer", 0) == 16
    n_claims = sum(len(r["claims"] or []) for r in rows)
    expect = [(4, 4)] + [(c.get("ok", 0), 1)] * bool(c.get("ok")) + [(n_claims, 1)] * bool(n_claims)
    n_eval = s["claim_eval"]["claims"]  # the world's math problems carry labelled claims
    assert 0 < n_eval <= 200
    assert sampler.calls == expect + [(n_eval, 1)]  # at most one call per phase
    assert all(r["tokens"] <= 16 and r["extract_tokens"] <= 8 for r in rows)
    assert all(r["verify_tokens"] <= 8 * len(r["claims"] or []) for r in rows)
    assert s["tokens"]["all"] == sum(
        r["tokens"]
        + r["extract_tokens"]
        + r["extract_prompt_tokens"]
        + r["verify_tokens"]
        + r["verify_prompt_tokens"]
        for r in rows
    )
    assert s["prompt_tokens_counted"] is True
    assert 0.0 <= s["comparison"]["rows"][-1]["clr"] <= 1.0


class EmptyClaimsModel(FakeModel):
    """Extraction replies list only empty items (or nothing at all)."""

    def _one(self, prompt, j):
        if "\nSolution: " in prompt:
            text = "1. \n2.   \nFinal answer: 10" if "3*4" in prompt else ""
            return Completion(text, list(range(len(text))), None, "stop")
        return super()._one(prompt, j)


def test_empty_claims_and_empty_replies_have_defined_outcomes(tmp_path):
    model = EmptyClaimsModel()
    _, s, rows = _run(tmp_path, model, k=4, repeats=1, m=5)
    c = s["counters"]
    # math: 3 replies with two empty items each; stem: 3 empty replies (malformed, no claims)
    assert c["empty_claims_dropped"] == 6 and c["no_claims"] == 6 and c["claims"] == 0
    assert c["malformed_lists"] == 3 and c["extracted_answer_missing"] == 3
    assert len(model.calls) == 2  # no claim to judge: no verification call at all
    assert all(r["r"] == 0.0 for r in rows)
    top = s["comparison"]["rows"][-1]
    assert top["clr"] == top["maj"] and top["clr_ties"] == 2  # no signal: majority vote


def test_a_template_without_its_placeholder_is_refused_before_sampling(tmp_path):
    bad = tmp_path / "verify.txt"
    bad.write_text("Is it true? {problem}")
    model = FakeModel()
    with pytest.raises(ValueError, match="lacks {claim}"):
        _run(tmp_path, model, k=2, repeats=1, verify_prompt=str(bad))
    assert model.calls == []


def test_maj_pool_draws_extra_baseline_samples_in_the_same_call(tmp_path):
    model = FakeModel()
    _, s, rows = _run(tmp_path, model, k=4, repeats=1, m=5, maj_pool=12)
    assert [(len(p), n) for p, n in model.calls] == [(2, 12), (6, 1), (9, 1)]  # CLR: first 4
    assert all(r["claims"] is None for r in rows if r["sample"] >= 4)
    curve = s["comparison"]["maj_curve"]
    assert [c["k"] for c in curve] == [1, 2, 4, 8, 12]
    # the 8 extra samples per problem: math 2 x (GOOD + BAD + BAD + "") + stem 2 x (9 + 9 + 13 + 9)
    extra = 2 * (len(GOOD) + 2 * len(BAD)) + 2 * (3 * len("\\boxed{B}") + len("I am not sure"))
    assert s["tokens"]["baseline_only_samples"] == extra


def test_math_clustering_uses_the_verifier_equivalence():
    from vibethinker.stages.clr_phases import letters_equivalent, math_equivalent

    assert math_equivalent("10", "10.0") and math_equivalent("\\frac{1}{2}", "0.5")
    assert math_equivalent("2", "\\sqrt{4}")  # the math verifier's sympy path
    assert not math_equivalent("3", "4")
    assert letters_equivalent("b", "B ") and not letters_equivalent("A", "B")


# ---------------------------------------------------------------- the world's CLR skills


@pytest.fixture(scope="module")
def clr_world():
    from vibethinker.data import world

    return world.generate(
        seed=3,
        n_train=300,
        n_probe=1,
        n_eval=40,
        domains=("math", "code", "stem", "instruct", "clr"),
    )


def test_world_clr_examples_are_the_stage_turns_and_parse(clr_world):
    from vibethinker.data.world.claims import trace_claims
    from vibethinker.prompts import fill, load_template, problem_text
    from vibethinker.prompts.paper import paper_prompt

    train = clr_world["train"]
    by_id = {p.id: p for p in train}
    ex = [p for p in train if p.domain == "clr"]
    assert {p.subdomain for p in ex} == {"extract", "verify"}
    assert not any(p.domain == "clr" for s in ("eval", "probe") for p in clr_world[s])
    ext_t = load_template("", "clr_extract.txt", ())
    ver_t = load_template("", "clr_verify.txt", ())
    labels, src_domains = [], set()
    for p in ex:
        src = by_id[p.meta["of"]]  # built from train problems only
        src_domains.add(src.domain)
        text = problem_text(paper_prompt(src))  # exactly what the stage fills in
        if p.subdomain == "extract":
            cl = parse_claims(p.traces[0], 5)
            assert cl.claims and cl.answer and not cl.malformed
            trace = p.prompt.split("\nSolution: ")[1]
            assert trace in (src.traces or []) + (src.wrong_traces or [])
            assert (cl.claims, cl.answer) == trace_claims(src, trace)
            assert p.prompt == fill(ext_t, problem=text, response=trace, m=5)
        else:
            claim = p.prompt.split("\nClaim: ")[1]
            assert p.prompt == fill(ver_t, problem=text, claim=claim)
            v = parse_verdict(p.traces[0])
            labels.append(v)
            if symbolic_verdict(claim) is not None:  # arithmetic: the label is the truth
                assert v == symbolic_verdict(claim), (claim, p.traces[0])
    assert src_domains == {"math", "stem"}
    assert 0.35 < sum(labels) / len(labels) < 0.65  # true claims and corrupted ones


def test_world_clr_examples_stay_out_of_rl_and_eval(clr_world, tmp_path):
    from vibethinker.data.io import load_problems, save_problems, select
    from vibethinker.stages.rl import load_domain

    save_problems(tmp_path / "train.jsonl", clr_world["train"])
    loaded = load_problems(tmp_path / "train.jsonl")  # the loader accepts the domain
    n_clr = sum(p.domain == "clr" for p in loaded)
    assert n_clr > 0
    assert all(p.domain != "clr" for p in select(loaded))  # eval: training-only is skipped
    assert len(select(loaded, domains=["clr"])) == n_clr  # unless asked for by name
    for d in ("math", "stem"):
        assert all(p.domain == d for p in load_domain(tmp_path / "train.jsonl", d))
    # a plain world has no CLR examples and no stem claims (the default output is unchanged)
    from vibethinker.data import world

    plain = world.generate(seed=3, n_train=300, n_probe=1, n_eval=40)
    assert [p.id for p in plain["eval"]] == [p.id for p in clr_world["eval"]]
    assert not any(p.domain == "stem" and p.claims for s in plain.values() for p in s)


def test_world_clr_examples_are_a_small_share_of_the_sft_text(clr_world):
    # the SFT cost (sft1's time) grows with the text: CLR examples stay under 8% of the rest,
    # counted in characters (tokens follow them closely: 7% measured with the demo tokenizer)
    from vibethinker.prompts.paper import paper_prompt

    size = {True: 0, False: 0}
    for p in clr_world["train"]:
        for t in p.traces or []:
            size[p.domain == "clr"] += len(paper_prompt(p)) + len(t)
    assert 0.03 < size[True] / size[False] < 0.08


def test_stem_claims_are_labelled_by_the_problem(clr_world):
    from vibethinker.data.world.claims import judge, stem_facts, trace_claims

    stem = [p for p in clr_world["eval"] if p.domain == "stem"]
    assert stem and all(p.claims and len(p.claims) == len(p.traces) for p in stem)
    for p in stem:
        facts = stem_facts(p)
        for t in p.traces:  # every claim of a correct trace holds
            assert all(judge(p, facts, c)[0] == 1 for c in trace_claims(p, t)[0]), t
        for t in p.wrong_traces:  # every wrong trace makes at least one false claim
            assert any(judge(p, facts, c)[0] == 0 for c in trace_claims(p, t)[0]), t
        for cl in p.claims:
            assert any(c["true"] for c in cl) and any(not c["true"] for c in cl)
    p = stem[0]
    facts = stem_facts(p)
    other = next(L for L, v in facts.options.items() if v != facts.r)
    assert judge(p, facts, f"{other}) {facts.r}")[0] == 0  # the value under the wrong letter
    assert judge(p, facts, f"{facts.sr}={facts.expr}")[0] == 1
    swapped = facts.expr.replace(facts.op, "/" if facts.op == "*" else "*", 1)
    assert judge(p, facts, f"{facts.sr}={swapped}")[0] == 0


# ---------------------------------------------------------------- claim eval, variants


def _labelled(tmp_path):
    from vibethinker.data.io import save_problems

    ps = _problems()
    ps[0].claims = [
        [
            {"text": "3*4=12", "true": True},
            {"text": "3*4=13", "true": False},
            {"text": "12-2=10", "true": True},
            {"text": "12-2=9", "true": False},
        ]
    ]
    save_problems(tmp_path / "p.jsonl", ps)


def test_claim_eval_reports_held_out_verification_accuracy(tmp_path):
    _labelled(tmp_path)
    model = FakeModel()  # a perfect arithmetic judge
    _, s, _ = _run_saved(tmp_path, model, k=2, repeats=1, claim_eval=10)
    ce = s["claim_eval"]
    assert ce["claims"] == 4 and ce["accuracy"]["all"] == 1.0 and ce["unparseable"] == 0
    assert ce["counts"] == {"all": 4, "math": 4, "true": 2, "false": 2}
    assert len(model.calls) == 4 and len(model.calls[3][0]) == 4  # one more call
    assert s["judge"]["claim_verification_accuracy"] == 1.0
    _, s, _ = _run_saved(tmp_path, FakeModel(mute=True), k=2, repeats=1, claim_eval=10)
    # never a verdict: all wrong (not 0.5, which "unparseable -> 0" would give on false claims)
    assert s["claim_eval"]["accuracy"]["all"] == 0.0 and s["claim_eval"]["unparseable"] == 4


def _run_saved(tmp_path, model, **kw):
    from vibethinker.stages import get
    from vibethinker.stages.clr import ClrConfig

    cfg = ClrConfig(model="fake", data=str(tmp_path / "p.jsonl"), out=str(tmp_path / "out"), **kw)
    cfg.workers = 1
    outputs = get("clr").fn(cfg, sampler=model)
    summary = json.load(open(outputs["summary"]))
    rows = [json.loads(x) for x in open(outputs["samples"])]
    return outputs, summary, rows


def test_extraction_parse_rate_and_answer_agreement(tmp_path):
    _, s, _ = _run(tmp_path, FakeModel(), k=4, repeats=1, m=5)
    c = s["counters"]
    # the fake extractor lists claims and states "x" as the answer: parsed, never agreeing
    assert c["extractions_parsed"] == 6 and c["extracted_answer_agrees"] == 0
    assert s["judge"]["extraction_parse_rate"] == 1.0
    assert s["judge"]["extracted_answer_agreement"] == 0.0
    _, s, _ = _run(tmp_path, EmptyClaimsModel(), k=4, repeats=1, m=5)
    assert s["counters"].get("extractions_parsed", 0) == 0


def test_variants_derived_from_a_both_run_equal_direct_runs(tmp_path):
    from vibethinker.data.io import save_problems
    from vibethinker.stages.clr import ClrConfig, run_phases
    from vibethinker.stages.clr_phases import as_variant

    save_problems(tmp_path / "p.jsonl", _problems())

    def phases(how):
        cfg = ClrConfig(
            model="fake",
            data=str(tmp_path / "p.jsonl"),
            k=4,
            repeats=1,
            claim_verifier=how,
            claim_eval=0,
            workers=1,
        )
        return run_phases(cfg, FakeModel())

    _, both, counters, _ = phases("both")
    for name in ("model", "symbolic"):
        _, direct, dc, _ = phases(name)
        derived, c = as_variant(both, counters, name, 5)
        assert [t.r for t in derived] == [t.r for t in direct]
        assert [t.cost for t in derived] == [t.cost for t in direct], name
        for key in ("decided_by_model", "decided_by_symbolic", "verdicts_1", "verdicts_0"):
            assert c.get(key, 0) == dc.get(key, 0), (name, key)
    with pytest.raises(ValueError, match="asked the model"):
        as_variant(direct, dc, "model", 5)  # a symbolic run did not ask about every claim


def test_world_verification_examples_are_minimal_pairs_decided_by_their_vs(clr_world):
    # each draw makes a true claim and its corrupted copy of the same problem (only the claimed
    # value tells them apart), and the reply's verdict is exactly "both sides of every `vs`
    # agree": the last step the model learns is a comparison of two adjacent values
    ex = [p for p in clr_world["train"] if p.domain == "clr" and p.subdomain == "verify"]
    assert len(ex) > 10
    for a, b in zip(ex[0::2], ex[1::2]):
        assert a.meta["of"] == b.meta["of"]
        assert a.prompt.split("\nClaim: ")[0] == b.prompt.split("\nClaim: ")[0]
        assert {parse_verdict(a.traces[0]), parse_verdict(b.traces[0])} == {0, 1}
    for p in ex:
        think = p.traces[0].split("<think>")[1].split("</think>")[0]
        pairs = [part.split(" vs ") for part in think.split("; ")]
        assert all(len(x) == 2 for x in pairs), think
        same = all(x.rsplit("=", 1)[-1].split(") ")[-1] == y for x, y in pairs)
        assert parse_verdict(p.traces[0]) == int(same), p.traces[0]


def test_stage_short_claims_default_is_the_papers_mean_over_m(tmp_path):
    """Default rule: a 2-claim list with both validated gets (2/5)^5, not 1; summary.json
    reports CLR@K under both rules on the same verdicts, and the run's own r_k follow its rule."""
    _, s, rows = _run(tmp_path, FakeModel(), k=4, repeats=1, m=5)
    m1 = [r for r in rows if r["id"] == "m1"]
    assert [r["r"] for r in m1] == pytest.approx([0.4**5, 0.2**5, 0.2**5, 0.0])
    sc = s["short_claims"]
    assert sc["rule"] == "unverified" and set(sc) >= {"unverified", "present", "short_lists"}
    assert sc["unverified"] == pytest.approx(0.5) and sc["present"] == pytest.approx(0.5)
    assert sc["short_lists"] == sc["answered"] == 6  # every list is shorter than M = 5
    _, s2, _ = _run(tmp_path / "p", FakeModel(), k=4, repeats=1, m=5, short_claims="present")
    assert s2["short_claims"]["unverified"] == sc["unverified"]  # same verdicts, same figure


def test_extraction_prompt_and_short_claims_rule_in_step(tmp_path):
    """Issue 41 item 2: `unverified` counts missing claims as failed, so the prompt must ask for
    exactly M; the short default asks for at most M (out of step: warned, reported), the verbose
    one (the 3B recipe's, by its packaged name) for exactly M."""
    from vibethinker.prompts import claim_count_rule, claims_in_step, load_template

    short = load_template("", "clr_extract.txt", ("{response}",))
    verbose = load_template("clr_extract_verbose.txt", "clr_extract.txt", ("{response}",))
    assert claim_count_rule(short) == "at most" and claim_count_rule(verbose) == "exactly"
    assert not claims_in_step(short, "unverified") and claims_in_step(short, "present")
    assert claims_in_step(verbose, "unverified")
    assert claim_count_rule("List up to {m} claims") == "at most"
    assert claim_count_rule("List the claims") == "unstated"
    _, s, _ = _run(tmp_path, FakeModel(), k=4, repeats=1, m=5)
    assert s["extract_asks"] == "at most"


def test_math_judge_second_opinion_is_counted_in_the_summary(tmp_path, monkeypatch):
    """Issue 41 item 5: with `math_judge`, a wrong math verdict the judge calls equivalent turns
    correct, and summary.json counts the verdicts it changed."""
    from vibethinker.stages import clr as clr_stage
    from vibethinker.types import Score
    from vibethinker.verifiers import math_judge

    class YesJudge:
        def score_batch(self, pairs):
            return [Score(1.0, True, "ok") for _ in pairs]

    monkeypatch.setattr(
        clr_stage,
        "judged_verify",
        lambda spec, out: math_judge.judged_verify(spec, out, judge=YesJudge()),
    )
    _, s, rows = _run(tmp_path, FakeModel(), k=4, repeats=1, m=5, math_judge="j@http://x/v1")
    judge = s["math_judge"]
    assert judge["overturned"] == judge["consulted"] == 2  # the two BADs; "" has no box
    m1 = [r for r in rows if r["id"] == "m1"]
    assert [r["correct"] for r in m1] == [True, True, True, False]
    _, s0, _ = _run(tmp_path / "rules", FakeModel(), k=4, repeats=1, m=5)
    assert "math_judge" not in s0
