"""Check `vibethinker plan RECIPE device=cpu`'s predicted stage times against a run's recorded
ones: per stage within 30%, the total within 15% (issue 40); and, with a run folder that has
ledgers, its predicted rollout counts against the recorded ones (exact: the recipe fixes them).

    .venv/bin/python scripts/cost_check.py                      # recipes/tiny.yaml vs the demo
    .venv/bin/python scripts/cost_check.py --run runs/tiny      # vs that run's manifest + ledgers

Without --run the recorded seconds are a 2026-12-06 demo's (docs/SCALING.md, "Checked against
a run (CPU)"; on the 2-core host). Stages whose time the plan
takes as given (data, construct, model: no model work to predict) are listed but not checked.
The CPU's rates come from plan/probe.py's cached measurements: measure them on the machine and
load the run had (`--refresh-probe`; a probe taken while other jobs share the cores predicts a
loaded machine). Prints a markdown table; exit status 1 when a bound is missed.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vibethinker import threads

threads.configure()  # as the CLI: OpenMP threads sleep while they wait (before torch loads)

from vibethinker import devices  # noqa: E402
from vibethinker.plan.predict import predict  # noqa: E402
from vibethinker.plan.probe import cpu_rates  # noqa: E402
from vibethinker.recipe import load_recipe  # noqa: E402

DEMO_SECONDS = {  # a 2026-12-06 demo's stage seconds (19:47 UTC, runs/tiny's manifest; docs/SCALING.md)
    "construct": 45,
    "sft1": 384,
    "sft2": 121,
    "probe_merge": 24,
    "rl_math": 67,
    "rl_l2s": 48,
    "rl_code": 74,
    "rl_stem": 66,
    "distill": 169,
    "reward_model": 12,
    "rl_instruct": 44,
    "eval_final": 14,
    "headline": 75,
    "clr": 6,
}
GIVEN = ("data", "construct", "model")  # no model work: the plan takes their seconds as given
STAGE_BOUND, TOTAL_BOUND = 0.30, 0.15


def recorded(run: str | None) -> tuple[dict[str, float], dict[str, dict]]:
    if not run:
        return dict(DEMO_SECONDS), {}
    stages = json.loads((Path(run) / "manifest.json").read_text())["stages"]
    secs = {n: float(r["seconds"]) for n, r in stages.items() if r.get("seconds") is not None}
    return secs, {n: r["ledger"] for n, r in stages.items() if r.get("ledger")}


def compare(recipe_path: str, run: str | None, values: dict[str, str]) -> tuple[str, bool]:
    recipe = load_recipe(recipe_path, {})
    got, ledgers = recorded(run)
    # with --run, the run's ledgers give the counts; without, the recipe's .expect.yaml
    costs, _, _ = predict(recipe, "cpu", 1, 64, {"ledger": run or "/nonexistent", **values})
    rows = ["| stage | predicted s | recorded s | ratio | within 30% |", "|---|---:|---:|---:|---|"]
    ok, p_tot, r_tot = True, 0.0, 0.0
    for sc in costs:
        if sc.name not in got:
            continue
        rec, pred = got[sc.name], sc.total
        given = sc.stage in GIVEN
        if not given:
            p_tot, r_tot = p_tot + pred, r_tot + rec
        hit = abs(pred / rec - 1) <= STAGE_BOUND if rec else False
        ok &= hit or given
        mark = "(given)" if given else ("yes" if hit else "NO")
        rows.append(f"| {sc.name} | {pred:.0f} | {rec:.0f} | {pred / rec:.2f} | {mark} |")
    t_hit = abs(p_tot / r_tot - 1) <= TOTAL_BOUND if r_tot else False
    ok &= t_hit
    rows.append(
        f"| **total (checked stages)** | {p_tot:.0f} | {r_tot:.0f} | {p_tot / r_tot:.2f} "
        f"| {'yes' if t_hit else 'NO'} (15%) |"
    )
    rows += ["", *token_rows(costs, ledgers)]
    return "\n".join(rows), ok


def token_rows(costs, ledgers) -> list[str]:
    """Predicted rollouts (sample phase) against the ledgers' (exact where the recipe fixes
    them: RL's steps x prompts x group, plus its start filter)."""
    out = []
    for sc in costs:
        led = ledgers.get(sc.name)
        if not led or not sc.tokens.get("rollouts_sample"):
            continue
        got = (led.get("generation") or {}).get("sample", {}).get("rollouts", 0)
        want = sc.tokens["rollouts_sample"]
        out.append(f"{sc.name}: rollouts predicted {want:.0f}, recorded {got}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--recipe", default="recipes/tiny.yaml")
    ap.add_argument("--run", default=None, help="a run folder (manifest.json) to compare with")
    ap.add_argument("--refresh-probe", action="store_true", help="measure this CPU again first")
    ap.add_argument("overrides", nargs="*", help="expect.<stage>.<key>=V")
    a = ap.parse_args()
    if a.refresh_probe:
        devices.cpu_probe(refresh=True)
        cpu_rates(refresh=True)
    table, ok = compare(a.recipe, a.run, dict(kv.split("=", 1) for kv in a.overrides))
    print(table)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
