"""`keep_last` for SFT checkpoints: older checkpoints lose their optimizer state but keep their
weights (probe_merge probes every one); the newest keep everything a resume needs."""

from __future__ import annotations

import torch

from tests.helpers.loop_options import sft_options
from vibethinker.models.tiny import build_tiny_model
from vibethinker.train import checkpoints, packing, policy, sft

torch.set_num_threads(1)


def _run(tiny: str, out, keep_last: int) -> list:
    model, tok = policy.load_policy(tiny, "cpu")
    pairs = [
        (f"Compute {i}+1.", f"<think>{i}+1={i + 1}</think>\\boxed{{{i + 1}}}") for i in range(16)
    ]
    samples = packing.build_samples(pairs, tok, 64)
    opts = sft_options(
        epochs=1,
        global_batch=4,
        micro_batch=2,
        lr=1e-3,
        final_lr=1e-4,
        max_len=64,
        save_every=1,
        keep_last=keep_last,
        seed=0,
    )
    sft.train(model, tok, samples, opts, out)
    return checkpoints.list_checkpoints(out / "checkpoints")


def test_sft_keep_last_keeps_weights_and_drops_old_optimizer_state(tmp_path):
    texts = [f"Compute {i}+1. <think>{i}+1={i + 1}</think>" for i in range(40)]
    tiny = build_tiny_model(tmp_path / "tiny", texts, "d1", 300, 0)
    found = _run(tiny, tmp_path / "k", keep_last=2)
    assert [s for s, _ in found] == [1, 2, 3, 4]  # every checkpoint still listed (probing)

    def opt(d):
        return torch.load(d / checkpoints.STATE_FILE, weights_only=False)["optimizer"]

    assert [opt(d) is None for _, d in found] == [True, True, False, False]
    assert all((d / "config.json").exists() for _, d in found)
    kept = _run(tiny, tmp_path / "all", keep_last=0)
    assert all(opt(d) is not None for _, d in kept)
