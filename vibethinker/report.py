"""The run report: one markdown page (plus the stages' PNG plots) a person reads in two minutes.

Each stage may leave a `summary.md` in its output folder (its headline numbers) and PNG plots;
the report stitches them together in recipe order under a table of status and timings.
"""

from __future__ import annotations

import json
import os
from pathlib import Path


def write_report(run_dir: str) -> str:
    run = Path(run_dir)
    manifest = json.loads((run / "manifest.json").read_text())
    stages = manifest.get("stages", {})
    order = manifest.get("order") or list(stages)
    lines = [
        f"# Run report: `{run_dir}`",
        "",
        f"Recipe: `{manifest.get('recipe')}`; model: `{manifest.get('model')}`.",
        "",
        "| stage | type | status | seconds | outputs |",
        "|---|---|---|---:|---|",
    ]
    for name in order:
        rec = stages.get(name, {"status": "pending"})
        outs = ", ".join(f"{k}: `{v}`" for k, v in (rec.get("outputs") or {}).items())
        secs = rec.get("seconds", "")
        lines.append(f"| {name} | {rec.get('stage', '')} | {rec['status']} | {secs} | {outs} |")
    for name in order:
        rec = stages.get(name, {})
        out = Path((rec.get("config") or {}).get("out", "")) if rec.get("config") else None
        if rec.get("status") != "done" or out is None or not out.is_dir():
            continue
        summary = out / "summary.md"
        pngs = sorted(out.glob("*.png"))
        if not summary.exists() and not pngs:
            continue
        lines += ["", f"## {name} ({rec.get('stage')})", ""]
        if summary.exists():
            lines.append(summary.read_text().strip())
        for png in pngs:
            lines += ["", f"![{png.stem}]({os.path.relpath(png, run)})"]
    path = run / "report.md"
    path.write_text("\n".join(lines) + "\n")
    return str(path)
