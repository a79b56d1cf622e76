"""LoRA through peft, an option beside full fine-tuning: SFT, then one RL step, on the
tiny model; each saves a loadable adapter and a merged plain HF folder that agree, and a LoRA SFT
run resumes from its checkpoint."""

from __future__ import annotations

import peft  # noqa: F401 - a dev dependency: a broken install fails, never skips
import pytest
import torch

from tests.helpers.sft_data import _problems, tiny  # noqa: F401 - the tiny-model fixture
from vibethinker.data.io import save_problems
from vibethinker.types import Score


def _logits(model, ids):
    with torch.no_grad():
        return model(input_ids=ids).logits


def _check_outputs(start: str, final: str, trained: bool = True) -> None:
    """final/ loads with plain transformers; final/adapter on the start model gives the same
    logits; the adapter moved the model away from the start."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(final).eval()
    base = AutoModelForCausalLM.from_pretrained(start).eval()
    with_adapter = PeftModel.from_pretrained(base, f"{final}/adapter").eval()
    ids = torch.tensor([[1, 5, 7, 9, 11, 3]])
    assert torch.allclose(_logits(merged, ids), _logits(with_adapter, ids), atol=1e-4)
    plain = AutoModelForCausalLM.from_pretrained(start).eval()
    moved = (_logits(merged, ids) - _logits(plain, ids)).abs().max()
    assert (moved > 1e-4) == trained


def test_lora_sft_then_one_rl_step(tiny, tmp_path, monkeypatch):  # noqa: F811
    import vibethinker.stages.rl as rl_stage
    from vibethinker.stages import get
    from vibethinker.train import checkpoints

    data = tmp_path / "data"
    data.mkdir()
    save_problems(data / "train.jsonl", _problems(24, seed=3))
    save_problems(data / "eval.jsonl", _problems(4, seed=4))
    sft = get("sft")
    cfg = sft.config_cls(
        model=tiny,
        data=str(data),
        out=str(tmp_path / "sft"),
        max_steps=4,
        global_batch=8,
        micro_batch=4,
        lr=1e-2,
        final_lr=1e-3,
        max_len=128,
        save_every=2,
        device="cpu",
        lora_r=4,
        lora_alpha=8,
    )
    outs = sft.fn(cfg)
    _check_outputs(tiny, outs["model"])
    ckpts = checkpoints.list_checkpoints(tmp_path / "sft" / "checkpoints")
    assert [s for s, _ in ckpts] == [2, 4] and (ckpts[0][1] / "adapter").is_dir()

    # resume: a LoRA checkpoint restores the adapters (a run stopped at step 2 continues to 4)
    import shutil

    shutil.rmtree(tmp_path / "sft" / "checkpoints" / "step-000004")
    again = sft.fn(cfg)
    _check_outputs(tiny, again["model"])

    # a checkpoint trained with another LoRA rank is refused on resume, never silently mixed
    shutil.rmtree(tmp_path / "sft" / "checkpoints" / "step-000004")
    changed = sft.config_cls(**{**cfg.__dict__, "lora_r": 8})
    with pytest.raises(ValueError, match="lora_r"):
        sft.fn(changed)

    # one RL step on the SFT model with LoRA; a stand-in verifier gives groups mixed rewards
    def has_digit(problems, responses, **kw):
        return [
            Score(float(ok), ok, "ok") for ok in (any(c.isdigit() for c in r) for r in responses)
        ]

    monkeypatch.setattr(rl_stage, "verify_batch", has_digit)
    rl = get("rl")
    rcfg = rl.config_cls(
        model=outs["model"],
        data=str(data),
        out=str(tmp_path / "rl"),
        steps=1,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=8,
        filter_rollouts=0,
        lr=1e-2,
        final_lr=1e-2,
        temperature=1.5,
        device="cpu",
        lora_r=4,
        lora_alpha=8,
        seed=1,
        truncated_reward="verify",
    )
    routs = rl.fn(rcfg)
    (row,) = [__import__("json").loads(x) for x in open(routs["metrics"]).read().splitlines()]
    _check_outputs(outs["model"], routs["model"], trained=row["trained_rows"] > 0)
    assert row["trained_rows"] > 0
