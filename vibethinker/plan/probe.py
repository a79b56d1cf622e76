"""The CPU's rates for the cost model, measured once on the embedded world's tiny model (the
model the CPU demo trains) and cached beside the matmul probe (devices.cpu_probe's file).

On a CPU a ~1M-parameter model is far from the matmul peak: each decode step's time is mostly
fixed per-call cost (Python, kernel dispatch), so the CPU row is not peak x efficiency alone.
Measured here: a training step (forward, backward, AdamW) of 8 x 256 tokens -> train efficiency
by 6N; a no-grad forward of 16 x 256 -> forward efficiency by 2N; the HF engine sampling 4 and
128 rows for 48 tokens (the demo's batches: RL's 128 rows a step, eval's 64 x n) -> the fixed cost per decode step and the cost per row per step.
"""

from __future__ import annotations

import json
import platform
import tempfile
import time
from typing import Any

import torch

from vibethinker import devices, ledger
from vibethinker.engines import SamplingParams
from vibethinker.engines.hf import HFSampler
from vibethinker.models.tiny import build_tiny_model

PROBE_TEXTS = [f"What is {a} + {b}? The answer is {a + b}." for a in range(40) for b in range(5)]


def _timed(fn, reps: int = 5) -> float:
    """The fastest of `reps` runs after a warm-up: the machine's speed, not its other load."""
    fn()
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def _decode(sampler: Any, rows: int, reps: int = 3) -> tuple[float, int]:
    """Seconds and decode steps of the fastest of `reps` identical sampling calls."""
    params = SamplingParams(temperature=1.0, max_new_tokens=48, seed=0)
    best = (float("inf"), 1)
    for _ in range(reps):
        ledger.start()
        sampler.generate(["What is 3 + 4?"] * rows, 1, params)
        led = ledger.stop(0.0)
        secs = led["seconds"]["sample"]
        best = min(best, (secs, led["generation"]["sample"]["decode_steps"]))
    return best


def measure() -> dict[str, float]:
    peak = devices.cpu_probe().flops
    with tempfile.TemporaryDirectory() as tmp:
        build_tiny_model(tmp, PROBE_TEXTS, size="1m", vocab_size=512)
        sampler = HFSampler(tmp, device="cpu")
        model = sampler.model
        n = sum(p.numel() for p in model.parameters())
        ids = torch.randint(0, model.config.vocab_size, (8, 256))
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4)

        def step() -> None:
            model.train()
            out = model(input_ids=ids, labels=ids)
            out.loss.backward()
            opt.step()
            opt.zero_grad()

        t_train = _timed(step)
        x = torch.randint(0, model.config.vocab_size, (16, 256))
        with torch.no_grad():
            t_fwd = _timed(lambda: model(input_ids=x))
        (s4, n4), (s128, n128) = _decode(sampler, 4), _decode(sampler, 128)
    per4, per128 = s4 / max(n4, 1), s128 / max(n128, 1)
    row = max(0.0, (per128 - per4) / 124)
    return {
        "params": n,
        "layers": model.config.num_hidden_layers,
        "train_eff": 6 * n * ids.numel() / t_train / peak,
        "fwd_eff": 2 * n * x.numel() / t_fwd / peak,
        "step_s": max(1e-5, per4 - 4 * row),
        "row_step_s": row,
    }


def cpu_rates(refresh: bool = False) -> dict[str, float]:
    """The measurements above, cached per host and thread count."""
    key = f"tiny:{platform.node()}:{torch.get_num_threads()}"
    path = devices._cache_file()
    cached = json.loads(path.read_text()) if path.is_file() else {}
    if key not in cached or refresh:
        got = measure()
        cached = json.loads(path.read_text()) if path.is_file() else {}
        cached[key] = got
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(cached, indent=1))
    return cached[key]
