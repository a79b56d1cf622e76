"""`vibethinker plan`'s time and token prediction: a recipe's stages through plan/stage_work.py
and plan/cost.py on one device of the table, and the comparison with the 1.5B report."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from vibethinker import devices
from vibethinker.config import ConfigError
from vibethinker.models.tiny import depth_shape, resolve_depth
from vibethinker.plan import probe
from vibethinker.plan.cost import Rates, StageCost, cost_table, total, where_it_goes
from vibethinker.plan.shapes import ModelShape, lookup
from vibethinker.plan.stage_work import WORK, work_fixed
from vibethinker.plan.workload import Expect, load_expect, read_ledgers

DISTRIBUTED = ("sft", "rl", "distill")  # recipe.py's stages that run on every process
REPORT_15B_H800_HOURS = 3900  # VibeThinker-1.5B technical report: ~3,900 H800 GPU-hours, all stages


def tiny_shape(recipe: Any) -> ModelShape | None:
    """The shape the recipe's own `model` stage will build (its config: size, vocabulary), when
    the recipe's model is that stage's output: plan works before anything has run."""
    for ps in recipe.stages:
        if ps.stage == "model" and str(ps.config.out).rstrip("/") == str(recipe.model).rstrip("/"):
            d = depth_shape(resolve_depth(ps.config.size, ps.config.vocab_size))
            heads = d["num_attention_heads"]
            return ModelShape(
                f"{ps.name} stage ({ps.config.size})",
                d["num_hidden_layers"],
                d["hidden_size"],
                d["intermediate_size"],
                heads,
                d["num_key_value_heads"],
                ps.config.vocab_size,
                True,
                d["hidden_size"] // heads,
            )
    return None


def base_shape(recipe: Any) -> ModelShape | None:
    return lookup(recipe.model or "") or tiny_shape(recipe)


def rates(device: str, gpus: int) -> Rates:
    """The device's Rates; an unknown name is a one-line error naming the key."""
    try:
        dev = devices.get(device)
    except ValueError as e:
        raise ConfigError(f"plan: {e}") from None
    if dev.name == "cpu":
        return Rates(dev, 1, probe.cpu_rates())
    return Rates(dev, gpus)


def predict(recipe: Any, device: str, gpus: int, prompt_tokens: int, values: dict[str, str]):
    """(stage costs, rates, expectations used) for the recipe on `gpus` x `device`."""
    r = rates(device, gpus)
    ex = load_expect(recipe, values, gpu=r.cpu is None)
    run = values.get("ledger") or recipe.run_dir
    ex.ledgers = read_ledgers(run) if run else {}
    shape = base_shape(recipe)
    ctx: dict[str, Any] = {"prompt_tokens": prompt_tokens, "steps": {}, "save_every": {}}
    costs = []
    for ps in recipe.stages:
        sc = StageCost(ps.name, ps.stage)
        fn = WORK.get(ps.stage, work_fixed)
        if fn is not work_fixed and shape is None:
            raise ConfigError(f"plan: no model shape for {ps.name}; pass model=FOLDER or a hub id")
        fn(sc, ps.config, shape, ex, ctx)
        for w in sc.work:  # engine=vllm: every sampling phase on vLLM (a what-if)
            w.engine = values.get("engine") or w.engine
        # under torchrun only the training stages use every GPU; the rest run on rank 0 while
        # the others wait (their hours still count: the devices are held)
        costs.append(total(sc, r if ps.stage in DISTRIBUTED else replace(r, gpus=1)))
    return costs, r, ex


def render(costs: list[StageCost], r: Rates, ex: Expect, recipe: Any) -> str:
    where = r.dev.name + (" (probe: " + r.dev.note + ")" if r.cpu else "")
    out = [cost_table(costs, where, r.gpus), "", where_it_goes(costs)]
    hours = sum(sc.total for sc in costs) * r.gpus / 3600
    if r.dev.name == "h800" and "3b" in str(recipe.path).lower():
        out.append(
            f"\nPredicted {hours:,.0f} H800-hours for this recipe, beside the VibeThinker-1.5B "
            f"report's ~{REPORT_15B_H800_HOURS:,} H800 GPU-hours (a comparison, not a test: a 3B "
            "model here against 1.5B there, our assumed data sizes and response lengths against "
            "their unpublished ones, HF or vLLM rollouts at our efficiencies against their stack)."
        )
    notes = [n for sc in costs for n in sc.notes]
    notes += [f"the other counts: {f} (and any expect.<stage>.<key>=V given)" for f in ex.files]
    notes += [f"ledgers of {len(ex.ledgers)} stages of an earlier run"] if ex.ledgers else []
    if ex.used or notes:
        out.append("\nCounts not fixed by the recipe (set expect.<stage>.<key>=N to change):")
        out += [f"  {u}" for u in ex.summary()] + [f"  {n}" for n in dict.fromkeys(notes)]
    return "\n".join(out)
