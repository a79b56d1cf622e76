"""Command line: `vibethinker run RECIPE [key=value ...]` and `vibethinker <stage> [key=value ...]`.

usage:
  vibethinker run RECIPE.yaml [key=value ...] [--dry-run] [--quiet]   run (or resume) a recipe
  vibethinker <stage> [POSITIONAL ...] [key=value ...]                one stage alone
  vibethinker <stage|name> RECIPE.yaml [key=value ...]                one recipe stage alone,
                                              written to <run_dir>/single/<name> (not the recipe's)
  vibethinker status RUN_DIR|RECIPE.yaml [--no-report]                the manifest as a table;
                                                                      rebuilds report.md
  vibethinker stages                                                  list the stages
  vibethinker plan RECIPE.yaml [gpus=N] [gpu_mem_gb=M] [key=value ...]  will each stage fit?
                                              peak memory per device, and the knob if not
  vibethinker ablate STUDY.yaml [out=DIR] [--jobs N] [key=value ...]  matched-budget ablation
                                              (docs/ABLATE.md): arms x seeds, table and plot
  vibethinker claims [CLAIMS.yaml] [out=FILE]                         the paper's claims table
                                              from the finished studies (studies/claims.yaml)
  vibethinker <command> --help                                        help (keys, defaults, meaning)

examples:
  vibethinker run recipes/tiny.yaml --dry-run     # the plan, and why each stage (re-)runs
  vibethinker data tiny out=runs/w seed=1
  vibethinker eval recipes/tiny.yaml n=4          # -> runs/tiny/single/eval_final
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import re
import sys
from pathlib import Path
from typing import Any

from vibethinker import rundir, threads
from vibethinker import stages as stage_registry
from vibethinker.config import (
    ConfigError,
    close_matches,
    config_help,
    make_config,
    parse_overrides,
)
from vibethinker.data.io import DataError
from vibethinker.log import LOGGER_NAME, get_logger, setup_logging
from vibethinker.malloc import keep_freed_memory

log = get_logger("cli")
COMMANDS = ("run", "status", "stages", "ablate", "plan", "claims", "help")
GLOBAL_FLAGS = ("--quiet", "--help", "-h")
COMMAND_FLAGS = {
    "run": ("--dry-run",),
    "status": ("--no-report",),
    "ablate": ("--dry-run", "--inprocess", "--table"),
}
RUN_USAGE = """usage: vibethinker run RECIPE.yaml [key=value ...] [--dry-run] [--quiet]

Run the recipe's stages in order into its run_dir; finished stages with an unchanged config are
skipped, so running it again resumes. Overrides: run_dir=..., model=..., <stage name>.<key>=...

  --dry-run   print the plan (skip / run / resume, and why) and run nothing
  --quiet     no progress bars; only warnings on the console (run.log keeps everything)"""
STATUS_USAGE = """usage: vibethinker status RUN_DIR|RECIPE.yaml [--no-report]

Print the run's manifest as a table (status, seconds, outputs per stage, and any single-stage
runs under RUN_DIR/single) and rebuild RUN_DIR/report.md from what is on disk.

  --no-report   only print the table"""


def _split_flags(argv: list[str], command: str) -> tuple[list[str], set[str]]:
    """Separate flags from arguments; an unknown flag is an error (a typo must not start a run)."""
    known = (*GLOBAL_FLAGS, *COMMAND_FLAGS.get(command, ()))
    args, flags = [], set()
    for a in argv:
        if not a.startswith("-") or re.fullmatch(r"-\d.*", a):
            args.append(a)
        elif a in known:
            flags.add("--help" if a == "-h" else a)
        else:
            hint = close_matches(a, known)
            if a.startswith("--") and "=" in a:
                hint = hint or f" (config keys are written key=value: {a[2:]})"
            where = f"vibethinker {command} --help" if command else "vibethinker --help"
            raise ConfigError(f"unknown option {a}{hint}; see `{where}`")
    return args, flags


def _usage(out: Any = None) -> None:
    out = out or sys.stdout
    print(__doc__.split("\n", 2)[2].rstrip(), file=out)
    print("\nstages: " + ", ".join(sorted(stage_registry.load_all())), file=out)


def cmd_run(args: list[str], flags: set[str]) -> int:
    from vibethinker.recipe import execute, explain, load_recipe

    if "--help" in flags:
        print(RUN_USAGE)
        return 0
    if not args:
        print(RUN_USAGE, file=sys.stderr)
        return 2
    recipe = load_recipe(args[0], parse_overrides(args[1:]))
    if "--dry-run" in flags:
        print(f"recipe {recipe.path} -> run dir {recipe.run_dir} (model: {recipe.model})")
        for i, (ps, action, why) in enumerate(explain(recipe), 1):
            keys = " ".join(f"{k}={v}" for k, v in vars(ps.config).items())
            print(f"{i:2d}. [{action:6s}] {ps.name} ({ps.stage}): {why}\n      {keys}")
        return 0
    if not execute(recipe, quiet="--quiet" in flags):  # torchrun: rank 0 alone reports
        return 0
    from vibethinker.report import write_report

    path = write_report(recipe.run_dir)
    print(f"run complete: {recipe.run_dir} (report: {path})")
    return 0


def cmd_status(args: list[str], flags: set[str]) -> int:
    from vibethinker.report import status_table, write_report

    if "--help" in flags:
        print(STATUS_USAGE)
        return 0
    if len(args) != 1:
        print(STATUS_USAGE, file=sys.stderr)
        return 2
    run_dir = args[0]
    if run_dir.endswith((".yaml", ".yml")) and Path(run_dir).is_file():
        from vibethinker.recipe import load_recipe

        run_dir = load_recipe(run_dir).run_dir
    if not (Path(run_dir) / "manifest.json").exists():
        raise FileNotFoundError(f"{run_dir}: no manifest.json (not a run directory, or not run)")
    print(status_table(run_dir))
    if "--no-report" not in flags:
        print(f"\nreport: {write_report(run_dir)}")
    return 0


def cmd_ablate(args: list[str], flags: set[str]) -> int:
    from vibethinker import ablate
    from vibethinker.ablate.study import describe, load_study
    from vibethinker.ablate.table import collect, write_outputs

    if "--help" in flags or not args:
        print(ablate.USAGE, file=sys.stdout if args or "--help" in flags else sys.stderr)
        return 0 if "--help" in flags else 2
    cli = parse_overrides(args[1:])
    jobs = int(cli.pop("jobs", 0) or 0)
    study = load_study(args[0], cli)
    if "--dry-run" in flags:
        print(describe(study))
        return 0
    if "--table" in flags:  # the table and plot of what has finished; nothing runs
        paths = write_outputs(study, {**collect(study), "failed": []})
        print(f"ablation: {paths['table']} ({paths['plot']})")
        return 0
    spawn = ablate.spawn_inprocess if "--inprocess" in flags else None
    res = ablate.run_study(study, cli, jobs, spawn=spawn)
    print(f"ablation: {study.out}/ablation.md ({study.out}/ablation.png)")
    return 1 if res["failed"] else 0


CLAIMS_USAGE = """usage: vibethinker claims [CLAIMS.yaml] [out=FILE] [base_run=DIR]

Write the claims table (one row per claim of the paper: the paper's number and setting, our
paired measurement with its interval, a verdict, the command that reproduces it and its time)
from the finished `vibethinker ablate` studies the claims file names, to FILE (default
runs/ablate/claims.md, and the rows as .json beside it), and print it. Runs no study.
CLAIMS.yaml defaults to studies/claims.yaml; base_run= is passed to every study (as
`vibethinker ablate STUDY base_run=DIR` takes it)."""


def cmd_claims(args: list[str], flags: set[str]) -> int:
    from vibethinker.claims import write_claims

    if "--help" in flags:
        print(CLAIMS_USAGE)
        return 0
    values = parse_overrides([a for a in args if "=" in a])
    files = [a for a in args if "=" not in a]
    if len(files) > 1:
        print(CLAIMS_USAGE, file=sys.stderr)
        return 2
    out = values.pop("out", "runs/ablate/claims.md")
    unknown = set(values) - {"base_run"}
    if unknown:
        raise ConfigError(f"claims: unknown key(s) {sorted(unknown)}; known: out, base_run")
    print(write_claims(files[0] if files else "studies/claims.yaml", out, values), end="")
    print(f"\nclaims table: {out}")
    return 0


def _stage_help(name: str) -> str:
    spec = stage_registry.get(name)
    pos = " ".join(spec.positional).upper()
    return (
        f"usage: vibethinker {name} {pos + ' ' if pos else ''}[key=value ...]\n"
        f"       vibethinker {name} RECIPE.yaml [key=value ...]   (config from the recipe's "
        f"{name} entry; outputs to <run_dir>/single/<name>)\n\n  {spec.help}\n\n"
        f"keys:\n{config_help(spec.config_cls)}"
    )


def _from_recipe(cmd: str, recipe_path: str, values: dict[str, str]) -> tuple[str, dict]:
    """The config values of the recipe entry `cmd` (a stage name, or a stage type with one
    entry), with `out` moved to <run_dir>/single/<name> unless given: a single-stage run never
    writes into a folder the recipe's manifest describes."""
    from vibethinker.recipe import load_recipe, single_out

    recipe = load_recipe(recipe_path)
    by_name = [s for s in recipe.stages if s.name == cmd]
    matches = by_name or [s for s in recipe.stages if s.stage == cmd]
    if not matches:
        have = ", ".join(f"{s.name} ({s.stage})" for s in recipe.stages)
        hint = close_matches(cmd, [s.name for s in recipe.stages])
        raise ConfigError(
            f"recipe {recipe_path} has no stage named or of type {cmd!r}{hint}; it has {have}"
        )
    if len(matches) > 1:
        names = ", ".join(s.name for s in matches)
        raise ConfigError(
            f"recipe {recipe_path} has {len(matches)} {cmd!r} stages ({names}); name one, e.g. "
            f"`vibethinker {matches[0].name} {recipe_path} ...`"
        )
    ps = matches[0]
    base = dict(vars(ps.config))
    base["out"] = single_out(recipe, ps.name, values.get("out"))
    return ps.stage, {**base, **values}


def cmd_stage(cmd: str, args: list[str], flags: set[str]) -> int:
    recipe_path = next((a for a in args if a.endswith((".yaml", ".yml")) and "=" not in a), None)
    if "--help" in flags:
        name = cmd
        if recipe_path and cmd not in stage_registry.load_all():
            name, _ = _from_recipe(cmd, recipe_path, {})
        print(_stage_help(name))
        return 0
    if recipe_path:
        args = [a for a in args if a != recipe_path]
    positional = [a for a in args if "=" not in a]
    overrides = parse_overrides([a for a in args if "=" in a])
    if recipe_path:
        name, values = _from_recipe(cmd, recipe_path, overrides)
    else:
        name, values = cmd, dict(overrides)
        if name not in stage_registry.load_all():
            known = [*COMMANDS, *sorted(stage_registry.STAGES)]
            raise ConfigError(
                f"unknown command or stage {name!r}{close_matches(name, known)}; commands: "
                f"{', '.join(COMMANDS)}; stages: {', '.join(sorted(stage_registry.STAGES))}"
            )
    spec = stage_registry.get(name)
    if len(positional) > len(spec.positional):
        raise ConfigError(
            f"{name}: unexpected argument(s) {positional[len(spec.positional) :]}; "
            f"use key=value (see `vibethinker {name} --help`)"
        )
    values.update(zip(spec.positional, positional))
    cfg = make_config(spec.config_cls, values, name)
    with _output_lock(cfg, name):
        outputs = _run_one(spec, cfg, name, recipe_path)
    for k, v in outputs.items():
        print(f"{k}: {v}")
    return 0


def _output_lock(cfg: Any, name: str) -> Any:
    """The stage's output locked while it runs (rank 0 under torchrun): a second process with
    the same out= is refused."""
    out = getattr(cfg, "out", "")
    if not out or os.environ.get("RANK", "0") != "0":
        return contextlib.nullcontext()
    return rundir.output_lock(out, f"`vibethinker {name}`")


def _run_one(spec: Any, cfg: Any, name: str, recipe_path: str | None) -> dict[str, Any]:
    """Run the stage; a recipe's stage alone keeps its record (`single_run.json`)."""
    if not recipe_path:
        return spec.fn(cfg) or {}
    from vibethinker.recipe import finish_single, prepare_single

    prepare_single(cfg, name)
    print(f"{name}: writing to {cfg.out} (the recipe's run and manifest are untouched)")
    try:
        outputs = spec.fn(cfg) or {}
    except BaseException as e:
        finish_single(cfg, "interrupted" if isinstance(e, KeyboardInterrupt) else "failed")
        raise
    finish_single(cfg)
    return outputs


_HUB_ERRORS = ("LocalEntryNotFoundError", "OfflineModeIsEnabled", "RepositoryNotFoundError")
_HUB_TEXT = (
    "offline mode",
    "couldn't connect to",
    "not a valid model identifier",
    "cannot find the requested files",
    "local_files_only",
)


def hub_hint(e: BaseException, values: dict[str, Any] | None = None) -> str | None:
    """One line for a model that is neither a local folder nor in the hub cache (offline), with
    the download command; None when `e` is something else."""
    chain, cur = [], e
    while cur is not None and len(chain) < 20:
        chain.append(cur)
        cur = cur.__cause__ or cur.__context__
    text = " ".join(str(c) for c in chain).lower()
    if not any(type(c).__name__ in _HUB_ERRORS for c in chain) and not any(
        t in text for t in _HUB_TEXT
    ):
        return None
    ids = [v for v in (values or {}).values() if isinstance(v, str)]  # the config's own ids first
    ids += [
        i.rstrip(".")
        for i in re.findall(r"([A-Za-z0-9][\w.-]*/[\w.-]+)", " ".join(map(str, chain)))
    ]
    repo = next(
        (i for i in ids if re.fullmatch(r"[\w.-]+/[\w.-]+", i) and not Path(i).exists()), None
    )
    what = f"model {repo!r}" if repo else "the model"
    cmd = f"hf download {repo} --local-dir DIR" if repo else "hf download ORG/NAME --local-dir DIR"
    return (
        f"{what} is not a local folder and is not in the Hugging Face cache, and the hub is "
        f"unreachable or offline: download it first (`{cmd}`) and pass model=DIR"
    )


def _command_flags_as_keys(argv: list[str]) -> tuple[list[str], str]:
    """(argv with a command's value flags spelled as keys, the command): eval's `--quick` ->
    quick=true, ablate's `--jobs N` / `--jobs=N` -> jobs=N."""
    argv = list(argv)
    command = next((a for a in argv if not a.startswith("-")), "")
    if command == "eval":  # `--quick`: the eval stage's cheap profile (stages/eval.py QUICK)
        argv = ["quick=true" if a == "--quick" else a for a in argv]
    if command == "ablate":
        argv = [a.replace("--jobs=", "jobs=", 1) for a in argv]
        while "--jobs" in argv[:-1]:
            i = argv.index("--jobs")
            argv[i : i + 2] = [f"jobs={argv[i + 1]}"]
    return argv, command


def _dispatch(args: list[str], flags: set[str]) -> int:
    """Run the command `args[0]` (a stage name when it is none of COMMANDS)."""
    if args[0] == "run":
        return cmd_run(args[1:], flags)
    if args[0] == "status":
        return cmd_status(args[1:], flags)
    if args[0] == "ablate":
        return cmd_ablate(args[1:], flags)
    if args[0] == "claims":
        return cmd_claims(args[1:], flags)
    if args[0] == "plan":
        rest = args[1:]
        values = parse_overrides([a for a in rest if "=" in a])
        from vibethinker.plan import cmd_plan  # imports torch: after threads.configure()

        return cmd_plan([a for a in rest if "=" not in a], values, "--help" in flags)
    if args[0] == "stages":
        for n, s in sorted(stage_registry.load_all().items()):
            print(f"{n:14s} {s.help}")
        return 0
    return cmd_stage(args[0], args[1:], flags)


def main(argv: list[str] | None = None) -> int:
    argv, command = _command_flags_as_keys(sys.argv[1:] if argv is None else argv)
    try:
        args, flags = _split_flags(argv, command)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    setup_logging(quiet="--quiet" in flags)
    keep_freed_memory()  # glibc: no page-fault churn on CPU tensors (vibethinker/malloc.py)
    threads.configure()  # OpenMP threads sleep while they wait (vibethinker/threads.py)
    if not args or args[0] == "help":
        if "--help" in flags or args[:1] == ["help"]:
            _usage()
            return 0
        _usage(sys.stderr)  # a bare `vibethinker` is a mistake, not a request
        return 2
    try:
        return _dispatch(args, flags)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as e:
        # Bad input, not a bug: the message is the whole story (the traceback goes to run.log).
        return _fail(f"error: {hub_hint(e) or e}", 2)
    except OSError as e:
        if e.errno in (errno.ENOSPC, errno.EDQUOT):
            return _fail(f"error: the disk is full ({e}); {_AFTER_DISK_FULL}", 1)
        hint = hub_hint(e)
        if hint is None:
            _to_log_file("failed")
            raise
        return _fail(f"error: {hint}", 2)
    except KeyboardInterrupt as e:
        return _fail(f"interrupted: {interrupted_note(e)}", 130)
    except Exception:
        _to_log_file("failed")  # a bug: the traceback on the console, and in run.log too
        raise


_AFTER_DISK_FULL = (
    "free some space and run the same command again: a stage resumes from its last complete "
    "checkpoint, state files are written whole or not at all"
)


def interrupted_note(e: BaseException) -> str:
    """What an interruption kept: the checkpoint a training loop saved (it says so on the
    exception, `train/interrupt.py`), else nothing of the step that was running."""
    saved = getattr(e, "saved", None)
    if saved:
        return f"a checkpoint was saved ({saved}); run the same command again to resume"
    return (
        "nothing of the step that was running was saved (it was loading, filtering or "
        "evaluating, not training); earlier checkpoints and finished stages are kept, and the "
        "same command again starts that step over"
    )


def _fail(message: str, code: int) -> int:
    """Print `message` on stderr and put it, with its traceback, in the run's log file."""
    print(message, file=sys.stderr)
    _to_log_file(message)
    return code


def _to_log_file(message: str) -> None:
    """`message` and the exception being handled, in the log FILE only (run.log; the console
    already has them)."""
    root = logging.getLogger(LOGGER_NAME)
    files = [h for h in root.handlers if isinstance(h, logging.FileHandler)]
    if files:
        rec = root.makeRecord(root.name, logging.ERROR, __file__, 0, message, (), sys.exc_info())
        for h in files:
            h.handle(rec)


if __name__ == "__main__":
    sys.exit(main())
