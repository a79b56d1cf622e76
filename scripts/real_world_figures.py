"""Two figures of docs/REAL_WORLD.md, before vs after, on CPU in ~4 minutes:

1. Stopping: a random-weight Qwen2.5-base-style checkpoint (EOS <|endoftext|>, turn end
   <|im_end|>) after a short SFT, sampled with the turn end as a stop token (now) and with the
   checkpoint's EOS only (before): mean tokens, truncation rate, wall time.
2. `transformers serve` (ignores n, honours seed): distinct samples per prompt with a seed per
   follow-up request (now) and with the first request's seed re-sent (before).

    python scripts/real_world_figures.py [--out /tmp/real_world]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import torch

import vibethinker.engines.openai as openai_engine
from vibethinker.data.io import save_problems
from vibethinker.engines import SamplingParams, make_sampler
from vibethinker.evaluate import PROMPT_STYLES, evaluate
from vibethinker.models.qwen_style import build_qwen25_style
from vibethinker.models.tiny import build_tiny_model
from vibethinker.stages import get
from vibethinker.stages.sft import SFTConfig
from vibethinker.types import Problem


def problems(n: int, seed: int, start: int = 0) -> list[Problem]:
    import random

    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        out.append(
            Problem(
                id=f"q{start + i}",
                domain="math",
                prompt=f"what is {a}+{b}?",
                answer=str(a + b),
                traces=[f"<think>{a}+{b}={a + b}</think>\\boxed{{{a + b}}}"],
            )
        )
    return out


def stopping(root: Path) -> None:
    base = build_qwen25_style(
        root / "base", [p.prompt + " " + p.traces[0] for p in problems(200, 0)]
    )
    save_problems(root / "train.jsonl", problems(160, 1))
    cfg = SFTConfig(
        model=base,
        data=str(root / "train.jsonl"),
        out=str(root / "sft"),
        epochs=8,
        global_batch=16,
        micro_batch=16,
        max_len=192,
        lr=3e-3,
        final_lr=3e-4,
        prompt_style="raw",
        device="cpu",
    )
    final = get("sft").fn(cfg)["model"]
    for label in ("turn end stops (now)", "checkpoint EOS only (before)"):
        s = make_sampler("hf", model=final, device="cpu")
        if "before" in label:
            s.eos_ids = [s.tokenizer.eos_token_id]
        t0 = time.perf_counter()
        res = evaluate(
            s,
            problems(40, 7, 5000),
            4,
            [1, 4],
            SamplingParams(max_new_tokens=512, seed=0),
            workers=1,
            prompt_fn=PROMPT_STYLES["raw"],
        )
        m = res.metrics["all"]
        print(
            f"{label}: avg@4 {m['avg@n']:.3f}, mean tokens {m['mean_tokens']:.1f}, "
            f"truncation {m['truncation_rate']:.2f}, {time.perf_counter() - t0:.1f} s"
        )


def serve(root: Path) -> None:
    texts = [
        f"what is {a}+{b}? <think>{a}+{b}={a + b}</think>\\boxed{{{a + b}}}"
        for a in range(10)
        for b in range(10)
    ]
    model = build_tiny_model(root / "served", texts, "1m", 300, 0)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    exe = Path(sys.executable).with_name("transformers")
    proc = subprocess.Popen(
        [str(exe), "serve", model, "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "HF_HUB_OFFLINE": "1"},
    )
    try:
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except OSError:
                time.sleep(0.5)
        prompts = [f"what is {i}+{i}?" for i in range(10)]
        now = openai_engine.request_seed
        for label in ("a seed per follow-up (now)", "first seed re-sent (before)"):
            if "before" in label:
                openai_engine.request_seed = lambda seed, i, first: seed + i
            s = make_sampler(
                "openai",
                base_url=f"http://127.0.0.1:{port}/v1",
                model=model,
                concurrency=1,
                tokenizer=model,
            )
            out = s.generate(prompts, 8, SamplingParams(max_new_tokens=16, seed=0))
            distinct = sum(len({c.text for c in g}) for g in out) / len(out)
            print(f"{label}: distinct samples per prompt {distinct:.2f} of 8")
        openai_engine.request_seed = now
    finally:
        proc.terminate()
        proc.wait(20)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="/tmp/real_world")
    args = ap.parse_args()
    torch.set_num_threads(1)
    root = Path(args.out)
    root.mkdir(parents=True, exist_ok=True)
    stopping(root)
    serve(root)


if __name__ == "__main__":
    main()
