"""Stage `data`: write the embedded world's splits as Problem JSONL.

`vibethinker data tiny out=DIR seed=N` -> DIR/train.jsonl, probe.jsonl, eval.jsonl, stats.json.
The paper's stage 0 (query expansion, teacher sampling and voting, filters) runs on real seed
data; in the embedded world a procedural teacher stands in for the strong teacher model, and it
already writes several distinct correct traces per problem plus labelled wrong ones for the
filters to catch.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from vibethinker.data.io import save_problems
from vibethinker.data.world import generate, stats
from vibethinker.data.world.instruct_open import open_problems
from vibethinker.log import get_logger
from vibethinker.stages import register
from vibethinker.types import DOMAINS

log = get_logger("stages.data")
KINDS = ("tiny",)


@dataclass
class DataConfig:
    kind: str = "tiny"
    """Which data to build: "tiny" = the embedded procedural world (the only kind today)."""
    out: str = "runs/data"
    """Output folder for train/probe/eval JSONL and stats.json."""
    seed: int = 0
    """World seed; the same seed gives byte-identical files."""
    n_train: int = 3000
    """Train problems over all domains (the paper's corpus is unpublished; sized for a CPU demo)."""
    n_probe: int = 40
    """Probe problems per math subdomain and per other domain (paper: sizes unpublished)."""
    n_eval: int = 400
    """Held-out evaluation problems over all domains."""
    math_share: float = 0.55
    """Fraction of train/eval that is math; the other domains share the rest evenly."""
    domains: list[str] = field(default_factory=lambda: list(DOMAINS))
    """Domains to generate (math, code, stem, instruct)."""
    n_open: int = 0
    """Open instruct prompts (explain / summarise / rewrite, no rules, scored by the rubric
    reward; data/world/instruct_open.py) added to the train split only (0: none)."""


@register("data", DataConfig, positional=("kind",))
def run(cfg: DataConfig) -> dict[str, str]:
    """Build the data set (today: the embedded world) as train/probe/eval JSONL."""
    if cfg.kind not in KINDS:
        raise ValueError(
            f"data kind {cfg.kind!r} is not supported; known kinds: {', '.join(KINDS)} "
            "(for real data, point the next stages at your JSONL files)"
        )
    splits = generate(
        cfg.seed, cfg.n_train, cfg.n_probe, cfg.n_eval, list(cfg.domains), cfg.math_share
    )
    if cfg.n_open and "instruct" in cfg.domains:
        splits["train"] += open_problems(cfg.seed, cfg.n_open)
    os.makedirs(cfg.out, exist_ok=True)
    outputs = {}
    for name, probs in splits.items():
        path = os.path.join(cfg.out, f"{name}.jsonl")
        save_problems(path, probs)
        outputs[name] = path
        log.info("%s: %d problems -> %s", name, len(probs), path)
    outputs["stats"] = os.path.join(cfg.out, "stats.json")
    tmp = outputs["stats"] + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(stats(splits), f, indent=1, sort_keys=True)
        f.write("\n")
    os.replace(tmp, outputs["stats"])
    return outputs
