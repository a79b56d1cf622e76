"""Training core: LR schedule by hand, clipping, grad accumulation, checkpoints, exact resume."""

from __future__ import annotations

import math
import random

import pytest
import torch

from tests.helpers.loop_options import sft_options
from vibethinker.models.tiny import build_tiny_model
from vibethinker.train import checkpoints, packing, policy, sft
from vibethinker.train.sft_config import SFTConfig

torch.set_num_threads(1)


def _pairs(n: int = 32, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
        out.append(
            (
                f"Compute {a}*{b}+{c}.",
                f"<think>{a}*{b}={a * b};{a * b}+{c}={a * b + c}</think>\\boxed{{{a * b + c}}}",
            )
        )
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    pairs = _pairs(64)
    return build_tiny_model(
        tmp_path_factory.mktemp("tiny"), [p + " " + r for p, r in pairs], "d1", 300, 0
    )


# ----------------------------------------------------------------------------- schedule


def test_lr_at_hand_values():
    # total 100, warm-up 5% -> W = 5 steps: 0.2, 0.4, 0.6, 0.8, 1.0 x peak.
    f = lambda s: policy.lr_at(s, 100, 1.0, 0.1, 0.05)  # noqa: E731
    assert [round(f(s), 6) for s in range(5)] == [0.2, 0.4, 0.6, 0.8, 1.0]
    # Cosine from step 5 (peak) to step 99 (final); decay length 94, halfway at step 52:
    # 0.1 + 0.45 * (1 + cos(pi/2)) = 0.55.
    assert f(5) == pytest.approx(1.0)
    assert f(52) == pytest.approx(0.55)
    assert f(99) == pytest.approx(0.1)
    # A quarter in (step 5 + 23.5 is not an integer; use total 101 -> W = 6, decay 94):
    # step 6 + 47 = 53 is halfway again.
    assert policy.lr_at(53, 101, 1.0, 0.0, 0.05) == pytest.approx(0.5)
    # No warm-up: first step is the peak, then monotone down to final.
    vals = [policy.lr_at(s, 10, 5e-5, 8e-8, 0.0) for s in range(10)]
    assert vals[0] == pytest.approx(5e-5) and vals[-1] == pytest.approx(8e-8)
    assert all(a >= b for a, b in zip(vals, vals[1:]))
    # The paper's schedule: 5e-5 -> 8e-8, 5% warm-up.
    assert policy.lr_at(0, 1000, 5e-5, 8e-8, 0.05) == pytest.approx(5e-5 / 50)
    assert policy.lr_at(49, 1000, 5e-5, 8e-8, 0.05) == pytest.approx(5e-5)
    assert policy.lr_at(999, 1000, 5e-5, 8e-8, 0.05) == pytest.approx(8e-8)
    assert policy.lr_at(0, 1, 1.0, 0.0, 0.05) == 1.0  # a one-step run still trains


def test_scheduler_follows_lr_at():
    p = torch.nn.Parameter(torch.zeros(2))
    opt = torch.optim.AdamW([p], lr=123.0)
    sched = policy.make_scheduler(opt, 20, 2e-3, 1e-5, 0.1)
    seen = []
    for _ in range(20):
        seen.append(opt.param_groups[0]["lr"])
        p.grad = torch.ones(2)
        opt.step()
        sched.step()
    assert seen == pytest.approx([policy.lr_at(s, 20, 2e-3, 1e-5, 0.1) for s in range(20)])


def test_optimizer_step_clips_and_reports_norm():
    lin = torch.nn.Linear(3, 1, bias=False)
    opt = torch.optim.SGD(lin.parameters(), lr=1.0)
    lin.weight.grad = torch.tensor([[3.0, 4.0, 0.0]])  # norm 5
    w0 = lin.weight.detach().clone()
    norm = policy.optimizer_step(lin, opt, None, max_grad_norm=1.0)
    assert norm == pytest.approx(5.0)
    # Clipped to norm 1: the step is (0.6, 0.8, 0).
    assert torch.allclose(w0 - lin.weight.detach(), torch.tensor([[0.6, 0.8, 0.0]]), atol=1e-6)
    assert lin.weight.grad is None


def test_cpu_optimizer_is_fused_and_steps_like_the_default():
    torch.manual_seed(0)
    a, b = torch.nn.Linear(8, 4), torch.nn.Linear(8, 4)
    b.load_state_dict(a.state_dict())
    fused = policy.make_optimizer(a, 1e-2, weight_decay=0.1)
    plain = torch.optim.AdamW(b.parameters(), lr=1e-2, weight_decay=0.1)
    assert fused.param_groups[0]["fused"] is True  # the one-call kernel, as TRL's Trainer uses
    for _ in range(3):
        g = [torch.randn_like(p) for p in a.parameters()]
        for m, opt in ((a, fused), (b, plain)):
            for p, gi in zip(m.parameters(), g):
                p.grad = gi.clone()
            opt.step()
    for p, q in zip(a.parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=1e-6) and not torch.equal(p, torch.zeros_like(p))


# ----------------------------------------------------------------------------- training


def _opts(**kw) -> SFTConfig:
    base = dict(
        epochs=1,
        global_batch=8,
        micro_batch=2,
        lr=3e-3,
        final_lr=1e-4,
        warmup_frac=0.2,
        max_len=64,
        pack=True,
        save_every=0,
        seed=3,
    )
    base.update(kw)
    return sft_options(**base)


def _weights(model) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def _run(tiny, out, opts, **kw):
    model, tok = policy.load_policy(tiny, "cpu")
    samples = packing.build_samples(_pairs(32, seed=1), tok, opts.max_len)
    stats = sft.train(model, tok, samples, opts, out, **kw)
    return model, stats


def test_grad_accumulation_matches_one_big_batch(tiny, tmp_path):
    # Same global batch, split 1 x 8 rows vs 8 x 1 row: same update (token-mean over the step).
    a, _ = _run(tiny, tmp_path / "a", _opts(pack=False, micro_batch=8, max_steps=2))
    b, _ = _run(tiny, tmp_path / "b", _opts(pack=False, micro_batch=1, max_steps=2))
    for (k, x), y in zip(_weights(a).items(), _weights(b).values()):
        assert torch.allclose(x, y, atol=1e-5), k


def test_exact_resume(tiny, tmp_path):
    opts = _opts(save_every=2)
    straight, s1 = _run(tiny, tmp_path / "straight", opts)
    assert s1["steps"] == 4
    _, half = _run(tiny, tmp_path / "resumed", opts, stop_at=2)
    assert (
        half["steps"] == 4
        and len(checkpoints.list_checkpoints(tmp_path / "resumed/checkpoints")) == 1
    )
    # A fresh process-like start: new model from the ORIGINAL weights, resumed from step 2.
    resumed, s2 = _run(tiny, tmp_path / "resumed", opts)
    assert s2["resumed_at"] == 2
    for (k, x), y in zip(_weights(straight).items(), _weights(resumed).values()):
        assert torch.allclose(x, y, atol=1e-6), k
    # The metrics file has each step once, and the same losses as the straight run.
    import json

    rows = [json.loads(x) for x in (tmp_path / "resumed/metrics.jsonl").read_text().splitlines()]
    ref = [json.loads(x) for x in (tmp_path / "straight/metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3, 4]
    assert [r["loss"] for r in rows] == pytest.approx([r["loss"] for r in ref], abs=1e-6)


def test_checkpoint_is_plain_hf_folder(tiny, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model, _ = _run(tiny, tmp_path / "r", _opts(save_every=2))
    found = checkpoints.list_checkpoints(tmp_path / "r/checkpoints")
    assert [s for s, _ in found] == [2, 4]
    last = found[-1][1]
    assert (last / checkpoints.STATE_FILE).exists()
    plain = AutoModelForCausalLM.from_pretrained(last)
    AutoTokenizer.from_pretrained(last)
    ids = torch.tensor([[1, 5, 7, 9]])
    with torch.no_grad():
        assert torch.allclose(plain(ids).logits, model.eval()(ids).logits, atol=1e-5)
    state = torch.load(last / checkpoints.STATE_FILE, weights_only=False)
    assert state["step"] == 4 and set(state["rng"]) >= {"python", "numpy", "torch"}


def test_training_lowers_the_loss(tiny, tmp_path):
    _, stats = _run(tiny, tmp_path / "r", _opts(epochs=4, lr=1e-2, final_lr=1e-3))
    assert stats["steps"] == 16
    assert stats["final_loss"] < 0.7 * stats["first_loss"], stats
    assert math.isfinite(stats["tokens_per_s"])


def test_resume_refuses_a_run_with_other_options(tiny, tmp_path):
    _run(tiny, tmp_path / "r", _opts(save_every=2), stop_at=2)
    with pytest.raises(ValueError, match="other options"):
        _run(tiny, tmp_path / "r", _opts(save_every=2, lr=1e-3))
