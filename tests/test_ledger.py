"""The cost ledger: hooks are no-ops with no ledger open; counts, lengths, verdicts, phases."""

from __future__ import annotations

from vibethinker import devices, ledger


def test_hooks_do_nothing_without_an_open_ledger():
    ledger.stop(0.0)  # whatever an earlier test left open
    ledger.sampled(1, [3], [4], 0, 4, 0.1)
    ledger.verified(["ok"], [True], 0.1)
    ledger.trained(10, 12, 0.1, 100)
    assert ledger.current() is None
    assert ledger.stop(1.0) == {}


def test_a_stage_record_counts_every_phase():
    ledger.start()
    ledger.sampled(2, [5, 5, 7, 7], [10, 20, 30, 40], truncated=1, decode_steps=40, seconds=2.0)
    ledger.verified(
        ["ok", "wrong_answer", "no_boxed_answer", "wrong_answer"], [True, False, False, False], 0.5
    )
    with ledger.phase("eval"):
        ledger.sampled(1, [5], [8], 0, 8, 1.0)
        ledger.verified(["ok"], [True], 0.25)
    ledger.trained(100, 120, 3.0, params=1000)
    rec = ledger.stop(10.0, "h100", 2, devices.DEVICES["h100"])
    assert rec["seconds"] == {
        "sample": 2.0,
        "verify": 0.5,
        "update": 3.0,
        "eval": 1.25,
        "other": 3.25,
    }
    assert rec["device_seconds"] == 20.0 and rec["device_count"] == 2
    g = rec["generation"]["sample"]
    assert (g["prompts"], g["rollouts"], g["prompt_tokens"], g["response_tokens"]) == (
        2,
        4,
        24,
        100,
    )
    assert g["response_mean"] == 25.0 and g["response_p95"] == 40 and g["truncation_rate"] == 0.25
    assert rec["generation"]["eval"]["rollouts"] == 1
    v = rec["verify"]["verify"]
    assert v["calls"] == 4 and v["rejection_rate"] == 0.75
    assert v["rejected_by_reason"] == {"wrong_answer": 2, "no_boxed_answer": 1}
    assert rec["verify"]["eval"]["rejection_rate"] == 0.0
    assert rec["trained_tokens"] == 100 and rec["padded_positions"] == 20
    assert rec["train_flops_s"] == 6 * 1000 * 100 / 3.0
    assert rec["train_frac_peak"] == round(rec["train_flops_s"] / (989e12), 4)
    # decoding: 48 weight reads of 2-byte weights over the engine calls' 3 seconds
    assert rec["decode_bytes_s"] == 48 * 2 * 1000 / 3.0


def test_checkpoint_bytes_and_p95(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100)
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "b").write_bytes(b"y" * 50)
    ledger.start()
    ledger.checkpoint(tmp_path)
    rec = ledger.stop(1.0)
    assert rec["checkpoints"] == {"count": 1, "bytes": 150}
    assert ledger.p95(list(range(1, 101))) == 95 and ledger.p95([]) == 0
