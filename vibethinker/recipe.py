"""Recipes and runs: YAML + overrides -> typed stage configs; a run dir with a manifest; resume.

A recipe is a short YAML file:

    # Run: vibethinker run recipes/tiny.yaml
    run_dir: runs/tiny
    model: ${run_dir}/model          # the model the recipe trains (a folder or hub id)
    stages:
      - stage: data                  # stage type (vibethinker/stages/<type>.py)
        seed: 0                      # the stage config's keys
      - stage: model
        name: tiny_model             # optional; defaults to the stage type, must be unique
        data: ${data.out}            # ${run_dir}, ${model}, ${<name>.<key>} of an earlier stage

Overrides: `run_dir=...`, `model=...`, and `<name>.<key>=...` for a stage's key.

The manifest (`<run_dir>/manifest.json`, rewritten atomically) records per stage its status
(pending, running, done, failed, interrupted), resolved config, start/finish times, seconds
over all its attempts, and its folder and outputs relative to the run folder (vibethinker/
rundir.py: the folder is self-contained and can be moved; `status` reads it from anywhere).
Running again skips stages that are done with an unchanged config; a stage whose config changed
re-runs, and so does everything after it. Fields declared `runtime` (device, worker counts,
request concurrency: config.runtime) cannot change results and do not count as a change. A stage that did not finish (crash, Ctrl-C, kill -9)
is never marked done; a non-resumable stage gets a clean output folder when it re-runs, a
resumable one (it checkpoints inside its folder) continues from its last checkpoint; sft, rl and
distill save one at the step where Ctrl-C or SIGTERM arrives (train/interrupt.py).

Under torchrun, `vibethinker run RECIPE` runs the training stages (sft, rl, distill) on every
process and the others on rank 0 (`execute`).

One recipe stage run alone (`vibethinker <stage or name> RECIPE ...`) takes that entry's config
but writes to <run_dir>/single/<name> (`single_out`), with its own `single_run.json`: it never
touches a folder the manifest describes, so it needs neither the run lock nor a manifest entry;
its own folder is locked while it runs (as each stage's folder is during `run`:
rundir.output_lock), so a second process writing there is refused.
"""

from __future__ import annotations

import contextlib
import dataclasses
import difflib
import json
import re
import shutil
import signal
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from vibethinker import devices, ledger, rundir, statefile
from vibethinker import stages as stage_registry
from vibethinker.config import ConfigError, is_runtime, make_config, read_yaml
from vibethinker.log import get_logger, setup_logging
from vibethinker.train import dist

log = get_logger("recipe")
_REF = re.compile(r"\$\{([A-Za-z0-9_.\-]+)\}")
TOP_LEVEL = ("run_dir", "model", "engine")
# `engine: vllm` at the top of a recipe sets these keys on every stage that has them and does not
# set them itself; `engine=hf` on the command line sets them on every stage (a `<stage>.engine=`
# on the command line still wins): one switch for every sampling stage.
ENGINE_KEYS = ("engine", "filter_engine")
# Stage types that train with torchrun (every process runs them); the others run on rank 0.
DISTRIBUTED = ("sft", "rl", "distill")
# Stage types whose training loop saves a checkpoint when Ctrl-C / SIGTERM arrives.
SAVE_ON_SIGNAL = ("sft", "rl", "distill")


@dataclass
class PlannedStage:
    name: str  # unique within the recipe
    stage: str  # stage type
    config: Any  # the stage's config dataclass, fully resolved


@dataclass
class Recipe:
    path: str
    run_dir: str
    model: str | None
    stages: list[PlannedStage] = field(default_factory=list)


def _substitute(value: Any, scope: dict[str, Any], where: str) -> Any:
    if isinstance(value, list):
        return [_substitute(v, scope, where) for v in value]
    if isinstance(value, dict):  # e.g. distill's teachers: [{model: "${rl_code.out}/final", ...}]
        return {k: _substitute(v, scope, where) for k, v in value.items()}
    if not isinstance(value, str):
        return value

    def repl(m: re.Match) -> str:
        key = m.group(1)
        if key not in scope:
            raise ConfigError(f"{where}: unknown reference ${{{key}}}{_ref_hint(key, scope)}")
        return str(scope[key])

    return _REF.sub(repl, value)


def _ref_hint(key: str, scope: dict[str, Any]) -> str:
    """The close match of a bad `${key}` (difflib), else what can be referenced: the top-level
    names and `<stage>.<key>` of the earlier stages (not every key of every stage)."""
    m = difflib.get_close_matches(key, list(scope), n=1, cutoff=0.6)
    if m:
        return f" (did you mean ${{{m[0]}}}?)"
    stages = sorted({k.split(".", 1)[0] for k in scope if "." in k})
    top = [k for k in scope if "." not in k]
    return f"; available: {', '.join(f'${{{t}}}' for t in top)}" + (
        f", or ${{<stage>.<key>}} of an earlier stage ({', '.join(stages)})" if stages else ""
    )


def load_recipe(path: str, overrides: dict[str, str] | None = None) -> Recipe:
    """Parse a recipe, apply overrides, resolve references; every error names the recipe."""
    overrides = dict(overrides or {})
    forced = "engine" in overrides  # engine= on the command line: every stage but its own key
    raw = read_yaml(path, "recipe")
    if not isinstance(raw, dict) or not isinstance(raw.get("stages"), list):
        raise ConfigError(f"recipe {path}: expected a mapping with a `stages` list")
    unknown = set(raw) - {*TOP_LEVEL, "stages"}
    if unknown:
        raise ConfigError(f"recipe {path}: unknown top-level key(s) {sorted(unknown)}")
    top = {k: raw.get(k) for k in TOP_LEVEL}
    for k in TOP_LEVEL:
        if k in overrides:
            top[k] = overrides.pop(k)
    if not top["run_dir"]:
        raise ConfigError(f"recipe {path}: `run_dir` is required")
    scope: dict[str, Any] = {"run_dir": top["run_dir"]}
    top["model"] = _substitute(top["model"], scope, f"{path}: model") if top["model"] else None
    if top["model"]:
        scope["model"] = top["model"]

    entries: list[tuple[str, str, dict[str, Any]]] = []
    for i, entry in enumerate(raw["stages"]):
        if not isinstance(entry, dict) or "stage" not in entry:
            raise ConfigError(f"recipe {path}: stages[{i}] needs a `stage:` key")
        values = dict(entry)
        stype, name = values.pop("stage"), values.pop("name", None) or entry["stage"]
        if any(name == n for n, _, _ in entries):
            raise ConfigError(f"recipe {path}: duplicate stage name {name!r}; add `name:`")
        entries.append((name, stype, values))
    names = {n for n, _, _ in entries}
    cli_keys: set[str] = set()
    for key, val in overrides.items():
        sname, _, k = key.partition(".")
        if sname not in names or not k:
            raise ConfigError(
                f"override {key}={val}: expected run_dir=, model=, engine= or <stage>.<key>= with a stage "
                f"in {sorted(names)}"
            )
        next(v for n, _, v in entries if n == sname)[k] = val
        cli_keys.add(key)

    recipe = Recipe(path=str(path), run_dir=top["run_dir"], model=top["model"])
    for name, stype, values in entries:
        spec = stage_registry.get(stype)
        if top["engine"]:
            keep = {k for k in ENGINE_KEYS if f"{name}.{k}" in cli_keys or not forced}
            _apply_engine(values, spec.config_cls, str(top["engine"]), keep)
        values.setdefault("out", f"{top['run_dir']}/{name}")
        values = {k: _substitute(v, scope, f"{path}: {name}.{k}") for k, v in values.items()}
        cfg = make_config(spec.config_cls, values, f"{path}: {name}")
        for f in dataclasses.fields(cfg):
            scope[f"{name}.{f.name}"] = getattr(cfg, f.name)
        recipe.stages.append(PlannedStage(name, stype, cfg))
    return recipe


def _apply_engine(values: dict[str, Any], config_cls: Any, engine: str, keep: set[str]) -> None:
    """The top-level `engine` on a stage's engine keys: those it leaves unset, and those it sets
    unless they are in `keep` (the recipe's top-level key keeps a stage's own value; `engine=`
    on the command line keeps only a `<stage>.engine=` given there too)."""
    names = {f.name for f in dataclasses.fields(config_cls)}
    for key in ENGINE_KEYS:
        if key in names and (key not in values or key not in keep):
            values[key] = engine


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


class Manifest:
    """`<run_dir>/manifest.json`, rewritten atomically after every change."""

    def __init__(self, run_dir: str):
        self.path = Path(run_dir) / "manifest.json"
        self.data: dict[str, Any] = {"stages": {}}
        if self.path.exists():  # a damaged one is an error naming it (rundir.read_manifest)
            self.data = rundir.read_manifest(run_dir)

    def stage(self, name: str) -> dict[str, Any]:
        return self.data["stages"].setdefault(name, {"status": "pending"})

    def save(self) -> None:
        statefile.write_json(self.path, self.data)  # temporary file, fsync, rename


def _config_dict(cfg: Any) -> dict[str, Any]:
    return json.loads(json.dumps(dataclasses.asdict(cfg), default=str))


def _result_dict(cfg: Any, recorded: dict[str, Any] | None = None) -> dict[str, Any]:
    """JSON form of the fields that can change results (`runtime` fields are left out)."""
    runtime = {f.name for f in dataclasses.fields(cfg) if is_runtime(f)}
    src = _config_dict(cfg) if recorded is None else recorded
    return {k: v for k, v in src.items() if k not in runtime}


def _changes(old: dict[str, Any], new: dict[str, Any], most: int = 3) -> str:
    keys = [k for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]
    shown = ", ".join(f"{k} {old.get(k)!r} -> {new.get(k)!r}" for k in keys[:most])
    return shown + (f" (+{len(keys) - most} more)" if len(keys) > most else "")


def explain(recipe: Recipe) -> list[tuple[PlannedStage, str, str]]:
    """Each stage with what a run would do ('skip', 'run' or 'resume') and why.

    A finished stage is skipped when its config is unchanged apart from `runtime` fields (device,
    worker counts: they cannot change results); otherwise it and every stage after it re-run."""
    manifest = Manifest(recipe.run_dir)
    # compared with the run folder's own prefix as ${run_dir}: a moved folder is the same run
    was = manifest.data.get("run_dir") or recipe.run_dir, manifest.data.get("run_dir_abs")
    out: list[tuple[PlannedStage, str, str]] = []
    dirty = ""
    for ps in recipe.stages:
        rec = manifest.data["stages"].get(ps.name, {})
        now = rundir.portable(_result_dict(ps.config), recipe.run_dir)
        then = (
            rundir.portable(_result_dict(ps.config, rec["config"]), *was)
            if rec.get("config")
            else None
        )
        same, status = then == now, rec.get("status")
        if not dirty and status == "done" and same:
            out.append((ps, "skip", "done, same config"))
            continue
        resumable = stage_registry.get(ps.stage).resumable
        partial = status in ("running", "failed", "interrupted") and same
        if dirty:
            why = f"an earlier stage ({dirty}) re-runs"
        elif then is None:
            why = "not run yet"
        elif not same:
            why = "config changed: " + _changes(then, now)
        else:
            why = f"last run {status}" + ("; resumes from its checkpoints" if resumable else "")
        dirty = dirty or ps.name
        out.append((ps, "resume" if resumable and partial else "run", why))
    return out


def plan(recipe: Recipe) -> list[tuple[PlannedStage, str]]:
    """Each stage with what a run would do: 'skip' (done, same config) or 'run'/'resume'."""
    return [(ps, action) for ps, action, _ in explain(recipe)]


def _inside(child: Path, parent: Path) -> bool:
    try:
        child.resolve().relative_to(parent.resolve())
        return True
    except ValueError:
        return False


def _clean_out(out: str, run_dir: str) -> None:
    """Remove a stale partial output folder, but only inside the run dir (never user data)."""
    p = Path(out)
    if p.exists() and _inside(p, Path(run_dir)) and p.resolve() != Path(run_dir).resolve():
        shutil.rmtree(p) if p.is_dir() else p.unlink()


def single_out(recipe: Recipe, name: str, given: str | None = None) -> str:
    """Output folder of `vibethinker <stage> RECIPE ...` (one recipe stage run alone): by default
    <run_dir>/single/<name>, so it never overwrites a folder the manifest describes; an explicit
    `out=` inside a recipe stage's folder is refused (re-run that stage with `vibethinker run`)."""
    if not given:
        return f"{recipe.run_dir}/single/{name}"
    g = Path(given)
    if g.resolve() == Path(recipe.run_dir).resolve():
        raise ConfigError(f"out={given} is the recipe's run dir; choose another folder")
    for ps in recipe.stages:
        if _inside(g, Path(ps.config.out)):
            raise ConfigError(
                f"out={given} is inside recipe stage {ps.name}'s folder {ps.config.out}, which "
                f"its manifest describes; to re-run that stage use `vibethinker run "
                f"{recipe.path} {ps.name}.<key>=...`, or choose another out="
            )
    return given


def prepare_single(cfg: Any, stage: str) -> None:
    """Before a single-stage run: clear its folder if an earlier single run there had another
    config (a resumable stage would otherwise continue someone else's checkpoints), and leave
    `single_run.json` (stage, config, times, status) as its record."""
    if dist.launched():  # torchrun: rank 0 alone touches the folder, the others wait
        dist.init(_dist_device([cfg]))
    out = Path(cfg.out)
    marker = out / "single_run.json"
    if dist.is_main():
        old = statefile.read_json(marker)  # empty or torn: as if absent, with a warning
        if isinstance(old, dict):
            same = _result_dict(cfg, old.get("config") or {}) == _result_dict(cfg)
            if not (same and stage_registry.get(stage).resumable):
                shutil.rmtree(out)
        out.mkdir(parents=True, exist_ok=True)
        rec = {"stage": stage, "status": "running", "config": _config_dict(cfg), "started": _now()}
        statefile.write_json(marker, rec)
    dist.barrier()


def _dist_device(cfgs: list[Any]) -> str:
    """The device that picks the process group's backend under torchrun: the first one a config
    names (nccl for cuda, gloo for cpu), else cuda when there is one."""
    named = [str(getattr(c, "device", "") or "") for c in cfgs]
    named = [d for d in named if d not in ("", "auto")]
    return named[0] if named else ("cuda" if torch.cuda.is_available() else "cpu")


def finish_single(cfg: Any, status: str = "done") -> None:
    if not dist.is_main():
        return
    marker = Path(cfg.out) / "single_run.json"
    rec = statefile.read_json(marker)
    rec = rec if isinstance(rec, dict) else {}
    rec.update(status=status, finished=_now())
    statefile.write_json(marker, rec)


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def _start_stage(manifest: Manifest, ps: PlannedStage, action: str, run_dir: str) -> None:
    """Record a stage as running (a fresh `run` empties its folder first). A `resume` keeps the
    seconds its earlier attempts spent (`spent`), so the report shows the stage's whole time."""
    rec = manifest.stage(ps.name)
    if action == "run":
        _clean_out(ps.config.out, run_dir)
        rec.update(spent=0.0, attempts=0)
    rec.update(
        stage=ps.stage,
        status="running",
        config=_config_dict(ps.config),
        dir=rundir.relative(ps.config.out, run_dir),
        started=_now(),
        finished=None,
        outputs={},
        error=None,
        attempts=rec.get("attempts", 0) + 1,
    )
    rec.setdefault("spent", 0.0)
    manifest.save()


def _end_stage(manifest: Manifest, ps: PlannedStage, t0: float, status: str, **kw: Any) -> None:
    rec = manifest.stage(ps.name)
    rec["spent"] = round(rec.get("spent", 0.0) + time.time() - t0, 2)
    rec.update(status=status, **kw)
    if status == "done":
        rec.update(finished=_now(), seconds=rec["spent"])
    manifest.save()


def _interrupted_note(ps: PlannedStage, e: BaseException) -> str:
    saved = getattr(e, "saved", None)  # set by the training loop that saved it (interrupt.stop)
    if saved:
        return f"a checkpoint was saved at {saved}; run again to resume"
    if ps.stage in SAVE_ON_SIGNAL:
        return (
            "it was not training (loading, filtering or evaluating): nothing of this attempt "
            "was saved, its earlier checkpoints are kept; run again to resume"
        )
    if stage_registry.get(ps.stage).resumable:
        return "it resumes from its last checkpoint (or chunk) when run again"
    return "nothing of this stage is saved: it starts over when run again"


def _run_stage(manifest: Manifest | None, ps: PlannedStage, run_dir: str) -> dict[str, str]:
    """One stage: on every process when it trains with torchrun (sft, rl, distill), else on
    rank 0 alone; the manifest (rank 0's) records the outcome, with outputs relative to the run
    folder."""
    spec = stage_registry.get(ps.stage)
    ledger.start()
    t0 = time.time()
    try:
        try:
            outputs = dist.run_on_main(lambda: spec.fn(ps.config) or {}, ps.stage in DISTRIBUTED)
        finally:
            _close_engines()
    except KeyboardInterrupt as e:
        if manifest is not None:
            _end_stage(manifest, ps, t0, "interrupted", error="interrupted")
            log.warning("stage %s interrupted; %s", ps.name, _interrupted_note(ps, e))
        raise
    except Exception as e:
        if manifest is not None:
            _end_stage(manifest, ps, t0, "failed", error=f"{type(e).__name__}: {e}")
            log.error("stage %s failed: %s", ps.name, manifest.stage(ps.name)["error"])
        raise
    if manifest is not None:
        outs = {k: rundir.relative(str(v), run_dir) for k, v in (outputs or {}).items()}
        cost = ledger.stop(time.time() - t0, *devices.detect(getattr(ps.config, "device", "")))
        ledger.write(ps.config.out, cost)
        _end_stage(manifest, ps, t0, "done", outputs=outs, ledger=cost)
        log.info("stage %s done in %.1f s", ps.name, time.time() - t0)
    return outputs or {}


def _adopt(manifest: Manifest, run_dir: str, run_dir_abs: str) -> None:
    """A run folder copied or moved from elsewhere: its recorded stage configs name the old
    folder; rewritten to this one, so that the next run compares them as unchanged (the runner
    compares with both prefixes as ${run_dir}, but only the folder's latest name is kept)."""
    old, old_abs = manifest.data.get("run_dir"), manifest.data.get("run_dir_abs")
    if not old or rundir.portable(run_dir_abs, old, old_abs) == rundir.RUN_DIR_TOKEN:
        return
    for rec in manifest.data["stages"].values():
        if rec.get("config"):
            rec["config"] = rundir.relocate(rec["config"], old, old_abs, run_dir)


def _close_engines() -> None:
    """A stage's vLLM engine ends with the stage (engines/vllm.py `close_live`: one in-process
    engine at a time, and its KV cache holds memory the next stage needs). Nothing to do when
    vLLM was never loaded (no import here: the hf-only path stays vLLM-free)."""
    mod = sys.modules.get("vibethinker.engines.vllm")
    if mod is not None:
        mod.close_live()


def _lock(run_dir: Path) -> Any:
    """The run folder's lock, held for the whole run."""
    return rundir.hold_lock(
        run_dir / rundir.LOCK_FILE, f"{run_dir} is in use by another vibethinker run"
    )


def _stage_lock(ps: PlannedStage, run_dir: Path, main: bool) -> Any:
    """The lock of a stage's folder while it runs (rank 0), so that a `vibethinker <stage>
    out=<that folder>` started beside the run is refused; the run folder itself has the run's."""
    out = Path(ps.config.out)
    if not main or out.resolve() == run_dir.resolve():
        return contextlib.nullcontext()
    return rundir.output_lock(out, f"stage {ps.name} of the run {run_dir}")


def execute(recipe: Recipe, quiet: bool = False) -> dict[str, Any]:
    """Run the recipe's stages in order into its run dir; resume after the last completed one.

    Under torchrun (`torchrun ... vibethinker run RECIPE`) every process runs this: rank 0 holds
    the lock and writes the manifest, the training stages (sft, rl, distill) run on every
    process, the others on rank 0 while the rest wait."""
    if dist.launched():
        dist.init(_dist_device([ps.config for ps in recipe.stages if ps.stage in DISTRIBUTED]))
    main, run_dir = dist.is_main(), Path(recipe.run_dir)
    manifest, lock = None, None
    if main:
        run_dir.mkdir(parents=True, exist_ok=True)
        setup_logging(quiet=quiet, log_file=str(run_dir / "run.log"))
        lock = _lock(run_dir)
    old_term = signal.signal(signal.SIGTERM, _raise_interrupt)
    try:
        actions = dist.broadcast_object([a for _, a in plan(recipe)] if main else None)
        if main:
            manifest = Manifest(recipe.run_dir)
            _adopt(manifest, recipe.run_dir, str(run_dir.resolve()))
            manifest.data.update(
                recipe=recipe.path,
                model=recipe.model,
                run_dir=recipe.run_dir,
                run_dir_abs=str(run_dir.resolve()),
                order=[s.name for s in recipe.stages],
            )
        for ps, action in zip(recipe.stages, actions):
            if action == "skip":
                log.info("stage %s: done, skipping", ps.name)
                continue
            where = (
                f" on {dist.world()} processes" if ps.stage in DISTRIBUTED and dist.active() else ""
            )
            log.info("stage %s (%s): %s%s", ps.name, ps.stage, action, where)
            with _stage_lock(ps, run_dir, main):
                if manifest is not None:
                    _start_stage(manifest, ps, action, recipe.run_dir)
                dist.barrier()  # the folder is clean before any process writes to it
                _run_stage(manifest, ps, recipe.run_dir)
    finally:
        signal.signal(signal.SIGTERM, old_term)
        if lock is not None:
            lock.close()
    return manifest.data if manifest is not None else {}
