"""Predicted time and tokens of a recipe, per stage and phase (sample / verify / update / eval /
other), on a device of vibethinker/devices.py's table.

Each stage becomes a list of `Work` items from its config and the recipe's counts; each item's
seconds come from one of four models:
- train: FLOPs = tokens x (6N + 6 x layers x seq x hidden) (causal attention, forward and
  backward) over peak x train efficiency (devices.train_eff; on CPU the probe's).
- prefill (teacher-forced scoring, prompts before decoding): tokens x (2N + 2 x layers x seq x
  hidden) over peak x forward efficiency.
- decode: steps x step time; a step reads the weights once and each row's KV cache
  (bandwidth x BW_EFF), or computes 2N per row (whichever is slower). HF adds its kernel
  launches (HF_LAYER_S per layer) and a cost per row and context token (solved from the HF
  anchor), batches to its token budget and runs each batch to its longest response; vLLM runs
  at its anchor's factor over the bound, batching continuously (256 rows, or what its KV cache
  holds). On CPU: the probe's fixed cost per step plus its cost per row.
- verify: calls x seconds per call over the verifier workers.
Counts the recipe does not fix come from `Expect` (module plan/expect.py): plan keys, an earlier
run's ledger, the data on disk, or a default named in the output.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from vibethinker import devices
from vibethinker.devices import BW_EFF, Device
from vibethinker.plan.shapes import ModelShape

PHASES = ("sample", "verify", "update", "eval", "other")
HF_BUDGET = 1 << 17  # engines/hf.py's default token budget per batch
HF_MAX_BATCH = 256  # engines/hf.py's default max_batch_size
VLLM_BATCH = 256  # vLLM's default max_num_seqs
# eager PyTorch's kernel launches per layer per decode step (~35 kernels x ~10 us; ASSUMED)
HF_LAYER_S = 0.35e-3
VLLM_UTIL = 0.9  # vLLM's default gpu_memory_utilization: weights + KV cache share of the device
# Engine anchors for the decode factor: (params, layers, hidden, kv_dim, batch, prompt, response,
# tok/s, device). HF: the H200 anchor (Qwen2.5-1.5B, batch 256, 2.9K-3.2K tok/s; prompt and
# response lengths ASSUMED 256 + 1024). vLLM: Llama 3.1 8B bf16 on one H100, ~12,500 output
# tok/s (devices.py names the source; ShareGPT-like lengths ASSUMED 256 + 256).
ANCHORS = {
    "hf": (1.54e9, 28, 1536, 256, 256, 256, 1024, 3.0e3, "h200"),
    "vllm": (8.03e9, 32, 4096, 1024, 256, 256, 256, 12.5e3, "h100"),
}


@dataclass
class Work:
    """One piece of a stage's work (see the module docstring for the models)."""

    phase: str
    kind: str  # train, prefill, decode, verify, fixed
    shape: ModelShape | None = None
    tokens: float = 0.0  # trained / prefilled / generated tokens
    seq: float = 0.0  # attention context per token (train, prefill); prompt length (decode)
    rows: float = 0.0  # decoded sequences; verifier calls
    cap: float = 0.0  # the length cap of a decode (HF batches run to their longest)
    engine: str = "hf"
    seconds: float = 0.0  # fixed items; verify: seconds per call
    workers: int = 1
    recompute: bool = False  # train: activation checkpointing (one more forward: x 4/3)


@dataclass
class StageCost:
    name: str
    stage: str
    work: list[Work] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # defaults used, named
    seconds: dict[str, float] = field(default_factory=dict)
    tokens: dict[str, float] = field(default_factory=dict)  # trained, prompt, generated

    @property
    def total(self) -> float:
        return sum(self.seconds.values())


@dataclass(frozen=True)
class Rates:
    """What the device does per phase: its peaks, efficiencies and per-step costs."""

    dev: Device
    gpus: int = 1
    cpu: dict[str, float] | None = None  # the CPU probe's measurements (plan/probe.py)

    def train_eff(self, s: ModelShape) -> float:
        return self.cpu["train_eff"] if self.cpu else devices.train_eff(s.params())

    def fwd_eff(self, s: ModelShape) -> float:
        return self.cpu["fwd_eff"] if self.cpu else devices.fwd_eff(s.params())


def _attn(s: ModelShape, seq: float) -> float:
    """Attention FLOPs per token, forward, causal: 2 x layers x seq x hidden."""
    return 2.0 * s.layers * seq * s.hidden


def train_seconds(w: Work, r: Rates) -> float:
    flops = w.tokens * (6.0 * w.shape.params() + 3 * _attn(w.shape, w.seq))
    flops *= 4 / 3 if w.recompute else 1.0  # the anchors ran without checkpointing (ASSUMED)
    return flops / (r.dev.flops * r.train_eff(w.shape) * r.gpus)


def prefill_seconds(w: Work, r: Rates) -> float:
    flops = w.tokens * (2.0 * w.shape.params() + _attn(w.shape, w.seq))
    return flops / (r.dev.flops * r.fwd_eff(w.shape) * r.gpus)


def step_seconds(s_params: float, layers: int, kv_dim: int, b: float, ctx: float, dev: Device):
    """One decode step of b rows at mean context ctx: (bandwidth time, compute time)."""
    kv_tok = 2.0 * layers * kv_dim * dev.dtype_bytes
    t_bw = (dev.dtype_bytes * s_params + b * ctx * kv_tok) / (dev.bandwidth * BW_EFF)
    t_fl = b * 2.0 * s_params / (dev.flops * devices.MATMUL_EFF)
    return t_bw, t_fl


def engine_factor(engine: str) -> float:
    """vLLM: how much slower than the bandwidth/compute bound it runs, solved from its anchor's
    measured throughput (ANCHORS; CUDA graphs leave it little fixed cost per step)."""
    n, layers, _, kv, b, p, resp, tok_s, dev = ANCHORS["vllm"]
    t_bw, t_fl = step_seconds(n, layers, kv, b, p + resp / 2, devices.DEVICES[dev])
    return (b / tok_s) / max(t_bw, t_fl)


def hf_row_cost() -> float:
    """HF generate's seconds per row per context token per step, beyond the bound and the
    launches (its padded cache and eager attention): solved from the HF anchor (ANCHORS)."""
    n, layers, _, kv, b, p, resp, tok_s, dev = ANCHORS["hf"]
    ctx = p + resp / 2
    t_bw, t_fl = step_seconds(n, layers, kv, b, ctx, devices.DEVICES[dev])
    return (b / tok_s - max(t_bw, t_fl) - layers * HF_LAYER_S) / (b * ctx)


def hf_step(s: ModelShape, b: float, ctx: float, dev: Device) -> float:
    """One HF decode step: the bound, the launches, and the per-row cost over the context."""
    t_bw, t_fl = step_seconds(s.params(), s.layers, s.kv_dim, b, ctx, dev)
    return max(t_bw, t_fl) + s.layers * HF_LAYER_S + b * ctx * hf_row_cost()


def decode_seconds(w: Work, r: Rates) -> float:
    """Generation: prompts prefilled, then steps of the batch (module docstring)."""
    s = w.shape
    if w.rows <= 0 or w.tokens <= 0:
        return 0.0
    mean = w.tokens / w.rows
    pre = prefill_seconds(Work("", "prefill", s, w.rows * w.seq, w.seq), r)
    if w.engine == "vllm":  # continuous batching, as many rows as the KV cache holds
        kv_row = 2.0 * s.layers * s.kv_dim * r.dev.dtype_bytes * (w.seq + mean)
        room = VLLM_UTIL * r.dev.mem_gb * 1e9 - r.dev.dtype_bytes * s.params()
        b = max(1.0, min(w.rows, VLLM_BATCH, room / kv_row))
        steps = w.tokens / b
    else:
        b = min(w.rows, HF_MAX_BATCH, max(1, HF_BUDGET // max(1, int(w.seq + w.cap))))
        longest = min(w.cap, 2 * mean) if w.cap else mean  # a batch runs to its longest row
        steps = math.ceil(w.rows / b) * longest
        # the engine drops finished rows (compact_frac): on average mean/longest of b still run
        active = b * min(1.0, mean / longest)
    if r.cpu:  # measured: a fixed cost per step plus a cost per row per step
        step = r.cpu["step_s"] + active * r.cpu["row_step_s"] * (s.layers / r.cpu["layers"])
        return pre + steps * step
    ctx = w.seq + mean / 2
    if w.engine != "vllm":
        return pre + steps * hf_step(s, active, ctx, r.dev) / r.gpus
    t_bw, t_fl = step_seconds(s.params(), s.layers, s.kv_dim, b, ctx, r.dev)
    return pre + steps * max(t_bw, t_fl) * engine_factor(w.engine) / r.gpus


def seconds(w: Work, r: Rates) -> float:
    if w.kind == "train":
        return train_seconds(w, r)
    if w.kind == "prefill":
        return prefill_seconds(w, r)
    if w.kind == "decode":
        return decode_seconds(w, r)
    if w.kind == "verify":
        return w.rows * w.seconds / max(1, w.workers)
    return w.seconds


def total(sc: StageCost, r: Rates) -> StageCost:
    """Fill the stage's seconds per phase and tokens from its work."""
    sc.seconds = {p: 0.0 for p in PHASES}
    sc.tokens = {"trained": 0.0, "prompt": 0.0, "generated": 0.0, "rollouts_sample": 0.0}
    sc.tokens["rollouts_eval"] = 0.0
    for w in sc.work:
        sc.seconds[w.phase] += seconds(w, r)
        if w.kind == "train":
            sc.tokens["trained"] += w.tokens
        elif w.kind == "decode":
            sc.tokens["generated"] += w.tokens
            sc.tokens["prompt"] += w.rows * w.seq
            sc.tokens["rollouts_eval" if w.phase == "eval" else "rollouts_sample"] += w.rows
    return sc


def fmt_count(x: float) -> str:
    for unit, v in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if x >= v:
            return f"{x / v:.1f}{unit}"
    return f"{x:.0f}"


def cost_table(costs: list[StageCost], where: str, gpus: int) -> str:
    """The markdown table: per stage, seconds per phase, device-hours, tokens."""
    lines = [
        f"Predicted time on {where} ({gpus} device{'s' if gpus > 1 else ''}); "
        "device-hours = wall hours x devices.",
        "",
        "| stage | type | " + " | ".join(f"{p} s" for p in PHASES) + " | wall | device-h "
        "| tokens trained | prompt tokens | generated |",
        "|---|---|" + "---:|" * (len(PHASES) + 5),
    ]
    tot = {p: 0.0 for p in PHASES}
    tok = {"trained": 0.0, "prompt": 0.0, "generated": 0.0}
    for sc in costs:
        for p in PHASES:
            tot[p] += sc.seconds.get(p, 0.0)
        for k in tok:
            tok[k] += sc.tokens.get(k, 0.0)
        lines.append(_row(sc.name, sc.stage, sc.seconds, sc.tokens, gpus))
    lines.append(_row("**total**", "", tot, tok, gpus))
    return "\n".join(lines)


def _row(name: str, stage: str, secs: dict[str, float], tok: dict[str, float], gpus: int) -> str:
    wall = sum(secs.values())
    cells = [f"{secs.get(p, 0.0):,.0f}" for p in PHASES]
    return (
        f"| {name} | {stage} | {' | '.join(cells)} | {_dur(wall)} | {wall * gpus / 3600:,.2f} "
        f"| {fmt_count(tok['trained'])} | {fmt_count(tok['prompt'])} "
        f"| {fmt_count(tok['generated'])} |"
    )


def _dur(s: float) -> str:
    if s >= 3600:
        return f"{s / 3600:.1f} h"
    return f"{s / 60:.1f} min" if s >= 120 else f"{s:.0f} s"


def where_it_goes(costs: list[StageCost]) -> str:
    """One line: the share of the run's time per phase, largest first."""
    tot = {p: sum(sc.seconds.get(p, 0.0) for sc in costs) for p in PHASES}
    all_s = sum(tot.values()) or 1.0
    parts = sorted(tot.items(), key=lambda kv: -kv[1])
    return "Where it goes: " + ", ".join(f"{p} {100 * v / all_s:.0f}%" for p, v in parts if v)


def as_dict(sc: StageCost) -> dict[str, Any]:
    return {"name": sc.name, "stage": sc.stage, "seconds": sc.seconds, "tokens": sc.tokens}
