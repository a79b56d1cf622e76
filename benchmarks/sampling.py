"""Sampling throughput: our hf engine vs a plain `model.generate` loop, same model and settings.

Both sample n completions for each prompt with the paper's protocol (temperature 1.0, top-p 0.95,
top-k off) and the same max_new_tokens, on the embedded world's tiny model (random weights: rows
rarely hit EOS, so both do about the same number of decoding steps). Throughput = generated tokens
(up to and including EOS) / wall seconds. The `generate` baseline gets the same batches (prompts
x n rows, `num_return_sequences=n`), left padding, and no logprobs (our engine computes them, so
the comparison favours the baseline).

Run: `python benchmarks/sampling.py [--prompts 32] [--n 8] [--max-new-tokens 64] [--threads 2]`
"""

from __future__ import annotations

import argparse
import tempfile
import time

import torch


def build_model(tmp: str, texts: list[str]):
    from vibethinker.models import load_model_and_tokenizer
    from vibethinker.models.tiny import build_tiny_model

    path = build_tiny_model(tmp, texts, size="1m", vocab_size=512, seed=0)
    return load_model_and_tokenizer(path, device="cpu", dtype="float32")


def plain_generate(model, tok, prompts: list[str], n: int, max_new: int, rows: int) -> int:
    """Batched `model.generate` with the paper's protocol; returns generated tokens."""
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True,
                                     tokenize=False) for p in prompts]  # fmt: skip
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


def main(prompts: int = 32, n: int = 8, max_new_tokens: int = 64, threads: int = 2) -> dict:
    from vibethinker.data import world
    from vibethinker.engines import SamplingParams
    from vibethinker.engines.hf import HFSampler
    from vibethinker.evaluate.prompts import paper_prompt

    torch.set_num_threads(threads)
    splits = world.generate(seed=0, n_train=200, n_probe=1, n_eval=prompts, domains=("math",))
    texts = [paper_prompt(p) for p in splits["eval"]][:prompts]
    with tempfile.TemporaryDirectory() as tmp:
        model, tok = build_model(tmp, [p.prompt for p in splits["train"]])
    params = SamplingParams(max_new_tokens=max_new_tokens, seed=0)
    engine = HFSampler(model, tok)
    rows = min(engine.max_batch_size, len(texts) * n)
    engine.generate(texts[:2], 2, SamplingParams(max_new_tokens=4, seed=0))  # warm-up
    plain_generate(model, tok, texts[:2], 2, 4, rows)

    t0 = time.perf_counter()
    out = engine.generate(texts, n, params)
    t_ours = time.perf_counter() - t0
    ours = sum(len(c.token_ids) for g in out for c in g)

    torch.manual_seed(0)
    t0 = time.perf_counter()
    theirs = plain_generate(model, tok, texts, n, max_new_tokens, rows)
    t_plain = time.perf_counter() - t0

    result = {
        "prompts": len(texts),
        "n": n,
        "max_new_tokens": max_new_tokens,
        "threads": threads,
        "engine_tokens": ours,
        "engine_s": round(t_ours, 3),
        "engine_tok_per_s": round(ours / t_ours, 1),
        "generate_tokens": theirs,
        "generate_s": round(t_plain, 3),
        "generate_tok_per_s": round(theirs / t_plain, 1),
    }
    result["ratio"] = round(result["engine_tok_per_s"] / result["generate_tok_per_s"], 2)
    print(
        f"hf engine: {result['engine_tok_per_s']:.0f} tok/s ({ours} tokens, {t_ours:.2f} s); "
        f"model.generate: {result['generate_tok_per_s']:.0f} tok/s ({theirs} tokens, "
        f"{t_plain:.2f} s); ratio {result['ratio']:.2f}x"
    )
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompts", type=int, default=32)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    main(a.prompts, a.n, a.max_new_tokens, a.threads)
