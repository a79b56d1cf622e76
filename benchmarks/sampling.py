"""Sampling throughput: our hf engine vs a plain `model.generate` loop, same model and settings.

    .venv/bin/python benchmarks/sampling.py [--prompts 32] [--n 8] [--max-new-tokens 64]
        [--size 1m] [--threads 2] [--repeats 3] [--sides ours,generate,ours_static]

Both sample n completions for each prompt with the paper's protocol (temperature 1.0, top-p 0.95,
top-k off) and the same max_new_tokens, on a random-weight Qwen2 (rows rarely hit EOS, so both
do about the same number of decoding steps). Throughput = generated tokens (up to and including
EOS) / wall seconds after one warm-up call. The `generate` peer gets the same batches (prompts x
n rows, `num_return_sequences=n`), left padding, and no logprobs (our engine computes them, so
the comparison favours the peer). `ours_static` is the engine's static-KV/CUDA-graph path on the
same CPU (no graphs there): what that path costs where it is not meant to win. Each side in its
own process, rotating repeats (benchmarks/harness.py).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


def plain_generate(model, tok, prompts: list[str], n: int, max_new: int, rows: int) -> int:
    """Batched `model.generate` with the paper's protocol; returns generated tokens."""
    texts = [
        tok.apply_chat_template(
            [{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False
        )
        for p in prompts
    ]
    tok.padding_side = "left"
    eos = model.generation_config.eos_token_id
    eos = set(eos if isinstance(eos, list) else [eos])
    total = 0
    per = max(1, rows // n)  # prompts per batch, so a batch has about `rows` rows
    for s in range(0, len(texts), per):
        enc = tok(texts[s : s + per], return_tensors="pt", padding=True, add_special_tokens=False)
        with torch.inference_mode():
            out = model.generate(
                **enc,
                do_sample=True,
                temperature=1.0,
                top_p=0.95,
                top_k=0,  # explicit: HF's default top_k=50 would otherwise apply
                max_new_tokens=max_new,
                num_return_sequences=n,
                pad_token_id=tok.pad_token_id,
            )
        for row in out[:, enc["input_ids"].shape[1] :].tolist():
            k = next((i + 1 for i, t in enumerate(row) if t in eos), len(row))
            total += k
    return total


def add_args(ap) -> None:
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--size", default="1m")
    ap.add_argument("--threads", type=int, default=2)


def prepare(args, work: Path) -> dict:
    from vibethinker.data import world
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.prompts.paper import paper_prompt

    splits = world.generate(seed=0, n_train=200, n_probe=1, n_eval=args.prompts, domains=("math",))
    texts = [paper_prompt(p) for p in splits["eval"]][: args.prompts]
    path = build_tiny_model(work / "model", [p.prompt for p in splits["train"]], args.size, 512, 0)
    return {"model": str(path), "texts": texts, "size": args.size}


def _setup(args, shared):
    from vibethinker.models import load_model_and_tokenizer

    harness.set_threads(args.threads)
    return load_model_and_tokenizer(shared["model"], device="cpu", dtype="float32")


def _engine(args, shared: dict, static: bool) -> dict:
    from vibethinker.engines import SamplingParams
    from vibethinker.engines.hf import HFSampler

    model, tok = _setup(args, shared)
    texts = shared["texts"]
    engine = HFSampler(model, tok, static_cache=static)
    engine.generate(texts[:2], 2, SamplingParams(max_new_tokens=4, seed=0))  # warm-up
    t0 = time.perf_counter()
    out = engine.generate(texts, args.n, SamplingParams(max_new_tokens=args.max_new_tokens, seed=0))
    dt = time.perf_counter() - t0
    n = sum(len(c.token_ids) for g in out for c in g)
    cfg = {
        "engine": "vibethinker.engines.hf.HFSampler",
        "static_cache": static,
        "token_budget": engine.token_budget,
        "max_batch_size": engine.max_batch_size,
        "temperature": 1.0,
        "top_p": 0.95,
        "top_k": 0,
        "logprobs": True,
        "threads": args.threads,
        "size": shared["size"],
    }
    return {"config": cfg, "metrics": {"tok_per_s": n / dt, "tokens": n, "seconds": dt}}


def side_ours(args, shared: dict) -> dict:
    return _engine(args, shared, False)


def side_ours_static(args, shared: dict) -> dict:
    return _engine(args, shared, True)


def side_generate(args, shared: dict) -> dict:
    model, tok = _setup(args, shared)
    texts = shared["texts"]
    rows = min(256, len(texts) * args.n)
    plain_generate(model, tok, texts[:2], 2, 4, rows)  # warm-up
    torch.manual_seed(0)
    t0 = time.perf_counter()
    n = plain_generate(model, tok, texts, args.n, args.max_new_tokens, rows)
    dt = time.perf_counter() - t0
    import transformers

    cfg = {
        "peer": f"transformers {transformers.__version__} model.generate",
        "do_sample": True,
        "temperature": 1.0,
        "top_p": 0.95,
        "top_k": 0,
        "num_return_sequences": args.n,
        "rows_per_batch": rows,
        "padding_side": "left",
        "logprobs": False,
        "threads": args.threads,
        "size": shared["size"],
    }
    return {"config": cfg, "metrics": {"tok_per_s": n / dt, "tokens": n, "seconds": dt}}


SIDES = {"ours": side_ours, "generate": side_generate, "ours_static": side_ours_static}

if __name__ == "__main__":
    harness.main(__doc__, add_args, prepare, SIDES, headline=("tok_per_s", "higher"))
