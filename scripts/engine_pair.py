"""Pair two runs' headline tables problem by problem: the same recipe sampled by two engines
(`vibethinker run recipes/tiny.yaml` and `... engine=vllm run_dir=runs/tiny_vllm`), or any two
runs whose headlines scored the same problems.

    .venv/bin/python scripts/engine_pair.py runs/tiny runs/tiny_vllm

For every headline row both runs have and every column (domains and `all`), prints A's and B's
mean and the paired bootstrap interval of B - A over problems (evaluate/stats.paired_diff_ci, the
headline's own confidence); `*` marks an interval that excludes 0. Adds the stage seconds of both
runs' manifests. A run whose headline scored other problems is refused with the first mismatch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from vibethinker.evaluate.stats import beyond_noise, paired_diff_ci


def load(run: str) -> dict:
    path = Path(run) / "headline" / "headline.json"
    if not path.exists():
        sys.exit(f"{path}: no headline (run the recipe's headline stage first)")
    return json.loads(path.read_text())


def seconds(run: str) -> dict[str, float]:
    stages = json.loads((Path(run) / "manifest.json").read_text())["stages"]
    return {n: float(r["seconds"]) for n, r in stages.items() if r.get("seconds") is not None}


def table(a_run: str, b_run: str) -> str:
    a, b = load(a_run), load(b_run)
    ids_a = [p["id"] for p in a["problems"]]
    ids_b = [p["id"] for p in b["problems"]]
    if ids_a != ids_b:
        first = (
            next(i for i, (x, y) in enumerate(zip(ids_a, ids_b)) if x != y)
            if (len(ids_a) == len(ids_b))
            else min(len(ids_a), len(ids_b))
        )
        sys.exit(f"the headlines scored different problems (first difference at #{first})")
    domains = [p["domain"] for p in a["problems"]]
    rows_b = {r["name"]: r for r in b["rows"]}
    cols = a["columns"]
    lines = [
        f"A = {a_run}, B = {b_run}; B - A per problem, paired bootstrap {a['conf']:.0%} interval",
        "",
        "| row | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for ra in a["rows"]:
        rb = rows_b.get(ra["name"])
        if rb is None or not ra.get("scores") or not rb.get("scores"):
            continue
        cells = []
        for col in cols:
            keep = [i for i, d in enumerate(domains) if col == "all" or d == col]
            sa = [ra["scores"][i] for i in keep]
            sb = [rb["scores"][i] for i in keep]
            d, lo, hi = paired_diff_ci(sa, sb, conf=a["conf"])
            mark = "*" if beyond_noise(lo, hi) else ""
            cells.append(
                f"{sum(sa) / len(sa):.3f} / {sum(sb) / len(sb):.3f}: "
                f"{d:+.3f} [{lo:+.3f}, {hi:+.3f}]{mark}"
            )
        lines.append(f"| {ra['name']} | " + " | ".join(cells) + " |")
    sa, sb = seconds(a_run), seconds(b_run)
    lines += ["", "| stage | A s | B s | B / A |", "|---|---:|---:|---:|"]
    for name in sa:
        if name in sb and sa[name] > 0:
            lines.append(
                f"| {name} | {sa[name]:.0f} | {sb[name]:.0f} | {sb[name] / sa[name]:.2f} |"
            )
    ta = sum(sa[n] for n in sa if n in sb)
    tb = sum(sb[n] for n in sa if n in sb)
    lines.append(f"| **total** | {ta:.0f} | {tb:.0f} | {tb / ta:.2f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("a", help="run folder A (e.g. the hf run)")
    ap.add_argument("b", help="run folder B (e.g. the vLLM run)")
    args = ap.parse_args(argv)
    print(table(args.a, args.b))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
