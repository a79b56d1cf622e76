"""The `clr` stage's outputs: samples.jsonl, summary.json, summary.md (CLR@k vs maj@k vs avg@n
at equal token budgets, the model as its own judge, per domain, tokens, counters) and clr.png.
The numbers come from evaluate/clr.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from vibethinker.evaluate.clr import judge_quality, sample_row, summarize
from vibethinker.evaluate.report import write_samples, write_summary_json
from vibethinker.reports import pyplot


def _f(x: Any) -> str:
    return f"{x:.3f}" if isinstance(x, float) else str(x)


def markdown(summary: dict[str, Any]) -> str:
    """summary.md: the CLR table, the judge lines, per domain, token totals, counters."""
    k, rep = summary["k"], summary["repeats"]
    lines = [
        f"# CLR: K={k}, M={summary['m']}, R={rep}, claim_verifier={summary['claim_verifier']}",
        "",
        "Accuracy is Pass@1 of the selected answer, mean over repeats (+- std over repeats);",
        "tokens are per problem (CLR: sampling + extraction + verification"
        + (", prompts included)." if summary["prompt_tokens_counted"] else ", replies only).")
        + " maj@k' is given the largest k' that fits CLR@k's tokens.",
        "",
        "| k | CLR@k | tokens | of which generated | maj@k (same samples) | tokens | k' "
        "| maj@k' (equal budget) | tokens | avg@n |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in summary["comparison"]["rows"]:
        cap = " (pool cap)" if r["maj_budget_capped"] else ""
        lines.append(
            f"| {r['k']} | {r['clr']:.3f} +- {r['clr_spread']:.3f} | {r['clr_tokens']:.0f} "
            f"| {r['clr_generated_tokens']:.0f} "
            f"| {r['maj']:.3f} +- {r['maj_spread']:.3f} | {r['maj_tokens']:.0f} "
            f"| {r['maj_budget_k']}{cap} | {r['maj_at_budget']:.3f} +- "
            f"{r['maj_at_budget_spread']:.3f} | {r['maj_at_budget_tokens']:.0f} | {r['avg']:.3f} |"
        )
    lines += judge_lines(summary)
    lines += ["", "## Per domain", "", "| domain | " + " | ".join(_dom_keys(summary)) + " |"]
    lines.append("|---" * (1 + len(_dom_keys(summary))) + "|")
    for dom, vals in summary["domains"].items():
        lines.append(f"| {dom} | " + " | ".join(_f(vals[x]) for x in _dom_keys(summary)) + " |")
    lines += ["", "## Tokens (totals)", "", "| phase | tokens |", "|---|---|"]
    lines += [f"| {key} | {v} |" for key, v in summary["tokens"].items()]
    lines += ["", "## Counters", ""]
    lines += [
        f"Sample status (ok, empty_response, no_final_answer) covers all {summary.get('pool')} "
        "samples per problem; claim and verdict counters cover CLR's R x K.",
        "",
        "| counter | count |",
        "|---|---|",
    ]
    lines += [f"| {key} | {v} |" for key, v in sorted(summary["counters"].items())]
    return "\n".join(lines) + "\n"


def judge_lines(summary: dict[str, Any]) -> list[str]:
    q = judge_quality(summary)
    if not q:
        return []
    lines = ["", "## The model as its own judge", ""]
    c = summary["counters"]
    if "extraction_parse_rate" in q:
        lines.append(
            f"Extraction: {q['extraction_parse_rate']:.3f} of {c['extractions']} replies parsed "
            f"(numbered claims and a final answer); the stated answer is the trajectory's own in "
            f"{q['extracted_answer_agreement']:.3f}."
        )
    ce = summary.get("claim_eval") or {}
    if ce.get("claims"):
        acc, cnt = ce["accuracy"], ce["counts"]
        parts = ", ".join(f"{k} {acc[k]:.3f} (n={cnt[k]})" for k in acc if k != "all")
        lines.append(
            f"Held-out claim verification: accuracy **{acc['all']:.3f}** on {ce['claims']} "
            f"labelled claims ({parts}); {ce['unparseable']} verdicts unparseable (counted wrong)."
        )
    return lines


def _dom_keys(summary: dict[str, Any]) -> list[str]:
    first = next(iter(summary["domains"].values()), {})
    return list(first)


def plot(path: str | Path, comparison: dict[str, Any], title: str) -> str:
    """Accuracy against tokens per problem: CLR@k, maj@k, avg@n (log2 token axis)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4), dpi=100)
    rows, curve = comparison["rows"], comparison["maj_curve"]
    ax.plot([r["clr_tokens"] for r in rows], [r["clr"] for r in rows], "o-", label="CLR@k")
    ax.plot([c["tokens"] for c in curve], [c["accuracy"] for c in curve], "s--", label="maj@k")
    avg = comparison["avg"]
    ax.plot([avg["tokens"]], [avg["accuracy"]], "^", label="avg@n (one sample)")
    for r in rows:
        ax.annotate(
            f"k={r['k']}",
            (r["clr_tokens"], r["clr"]),
            xytext=(5, 7),
            textcoords="offset points",
            fontsize=7,
        )  # beside the marker, not on it
    if any(r["clr_tokens"] > 0 for r in rows):
        ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per problem")
    ax.set_ylabel("Pass@1 of the selected answer")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return str(path)


def write_clr_outputs(out, problems, trajs, k, repeats, counters, meta) -> dict[str, str]:
    """Every output file of a CLR run (the numbers: evaluate.clr.summarize)."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    summary = summarize(problems, trajs, k, repeats, counters, meta)
    rows = [sample_row(problems[t.problem], t, k) for t in trajs]
    outputs = {
        "samples": write_samples(out / "samples.jsonl", rows),
        "summary": write_summary_json(out / "summary.json", summary),
    }
    (out / "summary.md").write_text(markdown(summary))
    outputs["table"] = str(out / "summary.md")
    comparison = summary["comparison"]
    outputs["plot"] = plot(out / "clr.png", comparison, f"CLR vs maj@k (K={k}, R={repeats})")
    return outputs
