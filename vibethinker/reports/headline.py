"""The headline's markdown and plot (headline.md, headline.png, the stage's summary.md) from
`evaluate.headline.build_headline`'s numbers; the run report puts the markdown at its top."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from vibethinker.reports import pyplot


def training_steps(model: str | Path) -> dict[str, Any] | None:
    """Steps a model's training stage ran and planned, from its stage folder (the model's
    parent): `steps.json` (rl: done, planned, capped) or, for SFT, the last row of
    `metrics.jsonl` against `stats.json`'s planned steps; None when the folder has neither (a
    merged or untrained model)."""
    folder = Path(model).parent
    try:
        if (folder / "steps.json").exists():
            return dict(json.loads((folder / "steps.json").read_text()))
        rows = [x for x in (folder / "metrics.jsonl").read_text().splitlines() if x.strip()]
        if not rows:
            return None
        done = int(json.loads(rows[-1])["step"])
        stats = folder / "stats.json"
        planned = int(json.loads(stats.read_text()).get("steps", done)) if stats.exists() else done
        return {"done": done, "planned": planned, "capped": done < planned}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def steps_text(st: Mapping[str, Any] | None) -> str:
    """`60/60`, or `35/60 (capped)` when a wall-clock cap stopped it; `-` when unknown."""
    if not st:
        return "-"
    return f"{st['done']}/{st['planned']}" + (" (capped)" if st.get("capped") else "")


def _cell(c: Mapping[str, float] | None) -> str:
    return "-" if not c else f"{c['mean']:.3f} [{c['lo']:.3f}, {c['hi']:.3f}]"


def headline_markdown(
    h: Mapping[str, Any], plot_href: str = "headline.png", heading: str = "#"
) -> str:
    """The headline as markdown: the table, the plot, one line per stage, and where the story
    does not hold. `h` is `build_headline`'s result plus the stage's `protocol` entry."""
    cols, p = h["columns"], h.get("protocol", {})
    pct = round(100 * h["conf"])
    per = p.get("problems_per_domain", {})
    steps = any(r.get("steps") for r in h["rows"])
    lines = [
        f"{heading} Headline: held-out accuracy after each stage",
        "",
        f"pass@1 (avg@n over n = {h['n']} samples per problem) on the held-out split "
        f"`{p.get('data', '')}`: "
        + ", ".join(f"{d} {k}" for d, k in per.items())
        + f" problems (the first of each domain); the same protocol for every row (temperature "
        f"{p.get('temperature')}, top-p {p.get('top_p')}, max new tokens "
        f"{p.get('max_new_tokens')}, seed {p.get('seed')}). Brackets: {pct}% percentile-bootstrap "
        "interval over problems. `all` is the mean over the table's problems (so each domain "
        "weighs by its problem count here, not as in the eval stage's full split)."
        + (
            " `steps`: training steps the stage ran / the recipe asked for; a run with fewer "
            "(a wall-clock cap) is not comparable with one that ran them all."
            if steps
            else ""
        ),
        "",
        "| after stage | " + " | ".join(cols) + " |" + (" steps |" if steps else ""),
        "|---|" + "---:|" * len(cols) + ("---:|" if steps else ""),
    ]
    for r in h["rows"]:
        label = r["name"] + (f" (= {r['same_as']}, same checkpoint)" if r.get("same_as") else "")
        tail = f" {steps_text(r.get('steps'))} |" if steps else ""
        lines.append(
            f"| {label} | " + " | ".join(_cell(r["cells"].get(c)) for c in cols) + " |" + tail
        )
    lines += [
        "",
        f"![headline]({plot_href})",
        "",
        f"{heading}# What each stage changed ({pct}% paired bootstrap over the same "
        "problems; the last line: the final model against the first)",
        "",
    ]
    lines += [f"- {ln['text']}" for ln in h["lines"]] or ["- (one row: nothing to compare)"]
    lines += ["", f"{heading}# Where the story does not hold", ""]
    if h["not_holding"]:
        lines += [f"- {t}" for t in h["not_holding"]]
    elif h["checks"]:
        lines.append("Nowhere: every check below holds beyond noise.")
    else:
        lines.append("No checks: the headline needs at least two rows.")
    held = [c["text"] for c in h["checks"] if c["holds"]]
    if held:
        lines += ["", "Holds: " + "; ".join(held) + "."]
    return "\n".join(lines) + "\n"


def plot_headline(path: str | Path, h: Mapping[str, Any]) -> str:
    """Accuracy per column (one line each) across the rows, with interval error bars."""
    plt = pyplot()
    rows, cols = h["rows"], h["columns"]
    fig, ax = plt.subplots(figsize=(max(6.5, 0.9 * len(rows) + 3), 4.2), dpi=100)
    xs = list(range(len(rows)))
    for j, col in enumerate(cols):
        shift = (j - (len(cols) - 1) / 2) * 0.08
        got = [(x, r["cells"][col]) for x, r in zip(xs, rows) if col in r["cells"]]
        mean = [c["mean"] for _, c in got]
        err = [[c["mean"] - c["lo"] for _, c in got], [c["hi"] - c["mean"] for _, c in got]]
        ax.errorbar(
            [x + shift for x, _ in got],
            mean,
            yerr=err,
            marker="o",
            capsize=3,
            label=col,
            linewidth=2.2 if col == "all" else 1.2,
            color="black" if col == "all" else None,
        )
    ax.set_xticks(xs)
    ax.set_xticklabels([r["name"] for r in rows], rotation=30, ha="right")
    ax.set_ylabel(f"pass@1 (avg@{h['n']}), {round(100 * h['conf'])}% CI")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title("held-out accuracy after each stage")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def summary_markdown(h: dict[str, Any]) -> str:
    """The stage's own section of the report: the protocol and the cost per model (the table
    itself is at the top of the report)."""
    p = h["protocol"]
    lines = [
        "# Headline: protocol and cost",
        "",
        f"{sum(p['problems_per_domain'].values())} held-out problems "
        f"({', '.join(f'{d} {k}' for d, k in p['problems_per_domain'].items())}) x n = {p['n']} "
        f"samples, max new tokens {p['max_new_tokens']}, seed {p['seed']}, engine {p['engine']}; "
        f"{h['seconds']:.0f} s in all. The table, plot and stage lines are at the top of the "
        "report.",
        "",
        "| row | model | evaluated | seconds |",
        "|---|---|---|---:|",
    ]
    for r in h["rows"]:
        how = f"= {r['same_as']}" if r["same_as"] else ("cache" if r["cached"] else "sampled")
        lines.append(f"| {r['name']} | `{r['model']}` | {how} | {r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"
