"""A study file (docs/ABLATE.md; the format is in vibethinker/ablate/__init__.py): parsing and
checking it, and planning each arm x seed (its recipe overrides, the upstream stages read from
the base run, the fixed budget every arm must share, what is done).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from vibethinker import stages as registry
from vibethinker.config import ConfigError, read_yaml
from vibethinker.log import get_logger

log = get_logger("ablate")


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
        upstream(study, arm)  # every stage named is a recipe stage
    return study


def recipe_entries(recipe: str) -> list[tuple[str, str, dict]]:
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


def upstream(study: Study, arm: Arm) -> list[str]:
    """Recipe stages the arm's stages (and overrides) refer to but do not run."""
    try:
        entries = recipe_entries(study.recipe)
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
    run_dir = str(Path(study.out) / arm.name / f"seed{seed}")
    base = _base_outs(study.base_run)
    raw = yaml.safe_load(Path(study.recipe).read_text())
    ov: dict[str, Any] = {"run_dir": run_dir}
    entries = recipe_entries(study.recipe)
    if raw.get("model"):  # the recipe's model folder is the base run's
        model_stage = next((n for n, _, v in entries if v.get("out") == "${model}"), None)
        rec = base.get(model_stage or "", {}).get("config", {})
        ov["model"] = rec.get("out") or str(raw["model"]).replace("${run_dir}", study.base_run)
    for name, stype, _ in entries:
        if name in arm.stages:
            if any(f.name == "seed" for f in dataclasses.fields(registry.get(stype).config_cls)):
                ov[f"{name}.seed"] = seed
            continue
        rec = base.get(name, {}).get("config", {})
        ov[f"{name}.out"] = rec.get("out") or f"{study.base_run}/{name}"
    ov.update(study.overrides)
    ov.update(arm.overrides)
    return ov


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
        need += [s for s in upstream(study, arm) if s not in need]
    base = _base_outs(study.base_run)
    missing = [s for s in need if base.get(s, {}).get("status") != "done"]
    if not missing:
        return
    if not study.base_run:
        raise ConfigError(f"study {study.path}: no base_run, but the arms need {missing}")
    names = [n for n, _, _ in recipe_entries(study.recipe)]
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
            f"{upstream(study, arm)}; done seeds {done}"
        )
        for k, v in {**study.overrides, **arm.overrides}.items():
            lines.append(f"      {k}={v}")
    for k, per in fixed.items():
        lines.append(f"  budget {k} = {next(iter(per.values()))!r} in every arm")
    return "\n".join(lines)


# Which base-run stages an arm x seed read, and when each had last finished there: a base stage
# re-run since (a new `make demo`) makes the arm's results stale though its own config is equal.
BASE_STAMP = "base_stages.json"


def seed_dir(study: Study, arm: Arm, seed: int) -> Path:
    return Path(study.out) / arm.name / f"seed{seed}"


def base_stamp(study: Study, arm: Arm) -> dict[str, str]:
    """Each upstream stage the arm reads from the base run -> when it finished there and a hash
    of its config (a re-run changes the first; one within the same second, the second)."""
    base = _base_outs(study.base_run)
    stamp = {}
    for s in upstream(study, arm):
        rec = base.get(s, {})
        conf = json.dumps(rec.get("config"), sort_keys=True, default=str).encode()
        stamp[s] = f"{rec.get('finished', '')} {hashlib.sha256(conf).hexdigest()[:16]}"
    return stamp


def stale_base(study: Study, arm: Arm, seed: int) -> list[str]:
    """The upstream stages re-run in the base run since this arm x seed read them (none for a
    run from before stamps were written: trusted as it is)."""
    path = seed_dir(study, arm, seed) / BASE_STAMP
    if not path.exists():
        return []
    then, now = json.loads(path.read_text()), base_stamp(study, arm)
    return sorted(s for s in set(then) | set(now) if then.get(s) != now.get(s))


def retire_stale(study: Study, arm: Arm, seed: int) -> None:
    """Move an arm x seed made on an older base aside (`seedN.old-base-<time>`: kept, not in the
    table), so that it runs again on the current base."""
    stale = stale_base(study, arm, seed)
    if not stale:
        return
    run_dir = seed_dir(study, arm, seed)
    old = run_dir.with_name(f"{run_dir.name}.old-base-{time.strftime('%Y%m%dT%H%M%S')}")
    run_dir.rename(old)
    log.warning(
        "%s seed %d: the base run re-ran %s since it ran; the old results moved to %s",
        arm.name,
        seed,
        ", ".join(stale),
        old,
    )


def write_base_stamp(study: Study, arm: Arm, seed: int) -> None:
    run_dir = seed_dir(study, arm, seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / BASE_STAMP).write_text(json.dumps(base_stamp(study, arm), indent=1) + "\n")


def is_done(study: Study, arm: Arm, seed: int) -> bool:
    """Every stage of the arm x seed finished with its current config, on the base run's
    current upstream stages."""
    from vibethinker.recipe import explain

    if stale_base(study, arm, seed):
        return False
    return all(action == "skip" for _, action, _ in explain(arm_recipe(study, arm, seed)))
