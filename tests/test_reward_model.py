"""The `reward_model` stage (Bradley-Terry head on the tiny Qwen2), the world's preference pairs,
and the local reward-model rubric back-end (batched = one at a time; bad folders refused)."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from vibethinker.data.io import save_problems
from vibethinker.data.world import generate
from vibethinker.data.world.instruct_open import degrade, open_problems, preference_pairs
from vibethinker.models.tiny import build_tiny_model
from vibethinker.stages.reward_model import RewardModelConfig, norm_from
from vibethinker.stages.reward_model import run as run_rm
from vibethinker.train.reward_model import bt_loss, length_batches
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
    spread = [max(len(enc[i][1]) for i in x) - min(len(enc[i][1]) for i in x)
              for x in length_batches(enc, 8, 1)]  # fmt: skip
    spread_rand = [max(len(enc[i][1]) for i in x) - min(len(enc[i][1]) for i in x)
                   for x in length_batches(enc, 8, 1, bucket=False)]  # fmt: skip
    assert sum(spread) < sum(spread_rand) / 2  # buckets hold pairs of similar length


def test_world_preference_pairs(world):
    _, probs, _ = world
    rng = random.Random(0)
    rule = next(p for p in probs if p.instructions and p.wrong_traces)
    opn = next(p for p in probs if p.subdomain == "open")
    rows_rule, rows_open = preference_pairs(rule, rng), preference_pairs(opn, rng)
    assert {r["kind"] for r in rows_open} == {"wrong", "ignores_instruction", "truncated",
                                              "rambling"}  # fmt: skip
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
    cfg = RewardModelConfig(model=str(model), data=str(root), out=str(tmp_path / "rm"),
                            epochs=3, batch=8, lr=3e-3, final_lr=3e-4, max_len=128,
                            eval_frac=0.2, device="cpu")  # fmt: skip
    out = run_rm(cfg)
    res = json.loads(open(out["eval"]).read())
    hist = [json.loads(x) for x in open(out["metrics"])]
    first, last = hist[: len(hist) // 4], hist[-(len(hist) // 4) :]
    assert sum(r["loss"] for r in last) / len(last) < sum(r["loss"] for r in first) / len(first)
    assert res["held_out_pairs"] > 0 and set(res["source"]) == {"rule", "open"}
    assert res["held_out_accuracy"] > 0.6  # truncation / rambling / wrong answers are learnable
    # the folder is a sequence-classification model with its normalisation
    rm = RewardModelRubric(out["model"], batch_size=4)
    pairs = [("Explain tea in two short sentences.", "Tea is made from leaves. Tea has caffeine."),
             ("Explain tea in two short sentences.", "Tea is"),
             ("Rewrite this request politely: Send me the notes on rain.",
              "Could you please send me the notes on rain? Thank you."),
             ("Write about cats. Use only lowercase letters.", "cats are small pets. " * 6)]  # fmt: skip
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
    save_file({k: v for k, v in sd.items() if not k.startswith("score")},
              tmp_path / "cls" / "model.safetensors", metadata={"format": "pt"})  # fmt: skip
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
    cfg = RLConfig(model=str(model), data=str(root / "train.jsonl"), domain="instruct",
                   out=str(tmp_path / "rl"), steps=1, prompts_per_step=4, group_size=2,
                   max_new_tokens=8, filter_rollouts=0, max_prompts=0, lr=1e-4, final_lr=1e-5,
                   rule_reward="strict", rubric_model=f"hf:{tmp_path / 'rm'}", device="cpu",
                   verify_workers=1, seed=1)  # fmt: skip
    run_rl(cfg)
    row = json.loads(open(tmp_path / "rl" / "metrics.jsonl").readline())
    assert row["n_rule"] + row["n_open"] == 8
    assert row["rubric_calls"] >= row["n_open"] and row["rubric_fail"] == 0
    assert "reward_rule" in row and "reward_open" in row
    bad = RLConfig(**{**cfg.__dict__, "rubric_model": f"hf:{model}", "out": str(tmp_path / "b")})
    with pytest.raises(ValueError, match="no sequence-classification head"):
        run_rl(bad)  # refused at the stage start, before any rollout
    assert not (tmp_path / "b" / "metrics.jsonl").exists()


@pytest.mark.parametrize("change", [
    {"rubric_model": "hf:/another/rm"}, {"rubric_threshold": 0.8}, {"rule_reward": "strict"},
    {"rubric_weight": 0.3}, {"rubric_fail_value": 0.5}, {"rubric_prompt": "rubric2.txt"},
    {"math_judge": "m@http://x"}])  # fmt: skip
def test_rl_filter_cache_is_not_reused_when_a_reward_setting_changes(tmp_path, change):
    from vibethinker.data.io import load_problems
    from vibethinker.stages.rl import training_prompts
    from vibethinker.train.rl_config import RLConfig

    save_problems(tmp_path / "train.jsonl", open_problems(3, 6))
    cfg = RLConfig(model="m", data=str(tmp_path / "train.jsonl"), domain="instruct",
                   out=str(tmp_path / "rl"), filter_rollouts=0, rubric_model="hf:/rm")  # fmt: skip
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
