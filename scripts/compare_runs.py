"""Compare two run folders of one recipe: every JSON / JSONL result they share, with timings, the
run folder's own path and file fingerprints (mtimes) left out. Used to show that a refactor left
the demo unchanged (docs/EVIDENCE.md): run the recipe before and after into two folders, with the
wall-clock caps lifted so both train the same steps, then

    python scripts/compare_runs.py runs/tiny runs/tiny_check

Prints, per stage folder, how many result files are equal and the first differing values of the
others; exit code 1 when any shared file differs (or the headline is missing in either).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

# keys that measure time (or throughput), not results; matched as a prefix or a substring
TIMING = ("t_", "sec", "time", "wall", "elapsed", "throughput", "tok_s", "tokens_per_s", "/s")
SKIP_DIRS = {"checkpoints"}  # optimizer state and RNG snapshots: bytes, not results
SKIP_FILES = {"manifest.json"}  # stage timings and config hashes
FINGERPRINT = "files"  # the headline cache key's (name, size, mtime) rows


def _is_timing(key: str) -> bool:
    return any(key.startswith(t) or t in key for t in TIMING)


def normalise(obj: Any, run: str) -> Any:
    """`obj` with timing keys and file fingerprints dropped and `run`'s path replaced by RUN."""
    if isinstance(obj, dict):
        return {
            normalise(k, run): normalise(v, run)
            for k, v in obj.items()
            if not _is_timing(k) and k != FINGERPRINT
        }
    if isinstance(obj, list):
        return [normalise(x, run) for x in obj]
    if isinstance(obj, str):
        return obj.replace(run.rstrip("/") + "/", "RUN/")
    return obj


def load(path: Path, run: str) -> Any:
    if path.suffix == ".jsonl":
        return [normalise(json.loads(line), run) for line in path.read_text().splitlines() if line]
    return normalise(json.loads(path.read_text()), run)


def first_difference(a: Any, b: Any, where: str = "") -> str | None:
    """The path and values of the first difference between two loaded results, or None."""
    if type(a) is not type(b):
        return f"{where or '/'}: {a!r:.60} != {b!r:.60}"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b), key=str):
            if k not in a or k not in b:
                return f"{where}/{k}: only in {'the second' if k in b else 'the first'}"
            if d := first_difference(a[k], b[k], f"{where}/{k}"):
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return f"{where or '/'}: {len(a)} != {len(b)} items"
        for i, (x, y) in enumerate(zip(a, b)):
            if d := first_difference(x, y, f"{where}[{i}]"):
                return d
        return None
    return None if a == b else f"{where or '/'}: {a!r:.60} != {b!r:.60}"


def result_files(run: Path) -> list[Path]:
    return sorted(
        p.relative_to(run)
        for p in run.rglob("*.json*")
        if p.suffix in (".json", ".jsonl")
        and p.name not in SKIP_FILES
        and not SKIP_DIRS & set(p.relative_to(run).parts)
    )


def compare(a: Path, b: Path) -> tuple[dict[str, list[int]], list[str]]:
    """(stage folder -> [equal, differing], difference lines) over the files both runs have."""
    shared = sorted(set(result_files(a)) & set(result_files(b)))
    per: dict[str, list[int]] = {}
    lines = []
    for rel in shared:
        stage = rel.parts[0] if len(rel.parts) > 1 else "."
        count = per.setdefault(stage, [0, 0])
        try:
            d = first_difference(load(a / rel, str(a)), load(b / rel, str(b)))
        except (ValueError, OSError) as e:
            d = f"unreadable: {e}"
        count[d is not None] += 1
        if d:
            lines.append(f"{rel}: {d}")
    return per, lines


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    args = ap.parse_args(argv)
    for run in (args.first, args.second):
        if not (run / "headline" / "headline.json").exists():
            print(f"{run}: no headline/headline.json (not a finished run?)", file=sys.stderr)
            return 1
    per, lines = compare(args.first, args.second)
    print("| stage folder | equal | differ |\n|---|---:|---:|")
    for stage, (same, diff) in per.items():
        print(f"| {stage} | {same} | {diff} |")
    print("\n".join(["", *lines]) if lines else "\nevery shared result file is equal")
    return 1 if lines else 0


if __name__ == "__main__":
    sys.exit(main())
