"""Check `vibethinker plan`'s arithmetic against measured peaks on CPU (fp32).

Each case builds a random-weight Qwen2 model of a given shape in a FRESH process, runs two
training steps (the second has AdamW's moments, as every later step does), and reports peak RSS
minus the RSS before the model was built; the predictor (vibethinker/plan/memory.py, `cuda=False`)
gives its number for the same step. SFT cases are packed rows (block-diagonal mask), with and
without activation checkpointing; RL cases are response-logprob updates (the LM head in chunks).
Large tensors are mmapped (MALLOC_MMAP_THRESHOLD_=65536), so RSS follows live memory.

    flock /tmp/heavy.lock env OMP_NUM_THREADS=1 python scripts/plan_check.py [--out FILE.md]
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import subprocess
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, Qwen2Config

from vibethinker.plan.memory import GIB, Step, train_phase
from vibethinker.plan.shapes import ModelShape
from vibethinker.train import policy, rollout, sft
from vibethinker.train.chunked import chunk_size
from vibethinker.train.packing import Sample, collate
from vibethinker.train.rollout import build_batch
from vibethinker.types import Completion

VOCAB = 32000


@dataclass(frozen=True)
class Case:
    name: str
    kind: str  # sft | rl
    layers: int
    hidden: int
    inter: int
    heads: int
    kv: int
    rows: int
    row_len: int  # SFT: packed row length; RL: prompt + response
    ckpt: bool
    prompt: int = 0  # RL only
    chunk: int = 0  # RL: LM head chunk (positions)

    def shape(self) -> ModelShape:
        return ModelShape(
            self.name, self.layers, self.hidden, self.inter, self.heads, self.kv, VOCAB, True
        )

    def step(self) -> Step:
        if self.kind == "sft":
            # the SFT trainer always puts the head through train/chunked.py's chunks
            return Step(
                self.rows,
                self.row_len,
                self.rows * (self.row_len - 1),
                chunk_size(VOCAB),
                self.ckpt,
                masked=True,
            )
        resp = self.row_len - self.prompt
        return Step(self.rows, self.row_len, self.rows * resp, self.chunk, self.ckpt, gather=True)


CASES = [
    Case("s1", "sft", 4, 256, 704, 4, 2, 1, 2048, False),
    Case("s1", "sft", 4, 256, 704, 4, 2, 1, 2048, True),
    Case("s2", "sft", 8, 512, 1408, 8, 2, 1, 2048, False),
    Case("s2", "sft", 8, 512, 1408, 8, 2, 1, 2048, True),
    Case("s3", "sft", 12, 768, 2048, 12, 2, 1, 1024, False),
    Case("s3", "sft", 12, 768, 2048, 12, 2, 2, 1024, True),
    Case("s2", "rl", 8, 512, 1408, 8, 2, 2, 1536, True, prompt=256, chunk=1024),
    Case("s3", "rl", 12, 768, 2048, 12, 2, 1, 2048, False, prompt=256, chunk=1024),
]


def _rss_peak() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024.0


def _rss_now() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _sft_batch(c: Case):
    g = torch.Generator().manual_seed(0)
    n = c.row_len // 4  # four samples per packed row
    samples = [
        Sample(torch.randint(3, VOCAB, (n,), generator=g).tolist(), [1] * n, False)
        for _ in range(4 * c.rows)
    ]
    rows = [list(range(4 * r, 4 * r + 4)) for r in range(c.rows)]
    return collate(samples, rows, 0, packed=True)


def _rl_batch(c: Case):
    g = torch.Generator().manual_seed(0)
    resp = c.row_len - c.prompt
    prompts = [torch.randint(3, VOCAB, (c.prompt,), generator=g).tolist() for _ in range(c.rows)]
    comps = [
        Completion(text="", token_ids=torch.randint(3, VOCAB, (resp,), generator=g).tolist())
        for _ in range(c.rows)
    ]
    return build_batch(prompts, comps, 0)


def _build(c: Case):
    cfg = Qwen2Config(
        vocab_size=VOCAB,
        hidden_size=c.hidden,
        intermediate_size=c.inter,
        num_hidden_layers=c.layers,
        num_attention_heads=c.heads,
        num_key_value_heads=c.kv,
        tie_word_embeddings=True,
        use_cache=False,
        max_position_embeddings=4096,
    )
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32, attn_implementation="sdpa")
    if c.ckpt:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    return model.train()


def _steps(c: Case, n: int) -> int:
    """n training steps of case c; the model's parameter count."""
    batch = _sft_batch(c) if c.kind == "sft" else _rl_batch(c)
    model = _build(c)
    opt = policy.make_optimizer(model, 1e-5)
    for _ in range(n):
        if c.kind == "sft":
            sft.train_step(model, [batch], "cpu")
        else:
            logp, _ = rollout.response_logprobs(model, batch, with_entropy=True, chunk=c.chunk)
            (-(logp * batch.mask).sum() / c.rows).backward()
        policy.optimizer_step(model, opt, None, 1.0)
    return sum(p.numel() for p in model.parameters())


def child(c: Case) -> dict:
    """Two training steps of case `c` in this process, after a warm-up step of a 1-layer model
    of the same kind (so code, kernels and allocator pools loaded once are in the baseline);
    (baseline RSS, peak RSS) in bytes."""
    torch.manual_seed(0)
    warm = Case("warm", c.kind, 1, 64, 128, 2, 2, 1, 256, c.ckpt, min(c.prompt, 64), c.chunk and 64)
    _steps(warm, 1)
    gc.collect()
    base = _rss_now()
    params = _steps(c, 2)
    return {"base": base, "peak": _rss_peak(), "params": params}


def run_case(c: Case) -> dict:
    root = str(Path(__file__).resolve().parents[1])  # this checkout's vibethinker, not another
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {
        **os.environ,
        "MALLOC_MMAP_THRESHOLD_": "65536",
        "OMP_NUM_THREADS": "1",
        "PYTHONPATH": path,
    }
    cmd = [sys.executable, __file__, "--child", json.dumps(asdict(c))]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    if out.returncode:
        raise RuntimeError(f"case {c}: {out.stderr[-2000:]}")
    got = json.loads(out.stdout.strip().splitlines()[-1])
    pred = train_phase(c.shape(), c.step(), gpus=1, cuda=False).total
    measured = got["peak"] - got["base"]
    return {
        "case": c,
        "params": got["params"],
        "measured": measured,
        "predicted": pred,
        "ratio": pred / measured,
    }


def table(rows: list[dict]) -> str:
    head = (
        "| model (L x h, I) | params | step | tokens | ckpt | measured GiB | predicted GiB "
        "| predicted / measured |\n|---|---:|---|---:|---|---:|---:|---:|"
    )
    lines = [head]
    for r in rows:
        c = r["case"]
        step = f"{c.kind} {c.rows} x {c.row_len}" + (f" (prompt {c.prompt})" if c.prompt else "")
        lines.append(
            f"| {c.name}: {c.layers} x {c.hidden}, {c.inter} | {r['params'] / 1e6:.1f}M | {step} "
            f"| {c.rows * c.row_len} | {'on' if c.ckpt else 'off'} | {r['measured'] / GIB:.3f} "
            f"| {r['predicted'] / GIB:.3f} | {r['ratio']:.2f} |"
        )
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--out", default="", help="also write the table to this file")
    ap.add_argument("--only", default="", help="comma list of case indices (default: all)")
    a = ap.parse_args()
    if a.child:
        print(json.dumps(child(Case(**json.loads(a.child)))))
        return 0
    picks = [int(i) for i in a.only.split(",")] if a.only else range(len(CASES))
    rows = []
    for i in picks:
        rows.append(run_case(CASES[i]))
        print(table(rows[-1:]).splitlines()[-1], flush=True)
    text = table(rows)
    print("\n" + text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")
    worst = max(abs(r["ratio"] - 1) for r in rows)
    print(
        f"worst |predicted / measured - 1| = {worst:.2f} ({'within' if worst <= 0.2 else 'OVER'}"
        " 20%)"
    )
    return 0 if worst <= 0.2 else 1


if __name__ == "__main__":
    sys.exit(main())
