"""The paper's claims, one row each: a claims file (studies/claims.yaml) names, per claim, the
study that tests it and the paired comparisons that decide it; `vibethinker claims` reads each
study's finished runs (OUT/ablation.json of `vibethinker ablate`) and writes the table.

A check compares two arms of one study on one metric, paired by seed (the same seed draws the
same prompts and start-model evaluation in both arms): the mean difference `arm - vs` with a 95%
Student-t interval over seeds. It passes when

- `expect: greater`: the interval lies above 0 (the paper's direction, beyond seed noise);
- `expect: less`: the interval lies below 0;
- `expect: no_worse`: the interval's lower end is above `-margin` (non-inferiority: "at no
  cost" is a claim that an interval containing 0 cannot show by itself; the margin is the cost
  we would call real, stated in the row).

A row's verdict: "reproduced" when every check passes; "partly reproduced" when some do;
"not reproduced at this scale" when none does; "not run" when a study has no finished pair;
"not testable here" when the row says why the embedded world cannot test it (`untestable`).
`context` checks are shown but do not count (e.g. the confounded plain comparison).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibethinker.ablate.study import load_study
from vibethinker.config import ConfigError, read_yaml
from vibethinker.evaluate.stats import mean_ci

EXPECT = ("greater", "less", "no_worse")
VERDICTS = (
    "reproduced",
    "partly reproduced",
    "not reproduced at this scale",
    "not run",
    "not testable here",
)


@dataclass
class Check:
    """One paired comparison: `arm - vs` on `metric` of the row's study (`vs` empty: the
    metric itself, for a metric that is already a difference, e.g. student minus teacher)."""

    arm: str
    vs: str
    metric: str
    expect: str = "greater"
    margin: float = 0.0
    study: str = ""  # the row's study unless set


@dataclass
class Claim:
    """One row of the claims table."""

    claim: str
    paper: str
    study: str = ""
    checks: list[Check] = field(default_factory=list)
    context: list[Check] = field(default_factory=list)
    untestable: str = ""
    note: str = ""


@dataclass
class Outcome:
    """A check's measured difference (mean, lo, hi over n seeds) and whether it passes."""

    check: Check
    n: int = 0
    mean: float = 0.0
    lo: float = 0.0
    hi: float = 0.0
    passed: bool = False


def _checks(raw: Any, where: str) -> list[Check]:
    out = []
    for i, c in enumerate(raw or []):
        if not isinstance(c, dict) or not {"arm", "metric"} <= set(c):
            raise ConfigError(f"{where}[{i}]: needs arm and metric (and vs), got {c!r}")
        unknown = set(c) - {"arm", "vs", "metric", "expect", "margin", "study"}
        if unknown:
            raise ConfigError(f"{where}[{i}]: unknown key(s) {sorted(unknown)}")
        chk = Check(**{"vs": "", **{k: c[k] for k in c}})
        chk.vs = str(chk.vs or "")
        chk.margin = float(chk.margin)
        if chk.expect not in EXPECT:
            raise ConfigError(f"{where}[{i}].expect: {chk.expect!r}, one of {EXPECT}")
        out.append(chk)
    return out


def load_claims(path: str) -> tuple[str, list[Claim]]:
    """The claims file: {title, rows: [{claim, paper, study, checks, context, untestable, note}]}."""
    raw = read_yaml(path, "claims")
    if not isinstance(raw, dict) or not isinstance(raw.get("rows"), list):
        raise ConfigError(f"claims {path}: expected a mapping with a `rows` list")
    rows = []
    for i, r in enumerate(raw["rows"]):
        where = f"claims {path}: rows[{i}]"
        if not isinstance(r, dict) or not r.get("claim") or not r.get("paper"):
            raise ConfigError(f"{where}: needs `claim` and `paper`")
        unknown = set(r) - {"claim", "paper", "study", "checks", "context", "untestable", "note"}
        if unknown:
            raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
        claim = Claim(
            claim=str(r["claim"]),
            paper=str(r["paper"]),
            study=str(r.get("study") or ""),
            checks=_checks(r.get("checks"), f"{where}.checks"),
            context=_checks(r.get("context"), f"{where}.context"),
            untestable=str(r.get("untestable") or ""),
            note=str(r.get("note") or "").strip(),
        )
        if not claim.untestable and not (claim.study and claim.checks):
            raise ConfigError(f"{where}: give `study` and `checks`, or `untestable` (why)")
        rows.append(claim)
    return str(raw.get("title") or "Claims"), rows


def per_seed(results: dict[str, Any], arm: str, metric: str) -> dict[str, float]:
    """{seed: value} of one arm's metric in an ablation.json's `arms`."""
    return {s: float(v["metrics"][metric]) for s, v in results.get(arm, {}).items()}


def measure(check: Check, results: dict[str, Any]) -> Outcome:
    """The paired difference of a check over the seeds both arms finished."""
    a = per_seed(results, check.arm, check.metric)
    b = per_seed(results, check.vs, check.metric) if check.vs else dict.fromkeys(a, 0.0)
    common = sorted(set(a) & set(b), key=int)
    if not common:
        return Outcome(check)
    m, lo, hi = mean_ci([a[s] - b[s] for s in common])
    if check.expect == "greater":
        ok = lo > 0
    elif check.expect == "less":
        ok = hi < 0
    else:
        ok = lo > -check.margin
    return Outcome(check, len(common), m, lo, hi, ok and len(common) > 1)


def verdict(claim: Claim, outcomes: list[Outcome]) -> str:
    """The row's verdict from its checks' outcomes (docstring of this module)."""
    if claim.untestable:
        return "not testable here"
    if not outcomes or any(o.n == 0 for o in outcomes):
        return "not run"
    passed = sum(o.passed for o in outcomes)
    if passed == len(outcomes):
        return "reproduced"
    return "partly reproduced" if passed else "not reproduced at this scale"


def study_results(study_path: str, base: dict[str, str]) -> tuple[dict[str, Any], Any]:
    """(`arms` of the study's ablation.json or {}, the study) for a study file."""
    study = load_study(study_path, base)
    p = Path(study.out) / "ablation.json"
    return (json.loads(p.read_text()).get("arms", {}) if p.exists() else {}), study


def study_seconds(study: Any) -> float:
    """Sum of the stage times of every finished arm x seed run of a study (the time its runs
    take one after another on this host)."""
    total = 0.0
    for mf in Path(study.out).glob("*/seed*/manifest.json"):
        stages = json.loads(mf.read_text()).get("stages", {})
        arm = mf.parent.parent.name
        own = next((a.stages for a in study.arms if a.name == arm), [])
        total += sum(float(v.get("spent") or 0) for k, v in stages.items() if k in own)
    return total


def _fmt(o: Outcome) -> str:
    c = o.check
    what = f"{c.arm} - {c.vs} ({c.metric})" if c.vs else f"{c.arm}: {c.metric}"
    if not o.n:
        return f"{what}: not run"
    mark = "pass" if o.passed else "fail"
    rule = {"greater": "> 0", "less": "< 0", "no_worse": f"> -{c.margin:g}"}[c.expect]
    return f"{what}: {o.mean:+.3f} [{o.lo:+.3f}, {o.hi:+.3f}], {o.n} seeds; needs {rule}: {mark}"


def claims_table(path: str, base: dict[str, str] | None = None) -> tuple[str, list[dict]]:
    """(markdown, rows) of the claims file; `base` holds `out=`/`base_run=` study overrides."""
    title, claims = load_claims(path)
    base = dict(base or {})
    rows = []
    cache: dict[str, tuple[dict, Any, float]] = {}
    for cl in claims:
        outs, ctx = [], []
        studies = list(dict.fromkeys(c.study or cl.study for c in [*cl.checks, *cl.context]))
        for sp in studies:
            if sp not in cache:
                res, study = study_results(sp, base)
                cache[sp] = (res, study, study_seconds(study))
        for chk in [*cl.checks, *cl.context]:
            o = measure(chk, cache[chk.study or cl.study][0])
            (outs if chk in cl.checks else ctx).append(o)
        rows.append(
            {
                "claim": cl.claim,
                "paper": cl.paper,
                "verdict": verdict(cl, outs),
                "measured": [_fmt(o) for o in outs],
                "context": [_fmt(o) for o in ctx],
                "why": cl.untestable or cl.note,
                "command": "; ".join(f"vibethinker ablate {sp}" for sp in studies),
                "minutes": round(sum(cache[sp][2] for sp in studies) / 60, 1),
            }
        )
    lines = [
        f"# {title}",
        "",
        "Each measured row is one `vibethinker ablate` study run from a fresh clone (it builds the "
        "base run with the recipe first when it is missing); differences are paired by seed, "
        "95% Student-t intervals over seeds. `minutes`: the sum of the study's runs' stage "
        "times on the host that ran them (run two at a time on 2 cores, so its wall time was "
        "about half).",
        "",
        "| claim | paper (number, setting) | our measurement | verdict | reproduce (minutes) |",
        "|---|---|---|---|---|",
    ]
    for r in rows:
        meas = "<br>".join(r["measured"] + [f"(context) {c}" for c in r["context"]])
        if r["why"]:
            meas = f"{meas}<br>{r['why']}" if meas else r["why"]
        cmd = f"`{r['command']}` ({r['minutes']})" if r["command"] else "-"
        lines.append(f"| {r['claim']} | {r['paper']} | {meas} | **{r['verdict']}** | {cmd} |")
    return "\n".join(lines) + "\n", rows


def write_claims(path: str, out: str, base: dict[str, str] | None = None) -> str:
    """Write OUT (markdown) and OUT with .json (the rows); return the markdown."""
    md, rows = claims_table(path, base)
    p = Path(out)
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(md)
    p.with_suffix(".json").write_text(json.dumps(rows, indent=1) + "\n")
    return md
