"""The construct stage's summary.md and plots (trace length and difficulty per domain)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from vibethinker.construct.progress import Progress
from vibethinker.reports import pyplot


def draw_histograms(ax: Any, hist: dict[str, Counter]) -> None:
    """One histogram per domain as bars side by side within each bin (binned values -> counts),
    so no domain hides another (lines joining bins read as a density that is not there)."""
    doms = sorted(d for d, c in hist.items() if c)
    xs = sorted({float(x) for c in hist.values() for x in c})
    if not doms or not xs:
        return
    gap = min((b - a for a, b in zip(xs, xs[1:])), default=1.0)
    width = 0.85 * gap / len(doms)
    for i, d in enumerate(doms):
        vals = {float(k): v for k, v in hist[d].items()}
        off = (i - (len(doms) - 1) / 2) * width
        ax.bar([x + off for x in xs], [vals.get(x, 0) for x in xs], width=width, label=d)


def _plot(path: Path, hist: dict[str, Counter], xlabel: str, title: str) -> None:
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.2))
    draw_histograms(ax, hist)
    ax.set_xlabel(xlabel)
    ax.set_ylabel("count")
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def _mean(c: Counter) -> float:
    n = sum(c.values())
    return sum(float(k) * v for k, v in c.items()) / n if n else 0.0


def _decontam_lines(cfg: Any, ctx: Any) -> list[str]:
    """The decontamination section: the eval index, its hits and the planted-item check."""
    hits = ctx.eval_hits
    lines = [
        "## Decontamination",
        "",
        f"{ctx.index.n_items} eval items, {len(ctx.index)} {cfg.decontam_n}-grams "
        f"({ctx.index.template_grams} template n-grams left out); "
        f"{len(hits)} eval items hit by {sum(hits.values())} drops.",
    ]
    if hits:
        lines += ["Most hit: " + ", ".join(f"`{k}` {v}" for k, v in hits.most_common(10))]
    pl = ctx.planted
    if getattr(ctx.sampler, "planted", None) is not None or pl.get("reached"):
        rec = pl["caught"] / pl["reached"] if pl["reached"] else float("nan")
        prec = pl["caught"] / pl["flagged"] if pl["flagged"] else float("nan")
        lines += [
            "",
            f"Planted eval items (simulated teacher): {pl['reached']} reached the filter, "
            f"{pl['caught']} caught: recall {rec:.2f}; precision {prec:.2f} ({pl['flagged']} "
            "queries flagged at the query step).",
        ]
    lines.append("")
    return lines


def _curriculum_lines(out: Path, hist: dict[str, dict]) -> list[str]:
    """The curriculum section (trace lengths and difficulty per domain) and its two plots."""
    lens, diffs = hist["lengths"], hist["difficulty"]
    if not lens:
        return []
    lines = [
        "## Curriculum tags",
        "",
        "| domain | problems | traces | mean trace chars | "
        "mean difficulty (1 - teacher pass rate) |",
        "|---|---|---|---|---|",
    ]
    for d in sorted(lens):
        lc, dc = Counter(lens[d]), Counter(diffs.get(d, {}))
        lines.append(
            f"| {d} | {sum(dc.values())} | {sum(lc.values())} | {_mean(lc) + 10:.0f} "
            f"| {_mean(dc):.3f} |"
        )
    _plot(
        out / "lengths.png",
        {d: Counter(c) for d, c in lens.items()},
        "trace chars (bins of 20)",
        "trace length",
    )
    _plot(
        out / "difficulty.png",
        {d: Counter(c) for d, c in diffs.items()},
        "difficulty = 1 - teacher pass rate",
        "difficulty",
    )
    lines += ["", "![lengths](lengths.png) ![difficulty](difficulty.png)", ""]
    return lines


def write_summary(out: Path, cfg: Any, ctx: Any, state: Progress, hist: dict[str, dict]) -> None:
    lines = [
        "# construct",
        "",
        f"Teacher `{cfg.teacher}`"
        + (" (SIMULATED world teacher, no LLM)" if cfg.teacher == "world" else "")
        + f"; {state.seeds_done} seeds, {cfg.n_samples} samples per query, "
        f"vote margin >= {cfg.vote_min_margin}, up to {cfg.max_traces} paths per query.",
        "",
        "## Funnel (in -> out per step and domain)",
        "",
        ctx.funnel.table(),
        "",
    ]
    drops = ctx.funnel.drop_lines()
    if drops:
        lines += ["Drop reasons:", "", *drops, ""]
    if state.bad_seeds:
        lines += [f"Seeds without supervision dropped: {state.bad_seeds}", ""]
    if ctx.index is not None:
        lines += _decontam_lines(cfg, ctx)
    lines += _curriculum_lines(out, hist)
    (out / "summary.md").write_text("\n".join(lines), encoding="utf-8")
