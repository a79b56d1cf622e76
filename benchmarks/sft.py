"""SFT throughput: our packed SFT loop vs TRL's SFTTrainer with packing; merge peak memory.

    .venv/bin/python benchmarks/sft.py [--problems 600] [--max-len 256] [--threads 1]

Same tiny model (built from the embedded world), same chat samples (prompt + one trace each,
assistant-only loss), same max length and packing, one epoch each, one run. Tokens/s counts every
non-padding token that went through a training forward+backward, over the training loop's own
wall time (TRL: `train_runtime`; dataset preparation excluded on both sides). Target: >= 1.0x.

Merge: peak resident memory the merge adds, against the size of one model, for 4 checkpoints.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _world(tmp: Path, n_problems: int):
    from vibethinker.data.world import generate
    from vibethinker.evaluate import paper_prompt
    from vibethinker.models.tiny import build_tiny_model

    splits = generate(0, n_problems, 1, 1, ["math", "code", "stem", "instruct"], 0.55)
    train = splits["train"]
    pairs = [(paper_prompt(p), t) for p in train for t in p.traces or []]
    model_dir = build_tiny_model(tmp / "model", [p + " " + t for p, t in pairs], "1m", 512, 0)
    return model_dir, pairs


def bench_ours(model_dir: str, pairs, max_len: int, batch: int, out: Path) -> dict:
    from vibethinker.train import packing, policy, sft

    model, tok = policy.load_policy(model_dir, "cpu")
    samples = packing.build_samples(pairs, tok, max_len)
    opts = sft.LoopOptions(epochs=1, global_batch=batch, micro_batch=max(1, batch // 8),
                           lr=2e-3, final_lr=2e-5, max_len=max_len, pack=True)  # fmt: skip
    t0 = time.perf_counter()
    stats = sft.train(model, tok, samples, opts, out, resume=False)
    wall = time.perf_counter() - t0
    return {"tokens": stats["tokens"], "seconds": stats["train_seconds"], "wall": wall,
            "tokens_per_s": stats["tokens"] / stats["train_seconds"],
            "final_loss": stats["final_loss"], "steps": stats["steps"]}  # fmt: skip


def bench_trl(model_dir: str, pairs, max_len: int, batch: int, out: Path) -> dict:
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from vibethinker.models import load_model_and_tokenizer

    model, tok = load_model_and_tokenizer(model_dir, "cpu", dtype="float32")
    model.train()
    ds = Dataset.from_list(
        [
            {"messages": [{"role": "user", "content": p}, {"role": "assistant", "content": t}]}
            for p, t in pairs
        ]  # fmt: skip
    )
    # Rows per step so that a step sees about as many samples as ours (global batch in samples).
    mean_len = sum(len(p) + len(t) for p, t in pairs) / len(pairs) / 3.0  # rough chars/token
    rows = max(1, round(batch * mean_len / max_len))
    args = SFTConfig(
        output_dir=str(out), max_length=max_len, packing=True, assistant_only_loss=True,
        per_device_train_batch_size=rows, gradient_accumulation_steps=1, num_train_epochs=1,
        learning_rate=2e-3, lr_scheduler_type="cosine", logging_steps=50,
        save_strategy="no", report_to=[], use_cpu=True, dataloader_num_workers=0,
        disable_tqdm=True, seed=0, bf16=False,
    )  # fmt: skip
    trainer = SFTTrainer(model=model, args=args, train_dataset=ds, processing_class=tok)
    data = trainer.train_dataset
    # Padding-free packing: each packed row is exactly its tokens (no padding tokens).
    tokens = sum(len(x) for x in data["input_ids"])
    res = trainer.train()
    secs = res.metrics["train_runtime"]
    return {"tokens": tokens, "seconds": secs, "tokens_per_s": tokens / secs,
            "final_loss": res.metrics.get("train_loss"), "rows_per_step": rows}  # fmt: skip


_PEAK_SCRIPT = r"""
import json, sys, torch
from vibethinker.algo.merge import merge_checkpoints
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
torch.zeros(1)  # allocator warm
base = rss("VmRSS:")
merge_checkpoints(sys.argv[1:-2], sys.argv[-2], shard_bytes=int(sys.argv[-1]))
print(json.dumps({"base": base, "peak": rss("VmHWM:")}))
"""


def measure_merge_peak(folders: list[Path], out: Path, shard_bytes: int) -> int:
    """Peak resident memory the merge adds over the process baseline, in bytes (own process)."""
    import subprocess

    cmd = [sys.executable, "-c", _PEAK_SCRIPT, *map(str, folders), str(out), str(shard_bytes)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    return r["peak"] - r["base"]


def bench_merge(tmp: Path, n: int = 4, mb_per_model: int = 64) -> dict:
    import torch
    from safetensors.torch import save_file

    tensors = mb_per_model // 4
    folders = []
    for i in range(n):
        d = tmp / f"ckpt{i}"
        d.mkdir()
        g = torch.Generator().manual_seed(i)
        save_file({f"w{j}": torch.randn(1024, 1024, generator=g) for j in range(tensors)},
                  str(d / "model.safetensors"))  # fmt: skip
        (d / "config.json").write_text("{}")
        folders.append(d)
    model_bytes = tensors * 4 * 1024 * 1024
    one = measure_merge_peak(folders, tmp / "merged1", 1 << 40)
    small = measure_merge_peak(folders, tmp / "merged2", 16 << 20)
    mb = 2**20
    return {
        "checkpoints": n, "model_mb": model_bytes / mb,
        "peak_mb_one_shard": round(one / mb, 1), "peak_mb_16mb_shards": round(small / mb, 1),
        "ratio_one_shard": round(one / model_bytes, 3),
        "ratio_16mb_shards": round(small / model_bytes, 3),
    }  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problems", type=int, default=600)
    ap.add_argument("--max-len", type=int, default=256)
    ap.add_argument("--batch", type=int, default=64, help="samples per optimizer step")
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: default)")
    ap.add_argument("--skip-trl", action="store_true")
    args = ap.parse_args(argv)
    import torch

    from vibethinker.log import setup_logging

    setup_logging(quiet=True)  # no progress bars in the measured loops
    if args.threads:
        torch.set_num_threads(args.threads)
    tmp = Path(tempfile.mkdtemp(prefix="bench_sft_"))
    try:
        model_dir, pairs = _world(tmp, args.problems)
        result: dict = {"samples": len(pairs), "max_len": args.max_len,
                        "threads": torch.get_num_threads()}  # fmt: skip
        result["ours"] = bench_ours(model_dir, pairs, args.max_len, args.batch, tmp / "ours")
        print(f"ours: {result['ours']['tokens_per_s']:.0f} tokens/s", flush=True)
        if not args.skip_trl:
            result["trl"] = bench_trl(model_dir, pairs, args.max_len, args.batch, tmp / "trl")
            print(f"trl:  {result['trl']['tokens_per_s']:.0f} tokens/s", flush=True)
            result["ratio"] = round(
                result["ours"]["tokens_per_s"] / result["trl"]["tokens_per_s"], 3
            )
            print(f"ratio ours/trl: {result['ratio']:.2f}x (target >= 1.0x)")
        result["merge"] = bench_merge(tmp)
        m = result["merge"]
        print(
            f"merge of {m['checkpoints']} x {m['model_mb']:.0f} MB: peak +{m['peak_mb_one_shard']}"
            f" MB ({m['ratio_one_shard']:.2f} x one model) with one output shard, "
            f"+{m['peak_mb_16mb_shards']} MB ({m['ratio_16mb_shards']:.2f} x) with 16 MB shards"
        )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(json.dumps(result, indent=1, default=str))
    return result


if __name__ == "__main__":
    main()
