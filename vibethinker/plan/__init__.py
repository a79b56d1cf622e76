"""`vibethinker plan RECIPE [gpus=N] [gpu_mem_gb=M | gpu=NAME]`: will each stage fit?

For every stage of a recipe (configs from recipe.py, overrides as for `vibethinker run`), the
predicted peak memory per device, term by term (weights, gradients and AdamW state under FSDP2
sharding; activations with and without checkpointing; the LM head's logits; the rollout engine's
KV cache or vLLM's share), whether it fits, and if not, the knob that makes it fit: activation
checkpointing, fewer tokens per micro-batch, more GPUs, or a shorter length cap. The arithmetic
is in memory.py (checked against measured CPU peaks by scripts/plan_check.py); docs/SCALING.md
has the tables for the recipes.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from vibethinker.config import ConfigError
from vibethinker.devices import DEVICES, KNOWN
from vibethinker.plan.memory import GIB, Phase
from vibethinker.plan.predict import base_shape, predict, render
from vibethinker.plan.shapes import ModelShape, lookup  # noqa: F401 (re-exported)
from vibethinker.plan.stages import ESTIMATORS, Context
from vibethinker.recipe import Recipe, load_recipe

GPUS = {
    "a10": 24,
    "l4": 24,
    "4090": 24,
    "a100-40": 40,
    "l40s": 48,
    "a6000": 48,
    "a100": 80,
    "a100-80": 80,
    "h100": 80,
    "h800": 80,
    "h200": 141,
    "b200": 180,
    "mi300x": 192,
}
RESERVE_GIB = 2.0  # CUDA context, NCCL buffers and allocator fragmentation: our allowance
MAX_GPUS = 64  # the largest torchrun world the knob search tries
PLAN_KEYS = ("gpus", "gpu_mem_gb", "gpu", "device", "prompt_tokens", "ledger", "engine")
USAGE = """usage: vibethinker plan RECIPE.yaml [gpus=N] [gpu_mem_gb=M | gpu=NAME] [device=D]
                        [prompt_tokens=T] [ledger=RUN_DIR] [expect.<stage>.<key>=V]
                        [recipe overrides: model=..., <stage>.<key>=...]

Predicted peak memory per device for every stage of the recipe, whether it fits, and the knob
that makes it fit; then predicted time and tokens per stage and phase, and device-hours.

  gpus=N          processes under torchrun (FSDP2 for the training stages); default 1
  gpu_mem_gb=M    memory per device in GB; default 80
  gpu=NAME        instead of gpu_mem_gb: {gpus}
  device=D        h100 (default), h200, a100, h800 or cpu (fp32 on this CPU; its rates
                  measured once by a probe); devices.py has the table and its sources
  ledger=RUN_DIR  counts (tokens, response lengths, verifier rate) from an earlier run's
                  ledger; default the recipe's own run folder when it has one
  engine=vllm     predict every sampling phase on vLLM (default: each stage's own engine)
  expect.S.K=V    a count the recipe does not fix (plan/workload.py lists the keys), e.g.
                  expect.sft1.rows=100000 expect.rl_math.response_tokens=12000
  prompt_tokens=T the assumed prompt length of sampled and RL rows; default 2048

Exit status 0 when every stage fits, 1 when one needs a knob, 2 for bad input."""


@dataclass
class StagePlan:
    name: str
    stage: str
    phases: list[Phase]
    fits: bool | None  # None: runs on the CPU (no estimate)
    knob: str = ""

    @property
    def peak(self) -> Phase | None:
        return max(self.phases, key=lambda p: p.total) if self.phases else None


def usable(ctx: Context) -> float:
    """Device memory a stage may plan for: all of it on CPU; on CUDA less RESERVE_GIB (at most
    5% of the device, so a vLLM share of 0.9 still fits a small card)."""
    return ctx.mem - (min(RESERVE_GIB * GIB, 0.05 * ctx.mem) if ctx.cuda else 0.0)


def _fits(stage: str, cfg: Any, ctx: Context) -> bool:
    phases = ESTIMATORS[stage](cfg, ctx)
    return max((p.total for p in phases), default=0.0) <= usable(ctx)


def _has(cfg: Any, key: str) -> bool:
    return any(f.name == key for f in dataclasses.fields(cfg))


def _largest(stage: str, cfg: Any, ctx: Context, key: str, values: list[int]) -> int | None:
    """The largest of `values` (descending) for `key` at which the stage fits."""
    for v in values:
        if _fits(stage, dataclasses.replace(cfg, **{key: v}), ctx):
            return v
    return None


def _halvings(start: int, floor: int) -> list[int]:
    out, v = [], start // 2
    while v >= floor:
        out.append(v)
        v //= 2
    return out


LENGTH_KEYS = ("max_len", "max_new_tokens")  # the length caps a knob may shorten
BATCH_KEYS = ("micro_batch", "max_tokens_per_micro", "batch", "score_tokens", "token_budget")


def knob(stage: str, cfg: Any, ctx: Context) -> str:
    """The first single change that makes the stage fit, in the order a user would try them:
    checkpointing, smaller micro-batches, vLLM asleep during the update, more GPUs, a shorter
    cap; '' when none alone does."""
    if _has(cfg, "gradient_checkpointing") and not cfg.gradient_checkpointing:
        if _fits(stage, dataclasses.replace(cfg, gradient_checkpointing=True), ctx):
            return "gradient_checkpointing=true"
    for key in BATCH_KEYS:
        if _has(cfg, key) and getattr(cfg, key) > 1:
            v = _largest(stage, cfg, ctx, key, _halvings(getattr(cfg, key), 1))
            if v:
                return f"{key}={v}"
    if _has(cfg, "vllm_sleep") and cfg.engine == "vllm" and not cfg.vllm_sleep:
        if _fits(stage, dataclasses.replace(cfg, vllm_sleep=True), ctx):
            return "vllm_sleep=true"
    if stage in ("sft", "rl", "distill"):
        n = ctx.gpus * 2
        while n <= MAX_GPUS:
            if _fits(stage, cfg, dataclasses.replace(ctx, gpus=n)):
                return f"gpus={n} (torchrun, FSDP2)"
            n *= 2
    for key in LENGTH_KEYS:
        if _has(cfg, key) and getattr(cfg, key) > 1024:
            v = _largest(stage, cfg, ctx, key, _halvings(getattr(cfg, key), 1024))
            if v:
                return f"{key}={v} (a shorter cap)"
    return ""


def combined_knob(stage: str, cfg: Any, ctx: Context) -> str:
    """Two changes together: checkpointing on (where there is the key) with a per-forward size
    (the largest that fits without a shorter cap), else with a length cap; the largest size
    first, then the longest cap that fits with it."""
    base: dict[str, Any] = {}
    if _has(cfg, "gradient_checkpointing") and not cfg.gradient_checkpointing:
        base["gradient_checkpointing"] = True
    sizes = [k for k in BATCH_KEYS if _has(cfg, k) and getattr(cfg, k) > 1]
    caps = [k for k in LENGTH_KEYS if _has(cfg, k) and getattr(cfg, k) > 1024]
    for size in sizes if base else []:  # checkpointing and a smaller size, the cap as it is
        v = _largest(
            stage, dataclasses.replace(cfg, **base), ctx, size, _halvings(getattr(cfg, size), 1)
        )
        if v:
            return " ".join(f"{k}={str(x).lower()}" for k, x in {**base, size: v}.items())
    for size in sizes or [None]:
        values = [getattr(cfg, size), *_halvings(getattr(cfg, size), 1)] if size else [None]
        for v in values:
            kw = {**base, **({size: v} if size else {})}
            for cap in caps:
                got = _largest(
                    stage,
                    dataclasses.replace(cfg, **kw),
                    ctx,
                    cap,
                    _halvings(getattr(cfg, cap), 1024),
                )
                if got:
                    return " ".join(f"{k}={str(x).lower()}" for k, x in {**kw, cap: got}.items())
    return ""


def _smallest(stage: str, cfg: Any, ctx: Context) -> tuple[Any, Context]:
    """Every knob at its extreme: the best this stage can do (for 'cannot fit at any setting')."""
    kw: dict[str, Any] = {}
    if _has(cfg, "gradient_checkpointing"):
        kw["gradient_checkpointing"] = True
    for key in BATCH_KEYS:
        if _has(cfg, key):
            kw[key] = 1
    for key in LENGTH_KEYS:
        if _has(cfg, key):
            kw[key] = min(getattr(cfg, key) or 1024, 1024)
    if _has(cfg, "vllm_sleep"):
        kw["vllm_sleep"] = True
    gpus = MAX_GPUS if stage in ("sft", "rl", "distill") else ctx.gpus
    return dataclasses.replace(cfg, **kw), dataclasses.replace(ctx, gpus=gpus)


def plan_stage(name: str, stage: str, cfg: Any, ctx: Context) -> StagePlan:
    """One stage's phases and verdict; ConfigError when no setting can make it fit."""
    if stage not in ESTIMATORS:
        return StagePlan(name, stage, [], None)
    phases = ESTIMATORS[stage](cfg, ctx)
    sp = StagePlan(name, stage, phases, None)
    sp.fits = sp.peak is None or sp.peak.total <= usable(ctx)
    if sp.fits:
        return sp
    sp.knob = knob(stage, cfg, ctx)
    if not sp.knob:
        sp.knob = combined_knob(stage, cfg, ctx)
    if not sp.knob:
        best_cfg, best_ctx = _smallest(stage, cfg, ctx)
        best = max(ESTIMATORS[stage](best_cfg, best_ctx), key=lambda p: p.total)
        if best.total > usable(best_ctx):
            big = max(best.terms, key=lambda t: t.bytes)
            raise ConfigError(
                f"stage {name} ({stage}) cannot fit {ctx.mem / GIB:g} GB at any setting: even "
                f"with every knob at its limit its {best.name} needs {best.total / GIB:.1f} GB, "
                f"{big.bytes / GIB:.1f} of them for {big.name}"
            )
        sp.knob = "checkpointing, micro-batch 1, more GPUs and a shorter cap together"
    return sp


def parse_gpu(values: dict[str, str]) -> tuple[int, float, bool]:
    """(gpus, bytes per device, cuda) from the plan's own keys; a bad value is a one-line error."""
    cuda = values.get("device", "cuda") != "cpu"
    try:
        gpus = int(values.get("gpus", "1"))
    except ValueError:
        raise ConfigError(f"plan: gpus={values['gpus']!r}: expected a whole number") from None
    if gpus < 1:
        raise ConfigError(f"plan: gpus={gpus}: expected 1 or more")
    if "gpu" in values:
        name = values["gpu"].lower()
        if name not in GPUS:
            known = ", ".join(f"{k} ({v} GB)" for k, v in GPUS.items())
            raise ConfigError(
                f"plan: unknown GPU {values['gpu']!r}; known: {known}; or pass gpu_mem_gb=M"
            )
        return gpus, GPUS[name] * GIB, cuda
    raw = values.get("gpu_mem_gb", "80")
    try:
        mem = float(raw)
    except ValueError:
        mem = -1.0
    if not 1 <= mem <= 4096:
        raise ConfigError(
            f"plan: gpu_mem_gb={raw!r}: expected a size in GB between 1 and 4096 "
            f"(e.g. 80 for an H100), or gpu= one of {', '.join(GPUS)}"
        )
    return gpus, mem * GIB, cuda


def plan_recipe(
    recipe: Recipe,
    gpus: int = 1,
    mem: float = 80 * GIB,
    cuda: bool = True,
    prompt_tokens: int = 2048,
) -> list[StagePlan]:
    base: ModelShape | None = base_shape(recipe)
    ctx = Context(base=base, gpus=gpus, mem=mem, cuda=cuda, prompt_tokens=prompt_tokens)
    return [plan_stage(ps.name, ps.stage, ps.config, ctx) for ps in recipe.stages]


def _gb(x: float) -> str:
    return f"{x / GIB:.1f}"


def _detail(ph: Phase) -> str:
    return "; ".join(f"{t.name} {_gb(t.bytes)}" for t in ph.terms)


def format_table(plans: list[StagePlan], gpus: int, mem: float, cuda: bool) -> str:
    where = f"{gpus} x {mem / GIB:g} GB GPU" if cuda else f"CPU fp32, {mem / GIB:g} GB"
    use = usable(Context(base=None, mem=mem, cuda=cuda))
    reserve = f" (usable {use / GIB:g} GB per device)" if cuda else ""
    lines = [
        f"Plan for {where}{reserve}; GB = GiB per device.",
        "",
        "| stage | type | peak phase | peak GB | fits | knob | terms of the peak phase (GB) |",
        "|---|---|---|---:|---|---|---|",
    ]
    for sp in plans:
        if sp.peak is None:
            lines.append(f"| {sp.name} | {sp.stage} | (CPU work) | | | | |")
            continue
        ok = "yes" if sp.fits else "NO"
        lines.append(
            f"| {sp.name} | {sp.stage} | {sp.peak.name} | {_gb(sp.peak.total)} | {ok} "
            f"| {sp.knob} | {_detail(sp.peak)} |"
        )
    return "\n".join(lines)


def ckpt_table(plans: list[StagePlan], recipe: Recipe, gpus: int, mem: float, cuda: bool) -> str:
    """Training stages' update peak with and without activation checkpointing."""
    rows = ["| stage | update peak, checkpointing on | off |", "|---|---:|---:|"]
    ctx = Context(base=base_shape(recipe), gpus=gpus, mem=mem, cuda=cuda)
    for ps in recipe.stages:
        if ps.stage not in ("sft", "rl", "distill", "reward_model"):
            continue
        peaks = []
        for on in (True, False):
            cfg = dataclasses.replace(ps.config, gradient_checkpointing=on)
            upd = ESTIMATORS[ps.stage](cfg, ctx)[-1 if ps.stage != "sft" else 0]
            peaks.append(_gb(upd.total))
        rows.append(f"| {ps.name} | {peaks[0]} | {peaks[1]} |")
    return "\n".join(rows) if len(rows) > 2 else ""


def cmd_plan(args: list[str], values: dict[str, str], show_help: bool = False) -> int:
    """The `plan` command: args = [RECIPE], values = key=value options and recipe overrides."""
    if show_help or not args:
        print(USAGE.format(gpus=", ".join(GPUS)))
        return 0 if show_help else 2
    if len(args) > 1:
        raise ConfigError(f"plan: one recipe, got {args}; options are key=value")
    own = {k: values.pop(k) for k in list(values) if k in PLAN_KEYS}
    expect = {k: values.pop(k) for k in list(values) if k.startswith("expect.")}
    device = own.get("device", "h100").lower()
    if own.get("engine", "hf") not in ("hf", "vllm"):
        raise ConfigError(f"plan: engine={own['engine']!r}: set engine=hf or engine=vllm")
    if device not in KNOWN:
        raise ConfigError(f"plan: unknown device {device!r}; set device= one of {', '.join(KNOWN)}")
    if device in DEVICES and "gpu" not in own and "gpu_mem_gb" not in own:
        own["gpu_mem_gb"] = str(DEVICES[device].mem_gb)
    gpus, mem, cuda = parse_gpu(own)
    prompt = own.get("prompt_tokens", "2048")
    if not prompt.isdigit() or int(prompt) < 1:
        raise ConfigError(f"plan: prompt_tokens={prompt!r}: expected a whole number of tokens")
    prompt = int(prompt)
    recipe = load_recipe(args[0], values)
    if not base_shape(recipe):
        lookup_err = f"recipe {recipe.path}: model {recipe.model!r}"
        raise ConfigError(
            f"{lookup_err} is neither a folder with config.json nor a known Qwen2.5 "
            "hub id; pass model=FOLDER or model=Qwen/Qwen2.5-1.5B"
        )
    plans = plan_recipe(recipe, gpus, mem, cuda, prompt)
    print(f"recipe {recipe.path} (model {recipe.model}, {base_shape(recipe).params():,} params)")
    print(format_table(plans, gpus, mem, cuda))
    ck = ckpt_table(plans, recipe, gpus, mem, cuda)
    if ck:
        print("\nActivation checkpointing (training stages, update phase, GB):\n\n" + ck)
    costs, r, ex = predict(recipe, device, gpus, prompt, {**expect, **own})
    print("\n" + render(costs, r, ex, recipe))
    return 0 if all(sp.fits is not False for sp in plans) else 1
