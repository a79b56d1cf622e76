"""An ablation study's ablation.md (the table, the budget check, every seed) and ablation.png.

`study` is an ablate.Study (vibethinker/ablate/study.py, a layer above; read by attribute here) and
`res` the collected results with `summary` (per arm: means, CIs, paired differences, budget).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vibethinker.reports import pyplot


def _fmt(ci: Any) -> str:
    if ci is None:
        return "-"
    m, lo, hi = ci
    d = 3 if max(abs(m), abs(lo), abs(hi)) < 100 else 0  # accuracies vs token counts
    if lo == hi:  # one seed: no interval
        return f"{m:.{d}f}"
    return f"{m:.{d}f} [{lo:.{d}f}, {hi:.{d}f}]"


def _fmt_seed(v: float) -> str:
    """One seed's value: 4 decimals for accuracies, none for token counts (as `_fmt`)."""
    return f"{v:.4f}" if abs(v) < 100 else f"{v:.0f}"


def _fmt_budget(span: Any) -> str:
    if span is None:
        return "-"
    lo, hi = span
    return f"{lo:g}" if lo == hi else f"{lo:g}..{hi:g}"


def ablation_markdown(study: Any, res: dict[str, Any], s: dict[str, Any]) -> str:
    """The study's table (mean and CI per arm and metric, the paired difference to the first
    arm, the consumed budget), the budget check, failed and unfinished runs, and every seed.
    `s` is ablate.summarise's result."""
    pct = round(study.conf * 100)
    first = study.arms[0].name
    head = [
        "arm",
        "seeds",
        *[f"{m} (mean [{pct}% CI])" for m in study.metrics],
        *[f"{m}: minus {first}" for m in study.metrics],
        *study.consumed,
    ]
    lines = [f"# Ablation: {study.title}", ""]
    if study.notes:
        lines += [study.notes, ""]
    lines += [
        f"Study `{study.path}`, recipe `{study.recipe}`, base run `{study.base_run}`. Seeds "
        f"{res.get('seeds', study.seeds)}; {pct}% Student-t intervals over seeds; the difference to {first} is "
        f"paired by seed. Budget held fixed: {', '.join(study.fixed) or '-'}; consumed "
        f"(read back from each run): {', '.join(study.consumed) or '-'}.",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "---|" * len(head),
    ]
    for arm in study.arms:
        t = s["table"][arm.name]
        cells = [arm.name, str(len(t["seeds"]))]
        cells += [_fmt(t["metrics"][m]) for m in study.metrics]
        cells += [
            _fmt(t.get("diff", {}).get(m)) if arm.name != first else "-" for m in study.metrics
        ]
        cells += [_fmt_budget(t["budget"][b]) for b in study.consumed]
        lines.append("| " + " | ".join(cells) + " |")
    lines.append("")
    if s["mismatch"]:
        lines.append(
            f"**Budget mismatch:** {', '.join(s['mismatch'])} differ between arms or "
            "seeds (see the columns above): the comparison is not at matched budget."
        )
    elif study.consumed:
        lines.append("Consumed budget identical in every arm and seed.")
    if res.get("failed"):
        lines.append(f"\n**Failed runs** (see their ablate.log): {', '.join(res['failed'])}")
    missing = [
        f"{a.name}/seed{x}"
        for a in study.arms
        for x in res.get("seeds", study.seeds)
        if str(x) not in res["arms"].get(a.name, {})
    ]
    if missing:
        lines.append(f"\nNot finished (not in the table): {', '.join(missing)}")
    lines += per_seed_lines(study, res)
    lines += ["", "![ablation](ablation.png)", ""]
    return "\n".join(lines)


def per_seed_lines(study: Any, res: dict[str, Any]) -> list[str]:
    """The per-seed table: every finished arm x seed with its metrics."""
    lines = [
        "",
        "Per seed:",
        "",
        "| arm | seed | " + " | ".join(study.metrics) + " |",
        "|---|---|" + "---|" * len(study.metrics),
    ]
    for arm in study.arms:
        for seed, r in sorted(res["arms"].get(arm.name, {}).items(), key=lambda x: int(x[0])):
            vals = " | ".join(_fmt_seed(r["metrics"][m]) for m in study.metrics)
            lines.append(f"| {arm.name} | {seed} | {vals} |")
    return lines


def plot_ablation(study: Any, res: dict[str, Any], png: Path) -> str:
    """One panel per metric: each arm's mean with its CI, and every seed as a dot."""
    plt = pyplot()
    ms = list(study.metrics)
    fig, axes = plt.subplots(1, len(ms), figsize=(3.2 * len(ms) + 0.6, 3.2), dpi=110, squeeze=False)
    for ax, m in zip(axes[0], ms):
        for i, arm in enumerate(study.arms):
            ci = res["summary"][arm.name]["metrics"][m]
            per = res["arms"].get(arm.name, {})
            pts = [r["metrics"][m] for r in per.values()]
            ax.scatter([i] * len(pts), pts, s=12, color="grey", alpha=0.6, zorder=3)
            if ci:
                mean, lo, hi = ci
                err = [[mean - lo], [hi - mean]]
                ax.errorbar([i], [mean], yerr=err, fmt="o", color=f"C{i}", capsize=5, ms=7)
        ax.set_xticks(range(len(study.arms)), [a.name for a in study.arms], fontsize=8)
        ax.set_xlim(-0.6, len(study.arms) - 0.4)
        ax.set_title(m, fontsize=9)
    fig.suptitle(
        f"{study.title} (mean, {round(study.conf * 100)}% CI over seeds; dots: seeds)", fontsize=9
    )
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return str(png)
