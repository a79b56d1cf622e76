"""`vibethinker plan`: model shapes, the memory arithmetic, verdicts and knobs, bad input, the
one-GPU recipe (plan passes; its first stages run on CPU with the tiny model swapped in)."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vibethinker import stages as stage_registry
from vibethinker.cli import main
from vibethinker.config import ConfigError
from vibethinker.plan import GIB, parse_gpu, plan_recipe, plan_stage
from vibethinker.plan.memory import Step, activations, kv_cache, train_phase, train_state
from vibethinker.plan.shapes import KNOWN, ModelShape, lookup, resolve
from vibethinker.plan.stages import Context
from vibethinker.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
ONE_GPU = str(ROOT / "recipes" / "qwen2.5-1.5b-1gpu.yaml")
THREE_B = str(ROOT / "recipes" / "vibethinker-3b.yaml")


def test_known_shapes_match_published_parameter_counts():
    # the safetensors totals of Qwen2.5-0.5B/1.5B/3B/7B (7B has an untied LM head)
    want = {"0.5b": 494_032_768, "1.5b": 1_543_714_304, "3b": 3_085_938_688, "7b": 7_615_616_512}
    assert {k: s.params() for k, s in KNOWN.items()} == want


def test_lookup_hub_ids_folders_and_unknowns(tmp_path):
    assert lookup("Qwen/Qwen2.5-Coder-3B").layers == 36
    assert lookup("WeiboAI/VibeThinker-1.5B").hidden == 1536
    assert lookup("qwen/qwen2.5-7b-instruct").kv_heads == 4
    assert lookup("meta-llama/Llama-3-8B") is None
    assert lookup(str(tmp_path / "not-yet-written")) is None
    cfg = {
        "num_hidden_layers": 2,
        "hidden_size": 64,
        "intermediate_size": 128,
        "num_attention_heads": 4,
        "num_key_value_heads": 2,
        "vocab_size": 100,
        "tie_word_embeddings": True,
    }
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    s = lookup(str(tmp_path))
    # per layer: q 64*64+64, k and v 64*32+32 each, o 64*64, MLP 3*64*128, norms 2*64
    layer = 4160 + 2 * 2080 + 4096 + 24576 + 128
    assert s.params() == 2 * layer + 100 * 64 + 64
    fallback = KNOWN["3b"]
    assert resolve("runs/x/merged", fallback, "w") is fallback
    with pytest.raises(ConfigError, match="w: model 'runs/x/merged' is neither"):
        resolve("runs/x/merged", None, "w")


def test_memory_terms_by_hand():
    s = KNOWN["1.5b"]
    # K and V, 28 layers, 2 kv heads x 128, bf16: 28,672 bytes per token
    assert kv_cache(s, 1, 2.0) == 2 * 28 * 256 * 2
    full = train_state(s, 8, cuda=False)
    assert [t.bytes for t in full] == [12.0 * s.params() / 8, 4.0 * s.params() / 8]
    # between steps (RL sampling) no gradients; at the head's backward only the head's
    assert sum(t.bytes for t in train_state(s, 1, False, grads="none")) == 12.0 * s.params()
    assert train_state(s, 1, False, grads="head")[1].bytes == 4.0 * 151936 * 1536
    # checkpointing keeps one fp32 hidden state per layer and token plus one recomputed layer
    no, yes = activations(s, 1000, False, False), activations(s, 1000, True, False)
    per_layer = 4 * (7 * 1536 + 2 * 256 + 4 * 8960) * 1000
    assert no == 28 * per_layer
    assert yes == 28 * 4 * 1536 * 1000 + per_layer


def test_chunked_head_and_more_gpus_lower_the_peak():
    s = KNOWN["3b"]
    whole = train_phase(s, Step(1, 32768, 32768, 0, True, masked=True), 1, True).total
    chunked = train_phase(s, Step(1, 32768, 32768, 8192, True, masked=True), 1, True).total
    sharded = train_phase(s, Step(1, 32768, 32768, 0, True, masked=True), 8, True).total
    assert chunked < whole - 30 * GIB  # 12 B x 32K x 152K at once vs 16 B x 8K x 152K
    assert sharded < whole - 25 * GIB  # 12 B/param + bf16 copies on one GPU vs 12/8 + the root


def test_one_gpu_recipe_fits_80gb_and_not_24gb():
    plans = plan_recipe(load_recipe(ONE_GPU), gpus=1, mem=80 * GIB)
    assert [p.fits for p in plans if p.fits is not None] == [True] * 10  # sft2, probe2 added
    small = plan_recipe(load_recipe(ONE_GPU), gpus=1, mem=24 * GIB)
    sft1 = next(p for p in small if p.name == "sft1")
    assert sft1.fits is False and sft1.knob  # e.g. more GPUs or a shorter cap


def test_knob_names_checkpointing_when_it_alone_makes_it_fit():
    # at 32K tokens per row: every layer's activations (~112 GB) do not fit 80 GB, checkpointed
    # ones (~29 GB) do
    rec = load_recipe(ONE_GPU, {"sft1.gradient_checkpointing": "false", "sft1.max_len": "32768"})
    ps = next(p for p in rec.stages if p.name == "sft1")
    sp = plan_stage(ps.name, ps.stage, ps.config, Context(base=KNOWN["1.5b"]))
    assert sp.fits is False and sp.knob == "gradient_checkpointing=true"
    # the config value itself: with it set, the same stage fits
    fixed = dataclasses.replace(ps.config, gradient_checkpointing=True)
    assert plan_stage(ps.name, ps.stage, fixed, Context(base=KNOWN["1.5b"])).fits


def test_cli_tables_for_both_recipes(capsys):
    assert main(["plan", ONE_GPU, "gpu_mem_gb=80"]) == 0
    out = capsys.readouterr().out
    assert "| sft1 | sft | update" in out and "1,543,714,304 params" in out
    # the 3B recipe on 8 x 80 GB: SFT at 32K and distill at 64K fit (the LM head goes a chunk
    # at a time); the reward model fits with the recipe's micro-batches and checkpointing
    assert main(["plan", THREE_B, "gpus=8", "gpu=h100"]) == 0
    out = capsys.readouterr().out
    rows = {line.split(" | ")[0][2:]: line for line in out.splitlines() if line.count("|") == 8}
    assert "| yes |" in rows["sft1"] and "| yes |" in rows["rl_math"]
    assert "| yes |" in rows["distill"]
    assert "| yes |" in rows["reward_model"] and "(4 x 8192 tok, checkpointed)" in out
    # its whole step in one forward (the trainer before micro-batches) does not fit, and the
    # knob names checkpointing with a micro-batch, not a shorter cap
    one = ["reward_model.micro_batch=64", "reward_model.gradient_checkpointing=false"]
    assert main(["plan", THREE_B, "gpus=8", "gpu=h100", *one]) == 1
    row = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("| reward_model |"))
    assert "| NO | gradient_checkpointing=true micro_batch=4 |" in row


def test_reward_model_estimate_reads_micro_batch_checkpointing_and_token_budget():
    rec = load_recipe(THREE_B, {})
    ps = next(p for p in rec.stages if p.stage == "reward_model")
    ctx = Context(base=KNOWN["3b"], gpus=8)

    def peak(**kw):
        return plan_stage(ps.name, ps.stage, dataclasses.replace(ps.config, **kw), ctx).peak.total

    base = peak()
    assert peak(batch=16) == base  # a step's pair count does not matter, its micro-batch does
    assert peak(micro_batch=4) > base > peak(micro_batch=1)
    assert peak(gradient_checkpointing=False) > 3 * base
    # a token budget of 2 pairs of max_len-long chosen + rejected rows = micro_batch 2
    assert peak(micro_batch=64, max_tokens_per_micro=4 * 8192) == base
    assert peak(micro_batch=64, max_tokens_per_micro=1) == peak(micro_batch=1)


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["gpu=tpu9"], "unknown GPU 'tpu9'"),
        (["gpu_mem_gb=lots"], "gpu_mem_gb='lots'"),
        (["gpus=0"], "gpus=0"),
        (["model=Qwen/Qwen2.5-7B", "gpu_mem_gb=8"], "cannot fit 8 GB at any setting"),
        (["model=some/unknown-model"], "neither a folder with config.json nor a known"),
    ],
)
def test_bad_input_gets_one_line(capsys, args, needle):
    assert main(["plan", ONE_GPU, *args]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and len(err.splitlines()) == 1


def test_parse_gpu_names_and_sizes():
    assert parse_gpu({"gpu": "H200"}) == (1, 141 * GIB, True)
    assert parse_gpu({"gpus": "4", "gpu_mem_gb": "40", "device": "cpu"}) == (4, 40 * GIB, False)


@pytest.mark.slow
def test_predictor_within_20_percent_of_a_measured_cpu_peak():
    """One case of scripts/plan_check.py (a fresh process: 4-layer Qwen2, packed 2048-token
    row, checkpointing on, two AdamW steps): predicted / measured peak RSS within 20%."""
    code = (
        "import sys; sys.argv = ['plan_check.py', '--only', '1']; "
        "import runpy; runpy.run_path('scripts/plan_check.py', run_name='__main__')"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "within 20%" in out.stdout


@pytest.mark.slow
def test_one_gpu_recipe_first_stages_run_on_cpu_with_the_tiny_model(tmp_path):
    """model=<run_dir>/tiny_model swaps the tiny model in: data, model and two steps of sft1."""
    run_dir = tmp_path / "run"
    over = {
        "run_dir": str(run_dir),
        "model": f"{run_dir}/tiny_model",
        "sft1.max_steps": "2",
        "sft1.max_len": "1024",
    }
    rec = load_recipe(ONE_GPU, over)
    for ps in rec.stages[:3]:
        stage_registry.get(ps.stage).fn(ps.config)
    rows = [json.loads(x) for x in (run_dir / "sft1" / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [1, 2]
    assert (run_dir / "sft1" / "final" / "config.json").exists()
    # the first stages' model is the tiny one, not the 1.5B of the recipe
    shape = lookup(str(run_dir / "tiny_model"))
    assert isinstance(shape, ModelShape) and shape.params() < 5e6


def test_rl_reads_the_token_budget_key_when_the_config_has_it():
    from vibethinker.plan.stages import rl_micro_rows
    from vibethinker.train.rl_config import RLConfig

    budget = dataclasses.make_dataclass(
        "Budgeted", [("max_tokens_per_micro", int, 0)], bases=(RLConfig,)
    )
    seq = 2048 + 16384
    # without the key: micro_batch rows; with it: as many whole rows as the budget holds (>= 1)
    assert rl_micro_rows(RLConfig(micro_batch=4), seq, 1) == 4
    assert rl_micro_rows(budget(micro_batch=4, max_tokens_per_micro=40000), seq, 1) == 2
    assert rl_micro_rows(budget(micro_batch=4, max_tokens_per_micro=1000), seq, 1) == 1
    # never more rows than the device's share of the step (prompts x G / gpus)
    assert rl_micro_rows(RLConfig(micro_batch=64, prompts_per_step=2, group_size=8), seq, 4) == 4


def test_vllm_needs_weights_and_one_sequence_within_its_share():
    rec = load_recipe(ONE_GPU, {"eval_aime.engine": "vllm", "model": "Qwen/Qwen2.5-7B"})
    ps = next(p for p in rec.stages if p.name == "eval_aime")
    big = plan_stage(ps.name, ps.stage, ps.config, Context(base=KNOWN["7b"], mem=80 * GIB))
    assert big.fits  # 14.2 GiB of bf16 weights and one 18K sequence within 0.9 x 80 GB
    ctx = Context(base=KNOWN["7b"], mem=12 * GIB)  # 0.9 x 12 GB < 14.2 GiB of bf16 weights
    with pytest.raises(ConfigError, match=r"eval_aime \(eval\) cannot fit 12 GB at any setting"):
        plan_stage(ps.name, ps.stage, ps.config, ctx)
