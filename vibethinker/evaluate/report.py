"""Evaluation output files as data: per-sample JSONL and summary.json (reports/eval.py writes
the eval's summary.md and passk.png from them)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any


def write_samples(path: str | Path, rows: list[dict[str, Any]]) -> str:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return str(path)


def _json_safe(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None  # JSON has no inf/nan; null reads as "undefined"
    if isinstance(x, dict):
        return {str(k): _json_safe(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_json_safe(v) for v in x]
    return x


def write_summary_json(path: str | Path, summary: dict[str, Any]) -> str:
    Path(path).write_text(json.dumps(_json_safe(summary), indent=2) + "\n")
    return str(path)
