"""Reward model training speed: our Bradley-Terry loop vs TRL's RewardTrainer, like for like
(issues 12 and 16).

    .venv/bin/python benchmarks/reward_model.py [--problems 600] [--n-open 60] [--epochs 1]
        [--batch 16] [--max-len 256] [--threads 1] [--repeats 3]
        [--sides ours,trl,trl_grouped,ours_random]

Every side starts from the same tiny Qwen2 (a random-weight causal LM built from the embedded
world, the world's tokenizer) with a fresh one-logit sequence-classification head, and trains on
the SAME preference pairs (data/world/instruct_open.py `preference_pairs` of the world's instruct
problems, rule and open prompts) with the same token ids (the chat-formatted text; `tokens_seen`
checks it), one epoch, `--batch` pairs per optimizer step (so the same number of optimizer
steps), AdamW lr 3e-4 cosine to 0 without warmup, max grad norm 1, no weight decay, fp32 on CPU,
no gradient checkpointing and no bf16 on any side (TRL's RewardConfig turns both on by default;
on CPU fp32 they only cost time), same max length. Each side runs in its own process, >= 3
repeats in rotating order (benchmarks/harness.py).

- ours: `vibethinker.train.reward_model.train_bt` (texts tokenized once, length-bucketed
  batches padded to their longest, chosen and rejected in one forward).
- trl: RewardTrainer on the conversational (prompt, chosen, rejected) dataset, as its docs show,
  its defaults otherwise (random sampler, DataCollatorForPreference: chosen and rejected in one
  forward, padded to the batch's longest, logging every 10 steps).
- ours_random: ours with the pairs in random order instead of length
  buckets, to separate the bucketing's share of the speed (and its effect on the loss).
- trl_grouped: the same with `train_sampling_strategy="group_by_length"` (transformers' length-
  grouped sampler; it needs a `length` column and `remove_unused_columns=False`): TRL with the
  padding saving that ours has built in.

Pairs with a text of max length or more are dropped before any side sees them (TRL's
RewardTrainer drops them, ours would cut them). Headline: pairs/s end to end, from the loaded
model to the trained one (ours: `train_bt`, which tokenizes; TRL: dataset, trainer construction,
which tokenizes, and `train()`); `pairs_per_s_loop` is the training loop alone (ours: the sum of
step times; TRL: `train_runtime`). Quality on the same basis: the mean training loss over all
steps (TRL's `train_loss` is that statistic), and the held-out pairwise accuracy and Bradley-Terry
loss after training (same function, same held-out pairs), so that speed is not bought with a
worse model. `pairs_per_cpu_s`: the end-to-end span in the side's own CPU seconds (1 thread), the
figure to read on a shared, loaded host, where wall time also counts time spent descheduled.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks import harness  # noqa: E402

LR = 3e-4


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--problems", type=int, default=600, help="world train problems (all domains)")
    ap.add_argument("--n-open", type=int, default=60, help="open instruct prompts added")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=16, help="pairs per optimizer step")
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--max-pairs", type=int, default=0, help="at most this many pairs (0: all)")


def prepare(args: argparse.Namespace, work: Path) -> dict:
    from vibethinker.data.world import generate
    from vibethinker.data.world.instruct_open import open_problems
    from vibethinker.evaluate import paper_prompt
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.stages.reward_model import build_pairs, split_problems

    splits = generate(0, args.problems, 1, 1, ["math", "code", "stem", "instruct"], 0.55)
    probs = [p for p in splits["train"] if p.domain == "instruct"] + open_problems(0, args.n_open)
    texts = [paper_prompt(p) + " " + t for p in splits["train"] + probs for t in p.traces or []]
    model = build_tiny_model(work / "model", texts, "1m", 512, 0)
    train_p, held_p = split_problems(probs, 0.15, 0)
    # TRL drops a pair whose chosen or rejected text is over max_length (we would cut it): keep
    # only pairs that fit, before either side sees them, so both train on the same pairs
    from transformers import AutoTokenizer

    from vibethinker.train.reward_model import encode_pairs

    tok = AutoTokenizer.from_pretrained(model)
    rows = build_pairs(train_p, 0)
    enc = encode_pairs(tok, rows, 10**9)
    fit = [(r, e) for r, e in zip(rows, enc) if max(len(e[0]), len(e[1])) < args.max_len]
    rows = [r for r, _ in fit][: args.max_pairs or None]
    tokens = sum(len(e[0]) + len(e[1]) for _, e in fit[: len(rows)])
    (work / "train.json").write_text(json.dumps(rows))
    (work / "held.json").write_text(json.dumps(build_pairs(held_p, 1)))
    return {
        "model": str(model),
        "train": str(work / "train.json"),
        "held": str(work / "held.json"),
        "tokens": tokens,
    }


def _start(shared: dict, args: argparse.Namespace):
    import torch

    from vibethinker.stages.reward_model import load_start

    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    return load_start(shared["model"], "cpu")


def _held_out(model, tok, shared: dict, args: argparse.Namespace) -> dict:
    """Held-out pairwise accuracy and Bradley-Terry loss: the same function for every side."""
    import torch

    from vibethinker.train.reward_model import bt_loss, encode_pairs, evaluate_pairs

    held = json.loads(Path(shared["held"]).read_text())
    ev = evaluate_pairs(model, encode_pairs(tok, held, args.max_len), tok.pad_token_id)
    loss = bt_loss(torch.tensor(ev["chosen"]), torch.tensor(ev["rejected"]))
    return {"held_out_accuracy": ev["accuracy"], "held_out_loss": float(loss)}


def _metrics(
    n: int, args: argparse.Namespace, shared: dict, total: float, loop: float, cpu: float
) -> dict:
    """Wall-clock rates, and `pairs_per_cpu_s`: the same span in this process's CPU seconds (all
    its threads), which a shared, loaded host disturbs far less than wall time."""
    import torch

    return {
        "pairs_per_s": n * args.epochs / total,
        "total_s": total,
        "train_s": loop,
        "pairs_per_s_loop": n * args.epochs / loop,
        "tokens_per_s": shared["tokens"] * args.epochs / total,
        "cpu_s": cpu,
        "pairs_per_cpu_s": n * args.epochs / cpu,
        "torch_threads_after": torch.get_num_threads(),
    }


def side_ours(args: argparse.Namespace, shared: dict, bucket: bool = True) -> dict:
    from vibethinker.train.reward_model import train_bt

    model, tok = _start(shared, args)
    pairs = json.loads(Path(shared["train"]).read_text())
    t0, c0 = time.perf_counter(), time.process_time()
    hist = train_bt(
        model,
        tok,
        pairs,
        epochs=args.epochs,
        batch=args.batch,
        lr=LR,
        final_lr=0.0,
        max_len=args.max_len,
        seed=0,
        bucket=bucket,
    )
    total, cpu = time.perf_counter() - t0, time.process_time() - c0
    cfg = {
        "trainer": "vibethinker train_bt",
        "epochs": args.epochs,
        "batch": args.batch,
        "lr": LR,
        "schedule": "cosine to 0, no warmup",
        "max_len": args.max_len,
        "max_grad_norm": 1.0,
        "weight_decay": 0.0,
        "gradient_checkpointing": False,
        "batching": ("length-bucketed" if bucket else "random order")
        + ", pad to the batch's longest",
        "threads": args.threads,
        "dtype": "float32",
        "pairs": len(pairs),
    }
    loop = sum(r["seconds"] for r in hist)
    return {
        "config": cfg,
        "metrics": {
            **_metrics(len(pairs), args, shared, total, loop, cpu),
            "steps": len(hist),
            "train_loss_mean": sum(r["loss"] for r in hist) / len(hist),
            "tokens_seen": shared["tokens"],
            **_held_out(model, tok, shared, args),
        },
    }


def side_trl(args: argparse.Namespace, shared: dict, grouped: bool = False) -> dict:
    import trl
    from datasets import Dataset
    from trl import RewardConfig, RewardTrainer

    from vibethinker.log import setup_logging

    setup_logging(quiet=True)
    model, tok = _start(shared, args)
    pairs = json.loads(Path(shared["train"]).read_text())
    t0, c0 = time.perf_counter(), time.process_time()
    rows = [
        {
            "prompt": [{"role": "user", "content": p["prompt"]}],
            "chosen": [{"role": "assistant", "content": p["chosen"]}],
            "rejected": [{"role": "assistant", "content": p["rejected"]}],
        }
        for p in pairs
    ]
    ds = Dataset.from_list(rows)
    with tempfile.TemporaryDirectory(prefix="bench_rm_trl_") as out:
        kw = dict(
            output_dir=out,
            per_device_train_batch_size=args.batch,
            num_train_epochs=args.epochs,
            learning_rate=LR,
            lr_scheduler_type="cosine",
            max_length=args.max_len,
            gradient_checkpointing=False,
            bf16=False,
            save_strategy="no",
            report_to=[],
            use_cpu=True,
            disable_tqdm=True,
            seed=0,
        )
        if grouped:
            kw.update(train_sampling_strategy="group_by_length", remove_unused_columns=False)
        trainer = RewardTrainer(
            model=model, args=RewardConfig(**kw), train_dataset=ds, processing_class=tok
        )
        if grouped:  # the sampler needs lengths: a "length" column (the pair's longer text)
            trainer.train_dataset = trainer.train_dataset.map(
                lambda r: {"length": max(len(r["chosen_ids"]), len(r["rejected_ids"]))}
            )
        n = len(trainer.train_dataset)
        seen = sum(len(r["chosen_ids"]) + len(r["rejected_ids"]) for r in trainer.train_dataset)
        res = trainer.train()
        total, cpu = time.perf_counter() - t0, time.process_time() - c0
    shown = {k: v for k, v in kw.items() if k != "output_dir"}
    cfg = {
        "trainer": f"trl {trl.__version__} RewardTrainer",
        **shown,
        "defaults_kept": "logging_steps 10, max_grad_norm 1.0, weight_decay 0, "
        "DataCollatorForPreference (pad to the batch's longest), "
        + ("group_by_length sampler" if grouped else "random sampler"),
        "threads": args.threads,
        "dtype": "float32",
        "pairs": n,
    }
    return {
        "config": cfg,
        "metrics": {
            **_metrics(n, args, shared, total, res.metrics["train_runtime"], cpu),
            "steps": trainer.state.global_step,
            "train_loss_mean": res.metrics["train_loss"],
            "tokens_seen": seen,
            "pairs_dropped": len(pairs) - n,
            **_held_out(model, tok, shared, args),
        },
    }


def side_trl_grouped(args: argparse.Namespace, shared: dict) -> dict:
    return side_trl(args, shared, grouped=True)


def side_ours_random(args: argparse.Namespace, shared: dict) -> dict:
    return side_ours(args, shared, bucket=False)


if __name__ == "__main__":
    harness.main(
        __doc__,
        add_args,
        prepare,
        {
            "ours": side_ours,
            "trl": side_trl,
            "trl_grouped": side_trl_grouped,
            "ours_random": side_ours_random,
        },
        headline=("pairs_per_s", "higher"),
    )
