"""The run report: one markdown page (plus the stages' PNG plots) a person reads in two minutes.

Each stage may leave a `summary.md` in its output folder (its headline numbers) and PNG plots;
the report stitches them together in recipe order under a table of status and timings. A stage
summary's own headings are nested under the report's stage heading (`#` becomes `###`).
`vibethinker status RUN_DIR` prints the same table on the console and rebuilds the report.
When the run has a finished `headline` stage, its table (held-out accuracy per domain after each
stage, with intervals), plot, stage lines and "where the story does not hold" open the report.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from vibethinker import statefile
from vibethinker.log import get_logger
from vibethinker.reports.cost import cost_markdown, cost_text
from vibethinker.reports.headline import headline_markdown
from vibethinker.rundir import read_manifest, stage_dir

log = get_logger("report")
_HEADING = re.compile(r"^(#{1,6}) ", re.MULTILINE)


def nest_headings(md: str, levels: int = 2) -> str:
    """Demote every markdown heading by `levels` (at most to level 6), code blocks left alone."""
    parts = md.split("```")
    for i in range(0, len(parts), 2):  # even parts are outside fenced code
        parts[i] = _HEADING.sub(lambda m: "#" * min(6, len(m.group(1)) + levels) + " ", parts[i])
    return "```".join(parts)


_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]+)\)")


def relink_images(md: str, folder: str) -> tuple[str, set[str]]:
    """A stage summary's image links (relative to its own folder) made relative to the report
    (`folder`: the stage folder relative to the run folder), and the file names it shows."""
    shown: set[str] = set()

    def fix(m: re.Match) -> str:
        href = m.group(2)
        if "://" in href or href.startswith("/"):
            return m.group(0)
        shown.add(Path(href).name)
        return f"![{m.group(1)}]({Path(folder, href).as_posix()})"

    return _IMAGE.sub(fix, md), shown


def _load(run_dir: str) -> tuple[dict[str, Any], list[str]]:
    manifest = read_manifest(run_dir)  # damaged: an error naming it, never an empty report
    stages = manifest.get("stages", {})
    return manifest, manifest.get("order") or list(stages)


def _warnings(run_dir: str, rec: dict[str, Any]) -> list[str]:
    """Warnings a stage left in `warnings.json` in its folder (e.g. RL that learned nothing)."""
    out = stage_dir(run_dir, rec) or Path("/nonexistent")
    f = out / "warnings.json"
    try:
        return list(json.loads(f.read_text())) if f.exists() else []
    except (OSError, ValueError):
        return []


def single_runs(run_dir: str) -> list[tuple[str, dict[str, Any]]]:
    """Single-stage runs from a recipe (`vibethinker <stage> RECIPE`): <run_dir>/single/*."""
    found = []
    for marker in sorted(Path(run_dir).glob("single/*/single_run.json")):
        try:
            found.append((marker.parent.name, json.loads(marker.read_text())))
        except (OSError, ValueError):
            continue
    return found


def _locked(run_dir: str) -> bool:
    """Whether a live `vibethinker run` holds the run dir's lock."""
    import fcntl

    path = Path(run_dir) / ".lock"
    if not path.exists():
        return False
    with open(path) as f:
        try:
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(f, fcntl.LOCK_UN)
    return False


def status_table(run_dir: str) -> str:
    """The manifest as a plain-text table: stage, type, status, seconds, finished, outputs."""
    manifest, order = _load(run_dir)
    stages = manifest.get("stages", {})
    rows = [("stage", "type", "status", "seconds", "finished", "outputs")]
    notes = []
    for name in order:
        rec = stages.get(name, {"status": "pending"})
        outs = " ".join(f"{k}={v}" for k, v in (rec.get("outputs") or {}).items())
        fin = rec.get("finished") or rec.get("started") or ""
        rows.append(
            (
                name,
                rec.get("stage", ""),
                rec.get("status", "pending"),
                _seconds(rec),
                fin,
                outs[:80],
            )
        )
        if rec.get("error"):
            notes.append(f"{name}: {rec['error']}")
        notes += [f"{name}: WARNING {w}" for w in _warnings(run_dir, rec)]
    if any(r[2] == "running" for r in rows[1:]) and not _locked(run_dir):
        notes.append(
            "a stage marked running has no live process (crashed or killed): run the "
            "recipe again to resume it"
        )
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    lines = [f"run {run_dir}: recipe {manifest.get('recipe')}, model {manifest.get('model')}"]
    for r in rows:
        lines.append("  ".join(c.ljust(w) for c, w in zip(r[:5], widths)) + "  " + r[5])
    singles = single_runs(run_dir)
    if singles:
        lines.append("\nsingle-stage runs (not part of the recipe's manifest):")
        for name, rec in singles:
            lines.append(
                f"  single/{name}  {rec.get('stage')}  {rec.get('status')}  "
                f"{rec.get('finished') or rec.get('started', '')}"
            )
    cost = cost_text(order, stages)
    return "\n".join(lines + ([""] + notes if notes else []) + (["", cost] if cost else []))


def headline_section(run_dir: str) -> tuple[str, str | None]:
    """The markdown of the run's last finished `headline` stage (table, plot, stage lines, where
    the story does not hold) with links relative to the report, and that stage's name; ("", None)
    when the run has none."""
    manifest, order = _load(run_dir)
    for name in reversed(order):
        rec = manifest.get("stages", {}).get(name, {})
        out = stage_dir(run_dir, rec) or Path("/nonexistent")
        if rec.get("stage") != "headline" or rec.get("status") != "done":
            continue
        try:
            h = json.loads((out / "headline.json").read_text())
        except (OSError, ValueError):
            continue
        href = os.path.relpath(out / "headline.png", run_dir)
        return headline_markdown(h, plot_href=href, heading="##"), name
    return "", None


def write_report(run_dir: str) -> str:
    run = Path(run_dir)
    manifest, order = _load(run_dir)
    stages = manifest.get("stages", {})
    headline, headline_stage = headline_section(run_dir)
    lines = [
        f"# Run report: `{run_dir}`",
        "",
        *([headline.rstrip(), ""] if headline else []),
        f"Recipe: `{manifest.get('recipe')}`; model: `{manifest.get('model')}`.",
        "",
        "| stage | type | status | seconds | outputs |",
        "|---|---|---|---:|---|",
    ]
    for name in order:
        rec = stages.get(name, {"status": "pending"})
        outs = ", ".join(f"{k}: `{v}`" for k, v in (rec.get("outputs") or {}).items())
        secs = _seconds(rec)
        lines.append(f"| {name} | {rec.get('stage', '')} | {rec['status']} | {secs} | {outs} |")
    cost = cost_markdown(order, stages)
    lines += ["", cost] if cost else []
    warned = [(n, w) for n in order for w in _warnings(run_dir, stages.get(n, {}))]
    if warned:
        lines += ["", "## Warnings", ""] + [f"- **{n}**: {w}" for n, w in warned]
    report = run / "report.md"
    old_report = report.read_text(errors="replace") if report.exists() else ""
    missing = []  # finished stages whose folder, summary or a plot is not on disk
    for name in order:
        rec = stages.get(name, {})
        out = stage_dir(run_dir, rec)
        if rec.get("status") != "done":
            continue
        if out is None or not out.is_dir():
            missing.append(name)
            continue
        if not (out / "summary.md").exists() or not all(p.exists() for p in _shown(out)):
            missing.append(name)
        elif any(not (run / href).exists() for href in _images(_section(old_report, name))):
            missing.append(name)  # a plot the report showed is gone
        summary = out / "summary.md"
        pngs = [] if name == headline_stage else sorted(out.glob("*.png"))  # plot is on top
        if not summary.exists() and not pngs:
            continue
        lines += ["", f"## {name} ({rec.get('stage')})", ""]
        text = summary.read_text().strip() if summary.exists() else ""
        if text:
            text, shown = relink_images(text, os.path.relpath(out, run))
            lines.append(nest_headings(text))
            pngs = [p for p in pngs if p.name not in shown]  # each plot once
        for png in pngs:
            lines += ["", f"![{png.stem}]({os.path.relpath(png, run)})"]
    return _replace_report(run / "report.md", "\n".join(lines) + "\n", missing, old_report)


def _replace_report(path: Path, text: str, missing: list[str], old: str) -> str:
    """Write the report, unless the one on disk has a longer section for a finished stage whose
    folder, summary or a plot is now missing (`missing`: moved, deleted, or an older manifest
    read from elsewhere): the rebuild would hold less than what it replaces. Then the old
    report stays, the rebuild goes to report.rebuilt.md, and a warning names the stages.
    Returns the report that now stands."""
    lost = [n for n in missing if len(_section(text, n)) < len(_section(old, n))]
    if lost:
        keep = path.with_name("report.rebuilt.md")
        statefile.write_text(keep, text)
        log.warning(
            "%s kept: parts of finished stage(s) %s (their folder, summary.md or a plot) were "
            "not found, so a rebuild would lose them; the rebuild is in %s",
            path,
            ", ".join(lost),
            keep.name,
        )
        return str(path)
    statefile.write_text(path, text)  # atomic: a full disk leaves the old report whole
    return str(path)


def _shown(out: Path) -> list[Path]:
    """The files a stage's summary links to (its plots)."""
    summary = out / "summary.md"
    return (
        [out / h for h in _images(summary.read_text(errors="replace"))] if summary.exists() else []
    )


def _images(md: str) -> list[str]:
    """The relative image links of a piece of markdown."""
    return [h for h in (m.group(2) for m in _IMAGE.finditer(md)) if "://" not in h and h[:1] != "/"]


def _section(md: str, name: str) -> str:
    """The report's section of stage `name` ("" when it has none)."""
    start = md.find(f"\n## {name} (")
    if start < 0:
        return ""
    end = md.find("\n## ", start + 1)
    return md[start : end if end >= 0 else len(md)]


def _seconds(rec: dict[str, Any]) -> str:
    """A stage's seconds over all its attempts (a resumed stage adds up its sessions)."""
    secs = rec.get("seconds", rec.get("spent", ""))
    n = rec.get("attempts", 1)
    return f"{secs} ({n} attempts)" if secs != "" and n > 1 else str(secs)
