"""The run's "Cost" table: one row per stage from its ledger (vibethinker/ledger.py), the run's
totals at the bottom. Its columns answer a reviewer's reproducibility list: tokens trained,
prompts and rollouts, tokens generated and their lengths, verifier calls and rejections,
teacher calls, checkpoints, the device and its hours, where the seconds went, and how close the
training and decoding came to the device's limits.
"""

from __future__ import annotations

from typing import Any

COLUMNS = (
    "stage",
    "device",
    "device-s",
    "sample / verify / update / eval / other s",
    "tokens trained (padded)",
    "prompts",
    "rollouts",
    "gen. tokens prompt / response",
    "response mean / p95",
    "truncated",
    "verifier calls (rejected)",
    "top rejection reasons",
    "teacher calls (tokens)",
    "checkpoints (MB)",
    "train FLOP/s / peak",
    "decode B/s / BW",
)
PHASES = ("sample", "verify", "update", "eval", "other")


def _k(x: float) -> str:
    """A count, short: 1234 -> 1,234; 1.2M for a million and up."""
    return f"{x / 1e6:.1f}M" if x >= 1e6 else f"{int(x):,}"


def _gen(led: dict[str, Any]) -> dict[str, Any]:
    """Every phase's generation summed (eval sampling included); mean and p95 of the largest."""
    rows = list((led.get("generation") or {}).values())
    out = {k: sum(r.get(k, 0) for r in rows) for k in ("prompts", "rollouts", "prompt_tokens")}
    out["response_tokens"] = sum(r.get("response_tokens", 0) for r in rows)
    n = out["rollouts"]
    out["mean"] = out["response_tokens"] / n if n else 0.0
    out["p95"] = max((r.get("response_p95", 0) for r in rows), default=0)
    out["trunc"] = (
        sum(r.get("truncation_rate", 0) * r.get("rollouts", 0) for r in rows) / n if n else 0
    )
    return out


def _verify(led: dict[str, Any]) -> tuple[int, int, dict[str, int]]:
    calls, rejected, reasons = 0, 0, {}
    for v in (led.get("verify") or {}).values():
        calls += v.get("calls", 0)
        for r, c in (v.get("rejected_by_reason") or {}).items():
            rejected += c
            reasons[r] = reasons.get(r, 0) + c
    return calls, rejected, reasons


def _pct(x: Any) -> str:
    return f"{100 * x:.1f}%" if isinstance(x, (int, float)) else ""


def cost_row(name: str, led: dict[str, Any]) -> list[str]:
    g, (calls, rej, reasons) = _gen(led), _verify(led)
    secs = led.get("seconds") or {}
    top = sorted(reasons.items(), key=lambda kv: -kv[1])[:2]
    teach = led.get("teacher") or {}
    ck = led.get("checkpoints") or {}
    tok = led.get("trained_tokens", 0)
    return [
        name,
        f"{led.get('device_count', 1)} x {led.get('device', '?')}",
        f"{led.get('device_seconds', 0):.1f}",
        " / ".join(f"{secs.get(p, 0):.1f}" for p in PHASES),
        f"{_k(tok)} ({_k(led.get('padded_positions', 0))})"
        if tok or led.get("train_steps")
        else "",
        _k(g["prompts"]) if g["prompts"] else "",
        _k(g["rollouts"]) if g["rollouts"] else "",
        f"{_k(g['prompt_tokens'])} / {_k(g['response_tokens'])}" if g["rollouts"] else "",
        f"{g['mean']:.1f} / {g['p95']}" if g["rollouts"] else "",
        _pct(g["trunc"]) if g["rollouts"] else "",
        f"{_k(calls)} ({_pct(rej / calls)})" if calls else "",
        ", ".join(f"{r} {c}" for r, c in top),
        f"{teach.get('calls', 0)} ({_k(teach.get('prompt', 0) + teach.get('completion', 0))})"
        if teach.get("calls")
        else "",
        f"{ck.get('count', 0)} ({ck.get('bytes', 0) / 1e6:.1f})" if ck.get("count") else "",
        _pct(led.get("train_frac_peak")),
        _pct(led.get("decode_frac_bandwidth")),
    ]


def total_ledger(leds: list[dict[str, Any]]) -> dict[str, Any]:
    """The run's totals as one ledger (sums; the device of the first stage)."""
    tot: dict[str, Any] = {
        "device": leds[0].get("device", "?") if leds else "?",
        "device_count": max((x.get("device_count", 1) for x in leds), default=1),
        "device_seconds": sum(x.get("device_seconds", 0) for x in leds),
        "seconds": {p: sum((x.get("seconds") or {}).get(p, 0) for x in leds) for p in PHASES},
        "trained_tokens": sum(x.get("trained_tokens", 0) for x in leds),
        "padded_positions": sum(x.get("padded_positions", 0) for x in leds),
        "generation": {
            f"{i}.{k}": v
            for i, x in enumerate(leds)
            for k, v in (x.get("generation") or {}).items()
        },
        "verify": {
            f"{i}.{k}": v for i, x in enumerate(leds) for k, v in (x.get("verify") or {}).items()
        },
        "teacher": {
            k: sum((x.get("teacher") or {}).get(k, 0) for x in leds)
            for k in ("calls", "prompt", "completion")
        },
        "checkpoints": {
            k: sum((x.get("checkpoints") or {}).get(k, 0) for x in leds) for k in ("count", "bytes")
        },
    }
    return tot


def ledgers(order: list[str], stages: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    return [(n, stages[n]["ledger"]) for n in order if (stages.get(n) or {}).get("ledger")]


def cost_markdown(order: list[str], stages: dict[str, Any]) -> str:
    """The report's Cost section; "" when no stage has a ledger (a run from before it)."""
    got = ledgers(order, stages)
    if not got:
        return ""
    tot = total_ledger([x for _, x in got])
    hours = tot["device_seconds"] / 3600
    lines = [
        "## Cost",
        "",
        f"Device-hours: {hours:.3f} ({tot['device_seconds']:.0f} device-seconds). Each stage's "
        "ledger.json has the rest (verdicts by reason and phase, decode steps). The totals' "
        "p95 is the largest stage's.",
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "|".join("---" if i < 2 else "---:" for i in range(len(COLUMNS))) + "|",
    ]
    for name, led in got:
        lines.append("| " + " | ".join(cost_row(name, led)) + " |")
    lines.append("| " + " | ".join(cost_row("**total**", tot)) + " |")
    return "\n".join(lines)


def cost_text(order: list[str], stages: dict[str, Any]) -> str:
    """The console form for `vibethinker status`: a few columns per stage and the total."""
    got = ledgers(order, stages)
    if not got:
        return ""
    keep = (0, 2, 4, 6, 7, 10)
    rows = [[COLUMNS[i] for i in keep]]
    rows += [[cost_row(n, led)[i] for i in keep] for n, led in got]
    rows.append([cost_row("total", total_ledger([x for _, x in got]))[i] for i in keep])
    widths = [max(len(r[i]) for r in rows) for i in range(len(keep))]
    return "\n".join(
        ["cost (each stage's ledger.json; report.md has every column):"]
        + ["  " + "  ".join(c.ljust(w) for c, w in zip(r, widths)) for r in rows]
    )
