"""Stage `probe_merge`: Diversity-Exploring Distillation (docs/PAPER.md, stage 1).

Every saved checkpoint of the SFT stage(s) is scored by Pass@K on the probe set of each
(sub)domain; the argmax checkpoint of each probe group is that group's specialist; the specialists
are merged by a weighted parameter average (equal weights by default, as in the 1.5B report)
into one model, which is probed too.

    vibethinker probe_merge sft=runs/tiny/sft2 probe=runs/tiny/data/probe.jsonl domains=math

Outputs in `out`: merged/ (HF folder), probe.json (checkpoint x group Pass@K, specialists,
weights, the merged row), probe.png (heat map), summary.md. When one checkpoint wins every group
the merge is that checkpoint, and the summary says so.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from vibethinker.algo.passk import pass_at_k
from vibethinker.config import PROMPT_STYLE_NAMES, Checks, runtime
from vibethinker.data.io import load_problems
from vibethinker.engines import make_sampler
from vibethinker.engines.settings import DeviceFields, EngineChoice, SamplingFields
from vibethinker.evaluate import PROMPT_STYLES, evaluate
from vibethinker.log import get_logger
from vibethinker.reports.probe_merge import plot_heatmap, summary_md
from vibethinker.stages import register
from vibethinker.types import Problem

log = get_logger("stages.probe_merge")
BY = ("subdomain", "domain", "math-subdomain")


# The probe's sampling keys (temperature, max_new_tokens) are declared once, in
# engines/settings.py; probe_merge's own default and notes are here (top-p is the paper's 0.95).
PROBE_SAMPLING = SamplingFields.with_defaults(
    max_new_tokens=256,
    notes={
        "temperature": "probe_merge: the probe samples' (top-p 0.95, top-k off: the paper's "
        "protocol).",
        "max_new_tokens": "probe_merge: each probe sample's.",
    },
)


@dataclass
class ProbeMergeConfig(PROBE_SAMPLING, EngineChoice, DeviceFields):
    sft: list[str] = field(default_factory=list)
    """SFT stage output folder(s); every checkpoint in their checkpoints/ is probed (the paper
    probes in both curriculum stages)."""
    checkpoints: list[str] = field(default_factory=list)
    """Extra checkpoint folders to probe (HF folders), besides those found under `sft`."""
    probe: str = ""
    """Probe problems: a JSONL file or a data folder (its probe.jsonl). Paper: sizes unpublished."""
    out: str = "runs/probe_merge"
    """Output folder (merged/, probe.json, probe.png, summary.md)."""
    k: int = 8
    """K of Pass@K, the probing metric (the spectrum, not Pass@1). Paper: K unpublished."""
    n: int = 8
    """Samples per probe problem (n >= k; unbiased Pass@K estimator)."""
    by: str = "subdomain"
    """Probe groups: "subdomain" (domain/subdomain), "domain", or "math-subdomain" (math by
    subdomain, other domains whole). Paper (1.5B): math subdomains algebra, geometry, calculus,
    statistics."""
    domains: list[str] = field(default_factory=list)
    """Probe only these domains (empty: all in the probe file)."""
    weights: dict[str, float] = field(default_factory=dict)
    """Merge weight per probe group (missing groups: 1); normalised to sum 1. Paper: equal."""
    limit: int = 0
    """At most this many probe problems per group (0: all)."""
    prompt_style: str = "paper"
    """User turn: "paper" (the evaluation prompt) or "raw" (the stored prompt)."""
    workers: int = runtime(2)
    """Verifier workers."""
    seed: int = 0
    """Sampling seed (the same for every checkpoint, so rows differ by the model only)."""

    def __post_init__(self) -> None:
        """Every key's range, when the config is built."""
        c = Checks(self)
        c.at_least(1, "k", "n", "max_new_tokens", "workers")
        c.at_least(0, "limit", "temperature")
        c.one_of("by", ("subdomain", "domain", "math-subdomain"))
        c.one_of("prompt_style", PROMPT_STYLE_NAMES)
        c.device()
        c.done()


# ----------------------------------------------------------------------------- pure logic


def group_key(p: Problem, by: str) -> str:
    if by == "domain" or not p.subdomain or (by == "math-subdomain" and p.domain != "math"):
        return p.domain
    return f"{p.domain}/{p.subdomain}"


def pick_specialists(table: dict[str, dict[str, float]], groups: Sequence[str]) -> dict[str, str]:
    """Group -> the checkpoint with the highest score (rows in training order). Ties go to the
    LATER checkpoint (it trained longer; the paper says nothing on ties)."""
    names = list(table)
    out = {}
    for g in groups:
        best = max(range(len(names)), key=lambda i: (table[names[i]][g], i))
        out[g] = names[best]
    return out


def merge_plan(
    specialists: dict[str, str], weights: dict[str, float] | None = None
) -> list[tuple[str, float]]:
    """(checkpoint, weight) pairs summing to 1: each group gives its weight (default 1) to its
    specialist; a checkpoint that wins several groups gets the sum of their weights."""
    weights = weights or {}
    acc: dict[str, float] = {}
    for g, ckpt in specialists.items():
        acc[ckpt] = acc.get(ckpt, 0.0) + float(weights.get(g, 1.0))
    total = sum(acc.values())
    if total <= 0:
        raise ValueError(f"probe_merge: merge weights sum to {total}")
    return [(c, w / total) for c, w in acc.items()]


# ----------------------------------------------------------------------------- probing


def find_checkpoints(cfg: ProbeMergeConfig) -> list[tuple[str, str]]:
    """(label, folder) of every checkpoint to probe, in training order."""
    from vibethinker.train.checkpoints import list_checkpoints

    found = []
    for sft in cfg.sft:
        root = Path(sft)
        ckpts = list_checkpoints(root / "checkpoints")
        if not ckpts:
            raise FileNotFoundError(f"probe_merge: no checkpoints under {root}/checkpoints")
        found += [(f"{root.name}/{d.name}", str(d)) for _, d in ckpts]
    found += [(Path(c).name, c) for c in cfg.checkpoints]
    if not found:
        raise ValueError("probe_merge: set `sft` (SFT output folders) or `checkpoints`")
    return found


def load_probe(cfg: ProbeMergeConfig) -> dict[str, list[Problem]]:

    path = Path(cfg.probe)
    if path.is_dir():
        path = path / "probe.jsonl"
    groups: dict[str, list[Problem]] = {}
    for p in load_problems(path):
        if not cfg.domains or p.domain in cfg.domains:
            groups.setdefault(group_key(p, cfg.by), []).append(p)
    if cfg.limit:
        groups = {g: ps[: cfg.limit] for g, ps in groups.items()}
    if not groups:
        raise ValueError(f"probe_merge: no probe problems in {path} for domains {cfg.domains}")
    return dict(sorted(groups.items()))


def probe_model(
    folder: str, groups: dict[str, list[Problem]], cfg: ProbeMergeConfig, device: str
) -> dict[str, float]:
    """Pass@K of one model on every probe group (one sampling pass over all groups)."""

    problems = [p for ps in groups.values() for p in ps]
    if cfg.engine == "vllm":  # one engine per checkpoint, in the checkpoint's dtype
        sampler = make_sampler("vllm", model=folder, seed=cfg.seed)
    else:
        sampler = make_sampler("hf", model=folder, device=device)
    params = cfg.sampling_params(seed=cfg.seed)
    res = evaluate(
        sampler,
        problems,
        cfg.n,
        [1],
        params,
        cfg.workers,
        prompt_fn=PROMPT_STYLES[cfg.prompt_style],
    )
    if hasattr(sampler, "close"):  # vllm: free the engine before the next checkpoint's
        sampler.close()
    scores: dict[str, list[float]] = {}
    for g in res.groups:
        c = sum(s.correct for s in g.scores)
        scores.setdefault(group_key(g.problem, cfg.by), []).append(
            pass_at_k(len(g.scores), c, cfg.k)
        )
    return {name: round(sum(v) / len(v), 4) for name, v in scores.items()}


# ----------------------------------------------------------------------------- stage


def probe_checkpoints(
    cfg: ProbeMergeConfig, device: str
) -> tuple[list[tuple[str, str]], dict[str, list], dict[str, dict[str, float]]]:
    """(checkpoints, probe problems by group, Pass@K of every checkpoint by group)."""
    ckpts = find_checkpoints(cfg)
    groups = load_probe(cfg)
    names = list(groups)
    log.info(
        "probing %d checkpoints on %d groups (%d problems, n=%d)",
        len(ckpts),
        len(names),
        sum(len(v) for v in groups.values()),
        cfg.n,
    )
    table: dict[str, dict[str, float]] = {}
    for label, folder in ckpts:
        table[label] = probe_model(folder, groups, cfg, device)
        log.info("probe %s: %s", label, table[label])
    return ckpts, groups, table


@register("probe_merge", ProbeMergeConfig, positional=("sft",))
def run(cfg: ProbeMergeConfig) -> dict[str, str]:
    """Probe SFT checkpoints by Pass@K per (sub)domain, merge the specialists, probe the merge."""
    from vibethinker.train.merge import merge_checkpoints
    from vibethinker.train.policy import resolve_device

    if cfg.by not in BY:
        raise ValueError(f"probe_merge: by={cfg.by!r}; expected one of {', '.join(BY)}")
    if cfg.k > cfg.n:
        raise ValueError(f"probe_merge: k={cfg.k} needs n >= k (n={cfg.n})")
    t0 = time.time()
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    device = resolve_device(cfg.device)
    ckpts, groups, table = probe_checkpoints(cfg, device)
    names = list(groups)
    folders = dict(ckpts)
    specialists = pick_specialists(table, names)
    plan = merge_plan(specialists, cfg.weights)
    merged = merge_checkpoints([folders[c] for c, _ in plan], out / "merged", [w for _, w in plan])
    table["merged"] = probe_model(merged, groups, cfg, device)
    last = ckpts[-1][0]
    result = {
        "k": cfg.k,
        "n": cfg.n,
        "by": cfg.by,
        "groups": names,
        "problems": {g: len(v) for g, v in groups.items()},
        "checkpoints": folders,
        "table": table,
        "specialists": specialists,
        "merge": [{"checkpoint": c, "folder": folders[c], "weight": w} for c, w in plan],
        "one_checkpoint_wins_all": len(set(specialists.values())) == 1,
        "last": last,
        "seconds": round(time.time() - t0, 1),
    }
    (out / "probe.json").write_text(json.dumps(result, indent=2) + "\n")
    plot_heatmap(table, names, specialists, cfg.k, out / "probe.png")
    md = summary_md(
        table,
        names,
        specialists,
        plan,
        k=cfg.k,
        n=cfg.n,
        last=last,
        problems=[len(v) for v in groups.values()],
    )
    (out / "summary.md").write_text(md)
    return {
        "model": merged,
        "table": str(out / "probe.json"),
        "plot": str(out / "probe.png"),
        "summary": str(out / "summary.md"),
    }
