"""The pipeline stages: one file per stage, each a flat config dataclass plus `run(config)`.

A stage registers itself with `@register("name", ConfigClass)`. `run(config) -> dict[str, str]`
returns its outputs (name -> path), which the recipe runner records in the manifest. Every config
has an `out` field (the stage's output folder); in a recipe it defaults to `<run_dir>/<name>`.

`resumable=True` means the stage resumes from its own checkpoints inside `out` after a crash, so
the runner keeps a partial `out`; other stages get a clean `out` when they are re-run.
"""

from __future__ import annotations

import importlib
import os
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vibethinker.config import ConfigError


@dataclass
class StageSpec:
    name: str
    config_cls: type
    fn: Callable[[Any], dict[str, str]]
    resumable: bool = False
    positional: tuple[str, ...] = ()  # CLI positional args map to these fields, in order
    help: str = ""


STAGES: dict[str, StageSpec] = {}


def register(
    name: str, config_cls: type, *, resumable: bool = False, positional: tuple[str, ...] = ()
) -> Callable:
    def deco(fn: Callable[[Any], dict[str, str]]) -> Callable:
        doc = (fn.__doc__ or "").strip().splitlines()
        STAGES[name] = StageSpec(name, config_cls, fn, resumable, positional, doc[0] if doc else "")
        return fn

    return deco


def load_all() -> dict[str, StageSpec]:
    """Import every module of this package (each registers its stages); lazily, on first use."""
    for mod in pkgutil.iter_modules(__path__):
        importlib.import_module(f"{__name__}.{mod.name}")
    # User stages: VIBETHINKER_STAGE_MODULES=pkg.mod1,pkg.mod2 (each calls `register`).
    for mod in filter(None, os.environ.get("VIBETHINKER_STAGE_MODULES", "").split(",")):
        importlib.import_module(mod.strip())
    return STAGES


def get(name: str) -> StageSpec:
    load_all()
    if name not in STAGES:
        from vibethinker.config import close_matches

        known = sorted(STAGES)
        raise ConfigError(
            f"unknown stage {name!r}{close_matches(name, known)}; known stages: {', '.join(known)}"
        )
    return STAGES[name]
