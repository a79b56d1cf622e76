"""The embedded world: determinism, splits, and that the teacher's traces are really correct
(math arithmetic re-checked, code executed, stem letters re-derived, instruct rules re-checked)
while its wrong traces really are wrong."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from vibethinker.data.io import load_problems
from vibethinker.data.world import SUBDOMAINS, generate, prompt_key
from vibethinker.data.world.instruct import IDS, holds
from vibethinker.data.world.math import SUFFIX
from vibethinker.stages.data import DataConfig
from vibethinker.stages.data import run as run_data
from vibethinker.types import DOMAINS


@pytest.fixture(scope="module")
def world():
    return generate(seed=7, n_train=400, n_probe=8, n_eval=80)


def _by_domain(world, domain):
    return [p for ps in world.values() for p in ps if p.domain == domain]


def _boxed(t: str) -> str:
    return re.findall(r"\\boxed\{([^}]*)\}", t)[-1]


def test_stage_is_deterministic_and_seeded(tmp_path):
    kw = dict(n_train=120, n_probe=3, n_eval=20)
    a = run_data(DataConfig(out=str(tmp_path / "a"), seed=5, **kw))
    b = run_data(DataConfig(out=str(tmp_path / "b"), seed=5, **kw))
    c = run_data(DataConfig(out=str(tmp_path / "c"), seed=6, **kw))
    assert set(a) == {"train", "probe", "eval", "stats"}
    for k in a:
        assert open(a[k], "rb").read() == open(b[k], "rb").read(), k
    assert open(a["train"], "rb").read() != open(c["train"], "rb").read()
    train = load_problems(a["train"])  # the files pass the loader's validation
    assert len(train) == 120
    st = json.load(open(a["stats"]))
    assert st["train"]["math"]["problems"] == round(120 * 0.55)
    assert st["probe"]["math"]["subdomains"] == {s: 3 for s in SUBDOMAINS["math"]}


def test_unknown_kind_fails_clearly(tmp_path):
    with pytest.raises(ValueError, match="tiny"):
        run_data(DataConfig(kind="huge", out=str(tmp_path)))


def test_domains_splits_and_no_shared_prompt(world):
    assert len(world["train"]) == 400 and len(world["eval"]) == 80
    for split in ("train", "probe", "eval"):
        assert {p.domain for p in world[split]} == set(DOMAINS), split
    probe_math = {p.subdomain for p in world["probe"] if p.domain == "math"}
    assert probe_math == set(SUBDOMAINS["math"]) and len(probe_math) >= 4
    assert all(p.subdomain for p in world["probe"])
    keys = {s: {prompt_key(p) for p in ps} for s, ps in world.items()}
    assert not keys["train"] & keys["probe"]
    assert not keys["train"] & keys["eval"]
    assert not keys["probe"] & keys["eval"]
    ids = [p.id for ps in world.values() for p in ps]
    assert len(ids) == len(set(ids))


def test_several_distinct_correct_traces(world):
    for d in DOMAINS:
        ps = _by_domain(world, d)
        mean = sum(len(set(p.traces)) for p in ps) / len(ps)
        assert mean >= 2.0, (d, mean)
        assert sum(len(p.wrong_traces) for p in ps) > 0.5 * len(ps), d
        assert max(len(t) for p in ps for t in p.traces) < 320, d


def _claim_holds(text: str) -> bool:
    lhs, rhs = text.split("=")
    assert re.fullmatch(r"\d+[-+*/]\d+", lhs) and rhs.isdigit(), text
    return eval(lhs) == int(rhs)  # digits and one operator, checked above


def test_math_traces_answers_and_claims(world):
    ps = _by_domain(world, "math")
    assert {p.difficulty for p in ps} == {1, 2, 3, 4}
    for p in ps:
        assert p.prompt.endswith(SUFFIX) and p.answer.isdigit()
        assert len(p.claims) == len(p.traces)
        for t, claims in zip(p.traces, p.claims):
            m = re.fullmatch(r"<think>([^<]*)</think>\\boxed\{(\d+)\}", t)
            assert m and m.group(2) == p.answer, t
            steps = m.group(1).split(";")
            assert [c["text"] for c in claims if c["true"]] == steps
            assert sum(not c["true"] for c in claims) == len(steps)
            for c in claims:
                assert _claim_holds(c["text"]) == c["true"], (c, t)
        for w in p.wrong_traces:
            assert _boxed(w) != p.answer, w


# Runs in a fresh interpreter: extract the last ```python block of each trace, run it against the
# problem's tests (function-style check() or stdin/stdout), print one result per trace.
_RUNNER = r"""
import contextlib, io, json, re, sys
def passes(p, trace):
    code = re.findall(r"```python\n(.*?)```", trace, re.S)[-1]
    try:
        if p.get("test_code"):
            ns = {}
            exec(code, ns); exec(p["test_code"], ns); ns["check"](ns[p["entry_point"]])
            return True
        for t in p["tests"]:
            out, old = io.StringIO(), sys.stdin
            sys.stdin = io.StringIO(t["input"])
            try:
                with contextlib.redirect_stdout(out):
                    exec(code, {"__name__": "__main__"})
            finally:
                sys.stdin = old
            if out.getvalue().split() != t["output"].split():
                return False
        return True
    except Exception:
        return False
res = []
for p in json.load(sys.stdin):
    res.append([[passes(p, t) for t in p["traces"]], [passes(p, t) for t in p["wrong_traces"]]])
print(json.dumps(res))
"""


def test_code_traces_pass_and_bugs_fail(world):
    ps = _by_domain(world, "code")
    assert {p.subdomain for p in ps} == {"function", "stdio"}
    rows = [
        {k: getattr(p, k) for k in ("test_code", "entry_point", "tests", "traces", "wrong_traces")}
        for p in ps
    ]
    out = subprocess.run(
        [sys.executable, "-c", _RUNNER],
        input=json.dumps(rows),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    for p, (good, bad) in zip(ps, json.loads(out.stdout)):
        assert all(good), (p.prompt, p.traces)
        assert not any(bad), (p.prompt, p.wrong_traces)
    for p in ps:
        for t in p.traces:
            assert t.startswith("<think>") and "</think>\n```python\n" in t


def test_stem_gold_letter_matches_correct_option(world):
    ps = _by_domain(world, "stem")
    assert {p.answer for p in ps} == set("ABCD")  # shuffled, not always the same slot
    for p in ps:
        assert len(set(p.choices)) == 4
        for L, c in zip("ABCD", p.choices):
            assert f"\n{L}) {c}\n" in p.prompt
        # Recompute the answer from the direct trace's formula: "...=x op y=r unit, so L".
        x, op, y = re.search(r"=(\d+)([*/])(\d+)=", p.traces[0]).groups()
        r = int(x) * int(y) if op == "*" else int(x) // int(y)
        assert p.choices["ABCD".index(p.answer)].split()[0] == str(r)
        assert all(_boxed(t) == p.answer for t in p.traces)
        assert all(_boxed(t) != p.answer for t in p.wrong_traces) and p.wrong_traces
        # The size rule the fourth (arithmetic-free) route states holds: the correct value is
        # the largest option of a product and the smallest of a quotient.
        vals = [int(c.split()[0]) for c in p.choices]
        want = max(vals) if op == "*" else min(vals)
        assert want == r and vals.count(r) == 1
        size = "largest" if op == "*" else "smallest"
        assert f"the {size} option, {p.answer}) {r} " in p.traces[3]


def test_instruct_traces_follow_rules_and_wrong_ones_break_one(world):
    ps = _by_domain(world, "instruct")
    used = {i["id"] for p in ps for i in p.instructions}
    assert used <= set(IDS) and len(used) >= 10
    for p in ps:
        assert 1 <= len(p.instructions) <= 3
        for t in p.traces:
            assert t.startswith("<think>") and len(t) < 320
            resp = t.split("</think>", 1)[1].strip()
            for ins in p.instructions:
                assert holds(ins["id"], ins["kwargs"], resp), (ins, resp)
                for kw in ins["kwargs"].get("keywords", []):
                    assert kw.lower() in resp.lower()
        for w in p.wrong_traces:
            resp = w.split("</think>", 1)[1].strip()
            assert not all(holds(i["id"], i["kwargs"], resp) for i in p.instructions), w


def test_holds_matches_ifeval_on_hand_examples():
    # IFEval counts words as \w+ runs: "P.S. x" is 3 words (P, S, x).
    assert holds("detectable_format:number_bullet_lists", {"num_bullets": 2}, "x\n- a\n* b")
    assert not holds("detectable_format:number_bullet_lists", {"num_bullets": 2}, "- a\n**b**")
    assert holds(
        "startend:end_checker", {"end_phrase": "Any other questions?"}, '"ok any other questions?"'
    )
    assert holds("length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\nb")
    assert not holds(
        "length_constraints:number_paragraphs", {"num_paragraphs": 2}, "a\n***\n***\nb"
    )
    assert holds(
        "length_constraints:number_words", {"relation": "less than", "num_words": 4}, "P.S. x"
    )
    assert not holds(
        "length_constraints:number_words", {"relation": "less than", "num_words": 4}, "P.S. x y"
    )
    assert holds("detectable_content:postscript", {"postscript_marker": "P.S."}, "hi\np.s. bye")
    assert not holds("change_case:english_lowercase", {}, "hello World")
