"""The `probe_merge` stage's probe.png (checkpoint x probe set heat map) and summary.md."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from vibethinker.reports import pyplot


def plot_heatmap(
    table: dict[str, dict[str, float]],
    groups: list[str],
    specialists: dict[str, str],
    k: int,
    png: str | Path,
) -> str:
    """Pass@k of every checkpoint (rows) on every probe set (columns); * marks each set's
    specialist."""
    plt = pyplot()
    rows = list(table)
    data = np.array([[table[r][g] for g in groups] for r in rows])
    fig, ax = plt.subplots(figsize=(1.2 + 1.1 * len(groups), 0.9 + 0.38 * len(rows)), dpi=110)
    im = ax.imshow(data, cmap="viridis", aspect="auto", vmin=0, vmax=1)
    ax.set_xticks(range(len(groups)), [g.split("/")[-1] for g in groups], rotation=30, ha="right")
    ax.set_yticks(range(len(rows)), rows)
    for i, r in enumerate(rows):
        for j, g in enumerate(groups):
            star = "*" if specialists.get(g) == r else ""
            ax.text(
                j,
                i,
                f"{data[i, j]:.2f}{star}",
                ha="center",
                va="center",
                fontsize=7,
                color="white" if data[i, j] < 0.6 else "black",
            )
    ax.set_title(f"Pass@{k} per probe set (* = specialist)")
    fig.colorbar(im, ax=ax, fraction=0.04)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return str(png)


def summary_md(
    table: dict[str, dict[str, float]],
    groups: list[str],
    specialists: dict[str, str],
    plan: list[tuple[str, float]],
    k: int,
    n: int,
    last: str,
    problems: Sequence[int] = (),
) -> str:
    """The checkpoint x probe set table (specialists in bold), who merged with what weight (or
    that one checkpoint won every set), the merged model's mean against the last checkpoint's,
    and the standard error the problem count allows."""
    head = "| checkpoint | " + " | ".join(groups) + " | mean |"
    lines = [head, "|---|" + "---:|" * (len(groups) + 1)]
    for r, row in table.items():
        cells = [
            f"**{row[g]:.3f}**" if specialists.get(g) == r else f"{row[g]:.3f}" for g in groups
        ]
        mean = sum(row[g] for g in groups) / len(groups)
        lines.append(f"| {r} | " + " | ".join(cells) + f" | {mean:.3f} |")
    winners = sorted(set(specialists.values()))
    text = [
        f"Pass@{k} (n={n} samples per problem) per probe set; bold = the set's specialist.",
        "",
        *lines,
        "",
    ]
    if len(winners) == 1:
        text.append(
            f"One checkpoint, `{winners[0]}`, wins every probe set: the merge is that "
            "checkpoint (no diversity to exploit at this scale)."
        )
    else:
        text.append(
            "Specialists: "
            + ", ".join(f"{g} -> `{c}`" for g, c in specialists.items())
            + "; merge weights: "
            + ", ".join(f"`{c}` {w:.2f}" for c, w in plan)
            + "."
        )
    merged, final = table["merged"], table[last]
    mean = lambda row: sum(row[g] for g in groups) / len(groups)  # noqa: E731
    spec = sum(table[specialists[g]][g] for g in groups) / len(groups)
    text.append(
        f"Mean Pass@{k}: merged {mean(merged):.3f}, last checkpoint `{last}` "
        f"{mean(final):.3f}, each set's specialist on its own set {spec:.3f}."
    )
    if problems:
        se = 0.5 / min(problems) ** 0.5
        text.append(
            f"Noise: with {min(problems)} problems per set, one standard error of a set's "
            f"Pass@{k} is up to {se:.2f}; smaller differences between rows are not "
            "evidence of specialisation."
        )
    return "\n".join(text) + "\n"
