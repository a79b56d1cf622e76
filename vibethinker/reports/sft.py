"""The `sft` stage's loss.png and summary.md (stages/sft.py)."""

from __future__ import annotations

import json
from pathlib import Path

from vibethinker.reports import pyplot
from vibethinker.train.sft_config import SFTConfig


def plot_loss(metrics: str | Path, png: str | Path, title: str = "SFT") -> str:
    """Loss (and LR on a second axis) against the step, from a metrics JSONL."""
    plt = pyplot()
    rows = [json.loads(x) for x in Path(metrics).read_text().splitlines() if x.strip()]
    steps = [r["step"] for r in rows]
    fig, ax = plt.subplots(figsize=(6, 3.2), dpi=110)
    ax.plot(steps, [r["loss"] for r in rows], color="C0", lw=1.2, label="loss")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("token loss (assistant only)", color="C0")
    ax.set_yscale("log")
    ax2 = ax.twinx()
    ax2.plot(steps, [r["lr"] for r in rows], color="C1", lw=1, alpha=0.7)
    ax2.set_ylabel("learning rate", color="C1")
    ax.set_title(title)
    fig.tight_layout()
    fig.savefig(png)
    plt.close(fig)
    return str(png)


def summary_md(
    cfg: SFTConfig,
    stats: dict,
    counts: dict,
    n_samples: int,
    n_cut: int,
    pass1: dict | None,
    n_dropped: int = 0,
) -> str:
    """The run in a few lines: settings, steps/tokens/losses/speed, what the filters removed,
    and the sampled Pass@1 when the stage evaluated its model."""
    lines = [
        f"SFT from `{cfg.model}` on `{cfg.data}`: {n_samples} samples (one per trace), "
        f"{cfg.epochs} epoch(s)"
        + (f" cut at max_steps {cfg.max_steps}" if cfg.max_steps else "")
        + f", global batch {cfg.global_batch}, LR {cfg.lr:g} -> "
        f"{cfg.final_lr:g} ({cfg.warmup_frac:.0%} warm-up), packing {'on' if cfg.pack else 'off'}.",
        "",
        "| steps | tokens | first loss | final loss | train s | tokens/s |",
        "|---:|---:|---:|---:|---:|---:|",
        f"| {stats['steps']} | {stats['tokens']:,} | {stats['first_loss']:.4f} | "
        f"{stats['final_loss']:.4f} | {stats['train_seconds']} | {stats['tokens_per_s']} |",
        "",
        "Filters: "
        + ", ".join(f"{k} {v}" for k, v in counts.items())
        + (f"; {n_cut} samples cut to max_len {cfg.max_len}" if n_cut else "")
        + (f"; {n_dropped} samples over max_len {cfg.max_len} dropped" if n_dropped else "")
        + ".",
    ]
    if stats.get("resumed_at"):
        lines.append(f"Resumed at step {stats['resumed_at']} (speed is this session's).")
    if pass1:
        lines += [
            "",
            f"Sampled Pass@1 (avg over {cfg.eval_n} samples) on `{cfg.eval_data}`: "
            + ", ".join(f"{k} **{v:.3f}**" for k, v in pass1.items())
            + ".",
        ]
    return "\n".join(lines) + "\n"
