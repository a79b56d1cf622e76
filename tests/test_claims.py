"""`vibethinker claims`: verdicts from paired per-seed differences of finished studies."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vibethinker import claims
from vibethinker.cli import main
from vibethinker.config import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def _results(values: dict[str, list[float]], metric: str = "m") -> dict:
    return {
        arm: {str(s): {"metrics": {metric: v}} for s, v in enumerate(vals)}
        for arm, vals in values.items()
    }


def test_greater_passes_only_beyond_noise():
    res = _results({"a": [0.30, 0.32, 0.31], "b": [0.20, 0.21, 0.22]})
    o = claims.measure(claims.Check("a", "b", "m"), res)
    assert o.n == 3 and o.passed and o.lo > 0
    noisy = _results({"a": [0.30, 0.10, 0.31], "b": [0.20, 0.21, 0.22]})
    assert not claims.measure(claims.Check("a", "b", "m"), noisy).passed
    assert not claims.measure(claims.Check("b", "a", "m"), res).passed


def test_less_and_no_worse_with_a_margin():
    res = _results({"a": [0.20, 0.21, 0.19, 0.20], "b": [0.21, 0.22, 0.20, 0.22]})
    assert claims.measure(claims.Check("a", "b", "m", expect="less"), res).passed
    assert claims.measure(claims.Check("a", "b", "m", expect="no_worse", margin=0.05), res).passed
    assert not claims.measure(
        claims.Check("a", "b", "m", expect="no_worse", margin=0.001), res
    ).passed


def test_a_metric_against_zero_and_a_single_seed_never_passes():
    res = _results({"a": [0.1, 0.12, 0.11]})
    assert claims.measure(claims.Check("a", "", "m"), res).passed
    one = _results({"a": [0.3], "b": [0.1]})
    assert not claims.measure(claims.Check("a", "b", "m"), one).passed


def test_verdicts():
    row = claims.Claim("c", "p", "s", [claims.Check("a", "b", "m")] * 2)
    ok, bad = claims.Outcome(row.checks[0], 3, passed=True), claims.Outcome(row.checks[0], 3)
    assert claims.verdict(row, [ok, ok]) == "reproduced"
    assert claims.verdict(row, [ok, bad]) == "partly reproduced"
    assert claims.verdict(row, [bad, bad]) == "not reproduced at this scale"
    assert claims.verdict(row, [ok, claims.Outcome(row.checks[0])]) == "not run"
    assert claims.verdict(claims.Claim("c", "p", untestable="why"), []) == "not testable here"


def test_bad_claims_files_name_the_row(tmp_path):
    p = tmp_path / "c.yaml"
    p.write_text("rows:\n  - {claim: x, paper: y}\n")
    with pytest.raises(ConfigError, match=r"rows\[0\]: give `study` and `checks`"):
        claims.load_claims(str(p))
    p.write_text(
        "rows:\n  - {claim: x, paper: y, study: s, checks: [{arm: a, metric: m, expect: up}]}\n"
    )
    with pytest.raises(ConfigError, match=r"checks\[0\].expect"):
        claims.load_claims(str(p))


def test_shipped_claims_file_names_real_arms_and_metrics(monkeypatch):
    from vibethinker.ablate import load_study

    monkeypatch.chdir(ROOT)
    _, rows = claims.load_claims("studies/claims.yaml")
    assert len(rows) >= 8
    for r in rows:
        for c in [*r.checks, *r.context]:
            study = load_study(c.study or r.study)
            arms = {a.name for a in study.arms}
            assert c.arm in arms and (not c.vs or c.vs in arms), (r.claim, c)
            assert c.metric in study.metrics, (r.claim, c)


def test_cli_writes_the_table_from_a_finished_study(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    out = tmp_path / "study"
    out.mkdir()
    arms = _results({"grpo": [0.30, 0.31, 0.29], "mgpo": [0.36, 0.38, 0.37]}, "heldout_math_end")
    (out / "ablation.json").write_text(json.dumps({"arms": arms}))
    study = tmp_path / "s.yaml"
    text = (ROOT / "studies" / "grpo_vs_mgpo.yaml").read_text()
    study.write_text(text.replace("out: runs/ablate/grpo_vs_mgpo", f"out: {out}"))
    cfile = tmp_path / "c.yaml"
    cfile.write_text(
        f"rows:\n  - claim: MGPO wins\n    paper: none\n    study: {study}\n"
        "    checks: [{arm: mgpo, vs: grpo, metric: heldout_math_end}]\n"
        "    context: [{arm: mgpo_norm, vs: grpo, metric: heldout_math_end}]\n"
    )
    md = tmp_path / "claims.md"
    assert main(["claims", str(cfile), f"out={md}"]) == 0
    text = md.read_text()
    assert "**reproduced**" in text and "+0.070" in text and "mgpo_norm - grpo" in text
    rows = json.loads(md.with_suffix(".json").read_text())
    assert rows[0]["verdict"] == "reproduced"
    assert "claims table" in capsys.readouterr().out
