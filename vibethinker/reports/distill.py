"""The `distill` stage's summary.md (settings, funnel, SFT, held-out table) and s_lp.png.

`cfg` is the stage's DistillConfig (stages/distill.py, a layer above; read by attribute here).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from vibethinker.reports import pyplot
from vibethinker.types import Candidate

# The funnel's columns, in order (also named in the stage's empty-domain message).
FUNNEL_COLS = (
    "prompts",
    "sampled",
    "truncated",
    "correct",
    "deduplicated",
    "over_max_len",
    "dropped_short",
    "dropped_outlier",
    "out_of_band",
    "over_quota",
    "kept",
)


def eval_md(rows: dict[str, dict[str, float]], cfg: Any) -> list[str]:
    """The held-out table: one row per evaluated model, a column per domain and "all"."""
    doms = sorted({k for r in rows.values() for k in r if k != "all"})
    lines = [
        f"Held-out Pass@1 (avg@{cfg.eval_n}, T={cfg.temperature}, top-p {cfg.top_p}, "
        f"{cfg.eval_max_new_tokens} new tokens) on `{cfg.eval_data}`"
        + (f", the first {cfg.eval_limit} problems of each domain" if cfg.eval_limit else "")
        + " (teachers: on their own domain only):",
        "",
        "| model | " + " | ".join(doms) + " | all |",
        "|---|" + "---:|" * (len(doms) + 1),
    ]
    for name, r in rows.items():
        cells = [f"{r[d]:.3f}" if d in r else "-" for d in doms]
        cells.append("-" if name.startswith("teacher") else f"{r['all']:.3f}")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def plot_s_lp(cands: dict[str, list[Candidate]], sels: dict, png: Path, method: str) -> str:
    """S_LP against response tokens per domain: every candidate, the kept ones highlighted, the
    bucket edges (dashed) and each bucket's kept band (shaded)."""
    plt = pyplot()
    doms = sorted(sels) or ["(none)"]
    fig, axes = plt.subplots(1, len(doms), figsize=(4.2 * len(doms), 3.4), dpi=110, squeeze=False)
    for ax, d in zip(axes[0], doms):
        ax.set_title(f"{d}: S_LP by length ({method})")
        ax.set_xlabel("response tokens")
        ax.set_ylabel("S_LP (nats/token)")
        if d not in sels:
            continue
        rows, sel = cands[d], sels[d]
        kept = set(sel.kept)
        xs, ys = [c.tokens for c in rows], [c.s_lp for c in rows]
        ax.scatter(xs, ys, s=6, c="0.7", label="candidates")
        ax.scatter([xs[i] for i in kept], [ys[i] for i in kept], s=8, c="C0", label="kept")
        lo_x = min(xs, default=0)
        bounds = [lo_x, *sel.edges, max(xs, default=1)]
        for e in sel.edges:
            ax.axvline(e, ls="--", c="k", lw=0.8)
        for b, (lo, hi) in enumerate(sel.bands):
            if not math.isnan(lo):
                ax.fill_between([bounds[b], bounds[b + 1]], lo, hi, color="C1", alpha=0.15)
        if not math.isinf(sel.outlier_cut):
            ax.axhline(sel.outlier_cut, c="C3", lw=0.8, label="outlier cut")
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return str(png)


def summary_md(
    cfg: Any,
    funnel: dict,
    warnings: list[str],
    sft_out: Path,
    seconds: float,
    evals: dict | None = None,
) -> str:
    """The stage's report section: settings, the funnel per domain, the SFT summary."""
    names = ", ".join(f"{t['domain']}: `{t['model']}`" for t in cfg.teachers)
    lines = [
        f"Self-distillation into `{cfg.student}` from {len(cfg.teachers)} teacher(s) "
        f"({names}): "
        f"{cfg.n_samples} samples per prompt (T={cfg.temperature}, top-p {cfg.top_p}), "
        f"selection **{cfg.select}** ({cfg.n_buckets} length buckets, min {cfg.min_tokens} "
        f"tokens, outlier cut at the {cfg.outlier_pct:g}th percentile, band "
        f"{cfg.band_lo_pct:g}-{cfg.band_hi_pct:g}th percentile per bucket).",
        "",
        "| domain | " + " | ".join(c.replace("_", " ") for c in FUNNEL_COLS) + " |",
        "|---|" + "---:|" * len(FUNNEL_COLS),
    ]
    for d, row in funnel.items():
        lines.append(f"| {d} | " + " | ".join(str(row.get(c, 0)) for c in FUNNEL_COLS) + " |")
    if cfg.select == "random":
        lines += [
            "",
            "Random baseline: as many traces per domain and length bucket as the "
            "learning-potential selection keeps, drawn at random (no outlier cut, no band); "
            "`over quota` counts the traces not drawn.",
        ]
    lines += [
        "",
        "Mean S_LP (all scored -> kept), bucket edges (response tokens), kept band per bucket:",
        "",
    ]
    for d, row in funnel.items():
        lines.append(
            f"- {d}: S_LP {row.get('s_lp_mean')} -> {row.get('s_lp_mean_kept')}; "
            f"edges {row.get('bucket_edges', [])}; bands {row.get('bands', [])}"
        )
    if warnings:
        lines += ["", *[f"**Warning**: {w}" for w in warnings]]
    sft_md = sft_out / "summary.md"
    if sft_md.exists():
        lines += ["", "Student SFT:", "", sft_md.read_text().strip()]
    if evals:
        lines += ["", *eval_md(evals, cfg)]
    lines += ["", f"Wall time {seconds:.0f} s. Plot: s_lp.png."]
    return "\n".join(lines) + "\n"
