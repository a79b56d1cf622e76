"""SFT: assistant-only masks, packing without cross-contamination, plans, filters, the stage."""

from __future__ import annotations

import json
import random

import pytest
import torch

from tests.helpers.loop_options import sft_options
from tests.helpers.sft_data import _problems, tiny  # noqa: F401 - the tiny-model fixture
from vibethinker.models.tiny import CHAT_TEMPLATE
from vibethinker.train import checkpoints, packing, policy, sft
from vibethinker.types import Completion, Score

torch.set_num_threads(1)


@pytest.fixture(scope="module")
def model_tok(tiny):  # noqa: F811
    return policy.load_policy(tiny, "cpu")


# ----------------------------------------------------------------------------- encoding


def test_assistant_mask_covers_exactly_the_response(model_tok):
    _, tok = model_tok
    p = _problems(1)[0]
    ids, mask = packing.encode_chat(tok, p.prompt, p.traces[0])
    assert len(ids) == len(mask) and 0 < sum(mask) < len(mask)
    trained = tok.decode([i for i, m in zip(ids, mask) if m])
    assert trained == p.traces[0] + "<|im_end|>"  # the turn's EOS is learned, the prompt not
    # The mask is one contiguous block, the prompt is all zeros.
    first, last = mask.index(1), len(mask) - 1 - mask[::-1].index(1)
    assert all(mask[first : last + 1]) and not any(mask[:first])


def test_template_without_generation_block_gives_the_same_mask(model_tok):
    _, tok = model_tok
    p = _problems(1)[0]
    ref = packing.encode_chat(tok, p.prompt, p.traces[1])
    plain = CHAT_TEMPLATE.replace("{% generation %}", "").replace("{% endgeneration %}", "")
    old = tok.chat_template
    try:
        tok.chat_template = plain
        assert packing.encode_chat(tok, p.prompt, p.traces[1]) == ref
    finally:
        tok.chat_template = old


# ----------------------------------------------------------------------------- packing


def test_pack_first_fit_by_hand():
    # max_len 10: 6 opens row0 (room 4); 5 opens row1 (room 5); 4 -> row0 (full, closed);
    # 3 -> row1 (room 2); 7 opens row2 (room 3); 2 -> row1 (full); 3 -> row2.
    assert packing.pack([6, 5, 4, 3, 7, 2, 3], 10) == [[0, 2], [1, 3, 5], [4, 6]]
    # A window of one open row is plain sequential packing: 6 | 5+4 | 3+7 | 2+3.
    assert packing.pack([6, 5, 4, 3, 7, 2, 3], 10, open_rows=1) == [[0], [1, 2], [3, 4], [5, 6]]
    assert packing.pack([12, 1], 10) == [[0], [1]]  # too long: a row of its own


def test_plan_steps_covers_each_sample_once_per_epoch():
    rng = random.Random(0)
    lengths = [rng.randint(5, 40) for _ in range(50)]
    plan = packing.plan_steps(lengths, 64, True, 16, 2, seed=1, epochs=2)
    assert len(plan) == 2 * 4  # 50 samples / 16 per step -> 4 steps per epoch
    per_epoch = [plan[:4], plan[4:]]
    for ep in per_epoch:
        idx = [i for step in ep for micro in step for row in micro for i in row]
        assert sorted(idx) == list(range(50))
        for step in ep:
            for micro in step:
                assert len(micro) <= 2
                assert all(sum(lengths[i] for i in row) <= 64 for row in micro)
    assert plan == packing.plan_steps(lengths, 64, True, 16, 2, seed=1, epochs=2)
    assert plan != packing.plan_steps(lengths, 64, True, 16, 2, seed=2, epochs=2)


def test_packed_loss_equals_unpacked_loss(model_tok):
    import copy

    base, tok = model_tok
    # Sharpen attention (a random init attends almost uniformly, so a leak would barely show).
    model = copy.deepcopy(base).eval()
    with torch.no_grad():
        for name, p in model.named_parameters():
            if any(k in name for k in ("q_proj", "k_proj", "v_proj", "o_proj")):
                p.mul_(4.0)
    pairs = [(p.prompt, t) for p in _problems(4, seed=5) for t in p.traces]
    samples = packing.build_samples(pairs, tok, 256)
    rows = [[0, 1, 2], [3, 4], [5, 6, 7]]
    with torch.no_grad():
        packed, n_packed = sft.token_loss_sum(model, packing.collate(samples, rows, 0, True))
        single = [
            sft.token_loss_sum(model, packing.collate(samples, [[i]], 0, False)) for i in range(8)
        ]
        padded, _ = sft.token_loss_sum(
            model, packing.collate(samples, [[i] for i in range(8)], 0, False)
        )
    assert n_packed == sum(n for _, n in single)
    ref = sum(float(x) for x, _ in single)
    assert float(packed) == pytest.approx(ref, rel=1e-5)
    assert float(padded) == pytest.approx(ref, rel=1e-5)
    exact = abs(float(packed) - ref)
    # Control: positions that do not restart let attention cross samples, and the loss changes.
    leak = packing.collate(samples, rows, 0, True)
    leak["position_ids"] = torch.arange(leak["input_ids"].shape[1]).expand_as(leak["input_ids"])
    with torch.no_grad():
        leaked, _ = sft.token_loss_sum(model, leak)
    # (measured: packed vs unpacked 2e-5 absolute of ~1045; the leak ~0.9)
    assert abs(float(leaked) - ref) > 1000 * max(exact, 1e-5), (exact, float(leaked), ref)


def test_token_loss_is_the_models_own_next_token_loss(model_tok, monkeypatch):
    """`token_loss_sum` / n equals transformers' `model(labels=...).loss` on the same batch (HF
    shifts the labels itself), through both the backbone+head path and the full-logits path.
    Catches a wrong shift (hidden[:, 1:]) or a wrong target that the packing tests cannot see."""
    model, tok = model_tok
    pairs = [(p.prompt, t) for p in _problems(3, seed=7) for t in p.traces]
    batch = packing.collate(
        packing.build_samples(pairs, tok, 256), [[i] for i in range(6)], 0, False
    )
    with torch.no_grad():
        ref = model(
            input_ids=batch["input_ids"],
            attention_mask=batch["attention_mask"],
            position_ids=batch["position_ids"],
            labels=batch["labels"],
        ).loss
        fast, n = sft.token_loss_sum(model, batch)
        monkeypatch.setattr(sft, "backbone_and_head", lambda m: None)
        full, n_full = sft.token_loss_sum(model, batch)
    assert n == n_full == int((batch["labels"][:, 1:] != packing.IGNORE).sum())
    assert float(fast) / n == pytest.approx(float(ref), rel=1e-5)
    assert float(full) / n == pytest.approx(float(ref), rel=1e-5)


@pytest.mark.parametrize("arch", ["gemma2", "cohere"])
def test_token_loss_with_a_head_that_is_more_than_a_matmul(arch):
    """Gemma-2 soft-caps its logits, Cohere scales them: the hidden-state shortcut would skip
    that, so the loss must come from the model's own forward and equal `model(labels=...).loss`."""
    torch.manual_seed(0)
    small = dict(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    if arch == "gemma2":
        from transformers import Gemma2Config, Gemma2ForCausalLM

        model = Gemma2ForCausalLM(
            Gemma2Config(
                **small, head_dim=16, final_logit_softcapping=2.0, attn_implementation="eager"
            )
        ).eval()
    else:
        from transformers import CohereConfig, CohereForCausalLM

        model = CohereForCausalLM(
            CohereConfig(**small, logit_scale=0.5, bos_token_id=0, eos_token_id=1, pad_token_id=0)
        ).eval()
    with torch.no_grad():
        model.lm_head.weight.mul_(50.0)  # logits well past the cap, so capping matters
    assert sft.backbone_and_head(model) is None
    ids = torch.randint(0, 64, (2, 12))
    labels = ids.clone()
    labels[:, :5] = packing.IGNORE
    batch = {
        "input_ids": ids,
        "labels": labels,
        "attention_mask": torch.ones_like(ids),
        "position_ids": torch.arange(12).expand(2, -1),
    }
    with torch.no_grad():
        ref = model(input_ids=ids, labels=labels).loss
        got, n = sft.token_loss_sum(model, batch)
    assert n == 2 * 7 and float(got) / n == pytest.approx(float(ref), rel=1e-5)


def test_plain_models_take_the_hidden_state_shortcut(model_tok):
    model = model_tok[0]
    assert sft.backbone_and_head(model) == (model.model, model.lm_head)


def test_train_step_with_one_trained_token(model_tok):
    """One trained label in the whole step: the step's loss is that token's cross-entropy."""
    import copy

    model = copy.deepcopy(model_tok[0]).eval()
    ids = torch.tensor([[5, 9, 12, 7, 3]])
    labels = torch.full_like(ids, packing.IGNORE)
    labels[0, 3] = 7
    batch = {
        "input_ids": ids,
        "labels": labels,
        "attention_mask": torch.ones_like(ids),
        "position_ids": torch.arange(5)[None],
        "n_tokens": 5,
    }
    with torch.no_grad():
        want = -torch.log_softmax(model(ids).logits[0, 2].float(), -1)[7]
    loss, n_loss, n_tok = sft.train_step(model, [batch], "cpu")
    assert (n_loss, n_tok) == (1, 5) and loss == pytest.approx(float(want), rel=1e-5)
    g = model.get_output_embeddings().weight.grad
    model.zero_grad()
    logits = model(ids).logits[0, 2].float()
    (-torch.log_softmax(logits, -1)[7]).backward()
    assert torch.allclose(g, model.get_output_embeddings().weight.grad, atol=1e-6)


def test_train_step_gradient_is_the_whole_batch_token_mean(model_tok):
    """Micro-batches of one step: their summed gradient is that of the step's token mean (the
    loss `model(labels=...)` gives over the whole batch), however the batch is split."""
    import copy

    model = copy.deepcopy(model_tok[0])
    tok = model_tok[1]
    pairs = [(p.prompt, t) for p in _problems(3, seed=8) for t in p.traces]
    samples = packing.build_samples(pairs, tok, 256)
    whole = packing.collate(samples, [[i] for i in range(6)], 0, False)
    model.zero_grad()
    ref = model(
        input_ids=whole["input_ids"],
        attention_mask=whole["attention_mask"],
        position_ids=whole["position_ids"],
        labels=whole["labels"],
    ).loss
    ref.backward()
    g_ref = model.get_output_embeddings().weight.grad.clone()
    model.zero_grad()
    micro = [
        packing.collate(samples, rows, 0, False) for rows in ([[0], [1]], [[2], [3], [4]], [[5]])
    ]
    loss, n_loss, _ = sft.train_step(model, micro, "cpu")
    assert n_loss == int((whole["labels"][:, 1:] != packing.IGNORE).sum())
    assert loss == pytest.approx(float(ref.detach()), rel=1e-5)
    g = model.get_output_embeddings().weight.grad
    assert torch.allclose(g, g_ref, rtol=1e-4, atol=1e-7)


def test_packed_and_unpacked_training_take_the_same_steps(tiny, tmp_path):  # noqa: F811
    def run(pack: bool, out):
        model, tok = policy.load_policy(tiny, "cpu")
        pairs = [(p.prompt, t) for p in _problems(12, seed=2) for t in p.traces]
        samples = packing.build_samples(pairs, tok, 128)
        opts = sft_options(
            epochs=1,
            global_batch=8,
            micro_batch=2,
            lr=3e-3,
            final_lr=1e-4,
            warmup_frac=0.0,
            max_len=128,
            pack=pack,
            seed=0,
        )
        sft.train(model, tok, samples, opts, out)
        return model.state_dict()

    a, b = run(True, tmp_path / "p"), run(False, tmp_path / "u")
    for k in a:
        assert torch.allclose(a[k], b[k], atol=2e-5), k


# ----------------------------------------------------------------------------- filters


def test_filter_short_traces_counts():
    from vibethinker.stages.sft import filter_short_traces

    ps = _problems(3)
    ps[2].traces = ["x" * 3]
    kept, counts = filter_short_traces(ps, len, 40)
    # Trace lengths: problem 0/1 have one trace >= 40 chars and one shorter? count them by hand.
    expect_removed = sum(1 for p in ps for t in p.traces if len(t) < 40)
    assert counts["short_traces_removed"] == expect_removed
    assert all(len(t) >= 40 for p in kept for t in p.traces)
    assert counts["problems_left_without_trace"] == 3 - len(kept) and len(kept) < 3


class _FakeSampler:
    """Answers problem i correctly in `right[i]` of its n samples."""

    def __init__(self, right):
        self.right = right
        self.prompts = []

    def generate(self, prompts, n, params):
        self.prompts = prompts
        return [[Completion(text="ok" if j < r else "bad") for j in range(n)] for r in self.right]


def test_filter_easy_prompts_keeps_high_error_prompts():
    from vibethinker.stages.sft import filter_easy_prompts

    ps = _problems(4)
    sampler = _FakeSampler([8, 3, 2, 0])  # error rates 0, 5/8, 6/8, 1

    def verify(probs, texts):
        return [Score(1.0 if t == "ok" else 0.0, t == "ok", "") for t in texts]

    kept, counts = filter_easy_prompts(ps, sampler, 8, 0.75, 64, 0, verify=verify)
    assert [p.id for p in kept] == ["m2", "m3"]  # 0.75 itself is kept (drop only below)
    assert counts["easy_prompts_removed"] == 2
    assert counts["ref_mean_error"] == pytest.approx((0 + 5 / 8 + 6 / 8 + 1) / 4, abs=1e-4)


# ----------------------------------------------------------------------------- the stage


def test_sft_stage_outputs_and_filters(tiny, tmp_path):  # noqa: F811
    from transformers import AutoModelForCausalLM

    from vibethinker.data.io import save_problems
    from vibethinker.stages.sft import SFTConfig, run

    data = tmp_path / "train.jsonl"
    save_problems(data, _problems(40, seed=3))
    cfg = SFTConfig(
        model=tiny,
        data=str(data),
        out=str(tmp_path / "sft"),
        epochs=2,
        global_batch=16,
        micro_batch=4,
        lr=3e-3,
        final_lr=1e-4,
        max_len=128,
        save_every=3,
        min_trace_tokens=20,
        device="cpu",
    )
    outs = run(cfg)
    out = tmp_path / "sft"
    AutoModelForCausalLM.from_pretrained(outs["model"])
    assert (out / "loss.png").stat().st_size > 1000
    stats = json.loads((out / "stats.json").read_text())
    # 40 problems x 2 traces; the short first traces (< 20 tokens) go, the long second ones stay.
    f = stats["filters"]
    assert f["traces_in"] == 80 and 0 < f["short_traces_removed"] < 80
    assert stats["samples"] == f["traces_out"] == 80 - f["short_traces_removed"]
    steps = stats["steps"]
    assert [s for s, _ in checkpoints.list_checkpoints(out / "checkpoints")] == sorted(
        set(range(3, steps + 1, 3)) | {steps}
    )
    md = (out / "summary.md").read_text()
    assert "short_traces_removed" in md and "final loss" in md
    assert stats["final_loss"] < stats["first_loss"]
