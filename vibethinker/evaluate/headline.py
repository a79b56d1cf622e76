"""The report's headline: held-out accuracy per domain after each stage, with intervals, what
each stage changed beyond noise, and where the paper's story does not hold. Pure functions over
per-problem scores (a problem's score: its share of correct samples among n, avg@n); the
`headline` stage (stages/headline.py) samples the models and calls `build_headline`;
reports/headline.py writes the result out (headline.md, headline.png).

Every row is evaluated on the same problems with the same sampling protocol and seed, so two
rows are compared PAIRED over problems (`stats.paired_diff_ci`): problem difficulty cancels out
of the difference. A cell's interval is the percentile bootstrap over its problems
(`stats.bootstrap_ci`), which covers problem-to-problem spread and, through each problem's
avg@n, sampling noise.

The story the paper tells, checked here (the issue's wording): the final model beats the first
(SFT stage 1) on every domain, and every specialist (a row with a `domain`) beats its starting
point (`start`, default the row before) on its own domain. "Beats" means a positive paired
difference whose interval excludes 0; anything else is listed under "Where the story does not
hold", with the figures, whichever way it fails (worse beyond noise, or no difference resolved).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from vibethinker.config import ConfigError
from vibethinker.evaluate.stats import beyond_noise, bootstrap_ci, paired_diff_ci
from vibethinker.types import DOMAINS, TRAIN_ONLY_DOMAINS, Problem

COLUMNS = (*DOMAINS, "all")
ROW_KEYS = ("name", "model")
ROW_OPTIONAL = ("domain", "start")


@dataclass(frozen=True)
class Row:
    """One headline row: the model after a stage."""

    name: str  # the stage's name (sft1, rl_math, ...)
    model: str  # its checkpoint folder
    domain: str = ""  # a specialist's own domain; "all": every domain; "": no specialist check
    start: str = ""  # the row a specialist is checked against; "": the row before it


def parse_rows(value: Any) -> list[Row]:
    """`models` as a list of {name, model[, domain, start]} or a mapping name -> model (or
    name -> {model[, domain, start]}), in pipeline order. Errors name the entry."""
    if isinstance(value, Mapping):
        items = [
            {"name": k, **(v if isinstance(v, Mapping) else {"model": v})} for k, v in value.items()
        ]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(
            "headline: `models` must be a list of {name, model[, domain, start]} "
            f"or a mapping name -> model, got {value!r}"
        )
    rows: list[Row] = []
    for i, it in enumerate(items):
        where = f"headline: models[{i}] = {it!r}"
        if not isinstance(it, Mapping):
            raise ConfigError(f"{where}: expected a mapping {{name, model[, domain, start]}}")
        missing = [k for k in ROW_KEYS if not it.get(k)]
        extra = sorted(set(it) - set(ROW_KEYS) - set(ROW_OPTIONAL))
        if missing or extra:
            raise ConfigError(
                f"{where}: needs the keys {ROW_KEYS}, optionally {ROW_OPTIONAL} "
                f"(missing {missing}, unknown {extra})"
            )
        row = Row(
            str(it["name"]),
            str(it["model"]),
            str(it.get("domain") or ""),
            str(it.get("start") or ""),
        )
        names = [r.name for r in rows]
        if row.name in names:
            raise ConfigError(f"{where}: the name {row.name!r} is used twice")
        if row.domain and row.domain not in COLUMNS:
            raise ConfigError(f"{where}: domain must be one of {COLUMNS}, got {row.domain!r}")
        if row.start and row.start not in names:
            raise ConfigError(f"{where}: start {row.start!r} must name an earlier row {names}")
        rows.append(row)
    if not rows:
        raise ConfigError("headline: `models` is empty (the model after each stage, in order)")
    return rows


def pick_problems(problems: Sequence[Problem], limit_per_domain: int = 0) -> list[Problem]:
    """The first `limit_per_domain` problems of each domain in file order (0 = all);
    training-only domains are dropped. Every row is evaluated on exactly these."""
    counts: dict[str, int] = {}
    out = []
    for p in problems:
        if p.domain in TRAIN_ONLY_DOMAINS:
            continue
        if limit_per_domain and counts.get(p.domain, 0) >= limit_per_domain:
            continue
        counts[p.domain] = counts.get(p.domain, 0) + 1
        out.append(p)
    return out


def columns_of(domains: Sequence[str]) -> list[str]:
    """The table's columns present in the problems: domains in DOMAINS order, then all."""
    return [c for c in DOMAINS if c in set(domains)] + ["all"]


def column_values(scores: Sequence[float], domains: Sequence[str], col: str) -> list[float]:
    return [s for s, d in zip(scores, domains) if col == "all" or d == col]


def cell_stats(
    scores: Sequence[float],
    domains: Sequence[str],
    n: int,
    conf: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, float]]:
    """Per column: mean per-problem score with its bootstrap interval, problems, samples."""
    cells = {}
    for col in columns_of(domains):
        vals = column_values(scores, domains, col)
        mean, lo, hi = bootstrap_ci(vals, conf, n_boot, seed)
        cells[col] = {
            "mean": mean,
            "lo": lo,
            "hi": hi,
            "n_problems": len(vals),
            "n_samples": len(vals) * n,
        }
    return cells


def diff_stats(
    a: Sequence[float],
    b: Sequence[float],
    domains: Sequence[str],
    conf: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, dict[str, Any]]:
    """Per column: b - a paired over the same problems, its interval, and beyond noise."""
    out = {}
    for col in columns_of(domains):
        d, lo, hi = paired_diff_ci(
            column_values(a, domains, col), column_values(b, domains, col), conf, n_boot, seed
        )
        out[col] = {"diff": d, "lo": lo, "hi": hi, "beyond": beyond_noise(lo, hi)}
    return out


def change_text(col: str, d: Mapping[str, Any]) -> str:
    """'math +0.080 [+0.030, +0.130]'."""
    return f"{col} {d['diff']:+.3f} [{d['lo']:+.3f}, {d['hi']:+.3f}]"


def stage_line(
    name: str, ref: str, diffs: Mapping[str, Mapping[str, Any]], same: bool = False
) -> str:
    """One line: what `name` changed against `ref` beyond noise, e.g.
    'rl_math (vs sft2): math +0.080 [+0.030, +0.130] (beyond noise); others within noise'."""
    head = f"{name} (vs {ref})"
    if same:
        return f"{head}: the same checkpoint as {ref} (evaluated once): no change"
    beyond = [c for c, d in diffs.items() if d["beyond"]]
    if not beyond:
        return (
            f"{head}: no change beyond noise ("
            + "; ".join(change_text(c, d) for c, d in diffs.items())
            + ")"
        )
    rest = [c for c in diffs if c not in beyond]
    text = "; ".join(change_text(c, diffs[c]) + " (beyond noise)" for c in beyond)
    return f"{head}: {text}" + (f"; others within noise ({', '.join(rest)})" if rest else "")


def check_claim(
    subject: str, ref: str, col: str, d: Mapping[str, Any], same: bool = False
) -> tuple[bool, str]:
    """Whether `subject` beats `ref` on `col` beyond noise, and a plain sentence saying so."""
    if same:
        return False, (
            f"{subject} is the same checkpoint as {ref} (the stage changed nothing), "
            f"so it does not beat it on {col}"
        )
    if d["beyond"] and d["diff"] > 0:
        return True, f"{subject} beats {ref} on {col}: {change_text(col, d)}"
    if d["beyond"]:
        return False, f"{subject} is WORSE than {ref} on {col}: {change_text(col, d)}, beyond noise"
    return False, (f"{subject} does not beat {ref} on {col} beyond noise: {change_text(col, d)}")


def _row_ref(rows: Sequence[Row], i: int) -> Row:
    """A row's starting point: its `start`, else the row before it."""
    by_name = {r.name: r for r in rows}
    return by_name[rows[i].start] if rows[i].start else rows[i - 1]


def _claim(kind: str, row: str, vs: str, col: str, diff: dict, same: bool) -> dict[str, Any]:
    """One story check (`check_claim`) as a record: kind, rows, column, whether it holds."""
    ok, text = check_claim(row, vs, col, diff, same)
    return {"kind": kind, "row": row, "vs": vs, "column": col, "holds": ok, "text": text}


def _specialist_checks(
    rows: Sequence[Row], domains: Sequence[str], compare: Callable[[Row, Row], dict[str, Any]]
) -> list[dict[str, Any]]:
    """The checks of the rows that name a domain: each against its reference row, on its
    domain's column (every domain column for `all`)."""
    out = []
    for i in range(1, len(rows)):
        r = rows[i]
        if not r.domain:
            continue
        ref = _row_ref(rows, i)
        cmp = compare(ref, r)
        cols = columns_of(domains)[:-1] if r.domain == "all" else [r.domain]
        for col in cols:
            if col in cmp["diffs"]:
                out.append(
                    _claim("specialist", r.name, ref.name, col, cmp["diffs"][col], cmp["same"])
                )
    return out


def _check_lengths(
    rows: Sequence[Row], scores: Mapping[str, Sequence[float]], domains: Sequence[str]
) -> None:
    """Every row has one score per problem."""
    for r in rows:
        if len(scores[r.name]) != len(domains):
            raise ValueError(
                f"headline: {r.name} has {len(scores[r.name])} scores for {len(domains)} problems"
            )


def build_headline(
    rows: Sequence[Row],
    scores: Mapping[str, Sequence[float]],
    domains: Sequence[str],
    n: int,
    same_as: Mapping[str, str] | None = None,
    conf: float = 0.95,
    n_boot: int = 2000,
    seed: int = 0,
) -> dict[str, Any]:
    """Cells, stage lines and story checks from per-problem scores.

    `scores[row name]` holds one score per problem (aligned with `domains`); `same_as[name]`
    names the earlier row a row shares its checkpoint with (evaluated once)."""
    same_as = dict(same_as or {})
    _check_lengths(rows, scores, domains)
    kw = {"conf": conf, "n_boot": n_boot, "seed": seed}

    def same(a: Row, b: Row) -> bool:
        return same_as.get(a.name, a.name) == same_as.get(b.name, b.name)

    def compare(a: Row, b: Row) -> dict[str, Any]:
        diffs = diff_stats(scores[a.name], scores[b.name], domains, **kw)
        return {
            "name": b.name,
            "vs": a.name,
            "same": same(a, b),
            "diffs": diffs,
            "text": stage_line(b.name, a.name, diffs, same(a, b)),
        }

    lines = [compare(rows[i - 1], rows[i]) for i in range(1, len(rows))]
    if len(rows) > 2:
        final = compare(rows[0], rows[-1])
        lines.append({**final, "final": True, "text": "final: " + final["text"]})
    checks = []
    if len(rows) > 1:
        final = lines[-1]
        for col in columns_of(domains)[:-1]:
            diff = final["diffs"][col]
            checks.append(_claim("final", rows[-1].name, rows[0].name, col, diff, final["same"]))
    checks += _specialist_checks(rows, domains, compare)
    return {
        "columns": columns_of(domains),
        "conf": conf,
        "n": n,
        "rows": [
            {
                **asdict(r),
                "same_as": same_as.get(r.name, ""),
                "cells": cell_stats(scores[r.name], domains, n, **kw),
            }
            for r in rows
        ],
        "lines": lines,
        "checks": checks,
        "not_holding": [c["text"] for c in checks if not c["holds"]],
    }
