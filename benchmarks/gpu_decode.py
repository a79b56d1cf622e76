"""GPU decode throughput and training MFU, plain transformers vs ours, for Qwen2.5-1.5B and -3B
architectures with random weights. Meant for one H200 in under 8 minutes:

    .venv/bin/python benchmarks/gpu_decode.py [--sizes 1.5b,3b] [--batches 64,256]
        [--prompt-len 128] [--max-new 256] [--train-len 2048] [--json out.json]

CPU smoke test (tiny architecture, seconds):

    .venv/bin/python benchmarks/gpu_decode.py --sizes tiny --device cpu --batches 4,8 \\
        --max-new 8 --train-len 64 --train-rows 2

Decode: `batch / 8` random prompts of `--prompt-len` tokens x n=8 samples each (an RL step's
shape), temperature 1, top-p 0.95, top-k off, `--max-new` new tokens (random weights almost never
emit EOS, so every row runs to the cap). plain = `model.generate` (transformers' default dynamic
cache); ours = `HFSampler(static_cache=True)` (preallocated KV cache, one CUDA graph per decode
step, device-side bookkeeping; it also returns per-token logprobs, generate does not). Each
decode figure is the median of `--repeats` runs, sides alternating, after one warm-up run of each
(graph capture, allocator). The roofline is HBM-bound decoding: every step reads all weights
once plus the live KV cache, so tok/s <= batch * bandwidth / (weight bytes + KV bytes at the
mean context); `--hbm-tbs` (H200: 4.8 TB/s).

Training MFU: forward + backward (no optimizer step) of `--train-rows` rows x `--train-len`
tokens in bf16, model FLOPs 6 * N (non-embedding weights plus the LM head) + 12 * layers *
hidden * len per token (causal attention counted half), over `--peak-tflops` (H200 dense bf16:
989). plain = padded rows of variable-length samples with an attention mask, HF's own loss over
all positions; ours = the same samples packed end to end into full rows (position ids restart per
sample, as train/packing.py does), the best attention the installed kernels allow (flash_attn 2
varlen if importable, else sdpa), and the LM head applied only to trained positions
(train/sft.py token_loss_sum).

Both sides run in this one process (GPU state is per process anyway; the model is built once per
size). Prints one JSON line per measurement and a summary table.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ARCH = {  # Qwen2.5 configs (config.json of the hub models), weights random
    "tiny": dict(
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        vocab_size=1024,
    ),
    "0.5b": dict(
        hidden_size=896,
        intermediate_size=4864,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        vocab_size=151936,
    ),
    "1.5b": dict(
        hidden_size=1536,
        intermediate_size=8960,
        num_hidden_layers=28,
        num_attention_heads=12,
        num_key_value_heads=2,
        vocab_size=151936,
    ),
    "3b": dict(
        hidden_size=2048,
        intermediate_size=11008,
        num_hidden_layers=36,
        num_attention_heads=16,
        num_key_value_heads=2,
        vocab_size=151936,
    ),
}


def build(size: str, device: str, dtype: torch.dtype, attn: str = "sdpa"):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    a = ARCH[size]
    cfg = Qwen2Config(
        **a,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        rope_theta=1e6,
        eos_token_id=a["vocab_size"] - 1,
        pad_token_id=a["vocab_size"] - 2,
    )
    cfg._attn_implementation = attn
    old = torch.get_default_dtype()
    try:  # built directly in the target dtype on the device: seconds, not minutes
        torch.set_default_dtype(dtype)
        with torch.device(device):
            torch.manual_seed(0)
            model = Qwen2ForCausalLM(cfg)
    except (TypeError, RuntimeError):
        torch.set_default_dtype(old)
        with torch.device(device):
            model = Qwen2ForCausalLM(cfg).to(dtype)
    finally:
        torch.set_default_dtype(old)
    model.generation_config.eos_token_id = cfg.eos_token_id
    model.generation_config.pad_token_id = cfg.pad_token_id
    return model.eval()


def word_tokenizer(vocab: int):
    """Token i <-> word "w{i}": prompts are exact id sequences, outputs decode (no hub)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    tk = Tokenizer(models.WordLevel({f"w{i}": i for i in range(vocab)}, unk_token="w0"))
    tk.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return PreTrainedTokenizerFast(
        tokenizer_object=tk, pad_token=f"w{vocab - 2}", eos_token=f"w{vocab - 1}"
    )


def sync(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def decode_plain(model, prompts: torch.Tensor, n: int, max_new: int, device: str) -> int:
    ids = prompts.to(device)
    with torch.inference_mode():
        out = model.generate(
            input_ids=ids,
            attention_mask=torch.ones_like(ids),
            do_sample=True,
            temperature=1.0,
            top_p=0.95,
            top_k=0,
            max_new_tokens=max_new,
            min_new_tokens=max_new,
            num_return_sequences=n,
        )
    return int(out.shape[0] * (out.shape[1] - ids.shape[1]))


def decode_ours(engine, texts: list[str], n: int, max_new: int) -> int:
    from vibethinker.engines import SamplingParams

    out = engine.generate(texts, n, SamplingParams(max_new_tokens=max_new, seed=0))
    return sum(len(c.token_ids) for g in out for c in g)


def roofline(model, batch: int, ctx: float, hbm_tbs: float) -> float:
    """HBM-bound decode tok/s: per step, all weights once plus the live KV cache."""
    c = model.config
    elt = next(model.parameters()).element_size()
    w = sum(p.numel() for p in model.parameters()) * elt
    head = c.hidden_size // c.num_attention_heads
    kv = batch * c.num_hidden_layers * 2 * c.num_key_value_heads * head * ctx * elt
    return batch * hbm_tbs * 1e12 / (w + kv)


def bench_decode(model, size, args) -> list[dict]:
    from vibethinker.engines.hf import HFSampler

    dev = args.device
    V = model.config.vocab_size
    tok = word_tokenizer(V)
    engine = HFSampler(
        model,
        tok,
        chat_template=False,
        static_cache=True,
        max_batch_size=4096,
        token_budget=1 << 30,
    )
    rows = []
    g = torch.Generator().manual_seed(0)
    for batch in args.batches:
        n = min(8, batch)
        p = max(1, batch // n)
        prompts = torch.randint(0, V - 2, (p, args.prompt_len), generator=g)
        texts = [" ".join(f"w{i}" for i in r) for r in prompts.tolist()]
        times: dict[str, list[float]] = {"plain": [], "ours": []}
        toks: dict[str, int] = {}
        for rep in range(args.repeats + 1):  # rep 0: warm-up of each side
            for side in ("plain", "ours") if rep % 2 == 0 else ("ours", "plain"):
                sync(dev)
                t0 = time.perf_counter()
                if side == "plain":
                    k = decode_plain(model, prompts, n, args.max_new, dev)
                else:
                    k = decode_ours(engine, texts, n, args.max_new)
                sync(dev)
                if rep:
                    times[side].append(time.perf_counter() - t0)
                    toks[side] = k
        roof = roofline(model, p * n, args.prompt_len + args.max_new / 2, args.hbm_tbs)
        for side in ("plain", "ours"):
            tps = toks[side] / statistics.median(times[side])
            row = {
                "kind": "decode",
                "size": size,
                "batch": p * n,
                "side": side,
                "tok_per_s": round(tps, 1),
                "seconds": [round(t, 3) for t in times[side]],
                "roofline_tok_per_s": round(roof, 1),
                "of_roofline": round(tps / roof, 4),
                "graphs": bool(engine._decoder and engine._decoder.graph is not None),
            }
            print(json.dumps(row), flush=True)
            rows.append(row)
        engine._decoder = None
        if dev.startswith("cuda"):
            torch.cuda.empty_cache()
    return rows


def _samples(V: int, rows: int, length: int, g: torch.Generator) -> list[torch.Tensor]:
    """Variable-length samples (32..length tokens) totalling about rows x length tokens."""
    out, total = [], 0
    while total < rows * length * 0.9:
        k = int(torch.randint(32, max(33, length), (1,), generator=g))
        out.append(torch.randint(0, V - 2, (k,), generator=g))
        total += k
    return out


def train_flops(model, tokens: int, length: float) -> float:
    c = model.config
    n = sum(p.numel() for name, p in model.named_parameters() if "embed_tokens" not in name)
    n += c.vocab_size * c.hidden_size  # the (tied) LM head is a matmul per token
    return tokens * (6 * n + 6 * c.num_hidden_layers * c.hidden_size * length)


def bench_train(model, size, args) -> list[dict]:
    from vibethinker.train import packing, sft

    dev = args.device
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    samples = _samples(V, args.train_rows, args.train_len, g)
    tokens = sum(len(s) for s in samples)
    # plain: padded rows (one sample each), HF loss over all positions
    plain_batches = []
    per = max(1, args.train_rows * args.train_len // max(len(s) for s in samples))
    for i in range(0, len(samples), per):
        chunk = samples[i : i + per]
        w = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), w), V - 2)
        am = torch.zeros((len(chunk), w), dtype=torch.long)
        for r, s in enumerate(chunk):
            ids[r, : len(s)], am[r, : len(s)] = s, 1
        lab = ids.masked_fill(am == 0, -100)
        plain_batches.append({"input_ids": ids, "attention_mask": am, "labels": lab})
    # ours: packed rows of train_len tokens, per-sample positions, head on trained positions only
    items = [packing.Sample(s.tolist(), [1] * len(s)) for s in samples]
    rows = packing.pack([len(s.ids) for s in items], args.train_len)
    ours_batches = [
        packing.collate(items, rows[i : i + args.train_rows], V - 2, True)
        for i in range(0, len(rows), args.train_rows)
    ]
    attn_ours = "sdpa"
    try:
        import flash_attn  # noqa: F401

        attn_ours = "flash_attention_2" if dev.startswith("cuda") else "sdpa"
    except ImportError:
        pass

    def run_plain():
        for b in plain_batches:
            b = {k: v.to(dev) for k, v in b.items()}
            model(**b, use_cache=False).loss.backward()

    def run_ours():
        for b in ours_batches:
            b = {k: (v.to(dev) if isinstance(v, torch.Tensor) else v) for k, v in b.items()}
            loss, n = sft.token_loss_sum(model, b)
            (loss / max(n, 1)).backward()

    model.train()
    out = []
    for side, fn, attn in (("plain", run_plain, "sdpa"), ("ours", run_ours, attn_ours)):
        model.config._attn_implementation = attn
        times = []
        for rep in range(args.train_repeats + 1):
            sync(dev)
            t0 = time.perf_counter()
            fn()
            sync(dev)
            model.zero_grad(set_to_none=True)
            if rep:
                times.append(time.perf_counter() - t0)
        dt = statistics.median(times)
        mean_len = statistics.mean(len(s) for s in samples)
        flops = train_flops(model, tokens, mean_len)
        row = {
            "kind": "train",
            "size": size,
            "side": side,
            "attn": attn,
            "tokens": tokens,
            "tok_per_s": round(tokens / dt, 1),
            "seconds": [round(t, 3) for t in times],
            "tflops": round(flops / dt / 1e12, 2),
            "mfu": round(flops / dt / (args.peak_tflops * 1e12), 4),
        }
        print(json.dumps(row), flush=True)
        out.append(row)
    model.config._attn_implementation = "sdpa"
    model.eval()
    return out


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1.5b,3b")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--dtype", default="", help="bfloat16 on cuda, float32 on cpu by default")
    ap.add_argument("--batches", default="64,256")
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--max-new", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--train-len", type=int, default=2048)
    ap.add_argument("--train-rows", type=int, default=8)
    ap.add_argument("--train-repeats", type=int, default=3)
    ap.add_argument("--hbm-tbs", type=float, default=4.8)
    ap.add_argument("--peak-tflops", type=float, default=989.0)
    ap.add_argument("--skip-train", action="store_true")
    ap.add_argument("--json", default="")
    args = ap.parse_args(argv)
    args.batches = [int(x) for x in args.batches.split(",")]
    dtype = (
        getattr(torch, args.dtype)
        if args.dtype
        else (torch.bfloat16 if args.device.startswith("cuda") else torch.float32)
    )
    import transformers

    info = {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": torch.cuda.get_device_name() if args.device.startswith("cuda") else "cpu",
        "dtype": str(dtype),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
    }
    print(json.dumps(info), flush=True)
    rows: list[dict] = []
    t_all = time.perf_counter()
    for size in args.sizes.split(","):
        t0 = time.perf_counter()
        model = build(size, args.device, dtype)
        print(f"# {size}: built in {time.perf_counter() - t0:.1f} s", flush=True)
        rows += bench_decode(model, size, args)
        if not args.skip_train:
            try:
                rows += bench_train(model, size, args)
            except torch.OutOfMemoryError as e:  # report and go on to the next size
                print(json.dumps({"kind": "train", "size": size, "error": f"OOM: {e}"[:300]}))
                model.zero_grad(set_to_none=True)
        del model
        if args.device.startswith("cuda"):
            torch.cuda.empty_cache()
    print(f"\n{'size':>5} {'what':>12} {'plain':>10} {'ours':>10} {'ratio':>6}  notes")
    for size in args.sizes.split(","):
        for key in [("decode", b) for b in args.batches] + [("train", None)]:
            sel = [
                r
                for r in rows
                if "side" in r
                and r["size"] == size
                and r["kind"] == key[0]
                and (key[1] is None or r.get("batch", -1) <= key[1])
            ]
            sel = [r for r in sel if key[1] is None or r["batch"] == max(x["batch"] for x in sel)]
            d = {r["side"]: r for r in sel}
            if len(d) < 2:
                continue
            what = f"decode b{d['ours']['batch']}" if key[0] == "decode" else "train tok/s"
            note = (
                f"roofline {d['ours']['roofline_tok_per_s']:.0f}: plain "
                f"{d['plain']['of_roofline']:.1%}, ours {d['ours']['of_roofline']:.1%}"
                if key[0] == "decode"
                else f"MFU plain {d['plain']['mfu']:.1%}, ours {d['ours']['mfu']:.1%}"
            )
            a, b = d["plain"]["tok_per_s"], d["ours"]["tok_per_s"]
            print(f"{size:>5} {what:>12} {a:>10.0f} {b:>10.0f} {b / a:>6.2f}  {note}")
    print(f"total {time.perf_counter() - t_all:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps({"info": info, "rows": rows}, indent=1))
    return rows


if __name__ == "__main__":
    main()
