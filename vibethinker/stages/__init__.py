"""The pipeline stages: one file per stage, each a flat config dataclass plus `run(config)`; a
large stage keeps its parts beside it (`distill_candidates.py`: `<stage>_<part>.py`).

A stage registers itself with `@register("name", ConfigClass)`. `run(config) -> dict[str, str]`
returns its outputs (name -> path), which the recipe runner records in the manifest. Every config
has an `out` field (the stage's output folder); in a recipe it defaults to `<run_dir>/<name>`.

`resumable=True` means the stage resumes from its own checkpoints inside `out` after a crash, so
the runner keeps a partial `out`; other stages get a clean `out` when they are re-run.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from vibethinker.config import ConfigError, close_matches


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


# Every stage of the package, name -> module (in recipe order): reading this dict tells which
# file holds a stage; importing one stage does not import the others (`get`).
MODULES: dict[str, str] = {
    "construct": "construct",
    "data": "data",
    "model": "model",
    "sft": "sft",
    "probe_merge": "probe_merge",
    "rl": "rl",
    "distill": "distill",
    "reward_model": "reward_model",
    "eval": "eval",
    "clr": "clr",
    "headline": "headline",
    "verify": "verify",
}


def _user_modules() -> list[str]:
    """User stages: VIBETHINKER_STAGE_MODULES=pkg.mod1,pkg.mod2 (each calls `register`)."""
    return [m.strip() for m in os.environ.get("VIBETHINKER_STAGE_MODULES", "").split(",") if m]


def names() -> list[str]:
    """Every stage name, without importing a stage module (user stages are imported)."""
    for mod in _user_modules():
        importlib.import_module(mod)
    return sorted({*MODULES, *STAGES})


def load_all() -> dict[str, StageSpec]:
    """Import every stage module (each registers its stages)."""
    for mod in dict.fromkeys(MODULES.values()):
        importlib.import_module(f"{__name__}.{mod}")
    for mod in _user_modules():
        importlib.import_module(mod)
    return STAGES


def get(name: str) -> StageSpec:
    if name in MODULES:
        importlib.import_module(f"{__name__}.{MODULES[name]}")
    else:
        for mod in _user_modules():
            importlib.import_module(mod)
    if name not in STAGES:
        known = sorted(STAGES)
        raise ConfigError(
            f"unknown stage {name!r}{close_matches(name, known)}; known stages: {', '.join(known)}"
        )
    return STAGES[name]
