"""The report's Cost table: a row per stage with a ledger, the run's totals at the bottom."""

from __future__ import annotations

from vibethinker import ledger
from vibethinker.reports.cost import cost_markdown, cost_text


def _rec(tokens: int, rollouts: int, wall: float) -> dict:
    ledger.start()
    if rollouts:
        ledger.sampled(rollouts, [4] * rollouts, [10] * rollouts, 1, 10, 1.0)
        ledger.verified(
            ["ok"] + ["wrong_answer"] * (rollouts - 1), [True] + [False] * (rollouts - 1), 0.5
        )
    if tokens:
        ledger.trained(tokens, tokens + 5, 2.0, 1000)
    return ledger.stop(wall, "cpu", 1)


def test_rows_and_totals():
    stages = {
        "sft1": {"ledger": _rec(500, 0, 4.0)},
        "rl": {"ledger": _rec(200, 4, 6.0)},
        "old": {"status": "done"},  # a stage from before the ledger: no row
    }
    md = cost_markdown(["sft1", "rl", "old"], stages)
    lines = md.splitlines()
    assert lines[0] == "## Cost"
    rows = [x for x in lines if x.startswith("| ")][1:]
    assert [r.split(" | ")[0] for r in rows] == ["| sft1", "| rl", "| **total**"]
    total = rows[-1].split(" | ")
    assert total[2] == "10.0"  # device-seconds
    assert total[4] == "700 (10)"  # tokens trained (padded)
    assert total[6] == "4" and total[10] == "4 (75.0%)"  # rollouts; verifier calls (rejected)
    assert "wrong_answer 3" in rows[-1]
    assert "Device-hours: 0.003" in md
    assert cost_text(["sft1", "rl"], stages).splitlines()[-1].startswith("  total")


def test_no_ledgers_no_section():
    assert cost_markdown(["a"], {"a": {"status": "done"}}) == ""
