"""Experiment tracking (`report_to`, log.py): none by default, TensorBoard event files and
offline Weights & Biases runs from the SFT and RL loops; trackio when installed."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.loop_options import rl_options, sft_options
from vibethinker.log import Tracker, make_tracker, parse_report_to
from vibethinker.models.tiny import build_tiny_model
from vibethinker.train import policy
from vibethinker.types import Problem, Score

torch.set_num_threads(1)


def _scalars(folder) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(folder))
    acc.Reload()
    return {t: [(e.step, e.value) for e in acc.Scalars(t)] for t in acc.Tags()["scalars"]}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [f"what is {i}+1? <think>{i}+1={i + 1}</think>\\boxed{{{i + 1}}}" for i in range(40)]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)


def test_parse_report_to():
    assert (
        parse_report_to("none") == [] and parse_report_to("") == [] and parse_report_to(None) == []
    )
    assert parse_report_to("tensorboard, wandb") == ["tensorboard", "wandb"]
    assert parse_report_to(["trackio"]) == ["trackio"]
    with pytest.raises(ValueError, match="known"):
        parse_report_to("tensorbord")
    t = make_tracker("none", "/nonexistent", "x")
    assert isinstance(t, Tracker) and t.names == []
    t.log({"loss": 1.0}, 1)
    t.close()


def test_every_training_stage_has_report_to_off_by_default():
    from vibethinker.stages.rl import RLConfig
    from vibethinker.stages.sft import SFTConfig

    assert SFTConfig().report_to == "none" and RLConfig().report_to == "none"


def test_sft_loop_writes_tensorboard_scalars(tiny, tmp_path):
    from vibethinker.train import packing, sft

    model, tok = policy.load_policy(tiny, "cpu")
    pairs = [
        (f"what is {i}+1?", f"<think>{i}+1={i + 1}</think>\\boxed{{{i + 1}}}") for i in range(16)
    ]
    samples = packing.build_samples(pairs, tok, 128)
    opts = sft_options(
        global_batch=8, micro_batch=8, max_len=128, lr=1e-3, epochs=2, report_to="tensorboard"
    )
    sft.train(model, tok, samples, opts, tmp_path / "sft")
    sc = _scalars(tmp_path / "sft" / "tensorboard")
    assert [s for s, _ in sc["loss"]] == [1, 2, 3, 4]
    assert {"lr", "grad_norm", "tokens_per_s"} <= set(sc)


def test_rl_loop_writes_tensorboard_scalars(tiny, tmp_path):
    from vibethinker.train.rl import train

    model, tok = policy.load_policy(tiny, "cpu")
    probs = [Problem(f"p{i}", "math", f"what is {i}+1?", answer=str(i + 1)) for i in range(4)]
    opts = rl_options(
        steps=2, prompts_per_step=2, group_size=2, max_new_tokens=6, report_to="tensorboard"
    )

    def verify(ps, rs):
        return [Score(float("1" in r), "1" in r, "ok") for r in rs]

    train(model, tok, probs, opts, tmp_path / "rl", verify=verify)
    sc = _scalars(tmp_path / "rl" / "tensorboard")
    assert [s for s, _ in sc["reward"]] == [1, 2]
    assert {"accuracy", "mgpo_weight", "t_generate"} <= set(sc)


def test_wandb_offline_run(tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_SILENT", "true")
    t = make_tracker("wandb", tmp_path, "run-a", {"lr": 1e-3})
    for step in (1, 2, 3):
        t.log({"loss": 1.0 / step, "note": "text is skipped"}, step)
    t.close()
    runs = list((tmp_path / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("*.wandb"))


def test_trackio_when_installed(tmp_path, monkeypatch):
    pytest.importorskip("trackio")
    monkeypatch.setenv("TRACKIO_DIR", str(tmp_path / "trackio"))
    t = make_tracker("trackio", tmp_path, "run-b", {"lr": 1e-3})
    t.log({"loss": 0.5}, 1)
    t.close()


def test_missing_tracker_package_fails_at_start(monkeypatch, tmp_path):
    import builtins

    real = builtins.__import__

    def no_wandb(name, *a, **k):
        if name == "wandb":
            raise ImportError("no wandb")
        return real(name, *a, **k)

    monkeypatch.setattr(builtins, "__import__", no_wandb)
    with pytest.raises(ImportError, match="pip install wandb"):
        make_tracker("wandb", tmp_path, "x")
