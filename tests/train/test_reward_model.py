"""The `reward_model` stage (Bradley-Terry head on the tiny Qwen2), the world's preference pairs,
and the local reward-model rubric back-end (batched = one at a time; bad folders refused)."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from vibethinker import ledger
from vibethinker.data.io import save_problems
from vibethinker.data.world import generate
from vibethinker.data.world.instruct_open import degrade, open_problems, preference_pairs
from vibethinker.models.tiny import build_tiny_model
from vibethinker.stages.reward_model import RewardModelConfig, build_pairs, load_start, norm_from
from vibethinker.stages.reward_model import run as run_rm
from vibethinker.train.reward_model import (
    accumulate_step,
    bt_loss,
    collate,
    encode_pairs,
    length_batches,
    micro_groups,
    step_tokens,
)
from vibethinker.verifiers.rubric import RewardModelRubric, load_reward_model


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("rm")
    splits = generate(3, 60, 1, 4, ["math", "instruct"], 0.5)
    probs = splits["train"] + open_problems(3, 12)
    save_problems(root / "train.jsonl", probs)
    texts = [p.prompt + " " + t for p in probs for t in p.traces or []]
    model = build_tiny_model(root / "model", texts, "d1", 300, 0)
    return root, probs, model


def test_bt_loss_is_the_bradley_terry_nll():
    assert float(bt_loss(torch.zeros(3), torch.zeros(3))) == pytest.approx(math.log(2))
    c, r = torch.tensor([2.0, -1.0]), torch.tensor([0.0, 0.5])
    want = -(math.log(1 / (1 + math.exp(-2.0))) + math.log(1 / (1 + math.exp(1.5)))) / 2
    assert float(bt_loss(c, r)) == pytest.approx(want)
    x = torch.tensor([0.0], requires_grad=True)
    bt_loss(x, torch.tensor([0.0])).backward()
    assert float(x.grad) < 0  # raising the chosen reward lowers the loss


def test_length_batches_bucketed_or_random():
    lens = random.Random(0).sample(range(1, 200), 50)
    enc = [([0] * n, [0] * (n + i % 3)) for i, n in enumerate(lens)]
    for bucket in (True, False):
        b = length_batches(enc, 8, 1, bucket)
        assert sorted(i for x in b for i in x) == list(range(50))  # every pair once
        assert b == length_batches(enc, 8, 1, bucket)  # seeded
    spread = [
        max(len(enc[i][1]) for i in x) - min(len(enc[i][1]) for i in x)
        for x in length_batches(enc, 8, 1)
    ]
    spread_rand = [
        max(len(enc[i][1]) for i in x) - min(len(enc[i][1]) for i in x)
        for x in length_batches(enc, 8, 1, bucket=False)
    ]
    assert sum(spread) < sum(spread_rand) / 2  # buckets hold pairs of similar length


def test_world_preference_pairs(world):
    _, probs, _ = world
    rng = random.Random(0)
    rule = next(p for p in probs if p.instructions and p.wrong_traces)
    opn = next(p for p in probs if p.subdomain == "open")
    rows_rule, rows_open = preference_pairs(rule, rng), preference_pairs(opn, rng)
    assert {r["kind"] for r in rows_open} == {
        "wrong",
        "ignores_instruction",
        "truncated",
        "rambling",
    }
    assert "ignores_instruction" in {r["kind"] for r in rows_rule}
    for r in rows_rule + rows_open:
        assert r["chosen"] != r["rejected"] and "</think>" not in r["chosen"] + r["rejected"]
    text = "Tea is made from leaves. Tea has caffeine."
    cut = degrade(text, "truncated", rng)
    assert text.startswith(cut) and len(cut) < len(text)
    ramble = degrade(text, "rambling", rng)
    assert ramble.startswith(text) and ramble.count("Tea is made from leaves") >= 3


def test_stage_trains_a_head_that_loads_and_ranks(world, tmp_path):
    root, _, model = world
    cfg = RewardModelConfig(
        model=str(model),
        data=str(root),
        out=str(tmp_path / "rm"),
        epochs=3,
        batch=8,
        lr=3e-3,
        final_lr=3e-4,
        max_len=128,
        eval_frac=0.2,
        device="cpu",
    )
    out = run_rm(cfg)
    res = json.loads(open(out["eval"]).read())
    hist = [json.loads(x) for x in open(out["metrics"])]
    first, last = hist[: len(hist) // 4], hist[-(len(hist) // 4) :]
    assert sum(r["loss"] for r in last) / len(last) < sum(r["loss"] for r in first) / len(first)
    assert res["held_out_pairs"] > 0 and set(res["source"]) == {"rule", "open"}
    assert res["held_out_accuracy"] > 0.6  # truncation / rambling / wrong answers are learnable
    # the folder is a sequence-classification model with its normalisation
    rm = RewardModelRubric(out["model"], batch_size=4)
    pairs = [
        ("Explain tea in two short sentences.", "Tea is made from leaves. Tea has caffeine."),
        ("Explain tea in two short sentences.", "Tea is"),
        (
            "Rewrite this request politely: Send me the notes on rain.",
            "Could you please send me the notes on rain? Thank you.",
        ),
        ("Write about cats. Use only lowercase letters.", "cats are small pets. " * 6),
    ]
    batched = rm.logits(pairs)
    single = [rm.logits([p])[0] for p in pairs]
    assert batched == pytest.approx(single, abs=1e-4)  # padding does not change a score
    vals = [r.value for r in rm.score(pairs)]
    assert all(0.0 <= v <= 1.0 for v in vals)
    norm = json.loads(open(f"{out['model']}/reward_norm.json").read())
    assert norm["mean_chosen"] > norm["mean_rejected"]
    z = (norm["mean_chosen"] - norm["offset"]) / norm["scale"]
    assert 1 / (1 + math.exp(-z)) == pytest.approx(0.8808, abs=1e-3)


def test_norm_rule():
    n = norm_from([3.0, 5.0], [-1.0, 1.0])
    assert (n["offset"], n["scale"]) == (2.0, 1.0)
    assert norm_from([1.0], [1.0])["scale"] == 1e-3


def test_folder_without_a_classification_head_is_refused(world, tmp_path):
    _, _, model = world
    with pytest.raises(ValueError, match="no sequence-classification head"):
        load_reward_model(model)
    with pytest.raises(FileNotFoundError, match="not a Hugging Face folder"):
        load_reward_model(tmp_path)
    # a sequence-classification config whose head weights are absent from the checkpoint
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    m = AutoModelForSequenceClassification.from_pretrained(model, num_labels=1)
    m.save_pretrained(tmp_path / "cls")
    AutoTokenizer.from_pretrained(model).save_pretrained(tmp_path / "cls")
    sd = load_file(tmp_path / "cls" / "model.safetensors")
    save_file(
        {k: v for k, v in sd.items() if not k.startswith("score")},
        tmp_path / "cls" / "model.safetensors",
        metadata={"format": "pt"},
    )
    with pytest.raises(ValueError, match="weights missing.*score"):
        load_reward_model(tmp_path / "cls")


def test_rl_instruct_stage_uses_the_reward_model_and_logs_metrics_by_source(world, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from vibethinker.stages.rl import run as run_rl
    from vibethinker.train.rl_config import RLConfig

    root, _, model = world
    rm = AutoModelForSequenceClassification.from_pretrained(model, num_labels=1)
    rm.config.pad_token_id = 0
    rm.save_pretrained(tmp_path / "rm")
    AutoTokenizer.from_pretrained(model).save_pretrained(tmp_path / "rm")
    cfg = RLConfig(
        model=str(model),
        data=str(root / "train.jsonl"),
        domain="instruct",
        out=str(tmp_path / "rl"),
        steps=1,
        prompts_per_step=4,
        group_size=2,
        max_new_tokens=8,
        filter_rollouts=0,
        max_prompts=0,
        lr=1e-4,
        final_lr=1e-5,
        rule_reward="strict",
        rubric_model=f"hf:{tmp_path / 'rm'}",
        device="cpu",
        verify_workers=1,
        seed=1,
    )
    run_rl(cfg)
    row = json.loads(open(tmp_path / "rl" / "metrics.jsonl").readline())
    assert row["n_rule"] + row["n_open"] == 8
    assert row["rubric_calls"] >= row["n_open"] and row["rubric_fail"] == 0
    assert "reward_rule" in row and "reward_open" in row
    bad = RLConfig(**{**cfg.__dict__, "rubric_model": f"hf:{model}", "out": str(tmp_path / "b")})
    with pytest.raises(ValueError, match="no sequence-classification head"):
        run_rl(bad)  # refused at the stage start, before any rollout
    assert not (tmp_path / "b" / "metrics.jsonl").exists()


@pytest.mark.parametrize(
    "change",
    [
        {"rubric_model": "hf:/another/rm"},
        {"rubric_threshold": 0.8},
        {"rule_reward": "strict"},
        {"rubric_weight": 0.3},
        {"rubric_fail_value": 0.5},
        {"rubric_prompt": "rubric2.txt"},
        {"math_judge": "m@http://x"},
    ],
)
def test_rl_filter_cache_is_not_reused_when_a_reward_setting_changes(tmp_path, change):
    from vibethinker.data.io import load_problems
    from vibethinker.stages.rl import training_prompts
    from vibethinker.train.rl_config import RLConfig

    save_problems(tmp_path / "train.jsonl", open_problems(3, 6))
    cfg = RLConfig(
        model="m",
        data=str(tmp_path / "train.jsonl"),
        domain="instruct",
        out=str(tmp_path / "rl"),
        filter_rollouts=0,
        rubric_model="hf:/rm",
    )
    full, _ = training_prompts(cfg, None, None, None)
    cache = tmp_path / "rl" / "prompts.jsonl"
    cache.write_text(cache.read_text().splitlines()[0] + "\n")  # a recognisably stale cache
    assert len(training_prompts(cfg, None, None, None)[0]) == 1  # same settings: reused
    changed = RLConfig(**{**cfg.__dict__, **change})
    assert len(training_prompts(changed, None, None, None)[0]) == len(full) > 1
    assert len(load_problems(cache)) == len(full)  # the cache was rebuilt under the new key


def test_reward_model_adamw_matches_the_default_update():
    from vibethinker.train.reward_model import make_adamw

    torch.manual_seed(0)
    a = torch.nn.Parameter(torch.randn(5, 3))
    b = torch.nn.Parameter(a.detach().clone())
    ref = torch.optim.AdamW([a], lr=0.1, weight_decay=0.01)
    ours = make_adamw([b], 0.1, 0.01)
    for _ in range(3):
        g = torch.randn(5, 3)
        a.grad, b.grad = g.clone(), g.clone()
        ref.step()
        ours.step()
    assert not torch.equal(a.detach(), torch.zeros(5, 3))
    assert torch.allclose(a, b, atol=1e-6)


def _rel(a, b):
    """Relative difference of two tensors, in norm (fp32 sums in another order differ ~1e-7)."""
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def _step_grads(model, enc, idx, micro, max_tokens=0):
    """(loss, rewards, {name: grad}) of one accumulated step, the model's grads reset after."""
    model.zero_grad(set_to_none=True)
    pad = model.config.pad_token_id
    loss, rc, rr = accumulate_step(model, enc, idx, pad, micro, max_tokens)
    grads = {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}
    model.zero_grad(set_to_none=True)
    return float(loss), torch.cat([rc, rr]), grads


def test_micro_batches_give_the_one_forward_loss_and_gradients(world):
    root, probs, model = world
    rows = build_pairs([p for p in probs if p.domain == "instruct" and p.traces], 0)[:12]
    torch.manual_seed(0)
    rm, tok = load_start(str(model), "cpu")
    enc = encode_pairs(tok, rows, 400)
    idx = list(range(len(enc)))
    assert len({max(map(len, enc[i])) for i in idx}) > 3  # rows of different lengths
    rm.double().train()  # fp64: the maths compared, not fp32 summation order (~1e-5 here)
    loss, z, ref = _step_grads(rm, enc, idx, len(idx))  # the whole step in one forward
    assert len(ref) == len(list(rm.parameters()))
    for micro, budget in ((1, 0), (5, 0), (0, 600)):
        got_loss, got_z, got = _step_grads(rm, enc, idx, micro, budget)
        assert got_loss == pytest.approx(loss, rel=1e-5)
        assert torch.allclose(got_z, z, rtol=1e-5, atol=1e-6)
        assert max(_rel(got[n], g) for n, g in ref.items()) < 1e-5
    rm.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    ck_loss, _, ck = _step_grads(rm, enc, idx, 2)  # checkpointing: the same gradients too
    assert ck_loss == pytest.approx(loss, rel=1e-5)
    assert max(_rel(ck[n], g) for n, g in ref.items()) < 1e-5


def test_micro_groups_keep_order_and_budget_and_pad_to_their_own_longest():
    enc = [([1] * n, [1] * (n + 2)) for n in (3, 5, 4, 10, 2, 9)]
    idx = [0, 2, 1, 4, 5, 3]
    assert micro_groups(enc, idx, 4) == [[0, 2, 1, 4], [5, 3]]
    groups = micro_groups(enc, idx, 99, max_tokens=40)
    assert [i for g in groups for i in g] == idx  # every pair once, in order
    for g in groups:
        longest = max(len(enc[i][1]) for i in g)
        assert len(g) == 1 or 2 * len(g) * longest <= 40
        ids, att = collate(enc, g, 0)
        assert ids.shape == (2 * len(g), longest) and int(att.sum()) == sum(
            len(enc[i][0]) + len(enc[i][1]) for i in g
        )
    assert micro_groups(enc, [3], 1, max_tokens=8) == [[3]]  # one pair over budget still runs


def test_step_tokens_count_real_tokens_and_the_padded_positions_of_each_micro_batch():
    enc = [([1, 2, 3], [1]), ([1, 2], [1, 2, 3, 4])]
    # one pair per forward: rows (3, 1) padded to 3, rows (2, 4) padded to 4
    assert step_tokens(enc, [0, 1], 1) == (10, 2 * 3 + 2 * 4)
    # both pairs in one forward: four rows padded to 4
    assert step_tokens(enc, [0, 1], 2) == (10, 4 * 4)


def test_the_stage_fills_the_cost_ledger(world, tmp_path):
    root, _, model = world
    cfg = RewardModelConfig(
        model=str(model),
        data=str(root),
        out=str(tmp_path / "rm"),
        epochs=1,
        batch=8,
        micro_batch=4,
        max_len=128,
        eval_frac=0.2,
        device="cpu",
    )
    ledger.start()
    try:
        out = run_rm(cfg)
    finally:
        rec = ledger.stop(1.0)
    hist = [json.loads(x) for x in open(out["metrics"])]
    assert rec["train_steps"] == len(hist) > 0
    assert rec["trained_tokens"] > 0 and rec["padded_positions"] > 0  # pairs of unequal lengths
    assert rec["params"] > 0 and rec["seconds"]["update"] > 0
    assert rec["checkpoints"]["count"] == 1 and rec["checkpoints"]["bytes"] > 0


class _Saved:
    """A tensor autograd keeps for backward, counted while alive."""

    def __init__(self, t, live):
        self.t, self.live, self.n = t, live, t.numel() * t.element_size()
        live["now"] += self.n
        live["peak"] = max(live["peak"], live["now"])

    def __del__(self):
        self.live["now"] -= self.n


def _peak_saved(model, enc, idx, micro):
    live = {"now": 0, "peak": 0}
    with torch.autograd.graph.saved_tensors_hooks(lambda t: _Saved(t, live), lambda s: s.t):
        accumulate_step(model, enc, idx, model.config.pad_token_id, micro)
    model.zero_grad(set_to_none=True)
    return live["peak"]


def test_step_memory_does_not_grow_with_pairs_per_step_at_fixed_micro_batch(world):
    _, _, model = world
    rm, _ = load_start(str(model), "cpu")
    rm.train()
    enc = [([5] * 40, [6] * 40)] * 16
    fixed = [_peak_saved(rm, enc, list(range(n)), 2) for n in (2, 8, 16)]
    assert fixed[0] == fixed[1] == fixed[2] > 0  # tensors kept for backward: one micro-batch's
    whole = [_peak_saved(rm, enc, list(range(n)), n) for n in (2, 8)]
    assert whole[0] == fixed[0] and whole[1] > 3 * whole[0]  # one forward: grows with the step


def test_bad_micro_batch_keys_are_refused_by_name(tmp_path):
    with pytest.raises(ValueError, match="micro_batch must be >= 1"):
        run_rm(RewardModelConfig(model="m", data="d", micro_batch=0))
    with pytest.raises(ValueError, match="max_tokens_per_micro must be >= 0"):
        run_rm(RewardModelConfig(model="m", data="d", max_tokens_per_micro=-1))


_RSS_STEP = """
import resource, sys, torch
from transformers import Qwen2Config, Qwen2ForSequenceClassification
from vibethinker.train.reward_model import accumulate_step, make_adamw
pairs, micro = int(sys.argv[1]), int(sys.argv[2])
torch.manual_seed(0)
cfg = Qwen2Config(vocab_size=1000, hidden_size=256, intermediate_size=1024, num_hidden_layers=4,
                  num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, num_labels=1)
model = Qwen2ForSequenceClassification(cfg).train()
opt = make_adamw(list(model.parameters()), 1e-4, 0.0)
enc = [([5] * 512, [6] * 512)] * pairs
accumulate_step(model, enc, list(range(pairs)), 0, micro)
opt.step()
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
"""


def rss_table() -> str:
    """Peak RSS (MB) of a fresh process running one reward-model step (a random 4-layer Qwen2,
    hidden 256, pairs of 512-token rows), by pairs per step: micro_batch 2 against the whole
    step in one forward. Run: flock /tmp/heavy.lock env OMP_NUM_THREADS=1 PYTHONPATH=$PWD
    python tests/train/test_reward_model.py"""
    import subprocess
    import sys

    lines = ["| pairs per step | micro_batch 2 | one forward |", "|---:|---:|---:|"]
    for pairs in (2, 8, 16, 32):
        peak = [
            float(
                subprocess.run(
                    [sys.executable, "-c", _RSS_STEP, str(pairs), str(m)],
                    capture_output=True,
                    text=True,
                    check=True,
                ).stdout
            )
            for m in (2, pairs)
        ]
        lines.append(f"| {pairs} | {peak[0]:.0f} | {peak[1]:.0f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    print(rss_table())
