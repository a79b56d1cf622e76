"""SFT throughput and loss: our packed SFT loop vs TRL's SFTTrainer, like for like.

    .venv/bin/python benchmarks/sft.py [--problems 300] [--max-len 256] [--batch 64]
        [--size 1m] [--threads 2] [--grad-ckpt] [--repeats 3] [--sides ours,trl_packed,trl_padded]

Every side trains the same random-weight Qwen2 (the embedded world's tokenizer; `--size` for a
larger one) on the same chat samples (prompt + one trace, assistant-only loss, samples longer
than max_len dropped before any side sees them), one epoch, the same optimizer steps (global
batch `--batch` samples per step), lr 2e-3 cosine, fp32 on CPU, gradient checkpointing the same
on every side (off unless --grad-ckpt). Each side runs in its own process, 3+ repeats in rotating
order (benchmarks/harness.py).

Sides:
- ours: `vibethinker.train.sft.train`, rows packed to max_len (position ids restart per sample,
  so attention stays per sample), `--micro` rows per forward.
- trl_packed: SFTTrainer with `packing=True` (its default best-fit-decreasing strategy, which
  forces padding-free: a micro-batch's rows are flattened into one sequence) and
  `per_device_train_batch_size=1`, so each forward is one packed row of max_len tokens: the
  padding-free setting that suits CPU attention (sdpa has no varlen kernel; flattening k rows
  builds a dense (k*max_len)^2 mask). Gradient accumulation is set so that its optimizer steps
  equal ours.
- trl_padded: SFTTrainer without packing, `--micro` samples per forward (padded to the longest),
  gradient accumulation to `--batch` samples per step: TRL's documented default for attention
  implementations without varlen support.

Figures: training tokens/s (non-padding tokens through forward+backward over the training loop's
own time: ours `train_seconds`, TRL `train_runtime`), optimizer steps, and the loss on the SAME
statistic on every side: the mean token loss of 64 held-out samples after training, computed
by one function (`train.sft.token_loss_sum`), plus each side's last-10-step training loss.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

HELD_OUT = 64


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--problems", type=int, default=300)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64, help="samples per optimizer step")
    ap.add_argument("--micro", type=int, default=8, help="rows per forward (ours, trl_padded)")
    ap.add_argument("--size", default="1m", help="random-weight Qwen2 size (1m, 30m, 100m)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--grad-ckpt", action="store_true", help="gradient checkpointing on all sides")


def prepare(args: argparse.Namespace, work: Path) -> dict:
    from vibethinker.models import load_model_and_tokenizer
    from vibethinker.train import packing

    shared = harness.tiny_world_model(work, args.problems, args.size)
    pairs = json.loads(Path(shared["pairs"]).read_text())
    _, tok = load_model_and_tokenizer(shared["model"], "cpu", dtype="float32")
    keep = [p for p in pairs if len(packing.encode_chat(tok, *p)[0]) <= args.max_len]
    train, held = keep[:-HELD_OUT], keep[-HELD_OUT:]
    (work / "train.json").write_text(json.dumps(train))
    (work / "held.json").write_text(json.dumps(held))
    steps = math.ceil(len(train) / args.batch)
    return {
        **shared,
        "train": str(work / "train.json"),
        "held": str(work / "held.json"),
        "samples": len(train),
        "dropped_overlong": len(pairs) - len(keep),
        "steps": steps,
    }


def held_out_loss(model, tok, held, max_len: int) -> float:
    """Mean token loss of the held-out samples (assistant tokens), one sample per forward."""
    import torch

    from vibethinker.train import packing, sft

    samples = packing.build_samples([tuple(p) for p in held], tok, max_len)
    model.eval()
    tot = n = 0.0
    with torch.no_grad():
        for i in range(len(samples)):
            batch = packing.collate(samples, [[i]], tok.pad_token_id or 0, False)
            loss, k = sft.token_loss_sum(model, batch)
            tot, n = tot + float(loss), n + k
    return tot / max(n, 1)


def _load(shared: dict, args: argparse.Namespace):
    from vibethinker.train import policy

    harness.set_threads(args.threads)
    return policy.load_policy(shared["model"], "cpu", args.grad_ckpt)


def side_ours(args: argparse.Namespace, shared: dict) -> dict:
    from vibethinker.log import setup_logging
    from vibethinker.train import packing, sft

    setup_logging(quiet=True)
    model, tok = _load(shared, args)
    train = [tuple(p) for p in json.loads(Path(shared["train"]).read_text())]
    samples = packing.build_samples(train, tok, args.max_len)
    opts = sft.SFTConfig(
        epochs=1,
        global_batch=args.batch,
        micro_batch=args.micro,
        lr=2e-3,
        final_lr=2e-5,
        max_len=args.max_len,
        pack=True,
        warmup_frac=0.05,
    )
    with tempfile.TemporaryDirectory(prefix="bench_sft_ours_") as out:
        stats = sft.train(model, tok, samples, opts, out, resume=False)
    held = json.loads(Path(shared["held"]).read_text())
    cfg = {
        "loop": "vibethinker.train.sft.train",
        "pack": True,
        "max_len": args.max_len,
        "global_batch_samples": args.batch,
        "micro_batch_rows": args.micro,
        "gradient_checkpointing": args.grad_ckpt,
        "lr": 2e-3,
        "schedule": "cosine, 5% warmup",
        "threads": args.threads,
        "dtype": "float32",
        "size": shared["size"],
    }
    return {
        "config": cfg,
        "metrics": {
            "tokens_per_s": stats["tokens"] / stats["train_seconds"],
            "tokens": stats["tokens"],
            "train_s": stats["train_seconds"],
            "steps": stats["steps"],
            "last10_train_loss": stats["final_loss"],
            "held_out_loss": held_out_loss(model, tok, held, args.max_len),
        },
    }


def _trl(args: argparse.Namespace, shared: dict, packed: bool) -> dict:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from vibethinker.log import setup_logging

    setup_logging(quiet=True)
    model, tok = _load(shared, args)
    train = json.loads(Path(shared["train"]).read_text())
    ds = Dataset.from_list(
        [
            {"messages": [{"role": "user", "content": p}, {"role": "assistant", "content": t}]}
            for p, t in train
        ]
    )
    per_dev = 1 if packed else args.micro
    accum = 1 if packed else max(1, args.batch // args.micro)
    with tempfile.TemporaryDirectory(prefix="bench_sft_trl_") as out:
        kw = dict(
            output_dir=out,
            max_length=args.max_len,
            packing=packed,
            assistant_only_loss=True,
            per_device_train_batch_size=per_dev,
            gradient_accumulation_steps=accum,
            num_train_epochs=1,
            learning_rate=2e-3,
            lr_scheduler_type="cosine",
            warmup_steps=0.05,
            gradient_checkpointing=args.grad_ckpt,
            logging_steps=1,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            dataloader_num_workers=0,
            disable_tqdm=True,
            seed=0,
            bf16=False,
            shuffle_dataset=True,
        )
        trainer = SFTTrainer(
            model=model, args=SFTConfig(**kw), train_dataset=ds, processing_class=tok
        )
        data = trainer.train_dataset
        rows = len(data)
        if packed:  # same optimizer steps as ours: rows per step = packed rows / our steps
            trainer.args.gradient_accumulation_steps = math.ceil(rows / shared["steps"])
        tokens = sum(len(x) for x in data["input_ids"])
        t0 = time.perf_counter()
        res = trainer.train()
        wall = time.perf_counter() - t0
        losses = [x["loss"] for x in trainer.state.log_history if "loss" in x]
    held = json.loads(Path(shared["held"]).read_text())
    shown = {k: v for k, v in kw.items() if k != "output_dir"}
    shown["gradient_accumulation_steps"] = trainer.args.gradient_accumulation_steps
    import trl

    cfg = {
        "trainer": f"trl {trl.__version__} SFTTrainer",
        **shown,
        "packing_strategy": trainer.args.packing_strategy if packed else None,
        "padding_free": getattr(trainer, "padding_free", None),
        "rows": rows,
        "threads": args.threads,
        "dtype": "float32",
        "size": shared["size"],
    }
    secs = res.metrics["train_runtime"]
    return {
        "config": cfg,
        "metrics": {
            "tokens_per_s": tokens / secs,
            "tokens": tokens,
            "train_s": secs,
            "train_wall_s": wall,
            "steps": trainer.state.global_step,
            "last10_train_loss": sum(losses[-10:]) / max(1, len(losses[-10:])),
            "held_out_loss": held_out_loss(model, tok, held, args.max_len),
        },
    }


def side_trl_packed(args: argparse.Namespace, shared: dict) -> dict:
    return _trl(args, shared, packed=True)


def side_trl_padded(args: argparse.Namespace, shared: dict) -> dict:
    return _trl(args, shared, packed=False)


SIDES = {"ours": side_ours, "trl_packed": side_trl_packed, "trl_padded": side_trl_padded}

if __name__ == "__main__":
    harness.main(__doc__, add_args, prepare, SIDES, headline=("tokens_per_s", "higher"))
