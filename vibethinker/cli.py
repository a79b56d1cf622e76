"""Command line: `vibethinker run RECIPE [key=value ...]` and `vibethinker <stage> [key=value ...]`.

vibethinker run recipes/tiny.yaml                 # run (or resume) a whole recipe
vibethinker run recipes/tiny.yaml --dry-run       # print the plan, run nothing
vibethinker data tiny out=runs/w seed=1           # one stage alone, its config from key=value
vibethinker eval recipes/tiny.yaml n=4            # one stage, config taken from a recipe entry
vibethinker stages                                # list the stages
vibethinker <stage> --help                        # a stage's keys, defaults and meanings
"""

from __future__ import annotations

import sys

from vibethinker import stages as stage_registry
from vibethinker.config import ConfigError, config_help, make_config, parse_overrides
from vibethinker.data.io import DataError
from vibethinker.log import get_logger, setup_logging

log = get_logger("cli")


def _split_flags(argv: list[str]) -> tuple[list[str], set[str]]:
    flags = {a for a in argv if a.startswith("--")}
    return [a for a in argv if not a.startswith("--")], flags


def cmd_run(args: list[str], flags: set[str]) -> int:
    from vibethinker.recipe import execute, load_recipe, plan

    if not args:
        print("usage: vibethinker run RECIPE.yaml [key=value ...] [--dry-run] [--quiet]")
        return 2
    recipe = load_recipe(args[0], parse_overrides(args[1:]))
    if "--dry-run" in flags:
        print(f"recipe {recipe.path} -> run dir {recipe.run_dir} (model: {recipe.model})")
        for i, (ps, action) in enumerate(plan(recipe), 1):
            keys = " ".join(f"{k}={v}" for k, v in vars(ps.config).items())
            print(f"{i:2d}. [{action:6s}] {ps.name} ({ps.stage}): {keys}")
        return 0
    execute(recipe, quiet="--quiet" in flags)
    from vibethinker.report import write_report

    path = write_report(recipe.run_dir)
    print(f"run complete: {recipe.run_dir} (report: {path})")
    return 0


def cmd_stage(name: str, args: list[str], flags: set[str]) -> int:
    spec = stage_registry.get(name)
    if "--help" in flags or "-h" in args:
        print(f"vibethinker {name} {' '.join(spec.positional).upper()} [key=value ...]")
        print(f"  {spec.help}\n\nkeys:\n{config_help(spec.config_cls)}")
        return 0
    values: dict = {}
    recipe_path = next((a for a in args if a.endswith((".yaml", ".yml")) and "=" not in a), None)
    if recipe_path:
        from vibethinker.recipe import load_recipe

        matches = [s for s in load_recipe(recipe_path).stages if s.stage == name]
        if not matches:
            raise ConfigError(f"recipe {recipe_path} has no {name!r} stage")
        values = dict(vars(matches[0].config))
        args = [a for a in args if a != recipe_path]
    positional = [a for a in args if "=" not in a]
    if len(positional) > len(spec.positional):
        raise ConfigError(
            f"{name}: unexpected argument(s) {positional[len(spec.positional) :]}; "
            f"use key=value (see `vibethinker {name} --help`)"
        )
    values.update(zip(spec.positional, positional))
    values.update(parse_overrides([a for a in args if "=" in a]))
    cfg = make_config(spec.config_cls, values, name)
    outputs = spec.fn(cfg) or {}
    for k, v in outputs.items():
        print(f"{k}: {v}")
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args, flags = _split_flags(argv)
    setup_logging(quiet="--quiet" in flags)
    if not args or args[0] in ("help", "-h") or (not args and "--help" in flags):
        print(__doc__)
        print("stages: " + ", ".join(sorted(stage_registry.load_all())))
        return 0
    try:
        if args[0] == "run":
            return cmd_run(args[1:], flags)
        if args[0] == "stages":
            for n, s in sorted(stage_registry.load_all().items()):
                print(f"{n:14s} {s.help}")
            return 0
        return cmd_stage(args[0], args[1:], flags)
    except (ConfigError, DataError, FileNotFoundError, ValueError) as e:
        # Bad input, not a bug: the message is the whole story (the traceback goes to the log).
        log.debug("error", exc_info=True)
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; run the same command again to resume", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
