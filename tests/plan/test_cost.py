"""`vibethinker plan`'s time and tokens: the anchors it is calibrated on come back out, bad input
gets one line naming the key, every recipe plans before anything has run."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vibethinker import devices
from vibethinker.cli import main
from vibethinker.plan import cost, probe
from vibethinker.plan.cost import Rates, Work
from vibethinker.plan.shapes import KNOWN

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "recipes" / "tiny.yaml")
ONE_GPU = str(ROOT / "recipes" / "qwen2.5-1.5b-1gpu.yaml")
THREE_B = str(ROOT / "recipes" / "vibethinker-3b.yaml")
H200 = Rates(devices.DEVICES["h200"])
CPU_RATES = {"params": 1.2e6, "layers": 3, "train_eff": 0.3, "fwd_eff": 0.3, "step_s": 0.005}
CPU_RATES["row_step_s"] = 1e-4


@pytest.fixture
def fake_cpu(monkeypatch):
    """The CPU row without measuring (the probe takes seconds and depends on the load)."""
    dev = devices.Device("cpu", 5e10, 2e10, 16, dtype_bytes=4, note="test")
    monkeypatch.setattr(devices, "cpu_probe", lambda refresh=False: dev)
    monkeypatch.setattr(probe, "cpu_rates", lambda refresh=False: dict(CPU_RATES))


def test_training_anchors_come_back():
    # Qwen2.5-1.5B / 3B at 4 x 4,096 tokens on the H200: 37.8K and 21.0K tok/s measured
    for size, tok_s in (("1.5b", 37.8e3), ("3b", 21.0e3)):
        w = Work("update", "train", KNOWN[size], tokens=4 * 4096, seq=4096)
        got = w.tokens / cost.train_seconds(w, H200)
        assert got == pytest.approx(tok_s, rel=0.03)


def test_forward_and_decode_anchors_come_back():
    w = Work("update", "prefill", KNOWN["1.5b"], tokens=1e6, seq=0)
    assert w.tokens / cost.prefill_seconds(w, H200) == pytest.approx(128e3, rel=0.03)
    # HF generate, batch 256, 1.5B on the H200: ~3.0K tok/s (the anchor its row cost is solved on)
    *_, b, p, resp, tok_s, _ = cost.ANCHORS["hf"]
    step = cost.hf_step(KNOWN["1.5b"], b, p + resp / 2, devices.DEVICES["h200"])
    assert b / step == pytest.approx(tok_s, rel=0.02)
    assert cost.hf_row_cost() > 0 and cost.engine_factor("vllm") > 1
    # vLLM is the faster engine at the same work; both slow down with a longer context
    shape = KNOWN["1.5b"]
    short = Work("sample", "decode", shape, tokens=256 * 512, seq=256, rows=256, cap=1024)
    hf, vllm = (
        cost.decode_seconds(short, H200),
        cost.decode_seconds(Work(**{**short.__dict__, "engine": "vllm"}), H200),
    )
    assert vllm < hf / 5
    long = Work(**{**short.__dict__, "seq": 16384})
    assert cost.decode_seconds(long, H200) > hf


def test_more_gpus_divide_training_time():
    w = Work("update", "train", KNOWN["3b"], tokens=1e9, seq=8192)
    one = cost.train_seconds(w, Rates(devices.DEVICES["h100"]))
    assert cost.train_seconds(w, Rates(devices.DEVICES["h100"], 8)) == pytest.approx(one / 8)
    assert cost.train_seconds(w, Rates(devices.DEVICES["a100"])) > 3 * one


def test_tiny_plans_before_anything_ran(capsys, fake_cpu, tmp_path):
    # the run folder does not exist: memory and time come from the model stage's config
    assert main(["plan", TINY, "device=cpu", f"run_dir={tmp_path / 'none'}"]) == 0
    out = capsys.readouterr().out
    assert "| sft1 | sft | update" in out and "Predicted time on cpu" in out
    rows = {x.split(" | ")[0][2:]: x.split(" | ") for x in out.splitlines() if x.startswith("| ")}
    # generated: (60 steps x 16 x 8 + the filter's 400 x 4) rollouts + 4 evals x 60 x 2, 23 each
    assert (
        rows["rl_math"][-1].strip(" |") == f"{(60 * 16 * 8 + 400 * 4 + 4 * 60 * 2) * 23 / 1e3:.1f}K"
    )
    assert "**total**" in rows


@pytest.mark.parametrize("recipe", [ONE_GPU, THREE_B])
@pytest.mark.parametrize("device", ["h100", "h200", "a100", "h800"])
def test_gpu_recipes_plan_on_every_device(capsys, recipe, device):
    assert main(["plan", recipe, f"device={device}", "gpus=8"]) in (0, 1)
    out = capsys.readouterr().out
    assert f"Predicted time on {device}" in out and "| **total** |" in out
    if device == "h800" and recipe == THREE_B:
        assert "beside the VibeThinker-1.5B report's ~3,900 H800 GPU-hours" in out


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["device=tpu9"], "unknown device 'tpu9'; set device= one of h100"),
        (["engine=sglang"], "set engine=hf or engine=vllm"),
        (["expect.sft1.rows=many"], "expect.sft1.rows='many': expected a number"),
    ],
)
def test_bad_input_gets_one_line(capsys, args, needle):
    assert main(["plan", ONE_GPU, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_a_recipe_with_no_lengths_names_the_key(capsys, tmp_path):
    bare = tmp_path / "bare.yaml"  # the 3B recipe without its .expect.yaml beside it
    shutil.copy(THREE_B, bare)
    assert main(["plan", str(bare), "gpus=8"]) == 2
    err = capsys.readouterr().err.strip()
    assert "stage sft1: no row count" in err and "set expect.sft1.rows=N" in err
    assert len(err.splitlines()) == 1
    # given the counts, it plans
    keys = ["expect.sft1.rows=1000", "expect.sft1.row_tokens=4000"]
    assert main(["plan", str(bare), "gpus=8", *keys]) == 2  # the next missing count: probe1's
    assert "set expect.probe1.eval_problems=N" in capsys.readouterr().err
