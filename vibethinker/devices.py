"""What a device can do: peak dense bf16 FLOP/s, memory bandwidth and memory, and the fractions of
them a phase reaches here (the cost ledger divides by these; `vibethinker plan` predicts with them).

Peaks are the vendors' datasheet figures (dense, no sparsity; SXM parts):
H100 SXM 989 TFLOP/s bf16, 3.35 TB/s HBM3, 80 GB; H800 SXM the same compute and memory as the H100
(its NVLink is cut to 400 GB/s, which one-GPU phases do not see); H200 989 TFLOP/s, 4.8 TB/s
HBM3e, 141 GB; A100 SXM 80 GB 312 TFLOP/s, 2.039 TB/s. The cpu row's peak is measured once by a
matmul probe (`cpu_probe`, cached per host and thread count).

Efficiencies (fractions of the peak a phase reaches), calibrated on one H200, bf16, plain
HF/PyTorch (issue 40's anchors):
- matmul 779 TFLOP/s = 0.79 of 989; device copy 4.29 TB/s = 0.89 of 4.8 (BW_EFF).
- training: Qwen2.5-1.5B 37.8K tok/s at 4 x 4,096 tokens is MFU 0.35 by 6N, Qwen2.5-3B 21.0K
  tok/s 0.39; counting causal attention's FLOPs (6 * layers * seq * hidden per token) the device
  did 0.39 and 0.43 of its peak: TRAIN_EFF (by model size, nearest anchor).
- teacher-forced logprob forward (prefill): 128K / 68K tok/s = 0.40 / 0.43 of peak by 2N:
  FWD_EFF.
- decoding: a bandwidth model (weights once per step + the batch's KV cache) times an engine
  factor solved from a measured throughput (`decode_factor`): HF generate at batch 256 about
  3.0K tok/s on Qwen2.5-1.5B (the H200 anchor, 2.9K-3.2K); vLLM ~12,500 output tok/s for Llama
  3.1 8B bf16 on one H100 80GB (https://www.morphllm.com/vllm-benchmarks, third-party figures
  collected 2025-26; FlashInfer, 0.8 GPU utilisation; ShareGPT-like lengths, which we take as
  ~256 prompt + ~256 response tokens at batch 256).
The same fractions are ASSUMED for H100, H800 and A100 (not measured there).
"""

from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

TB = 1e12


@dataclass(frozen=True)
class Device:
    """One accelerator (or this CPU): its peaks; efficiencies are per phase, below."""

    name: str
    flops: float  # peak dense FLOP/s in the training dtype (bf16; fp32 on CPU)
    bandwidth: float  # memory bytes/s
    mem_gb: float  # memory per device, GB
    dtype_bytes: int = 2  # bytes per weight when sampling (bf16; fp32 on CPU)
    note: str = ""


DEVICES: dict[str, Device] = {
    "h100": Device("h100", 989 * TB, 3.35 * TB, 80, note="H100 SXM datasheet"),
    "h800": Device("h800", 989 * TB, 3.35 * TB, 80, note="H800 SXM: H100 compute, 400 GB/s NVLink"),
    "h200": Device(
        "h200", 989 * TB, 4.8 * TB, 141, note="H200 SXM datasheet; anchors measured here"
    ),
    "a100": Device("a100", 312 * TB, 2.039 * TB, 80, note="A100 SXM 80GB datasheet"),
}
KNOWN = (*DEVICES, "cpu")

BW_EFF = 4.29 / 4.8  # device copy on the H200 over its datasheet bandwidth
MATMUL_EFF = 779 / 989  # bf16 matmul on the H200 over its datasheet peak
# (params, MFU by 6N at 4 x 4,096 tokens) of the training anchors; their attention share is added
TRAIN_ANCHORS = ((1.54e9, 0.35, 28, 1536), (3.09e9, 0.39, 36, 2048))
# (params, tokens/s) of the teacher-forced forward anchors on the H200
FWD_ANCHORS = ((1.54e9, 128e3), (3.09e9, 68e3))
ANCHOR_SEQ = 4096


def train_eff(params: float) -> float:
    """Fraction of peak a training step reaches, counting attention (nearest anchor by size)."""
    n, mfu, layers, hidden = min(TRAIN_ANCHORS, key=lambda a: abs(a[0] - params))
    attn = 6.0 * layers * ANCHOR_SEQ * hidden
    return mfu * (6 * n + attn) / (6 * n)


def fwd_eff(params: float) -> float:
    """Fraction of peak a teacher-forced forward reaches by 2N (nearest anchor by size)."""
    n, tok_s = min(FWD_ANCHORS, key=lambda a: abs(a[0] - params))
    return 2 * n * tok_s / DEVICES["h200"].flops


def _cache_file() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return root / "vibethinker" / "cpu_probe.json"


def cpu_probe(refresh: bool = False) -> Device:
    """This CPU as a Device: fp32 matmul FLOP/s and copy bytes/s measured once (a few seconds,
    then cached per host and thread count in ~/.cache/vibethinker/cpu_probe.json)."""
    import torch

    key = f"{platform.node()}:{torch.get_num_threads()}"
    path = _cache_file()
    try:
        cached = json.loads(path.read_text()) if path.is_file() else {}
    except (OSError, ValueError):
        cached = {}
    if key not in cached or refresh:
        cached[key] = _measure(torch)
        try:  # a read-only home measures again next time; it never fails a stage
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(cached, indent=1))
        except OSError:
            pass
    got = cached[key]
    return Device(
        "cpu",
        got["flops"],
        got["bandwidth"],
        got.get("mem_gb", 16.0),
        dtype_bytes=4,
        note=f"measured by a matmul probe ({key})",
    )


def _best(fn, reps: int = 5) -> float:
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _measure(torch) -> dict[str, float]:
    n = 512
    a, b = torch.randn(n, n), torch.randn(n, n)
    t = _best(lambda: [a @ b for _ in range(8)])
    x = torch.empty(8 << 20)  # 32 MB, beyond the caches
    y = torch.empty_like(x)
    tc = _best(lambda: y.copy_(x))
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 1e9
    return {"flops": 8 * 2 * n**3 / t, "bandwidth": 2 * x.numel() * 4 / tc, "mem_gb": mem}


def get(name: str) -> Device:
    """A device by name (h100, h200, a100, h800, cpu); a ValueError naming the choices."""
    key = name.strip().lower()
    if key == "cpu":
        return cpu_probe()
    if key not in DEVICES:
        raise ValueError(f"unknown device {name!r}; set device= one of {', '.join(KNOWN)}")
    return DEVICES[key]


def detect(configured: str = "") -> tuple[str, int, Device | None]:
    """(name, count, Device or None) of what a stage ran on: CUDA's device name matched against
    the table (None when it is not in it), else this CPU; count = the torchrun world size."""
    import torch

    count = int(os.environ.get("WORLD_SIZE", "1") or 1)
    if configured != "cpu" and torch.cuda.is_available():
        full = torch.cuda.get_device_name(0)
        match = [k for k in DEVICES if k in full.lower()]
        return full, count, DEVICES[match[0]] if match else None
    return "cpu", count, cpu_probe()
