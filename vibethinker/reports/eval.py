"""The eval's own summary.md (a markdown table per slice) and passk.png, and `write_outputs`,
which writes them with the data files of evaluate/report.py (samples.jsonl, summary.json)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from vibethinker.evaluate import EvalResult
from vibethinker.evaluate.report import write_samples, write_summary_json
from vibethinker.reports import pyplot

FIXED_COLUMNS = ("problems", "samples", "avg@n", "mean_score")
TAIL_COLUMNS = ("mean_tokens", "mean_correct_tokens", "tokens_per_correct", "truncation_rate")


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        if not math.isfinite(v):
            return "inf"
        return f"{v:.3f}" if abs(v) <= 1.0 else f"{v:.1f}"
    return str(v)


def markdown_table(metrics: dict[str, dict[str, Any]]) -> str:
    """One row per slice; columns: counts, avg@n, pass@k..., maj@k..., token columns."""
    keys: list[str] = []
    for m in metrics.values():
        for k in m:
            if k not in keys and k not in FIXED_COLUMNS and k not in TAIL_COLUMNS:
                keys.append(k)
    passk = sorted((k for k in keys if k.startswith("pass@")), key=lambda s: int(s[5:]))
    majk = sorted((k for k in keys if k.startswith("maj@")), key=lambda s: int(s[4:]))
    cols = [*FIXED_COLUMNS, *passk, *majk, *TAIL_COLUMNS]
    lines = [
        "| slice | " + " | ".join(cols) + " |",
        "|---|" + "---:|" * len(cols),
    ]
    for name, m in metrics.items():
        lines.append(f"| {name} | " + " | ".join(_fmt(m.get(c)) for c in cols) + " |")
    return "\n".join(lines)


def write_summary_md(path: str | Path, summary: dict[str, Any]) -> str:
    p = summary.get("params", {})
    head = [
        f"# Evaluation: {summary.get('model', '')}",
        "",
        f"data: `{summary.get('data', '')}`; n = {_n_text(summary)} samples per problem; "
        f"temperature {p.get('temperature')}, top-p {p.get('top_p')}, "
        f"top-k {p.get('top_k') or 'off'}, max new tokens "
        f"{p.get('max_new_tokens') or 'none (up to the context)'}; "
        f"engine {summary.get('engine', '')}; {summary.get('seconds', 0):.0f} s.",
        "",
        "avg@n: share of correct samples among the n (correct = the verifier's verdict; "
        "instruct: every instruction followed), so avg@n = pass@1; mean_score: mean verifier "
        "value (instruct: fraction of instructions followed); pass@k: unbiased estimator; maj@k: "
        "expected majority-vote accuracy over k-subsets (math, stem); tokens_per_correct: all "
        "tokens / correct answers; truncation_rate: share of samples that hit the token cap; "
        "'-': unknown (e.g. a server that reports no lengths).",
        "",
        "",
    ]
    Path(path).write_text("\n".join(head) + markdown_table(summary["metrics"]) + "\n")
    return str(path)


def n_text(n: int | dict[str, int], domains: Any) -> str:
    """Samples per problem for a log line: n, or the per-domain profile of the domains present
    (a profile lists every domain it knows; the ones the data lacks are left out)."""
    if isinstance(n, int):
        return str(n)
    present = set(domains)
    return ", ".join(f"{d} {v}" for d, v in n.items() if d in present) or "-"


def _n_text(summary: dict[str, Any]) -> str:
    by = summary.get("n_by_domain") or {}
    if len(set(by.values())) > 1:
        return ", ".join(f"{d} {v}" for d, v in by.items())
    return str(summary.get("n"))


def integer_k_axis(ax: Any, ks: list[int]) -> None:
    """Ticks at the k values used, labelled as integers (not 1.0, 2.0, 4.0), no minor ticks."""
    import matplotlib.ticker

    if ks:
        ax.set_xticks(ks)
    ax.xaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _: f"{x:.0f}"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())


def plot_passk(path: str | Path, curves: dict[str, dict[int, float]], title: str = "") -> str:
    """pass@k against k (log2 axis), one line per slice."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    for name, curve in curves.items():
        if curve:
            ks = sorted(curve)
            ax.plot(ks, [curve[k] for k in ks], marker="o", label=name)
    ax.set_xscale("log", base=2)
    integer_k_axis(ax, sorted({k for c in curves.values() for k in c}))
    ax.set_xlabel("k (samples)")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(title or "pass@k")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def write_outputs(result: EvalResult, out_dir: str | Path, **meta: Any) -> dict[str, str]:
    """samples.jsonl, summary.json, summary.md and passk.png under out_dir; name -> path."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    summary = result.summary(**meta)
    model = str(meta.get("model", "")) or "model"
    return {
        "samples": write_samples(out / "samples.jsonl", result.sample_rows()),
        "summary": write_summary_json(out / "summary.json", summary),
        "table": write_summary_md(out / "summary.md", summary),
        "plot": plot_passk(out / "passk.png", result.curves(), f"pass@k: {Path(model).name}"),
    }
