"""Faults at resume and during training (issue 37 part 2): a newest checkpoint that cannot resume
exactly (no optimizer or schedule state, a weights file cut short) is skipped for the previous
complete one with a warning naming it, or refused when none is complete; NaN in a checkpoint's
weights, in a step's loss or gradient norm, or in a model to evaluate stops with an error that
says where and why, instead of training or scoring on NaN."""

from __future__ import annotations

import json
import logging
import math

import pytest
import torch
from safetensors.torch import save_file

from tests.helpers import sft_data
from tests.helpers.loop_options import sft_options
from tests.helpers.sft_data import _problems
from vibethinker.cli import main
from vibethinker.data.io import save_problems
from vibethinker.train import checkpoints, packing, policy, sft

torch.set_num_threads(1)
tiny = sft_data.tiny  # the module-scoped tiny model (a fixture)
OPTS = dict(global_batch=8, micro_batch=4, lr=1e-3, final_lr=1e-4, max_len=128, seed=0)


def _samples(tok):
    pairs = [(p.prompt, t) for p in _problems(16, seed=3) for t in p.traces]
    return packing.build_samples(pairs, tok, 128)


def _train(tiny_path, out, **kw):
    model, tok = policy.load_policy(tiny_path, "cpu")
    opts = sft_options(**{**OPTS, "max_steps": 3, "save_every": 1, **kw})
    return sft.train(model, tok, _samples(tok), opts, out), opts


def _resume(tiny_path, out, opts):
    model, tok = policy.load_policy(tiny_path, "cpu")
    return sft.train(model, tok, _samples(tok), opts, out)


def _edit_state(folder, **changes):
    path = folder / checkpoints.STATE_FILE
    state = torch.load(path, weights_only=False)
    torch.save({**state, **changes}, path)


@pytest.mark.parametrize("missing", ["optimizer", "scheduler"])
def test_newest_checkpoint_without_state_falls_back_to_the_previous(
    tiny,
    tmp_path,
    caplog,
    missing,
):
    _, opts = _train(tiny, tmp_path)
    ck = tmp_path / "checkpoints"
    _edit_state(checkpoints.step_dir(ck, 3), **{missing: None})
    with caplog.at_level(logging.WARNING):
        res = _resume(tiny, tmp_path, opts)
    assert res["resumed_at"] == 2  # not 3 with a fresh optimizer / a restarted schedule
    said = caplog.text
    assert "step-000003" in said and f"no {missing} state" in said and "step-000002" in said


def test_no_complete_checkpoint_is_refused_with_the_folder_and_advice(tiny, tmp_path):
    _, opts = _train(tiny, tmp_path)
    for _, d in checkpoints.list_checkpoints(tmp_path / "checkpoints"):
        _edit_state(d, optimizer=None)
    with pytest.raises(checkpoints.CheckpointError) as e:
        _resume(tiny, tmp_path, opts)
    msg = str(e.value)
    assert "step-000003" in msg and "no optimizer state" in msg and "start over" in msg


def test_truncated_newest_weights_fall_back_with_a_warning_naming_the_file(
    tiny,
    tmp_path,
    caplog,
):
    _, opts = _train(tiny, tmp_path)
    f = checkpoints.step_dir(tmp_path / "checkpoints", 3) / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[: len(data) // 2])  # disk full / a copy cut short
    with caplog.at_level(logging.WARNING):
        res = _resume(tiny, tmp_path, opts)
    assert res["resumed_at"] == 2 and res["steps"] == 3
    assert "step-000003" in caplog.text and "model.safetensors" in caplog.text


def test_truncated_trainer_state_falls_back(tiny, tmp_path, caplog):
    _, opts = _train(tiny, tmp_path)
    f = checkpoints.step_dir(tmp_path / "checkpoints", 3) / checkpoints.STATE_FILE
    f.write_bytes(f.read_bytes()[:100])
    with caplog.at_level(logging.WARNING):
        assert _resume(tiny, tmp_path, opts)["resumed_at"] == 2
    assert "trainer_state.pt is unreadable" in caplog.text


def test_nan_weights_in_a_checkpoint_are_an_error_naming_the_file(tiny, tmp_path):
    _, opts = _train(tiny, tmp_path)
    f = checkpoints.step_dir(tmp_path / "checkpoints", 3) / "model.safetensors"
    weights = checkpoints.load_file(str(f))
    name = next(k for k, v in weights.items() if v.is_floating_point())
    weights[name] = weights[name].clone()
    weights[name].view(-1)[0] = math.nan  # bit rot
    save_file(weights, str(f), metadata={"format": "pt"})
    with pytest.raises(checkpoints.CheckpointError, match="non-finite") as e:
        _resume(tiny, tmp_path, opts)
    assert str(f) in str(e.value)


def test_sft_nan_stops_with_the_step_and_advice(tiny, tmp_path, capsys):
    """`sft lr=1e3`: the grad norm is NaN at step 2. The CLI exits nonzero naming the step and
    the advice; the checkpoint of step 1 (finite) is the last one, no NaN weights are saved."""
    data = tmp_path / "train.jsonl"
    save_problems(data, _problems(16, seed=3))
    out = tmp_path / "s"
    argv = [
        "sft",
        f"model={tiny}",
        f"data={data}",
        f"out={out}",
        "max_steps=4",
        "global_batch=8",
        "micro_batch=4",
        "max_len=128",
        "lr=1e3",
        "save_every=1",
        "device=cpu",
    ]
    assert main(argv) != 0
    err = capsys.readouterr().err
    assert "diverged at step 2" in err and "gradient norm is nan" in err and "lr=1000" in err
    assert [s for s, _ in checkpoints.list_checkpoints(out / "checkpoints")] == [1]
    assert not (out / "final").exists()
    # the model left behind is finite: evaluating it would not silently score 0
    for f in (out / "checkpoints").glob("*/model.safetensors"):
        checkpoints.read_weights(f)


def test_rl_nan_grad_norm_stops_the_loop(tmp_path, monkeypatch):
    from tests.helpers import rl_loop as t
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.train import rl

    texts = [f"{p.prompt} {i}" for i, p in enumerate(t._problems(40))]
    tiny_rl = build_tiny_model(tmp_path / "tiny", texts, "d1", 300, 0)
    model, tok = policy.load_policy(tiny_rl, "cpu")
    real = policy.optimizer_step

    def nan_grads(m, *a, **k):
        for p in m.parameters():
            if p.grad is not None:
                p.grad.fill_(math.nan)
        return real(m, *a, **k)

    monkeypatch.setattr(policy, "optimizer_step", nan_grads)
    opts = t._opts(steps=2, eval_every=0)
    with pytest.raises(policy.NonFiniteError, match="rl: training diverged at step 1"):
        rl.train(model, tok, t._problems(), opts, tmp_path / "rl", verify=t.has_digit)
    assert checkpoints.list_checkpoints(tmp_path / "rl" / "checkpoints") == []


def test_eval_of_a_nan_model_says_why(tiny, tmp_path, capsys):
    from vibethinker.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(tiny)
    with torch.no_grad():
        next(model.parameters()).fill_(math.nan)
    model.save_pretrained(tmp_path / "nan")
    tok.save_pretrained(tmp_path / "nan")
    data = tmp_path / "eval.jsonl"
    save_problems(data, _problems(4, seed=5))
    assert main(["eval", str(tmp_path / "nan"), str(data), f"out={tmp_path}/e", "n=1"]) == 2
    assert "non-finite" in capsys.readouterr().err


def test_disk_full_mid_sft_names_the_file_and_the_rerun_resumes(
    tiny, tmp_path, capsys, monkeypatch
):
    """The disk fills while step 2's metrics row is appended: one line naming the file (exit
    1), half a row on disk; the same command again drops the torn row and resumes at step 1."""
    from tests.helpers.faults import _FullDisk

    data = tmp_path / "train.jsonl"
    save_problems(data, _problems(16, seed=3))
    out = tmp_path / "s"
    argv = ["sft", f"model={tiny}", f"data={data}", f"out={out}", "max_steps=3", "save_every=1"]
    argv += ["global_batch=8", "micro_batch=4", "max_len=128", "device=cpu"]
    real = sft._main_file
    monkeypatch.setattr(sft, "_main_file", lambda p: _FullDisk(real(p), room=300))
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "the disk is full" in err and "metrics.jsonl: could not append step 2" in err
    assert not (out / "metrics.jsonl").read_text().endswith("\n")  # torn
    monkeypatch.setattr(sft, "_main_file", real)
    assert main(argv) == 0
    assert "metrics.jsonl: line 2 is torn" in capsys.readouterr().err
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2, 3]


def test_a_nan_checkpoint_folder_is_refused_before_an_engine_loads_it(tiny, tmp_path):
    """vLLM reads a checkpoint folder by itself: check_finite_files (called by VLLMSampler before
    it builds the engine) names the tensor and file; a clean folder passes."""
    from vibethinker.models import check_finite_files, load_model_and_tokenizer

    check_finite_files(tiny, "tiny")
    model, _ = load_model_and_tokenizer(tiny)
    with torch.no_grad():
        dict(model.named_parameters())["model.norm.weight"][0] = math.inf
    model.save_pretrained(tmp_path / "inf")
    with pytest.raises(ValueError, match=r"non-finite.*model\.norm\.weight in model\.safetensors"):
        check_finite_files(tmp_path / "inf", "inf")
