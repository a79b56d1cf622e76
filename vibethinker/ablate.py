"""Matched-budget ablations: `vibethinker ablate STUDY.yaml [out=DIR] [--jobs N]`.

A study file names a recipe, the recipe stages an arm re-runs, the arms (overrides in the recipe
override syntax), the seeds, the budget held equal, and the metrics to compare:

    # Run: vibethinker ablate studies/grpo_vs_mgpo.yaml out=runs/ablate/grpo_vs_mgpo
    recipe: recipes/tiny.yaml
    base_run: runs/tiny          # finished upstream stages are read from here, never retrained
    out: runs/ablate/grpo_vs_mgpo
    stages: [rl_math]            # what every arm re-runs (an arm may list its own: `stages:`)
    overrides: {rl_math.steps: 20, rl_math.max_seconds: 0}   # common to all arms
    arms:
      grpo: {rl_math.advantage: grpo}
      mgpo: {rl_math.advantage: mgpo}
    seeds: [0, 1, 2, 3, 4]       # each arm x seed sets <stage>.seed=<seed> on every stage it runs
    budget:
      fixed: [rl_math.steps, rl_math.prompts_per_step, rl_math.group_size]
      consumed:                  # read back from each finished arm x seed
        rollouts: rl_math/metrics.jsonl:rows * rl_math.prompts_per_step * rl_math.group_size
    metrics:
      heldout_math: rl_math/evals.jsonl:-1.accuracy

Upstream stages: every recipe stage an arm does not run keeps its output folder in `base_run`
(its `out` is the one the base run's manifest recorded), so `${sft2.out}` and the like resolve to
the base run's finished outputs; only the arm's own stages write, into OUT/<arm>/seed<k>/, which
is an ordinary run directory (manifest.json, run.log, resume). If the base run lacks a referenced
stage (a fresh clone), the recipe's prefix up to that stage is first run into `base_run` once.

Budget: each `fixed` key must resolve to the same value in every arm (an arm that changes one is
refused before anything runs); each `consumed` expression is evaluated on every finished arm x
seed and shown next to the metrics, and arms whose consumed budgets differ are flagged in the
table. Expressions: terms joined by `+`, factors by `*`; a factor is a number, a resolved config
value `<stage>.<key>`, or `FILE:WHAT` with FILE relative to the arm's run dir and WHAT one of
`rows` (lines of a JSONL), `sum.FIELD` (a JSONL column's sum) or a dotted path (`-1.accuracy`
for a JSONL's last row, `metrics.math.pass@1` in a JSON).

Resume: an arm x seed whose stages are all done with an unchanged config is not started again;
an interrupted one is re-run through the recipe runner, which resumes its checkpoints. Arms run
in parallel processes: `--jobs N` (or `jobs:` in the study); default max(1, cores // 2), each
with cores // jobs torch threads. Output: OUT/ablation.md (means with confidence intervals over
seeds, the paired difference to the first arm, the budget), OUT/ablation.json, OUT/ablation.png.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vibethinker.config import ConfigError, read_yaml
from vibethinker.log import get_logger
from vibethinker.reports.ablate import ablation_markdown, plot_ablation

log = get_logger("ablate")
USAGE = """usage: vibethinker ablate STUDY.yaml [out=DIR] [base_run=DIR] [seeds=[0,1]] [--jobs N]
                          [<stage>.<key>=value ...] [--dry-run]

Run every arm x seed of a study (docs/ABLATE.md) that is not finished yet, each in its own run
dir under OUT, reusing the base run's finished upstream stages; then write OUT/ablation.md
(means with confidence intervals over seeds, paired differences, consumed budget), ablation.json
and ablation.png. Running it again resumes. <stage>.<key>= overrides apply to every arm.

  --jobs N    arm x seed runs in parallel processes (default: max(1, cores // 2))
  --inprocess run the arms one after another in this process (no worker start-up per arm)
  --table     only write the table and plot of the arm x seed runs finished so far
  --dry-run   print each arm's stages, overrides and what would run, and run nothing"""
STUDY_KEYS = (
    "recipe",
    "base_run",
    "out",
    "stages",
    "overrides",
    "arms",
    "seeds",
    "budget",
    "metrics",
    "jobs",
    "conf",
    "title",
    "notes",
)
_REF = re.compile(r"\$\{([A-Za-z0-9_\-]+)\.")


@dataclass
class Arm:
    name: str
    stages: list[str]
    overrides: dict[str, Any]


@dataclass
class Study:
    path: str
    recipe: str
    base_run: str
    out: str
    arms: list[Arm]
    seeds: list[int]
    fixed: list[str] = field(default_factory=list)
    consumed: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, str] = field(default_factory=dict)
    overrides: dict[str, Any] = field(default_factory=dict)
    jobs: int = 0
    conf: float = 0.95
    title: str = ""
    notes: str = ""


def default_jobs() -> int:
    """max(1, cores // 2): each arm gets at least two torch threads (1 on a 2-core machine)."""
    return max(1, (os.cpu_count() or 1) // 2)


def _as_list(v: Any, where: str) -> list:
    if isinstance(v, str):
        return [x.strip() for x in v.strip("[]").split(",") if x.strip()]
    if not isinstance(v, list):
        raise ConfigError(f"{where}: expected a list, got {v!r}")
    return v


def load_study(path: str, cli: dict[str, str] | None = None) -> Study:
    """Parse and check a study file; `cli` holds `out=`, `base_run=`, `seeds=`, `jobs=` and
    `<stage>.<key>=` overrides (the latter apply to every arm)."""
    raw = read_yaml(path, "study")
    if not isinstance(raw, dict):
        raise ConfigError(f"study {path}: expected a mapping")
    unknown = sorted(set(raw) - set(STUDY_KEYS))
    if unknown:
        raise ConfigError(f"study {path}: unknown key(s) {unknown}; known: {', '.join(STUDY_KEYS)}")
    cli = dict(cli or {})
    common = dict(raw.get("overrides") or {})
    for k in list(cli):
        if k not in ("out", "base_run", "seeds", "jobs", "recipe"):
            common[k] = cli.pop(k)
    raw.update(cli)
    for k in ("recipe", "out", "arms", "metrics"):
        if not raw.get(k):
            raise ConfigError(f"study {path}: `{k}` is required")
    stages = _as_list(raw.get("stages") or [], f"study {path}: stages")
    arms = []
    if not isinstance(raw["arms"], dict) or len(raw["arms"]) < 2:
        raise ConfigError(f"study {path}: `arms` needs at least two named arms (a mapping)")
    for name, ov in raw["arms"].items():
        ov = dict(ov or {})
        own = _as_list(ov.pop("stages", stages), f"study {path}: arms.{name}.stages")
        if not own:
            raise ConfigError(f"study {path}: arm {name} runs no stage (set `stages:`)")
        for k in ov:
            if "." not in k:
                raise ConfigError(f"study {path}: arms.{name}: override {k!r} is not <stage>.<key>")
        if not re.fullmatch(r"[A-Za-z0-9_.\-]+", str(name)):
            raise ConfigError(f"study {path}: arm name {name!r}: letters, digits, _ . - only")
        arms.append(Arm(str(name), [str(s) for s in own], ov))
    budget = raw.get("budget") or {}
    if set(budget) - {"fixed", "consumed"}:
        raise ConfigError(
            f"study {path}: budget takes `fixed` and `consumed`, got {sorted(budget)}"
        )
    seeds = [int(s) for s in _as_list(raw.get("seeds", [0]), f"study {path}: seeds")]
    if not seeds or len(set(seeds)) != len(seeds):
        raise ConfigError(f"study {path}: seeds must be distinct, at least one: {seeds}")
    study = Study(
        path=str(path),
        recipe=str(raw["recipe"]),
        base_run=str(raw.get("base_run") or ""),
        out=str(raw["out"]),
        arms=arms,
        seeds=seeds,
        fixed=[str(k) for k in budget.get("fixed") or []],
        consumed={str(k): str(v) for k, v in (budget.get("consumed") or {}).items()},
        metrics={str(k): str(v) for k, v in raw["metrics"].items()},
        overrides=common,
        jobs=int(raw.get("jobs") or 0),
        conf=float(raw.get("conf") or 0.95),
        title=str(raw.get("title") or Path(path).stem),
        notes=str(raw.get("notes") or "").strip(),
    )
    for arm in study.arms:
        _upstream(study, arm)  # every stage named is a recipe stage
    return study


# ----------------------------------------------------------------------------- planning


def _recipe_entries(recipe: str) -> list[tuple[str, str, dict]]:
    raw = yaml.safe_load(Path(recipe).read_text())
    out = []
    for e in raw.get("stages") or []:
        e = dict(e)
        stype = e.pop("stage")
        out.append((e.pop("name", None) or stype, stype, e))
    return out


def _base_outs(base_run: str) -> dict[str, dict]:
    mf = Path(base_run) / "manifest.json"
    return json.loads(mf.read_text()).get("stages", {}) if mf.exists() else {}


def _upstream(study: Study, arm: Arm) -> list[str]:
    """Recipe stages the arm's stages (and overrides) refer to but do not run."""
    try:
        entries = _recipe_entries(study.recipe)
    except FileNotFoundError:
        raise FileNotFoundError(
            f"study {study.path}: recipe {study.recipe}: no such file"
        ) from None
    names = [n for n, _, _ in entries]
    unknown = [s for s in arm.stages if s not in names]
    if unknown:
        raise ConfigError(
            f"study {study.path}: arm {arm.name}: stage(s) {unknown} not in {study.recipe} "
            f"({', '.join(names)})"
        )
    ov = {**study.overrides, **arm.overrides}
    own = []
    for n, _, v in entries:  # each run stage's values after the overrides
        if n in arm.stages:
            v = {**v, **{k.partition(".")[2]: x for k, x in ov.items() if k.partition(".")[0] == n}}
            own.append(v)
    text = json.dumps(own, default=str)
    refs = set(_REF.findall(text))
    return [n for n in names if n in refs and n not in arm.stages]


def arm_overrides(study: Study, arm: Arm, seed: int) -> dict[str, Any]:
    """The recipe overrides of one arm x seed: run_dir, model, upstream `out`s pointing into the
    base run, the common and arm overrides, and `<stage>.seed`."""
    from vibethinker import stages as registry

    run_dir = str(Path(study.out) / arm.name / f"seed{seed}")
    base = _base_outs(study.base_run)
    raw = yaml.safe_load(Path(study.recipe).read_text())
    ov: dict[str, Any] = {"run_dir": run_dir}
    entries = _recipe_entries(study.recipe)
    if raw.get("model"):  # the recipe's model folder is the base run's
        model_stage = next((n for n, _, v in entries if v.get("out") == "${model}"), None)
        rec = base.get(model_stage or "", {}).get("config", {})
        ov["model"] = rec.get("out") or str(raw["model"]).replace("${run_dir}", study.base_run)
    for name, stype, _ in entries:
        if name in arm.stages:
            if any(f.name == "seed" for f in _fields(registry.get(stype).config_cls)):
                ov[f"{name}.seed"] = seed
            continue
        rec = base.get(name, {}).get("config", {})
        ov[f"{name}.out"] = rec.get("out") or f"{study.base_run}/{name}"
    ov.update(study.overrides)
    ov.update(arm.overrides)
    return ov


def _fields(cls: type) -> tuple:
    import dataclasses

    return dataclasses.fields(cls)


def arm_recipe(study: Study, arm: Arm, seed: int) -> Any:
    """The recipe of one arm x seed, reduced to the stages it runs."""
    from vibethinker.recipe import load_recipe

    recipe = load_recipe(study.recipe, arm_overrides(study, arm, seed))
    recipe.stages = [ps for ps in recipe.stages if ps.name in arm.stages]
    return recipe


def config_value(recipe: Any, key: str) -> Any:
    name, _, k = key.partition(".")
    for ps in recipe.stages:
        if ps.name == name:
            if not hasattr(ps.config, k):
                raise ConfigError(f"{key}: stage {name} has no key {k!r}")
            return getattr(ps.config, k)
    return None  # a stage this arm does not run


def check_fixed(study: Study) -> dict[str, dict[str, Any]]:
    """Each `budget.fixed` key per arm; a ConfigError when two arms differ (before any run)."""
    seen: dict[str, dict[str, Any]] = {k: {} for k in study.fixed}
    for arm in study.arms:
        recipe = arm_recipe(study, arm, study.seeds[0])
        for k in study.fixed:
            v = config_value(recipe, k)
            if v is not None:
                seen[k][arm.name] = v
    for k, per in seen.items():
        if not per:
            raise ConfigError(f"study {study.path}: budget key {k} is in no arm's stages")
        if len({json.dumps(v, default=str) for v in per.values()}) > 1:
            shown = ", ".join(f"{a}={v!r}" for a, v in per.items())
            raise ConfigError(
                f"study {study.path}: budget mismatch: fixed key {k} differs between arms "
                f"({shown}); matched-budget arms must share it"
            )
    return seen


def ensure_base(study: Study) -> None:
    """Run the recipe's prefix into base_run when a referenced upstream stage is not done there
    (a fresh clone); a complete base run (e.g. a read-only earlier demo) is only read."""
    from vibethinker.recipe import execute, load_recipe

    need: list[str] = []
    for arm in study.arms:
        need += [s for s in _upstream(study, arm) if s not in need]
    base = _base_outs(study.base_run)
    missing = [s for s in need if base.get(s, {}).get("status") != "done"]
    if not missing:
        return
    if not study.base_run:
        raise ConfigError(f"study {study.path}: no base_run, but the arms need {missing}")
    names = [n for n, _, _ in _recipe_entries(study.recipe)]
    last = max(names.index(s) for s in missing)
    log.info(
        "base run %s lacks %s: running the recipe up to %s", study.base_run, missing, names[last]
    )
    recipe = load_recipe(study.recipe, {"run_dir": study.base_run})
    recipe.stages = recipe.stages[: last + 1]
    execute(recipe, quiet=True)


def describe(study: Study) -> str:
    """The plan: per arm its stages and overrides, the fixed budget, what would run."""
    fixed = check_fixed(study)
    lines = [
        f"study {study.title}: recipe {study.recipe}, base run {study.base_run}, "
        f"out {study.out}, seeds {study.seeds}"
    ]
    for arm in study.arms:
        done = [s for s in study.seeds if is_done(study, arm, s)]
        lines.append(
            f"  arm {arm.name}: stages {arm.stages}; upstream from the base run: "
            f"{_upstream(study, arm)}; done seeds {done}"
        )
        for k, v in {**study.overrides, **arm.overrides}.items():
            lines.append(f"      {k}={v}")
    for k, per in fixed.items():
        lines.append(f"  budget {k} = {next(iter(per.values()))!r} in every arm")
    return "\n".join(lines)


def is_done(study: Study, arm: Arm, seed: int) -> bool:
    from vibethinker.recipe import explain

    return all(action == "skip" for _, action, _ in explain(arm_recipe(study, arm, seed)))


# ----------------------------------------------------------------------------- running


def run_one(study_path: str, cli: dict[str, str], arm_name: str, seed: int) -> None:
    """One arm x seed in this process (what the parallel workers call)."""
    from vibethinker.recipe import execute

    study = load_study(study_path, cli)
    arm = next(a for a in study.arms if a.name == arm_name)
    execute(arm_recipe(study, arm, seed), quiet=True)


_PROCS: list[subprocess.Popen] = []


def spawn_inprocess(study: Study, cli: dict[str, str], arm: Arm, seed: int, threads: int) -> int:
    """One arm x seed in this process (`--inprocess`): no worker start-up (importing torch and
    transformers again costs ~1 min per arm on a loaded 2-core host), no isolation between arms."""
    t0 = time.time()
    try:
        run_one(study.path, cli, arm.name, seed)
    except Exception as e:  # the next arm still runs; the table names the failure
        log.error("%s seed %d failed: %s: %s", arm.name, seed, type(e).__name__, e)
        print(f"{arm.name} seed {seed}: FAILED ({type(e).__name__}: {e})", flush=True)
        return 1
    print(f"{arm.name} seed {seed}: done in {time.time() - t0:.0f} s", flush=True)
    return 0


def _spawn(study: Study, cli: dict[str, str], arm: Arm, seed: int, threads: int) -> int:
    run_dir = Path(study.out) / arm.name / f"seed{seed}"
    run_dir.mkdir(parents=True, exist_ok=True)
    args = [f"{k}={v}" for k, v in cli.items()]
    cmd = [
        sys.executable,
        "-m",
        "vibethinker.ablate",
        "--one",
        study.path,
        arm.name,
        str(seed),
        *args,
    ]
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(threads))}
    t0 = time.time()
    with open(run_dir / "ablate.log", "a") as logf:
        proc = subprocess.Popen(cmd, stdout=logf, stderr=subprocess.STDOUT, env=env)
        _PROCS.append(proc)
        rc = proc.wait()
    log.info(
        "%s seed %d: %s in %.0f s",
        arm.name,
        seed,
        "done" if rc == 0 else f"FAILED rc={rc}",
        time.time() - t0,
    )
    return rc


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_study(
    study: Study, cli: dict[str, str], jobs: int = 0, spawn: Any = None
) -> dict[str, Any]:
    """Every arm x seed not yet done (in parallel processes), then the table and plot.
    `spawn(study, cli, arm, seed, threads) -> exit code` replaces the worker process (tests)."""
    check_fixed(study)
    ensure_base(study)
    jobs = jobs or study.jobs or default_jobs()
    if spawn is spawn_inprocess:
        jobs = 1
    threads = max(1, (os.cpu_count() or 1) // jobs)
    Path(study.out).mkdir(parents=True, exist_ok=True)
    todo = [(a, s) for s in study.seeds for a in study.arms if not is_done(study, a, s)]
    skipped = len(study.arms) * len(study.seeds) - len(todo)
    log.info(
        "study %s: %d arm x seed runs to do, %d already done; %d job(s)",
        study.title,
        len(todo),
        skipped,
        jobs,
    )
    print(f"ablate {study.title}: {len(todo)} to run, {skipped} done already, jobs={jobs}")
    old = signal.signal(signal.SIGTERM, _raise_interrupt)
    ex = ThreadPoolExecutor(max_workers=jobs)
    try:
        if jobs == 1:  # one at a time, from this thread
            rcs = [(spawn or _spawn)(study, cli, a, s, threads) for a, s in todo]
        else:
            futs = [ex.submit(spawn or _spawn, study, cli, a, s, threads) for a, s in todo]
            rcs = [f.result() for f in futs]
    except BaseException:  # Ctrl-C / SIGTERM: stop the workers (each resumes on the next run)
        ex.shutdown(wait=False, cancel_futures=True)
        for p in _PROCS:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in _PROCS:
            p.wait()
        raise
    finally:
        signal.signal(signal.SIGTERM, old)
    ex.shutdown()
    failed = [f"{a.name}/seed{s}" for (a, s), rc in zip(todo, rcs) if rc != 0]
    res = collect(study)
    res["failed"] = failed
    write_outputs(study, res)
    return res


# ----------------------------------------------------------------------------- reading back


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


def collect(study: Study) -> dict[str, Any]:
    """Per arm and seed: metrics and consumed budget of every finished run (missing: absent)."""
    arms: dict[str, Any] = {}
    for arm in study.arms:
        per: dict[str, Any] = {}
        for seed in study.seeds:
            run_dir = Path(study.out) / arm.name / f"seed{seed}"
            try:
                if not is_done(study, arm, seed):
                    continue
                recipe = arm_recipe(study, arm, seed)
                absent = {n for n, _, _ in _recipe_entries(study.recipe)} - set(arm.stages)
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
    return {"study": study.title, "arms": arms, "seeds": study.seeds, "conf": study.conf}


def _mean_ci(values: list[float], conf: float) -> tuple[float, float, float]:
    from vibethinker.evaluate.stats import mean_ci

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


if __name__ == "__main__":  # the worker of one arm x seed: python -m vibethinker.ablate --one ...
    from vibethinker.config import parse_overrides
    from vibethinker.log import setup_logging

    if sys.argv[1:2] != ["--one"] or len(sys.argv) < 5:
        sys.exit("usage: python -m vibethinker.ablate --one STUDY ARM SEED [key=value ...]")
    setup_logging(quiet=True)
    run_one(sys.argv[2], parse_overrides(sys.argv[5:]), sys.argv[3], int(sys.argv[4]))
