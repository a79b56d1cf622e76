"""One device check (scripts/gpu_check.sh runs it): random weights, no network, one process per
measurement so each peak is its own.

    python scripts/gpu_check.py sft --size 1.5b --seq 16384   # our SFT step: peak vs plan, tok/s, MFU
    python scripts/gpu_check.py trl --size 1.5b --seq 16384   # the same step through TRL's SFTTrainer
    python scripts/gpu_check.py rl --size 1.5b --group 8      # one RL step, hf engine, G samples
    python scripts/gpu_check.py table FILE.jsonl              # the markdown table of the lines

Each measurement prints one JSON line. The model is a Qwen2 of a Qwen2.5 shape (plan/shapes.py)
in fp32 with activation checkpointing, bf16 autocast on CUDA, as the trainers run it; the plan's
prediction comes from the same arithmetic `vibethinker plan` uses. `--size tiny --device cpu`
is the smoke test (seconds).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch
from datasets import Dataset
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, Qwen2Config, TrainerCallback
from trl import SFTConfig, SFTTrainer

from vibethinker.engines import SamplingParams
from vibethinker.engines.hf import HFSampler
from vibethinker.plan.memory import GIB, Step, train_phase
from vibethinker.plan.shapes import KNOWN, ModelShape
from vibethinker.plan.stages import ESTIMATORS, Context
from vibethinker.train import policy, sft
from vibethinker.train.packing import Sample, collate
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.rl_update import update
from vibethinker.train.rollout import build_batch

TINY = ModelShape("tiny", 2, 64, 128, 4, 2, 512, True)
PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "H800": 989.0, "A100": 312.0, "B200": 2250.0}


def shape_of(size: str) -> ModelShape:
    return TINY if size == "tiny" else KNOWN[size]


def build(s: ModelShape, device: str, max_pos: int) -> torch.nn.Module:
    cfg = Qwen2Config(
        vocab_size=s.vocab,
        hidden_size=s.hidden,
        intermediate_size=s.intermediate,
        num_hidden_layers=s.layers,
        num_attention_heads=s.heads,
        num_key_value_heads=s.kv_heads,
        tie_word_embeddings=s.tied,
        max_position_embeddings=max_pos,
        use_cache=False,
    )
    torch.manual_seed(0)
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(
            cfg, dtype=torch.float32, attn_implementation="sdpa"
        )
    model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model.train()


def tokenizer(vocab: int) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over ids t0..t{vocab-1} (no files): pad t0, eos t1."""
    tok = Tokenizer(models.WordLevel({f"t{i}": i for i in range(vocab)}, unk_token="t2"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok, pad_token="t0", eos_token="t1", unk_token="t2"
    )


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _peak(device: str) -> float | None:
    return torch.cuda.max_memory_allocated() / GIB if device.startswith("cuda") else None


def mfu(s: ModelShape, seq: int, tok_s: float, device: str, peak_tflops: float) -> float | None:
    """6 N + 12 L h seq FLOPs per trained token (the usual accounting, causal attention), over
    the card's dense bf16 peak."""
    if not device.startswith("cuda"):
        return None
    if not peak_tflops:
        name = torch.cuda.get_device_name()
        peak_tflops = next((v for k, v in PEAK_TFLOPS.items() if k in name), 0.0)
    flops = 6 * s.params() + 12 * s.layers * s.hidden * seq
    return flops * tok_s / (peak_tflops * 1e12) if peak_tflops else None


def random_row(s: ModelShape, seq: int) -> dict:
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(3, s.vocab, (seq,), generator=g).tolist()
    return collate([Sample(ids, [1] * seq, False)], [[0]], 0, packed=True)


def run_sft(a: argparse.Namespace) -> dict:
    s = shape_of(a.size)
    model = build(s, a.device, a.seq)
    opt = policy.make_optimizer(model, 1e-5)
    batch, times = random_row(s, a.seq), []
    for i in range(a.warmup + a.steps):
        _sync(a.device)
        t0 = time.perf_counter()
        sft.train_step(model, [batch], a.device)
        policy.optimizer_step(model, opt, None, 1.0)
        _sync(a.device)
        if i >= a.warmup:
            times.append(time.perf_counter() - t0)
    step = Step(1, a.seq, a.seq - 1, 0, True)
    pred = train_phase(s, step, 1, a.device.startswith("cuda")).total / GIB
    return _result("sft (ours)", s, a, times, pred)


class _Timer(TrainerCallback):
    def __init__(self, device: str):
        self.device, self.t0, self.times = device, 0.0, []

    def on_step_begin(self, args, state, control, **kw):
        _sync(self.device)
        self.t0 = time.perf_counter()

    def on_step_end(self, args, state, control, **kw):
        _sync(self.device)
        self.times.append(time.perf_counter() - self.t0)


def run_trl(a: argparse.Namespace) -> dict:
    s = shape_of(a.size)
    model = build(s, a.device, a.seq)
    row = random_row(s, a.seq)["input_ids"][0].tolist()
    data = Dataset.from_dict({"input_ids": [row] * (a.warmup + a.steps)})
    cuda = a.device.startswith("cuda")
    cfg = SFTConfig(
        output_dir=tempfile.mkdtemp(),
        max_steps=a.warmup + a.steps,
        per_device_train_batch_size=1,
        learning_rate=1e-5,
        bf16=cuda,
        gradient_checkpointing=True,
        max_length=a.seq,
        packing=False,
        report_to=[],
        save_strategy="no",
        logging_steps=1,
        use_cpu=not cuda,
        dataloader_num_workers=0,
        optim="adamw_torch_fused",
    )
    timer = _Timer(a.device)
    trainer = SFTTrainer(
        model=model,
        args=cfg,
        train_dataset=data,
        processing_class=tokenizer(s.vocab),
        callbacks=[timer],
    )
    trainer.train()
    return _result("sft (TRL SFTTrainer)", s, a, timer.times[a.warmup :], None)


def run_rl(a: argparse.Namespace) -> dict:
    s = shape_of(a.size)
    seq = a.prompt + a.max_new
    model = build(s, a.device, seq)
    opt = policy.make_optimizer(model, 1e-6)
    g = torch.Generator().manual_seed(0)
    prompts = [
        torch.randint(3, s.vocab, (a.prompt,), generator=g).tolist() for _ in range(a.prompts)
    ]
    sampler = HFSampler(model, tokenizer(s.vocab))
    sampler.encode = lambda p: prompts[int(p)]  # token-id prompts: no text round trip
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=a.max_new, seed=0)
    _sync(a.device)
    t0 = time.perf_counter()
    groups = sampler.generate([str(i) for i in range(a.prompts)], n=a.group, params=params)
    _sync(a.device)
    t_roll = time.perf_counter() - t0
    comps = [c for grp in groups for c in grp]
    batch = build_batch([prompts[i] for i in range(a.prompts) for _ in range(a.group)], comps, 0)
    cfg = RLConfig(
        prompts_per_step=a.prompts,
        group_size=a.group,
        max_new_tokens=a.max_new,
        micro_batch=1,
        gradient_checkpointing=True,
        device=a.device,
    )
    adv = torch.randn(len(comps), generator=g)
    t1 = time.perf_counter()
    update(model, opt, None, batch, adv, torch.arange(len(comps)), cfg)
    _sync(a.device)
    t_upd = time.perf_counter() - t1
    ctx = Context(base=s, cuda=a.device.startswith("cuda"), prompt_tokens=a.prompt)
    pred = max(p.total for p in ESTIMATORS["rl"](cfg, ctx)) / GIB
    gen = sum(len(c.token_ids) for c in comps)
    out = _result("rl step (hf engine)", s, a, [t_roll + t_upd], pred)
    out.update(
        rollout_s=round(t_roll, 2),
        update_s=round(t_upd, 2),
        sampled_tokens=gen,
        sample_tok_s=round(gen / t_roll, 1),
        group=a.group,
        prompts=a.prompts,
    )
    return out


def _result(
    what: str, s: ModelShape, a: argparse.Namespace, times: list[float], pred: float | None
) -> dict:
    med = statistics.median(times) if times else float("nan")
    tokens = a.seq if what.startswith("sft") else 0
    tok_s = tokens / med if tokens else None
    peak = _peak(a.device)
    return {
        "what": what,
        "size": a.size,
        "device": a.device,
        "seq": a.seq,
        "steps": len(times),
        "step_s": round(med, 3),
        "tok_s": round(tok_s, 1) if tok_s else None,
        "mfu": mfu(s, a.seq, tok_s, a.device, a.peak_tflops) if tok_s else None,
        "peak_gib": round(peak, 2) if peak is not None else None,
        "plan_gib": round(pred, 3) if pred is not None else None,
        "card": torch.cuda.get_device_name() if a.device.startswith("cuda") else "cpu",
        "date": time.strftime("%Y-%m-%d"),
    }


def _cell(x: float | None) -> str:
    return "" if x is None else f"{x}"


def table(path: str) -> str:
    rows = [json.loads(x) for x in Path(path).read_text().splitlines() if x.startswith('{"what"')]
    lines = [
        "| measurement | size | seq | step s | tokens/s | MFU | peak GiB | plan GiB | card |",
        "|---|---|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in rows:
        m = f"{r['mfu']:.1%}" if r.get("mfu") else ""
        lines.append(
            f"| {r['what']} | {r['size']} | {r['seq']} | {r['step_s']} | "
            f"{r.get('tok_s') or r.get('sample_tok_s', '')} | {m} | {_cell(r['peak_gib'])} | "
            f"{_cell(r.get('plan_gib'))} | {r['card']} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("mode", choices=("sft", "trl", "rl", "table"))
    ap.add_argument("file", nargs="?", default="")
    ap.add_argument("--size", default="1.5b", choices=("tiny", *KNOWN))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seq", type=int, default=16384, help="SFT tokens per step (one row)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--prompts", type=int, default=4, help="RL prompts per step")
    ap.add_argument("--group", type=int, default=8, help="RL samples per prompt (G)")
    ap.add_argument("--prompt", type=int, default=512, help="RL prompt tokens")
    ap.add_argument("--max-new", type=int, default=2048, help="RL response cap")
    ap.add_argument("--peak-tflops", type=float, default=0.0, help="0: from the card's name")
    a = ap.parse_args()
    if a.mode == "table":
        print(table(a.file))
        return 0
    if a.mode == "rl":
        a.seq = a.prompt + a.max_new
    run = {"sft": run_sft, "trl": run_trl, "rl": run_rl}[a.mode]
    print(json.dumps(run(a)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
