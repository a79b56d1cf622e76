"""Reading a study's results back: metric and budget expressions (the format is in
vibethinker/ablate/__init__.py) per finished arm x seed, means with confidence intervals, paired
differences, and the outputs (ablation.md, ablation.json, ablation.png).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from vibethinker.ablate.study import Study, arm_recipe, config_value, is_done, recipe_entries
from vibethinker.config import ConfigError
from vibethinker.evaluate.stats import mean_ci
from vibethinker.log import get_logger
from vibethinker.reports.ablate import ablation_markdown, plot_ablation

log = get_logger("ablate")


def _read_path(obj: Any, path: str, where: str) -> Any:
    for part in path.split(".") if path else []:
        if isinstance(obj, list):
            obj = obj[int(part)]
        elif isinstance(obj, dict) and part in obj:
            obj = obj[part]
        else:
            raise KeyError(f"{where}: no {part!r}")
    return obj


def read_value(run_dir: Path, spec: str, recipe: Any = None, absent: Any = ()) -> float:
    """Evaluate a metric or budget expression (see the module docstring) for one run dir; a term
    naming a stage in `absent` (one the arm does not run) counts 0."""
    total = 0.0
    for term in spec.split("+"):
        prod = 1.0
        for factor in term.split("*"):
            f = factor.strip()
            if re.split(r"[/.:]", f, maxsplit=1)[0] in absent:
                prod = 0.0
                break
            if ":" in f:
                file, what = f.split(":", 1)
                p = run_dir / file
                if not p.exists():
                    raise FileNotFoundError(f"{p}: not found (metric {spec!r})")
                if p.suffix == ".jsonl":
                    rows = [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
                    if what == "rows":
                        v: Any = len(rows)
                    elif what.startswith("sum."):
                        v = sum(float(r.get(what[4:], 0) or 0) for r in rows)
                    else:
                        v = _read_path(rows, what, str(p))
                else:
                    v = _read_path(json.loads(p.read_text()), what, str(p))
                prod *= float(v)
            elif re.fullmatch(r"[-+0-9.eE]+", f):
                prod *= float(f)
            else:
                v = config_value(recipe, f) if recipe is not None else None
                if v is None:
                    raise ConfigError(f"budget expression {spec!r}: {f} is no config value here")
                prod *= float(v)
        total += prod
    return total


def seeds_on_disk(study: Study) -> list[int]:
    """The study's seeds and every other `<arm>/seed<N>` folder under its out (a run with
    `seeds=[...]` names only some seeds, the table still counts all that finished)."""
    found = {
        int(d.name[4:])
        for arm in study.arms
        if (Path(study.out) / arm.name).is_dir()
        for d in (Path(study.out) / arm.name).iterdir()
        if d.is_dir() and re.fullmatch(r"seed\d+", d.name)
    }
    return sorted(found | set(study.seeds))


def collect(study: Study) -> dict[str, Any]:
    """Per arm and seed: metrics and consumed budget of every finished run (missing: absent),
    over the study's seeds and any other finished seed found on disk (`seeds_on_disk`)."""
    arms: dict[str, Any] = {}
    seeds = seeds_on_disk(study)
    for arm in study.arms:
        per: dict[str, Any] = {}
        for seed in seeds:
            run_dir = Path(study.out) / arm.name / f"seed{seed}"
            try:
                if not is_done(study, arm, seed):
                    continue
                recipe = arm_recipe(study, arm, seed)
                absent = {n for n, _, _ in recipe_entries(study.recipe)} - set(arm.stages)
                row = {
                    "metrics": {
                        k: read_value(run_dir, v, recipe, absent) for k, v in study.metrics.items()
                    },
                    "budget": {
                        k: read_value(run_dir, v, recipe, absent) for k, v in study.consumed.items()
                    },
                }
            except (OSError, KeyError, IndexError, ValueError) as e:
                log.warning("%s seed %d: cannot read results: %s", arm.name, seed, e)
                continue
            per[str(seed)] = row
        arms[arm.name] = per
    return {"study": study.title, "arms": arms, "seeds": seeds, "conf": study.conf}


def _mean_ci(values: list[float], conf: float) -> tuple[float, float, float]:
    return mean_ci(values, conf=conf)


def summarise(study: Study, res: dict[str, Any]) -> dict[str, Any]:
    """Means and CIs per arm and metric, the paired difference (same seeds) to the first arm,
    the consumed budget per arm, and which budget entries differ between arms."""
    first = study.arms[0].name
    table: dict[str, Any] = {}
    for arm in study.arms:
        per = res["arms"].get(arm.name, {})
        row: dict[str, Any] = {"seeds": sorted(int(s) for s in per), "metrics": {}, "budget": {}}
        for m in study.metrics:
            vals = [per[s]["metrics"][m] for s in sorted(per)]
            row["metrics"][m] = _mean_ci(vals, study.conf) if vals else None
            base = res["arms"].get(first, {})
            common = [s for s in sorted(per) if s in base]
            if arm.name != first and common:
                d = [per[s]["metrics"][m] - base[s]["metrics"][m] for s in common]
                row.setdefault("diff", {})[m] = _mean_ci(d, study.conf)
        for b in study.consumed:
            vals = [per[s]["budget"][b] for s in sorted(per)]
            row["budget"][b] = (min(vals), max(vals)) if vals else None
        table[arm.name] = row
    mismatch = []
    for b in study.consumed:
        spans = {t["budget"][b] for t in table.values() if t["budget"][b]}
        if len({v for span in spans for v in span}) > 1:
            mismatch.append(b)
    return {"table": table, "mismatch": mismatch}


def write_outputs(study: Study, res: dict[str, Any]) -> dict[str, str]:
    """OUT/ablation.md, OUT/ablation.json, OUT/ablation.png."""
    out = Path(study.out)
    s = summarise(study, res)
    res.update(summary=s["table"], budget_mismatch=s["mismatch"])
    md = ablation_markdown(study, res, s)
    out.mkdir(parents=True, exist_ok=True)
    (out / "ablation.md").write_text(md)
    (out / "ablation.json").write_text(json.dumps(res, indent=1, default=str) + "\n")
    plot_ablation(study, res, out / "ablation.png")
    return {
        "table": str(out / "ablation.md"),
        "json": str(out / "ablation.json"),
        "plot": str(out / "ablation.png"),
    }
