"""The cost ledger: what one stage spent, counted where the work happens.

The runner opens a ledger for each stage (`start`), the places that do the work add to it
(`sampled` in the HF engine, `verified` in verify_batch, `trained` in the SFT and RL steps,
`checkpoint` when weights are saved, `teacher` for a remote teacher or judge), and the runner
closes it (`stop`) into a JSON record: the stage's ledger.json, and its summary in the manifest.
With no ledger open every hook is a no-op, so a library caller pays nothing. Counting never
touches a tensor, a seed or an RNG: training numbers are unchanged.

Phases: `sample` (rollouts and other generation), `verify`, `update` (forward/backward and the
optimizer, RL's logprob pass included), `eval` (everything under `phase("eval")`: held-out
sampling and its verification); what is left of the stage's wall time is `other` (loading,
saving, data). Achieved rates: training FLOPs by 6N per trained token over the update seconds,
over the device's peak; decoding as bytes read per decode step (the weights once) over the
sampling seconds, over the device's memory bandwidth.
"""

from __future__ import annotations

import json
import math
import os
import threading
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PHASES = ("sample", "verify", "update", "eval")


@dataclass
class Gen:
    """Generation in one phase."""

    calls: int = 0
    prompts: int = 0
    rollouts: int = 0
    prompt_tokens: int = 0
    lengths: list[int] = field(default_factory=list)  # response tokens per rollout
    truncated: int = 0
    decode_steps: int = 0  # sum over batches of the longest response (one weight read each)
    seconds: float = 0.0  # the engine calls' own seconds


@dataclass
class Ledger:
    """One stage's counters (see the module docstring)."""

    seconds: Counter = field(default_factory=Counter)  # per phase
    gen: dict[str, Gen] = field(default_factory=dict)
    verdicts: dict[str, Counter] = field(default_factory=dict)  # phase -> reason -> count
    rejected: dict[str, Counter] = field(default_factory=dict)  # phase -> reason of incorrect
    trained_tokens: int = 0
    trained_positions: int = 0  # tokens plus padding the forward computed
    train_steps: int = 0
    params: int = 0  # of the trained (or, failing that, the sampling) model
    checkpoints: int = 0
    checkpoint_bytes: int = 0
    teacher_calls: int = 0
    teacher_tokens: Counter = field(default_factory=Counter)  # prompt / completion


_CUR: Ledger | None = None
_LOCK = threading.Lock()
_PHASE: list[str] = []


def start() -> Ledger:
    """Open a fresh ledger for the stage about to run."""
    global _CUR
    _CUR = Ledger()
    _PHASE.clear()
    return _CUR


def current() -> Ledger | None:
    return _CUR


@contextmanager
def phase(name: str):
    """Count what runs inside as `name` (e.g. "eval"), whatever phase each hook would pick."""
    _PHASE.append(name)
    try:
        yield
    finally:
        _PHASE.pop()


def _where(default: str) -> str:
    return _PHASE[-1] if _PHASE else default


def sampled(
    prompts: int,
    prompt_lens: list[int],
    lengths: list[int],
    truncated: int,
    decode_steps: int,
    seconds: float,
    params: int = 0,
) -> None:
    """One engine call: its distinct prompts, each rollout's prompt and response length, how
    many hit the length cap, its decode steps (the longest response of each batch)."""
    if _CUR is None:
        return
    ph = _where("sample")
    g = _CUR.gen.setdefault(ph, Gen())
    g.calls += 1
    g.prompts += prompts
    g.rollouts += len(lengths)
    g.prompt_tokens += sum(prompt_lens)
    g.lengths += lengths
    g.truncated += truncated
    g.decode_steps += decode_steps
    g.seconds += seconds
    _CUR.seconds[ph] += seconds
    _CUR.params = _CUR.params or params


def verified(reasons: list[str], correct: list[bool], seconds: float) -> None:
    """One verify_batch: each verdict's reason and whether it was correct."""
    if _CUR is None:
        return
    ph = _where("verify")
    _CUR.verdicts.setdefault(ph, Counter()).update(reasons)
    _CUR.rejected.setdefault(ph, Counter()).update(r for r, ok in zip(reasons, correct) if not ok)
    _CUR.seconds[ph] += seconds


def trained(tokens: int, positions: int, seconds: float, params: int) -> None:
    """One optimizer step (or RL's logprob + update): real tokens, computed positions."""
    if _CUR is None:
        return
    _CUR.trained_tokens += tokens
    _CUR.trained_positions += positions
    _CUR.train_steps += 1
    _CUR.seconds[_where("update")] += seconds
    _CUR.params = params


def n_params(model: Any) -> int:
    """Parameters of a torch module (cached per module object)."""
    key = id(model)
    if key not in _PARAMS:
        _PARAMS[key] = sum(p.numel() for p in model.parameters())
    return _PARAMS[key]


_PARAMS: dict[int, int] = {}


def checkpoint(folder: str | os.PathLike) -> None:
    """Weights written: one checkpoint, its files' bytes."""
    if _CUR is None:
        return
    _CUR.checkpoints += 1
    _CUR.checkpoint_bytes += sum(p.stat().st_size for p in Path(folder).rglob("*") if p.is_file())


def teacher(calls: int, prompt_tokens: int, completion_tokens: int) -> None:
    """Requests to an OpenAI-compatible server (a teacher, a judge, a served policy) and their
    tokens as the server's `usage` reports them."""
    if _CUR is None:
        return
    with _LOCK:  # requests run in a thread pool
        _CUR.teacher_calls += calls
        _CUR.teacher_tokens.update(prompt=prompt_tokens, completion=completion_tokens)


def p95(xs: list[int]) -> int:
    """The 95th percentile (nearest rank)."""
    if not xs:
        return 0
    s = sorted(xs)
    return s[max(0, math.ceil(0.95 * len(s)) - 1)]


def _gen_row(g: Gen) -> dict[str, Any]:
    n = len(g.lengths)
    return {
        "calls": g.calls,
        "prompts": g.prompts,
        "rollouts": g.rollouts,
        "prompt_tokens": g.prompt_tokens,
        "response_tokens": sum(g.lengths),
        "response_mean": round(sum(g.lengths) / n, 1) if n else 0.0,
        "response_p95": p95(g.lengths),
        "truncation_rate": round(g.truncated / n, 4) if n else 0.0,
        "decode_steps": g.decode_steps,
    }


def _verify_row(verdicts: Counter, rejected: Counter) -> dict[str, Any]:
    calls = sum(verdicts.values())
    return {
        "calls": calls,
        "rejection_rate": round(sum(rejected.values()) / calls, 4) if calls else 0.0,
        "rejected_by_reason": dict(rejected.most_common()),
    }


def _rates(led: Ledger, dev: Any) -> dict[str, float]:
    """Achieved fractions of the device's peak (see the module docstring); {} without one."""
    out: dict[str, float] = {}
    if dev is None or not led.params:
        return out
    upd = led.seconds.get("update", 0.0)
    if upd and led.trained_tokens:
        out["train_flops_s"] = 6.0 * led.params * led.trained_tokens / upd
        out["train_frac_peak"] = round(out["train_flops_s"] / dev.flops, 4)
    steps = sum(g.decode_steps for g in led.gen.values())
    samp = sum(g.seconds for g in led.gen.values())
    if steps and samp:
        out["decode_bytes_s"] = steps * dev.dtype_bytes * led.params / samp
        out["decode_frac_bandwidth"] = round(out["decode_bytes_s"] / dev.bandwidth, 4)
    return out


def stop(wall: float, device: str = "", count: int = 1, dev: Any = None) -> dict[str, Any]:
    """Close the ledger into its JSON record (None stays open as None: an empty record)."""
    global _CUR
    led, _CUR = _CUR, None
    if led is None:
        return {}
    seconds = {k: round(led.seconds.get(k, 0.0), 3) for k in PHASES}
    seconds["other"] = round(max(0.0, wall - sum(seconds.values())), 3)
    return {
        "device": device,
        "device_count": count,
        "wall_seconds": round(wall, 3),
        "device_seconds": round(wall * count, 3),
        "seconds": seconds,
        "trained_tokens": led.trained_tokens,
        "padded_positions": led.trained_positions - led.trained_tokens,
        "train_steps": led.train_steps,
        "params": led.params,
        "generation": {k: _gen_row(g) for k, g in led.gen.items()},
        "verify": {
            k: _verify_row(v, led.rejected.get(k, Counter())) for k, v in led.verdicts.items()
        },
        "teacher": {"calls": led.teacher_calls, **dict(led.teacher_tokens)},
        "checkpoints": {"count": led.checkpoints, "bytes": led.checkpoint_bytes},
        **_rates(led, dev),
    }


def write(out: str | os.PathLike, record: dict[str, Any]) -> None:
    """The record as `out`/ledger.json (when the stage has a folder)."""
    if record and out and Path(out).is_dir():
        (Path(out) / "ledger.json").write_text(json.dumps(record, indent=1) + "\n")
