"""Each stage's work for the cost model (plan/cost.py), from its config and the counts it does
not fix (`Expect`).

Where a count comes from, first found wins: a plan key `expect.<stage>.<key>=V`; a file
`<recipe>.expect.yaml` beside the recipe (`<stage>: {key: V}`); an earlier run's ledger
(`ledger=RUN_DIR`; default the recipe's own run folder when it has one); a default (a response
is half its length cap; a verifier call 2 ms, code 50 ms; a stage's load/save overhead). A
count with none of these (an SFT stage's rows before its data exists) stops the plan with a
line naming the key. The keys:
  rows, row_tokens   SFT: training examples per epoch and their mean tokens (or `tokens`: all
                     trained tokens of the stage)
  prompt_tokens      mean prompt tokens of the stage's sampling
  response_tokens    mean response tokens of the stage's sampling (default: half the cap)
  eval_response_tokens  the same for its held-out evaluation
  prompts            RL: prompts kept by the start filter (default: max_prompts)
  filter_prompts     SFT stage 2: prompts its filter samples (default: rows)
  eval_problems      problems an eval / headline / probe reads when its limit does not say
  verify_s           seconds per verifier call of one worker (the stage's workers share the calls)
  verify_wall_s      from an earlier run's ledger: wall seconds per call, its workers' overlap
                     included (its verify seconds / calls); used when verify_s is not set
  code_share         the share of code among an all-domain stage's verifier calls (default 0.25)
  seconds            a stage with no model work (data, construct, model): its wall seconds
  other_s            a stage's fixed seconds (loading, saving)
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vibethinker.config import ConfigError, read_yaml
from vibethinker.plan.cost import StageCost, Work
from vibethinker.plan.shapes import ModelShape

VERIFY_S = {"code": 0.05}  # seconds per call; others 0.002 (ASSUMED; a ledger's replace them)
VERIFY_DEFAULT_S = 0.002
# computed from the config and other counts (not assumptions of their own): not listed
DERIVED = (
    "tokens",
    "checkpoints",
    "filter_prompts",
    "other_s",
    "eval_response_tokens",
    "verify_s",
    "verify_wall_s",
)


@dataclass
class Expect:
    """Counts a recipe does not fix, by stage name (module docstring)."""

    keys: dict[str, dict[str, float]] = field(default_factory=dict)
    ledgers: dict[str, dict[str, Any]] = field(default_factory=dict)
    used: list[str] = field(default_factory=list)  # "key = V (source): stage"
    files: list[str] = field(default_factory=list)  # the .expect.yaml read
    gpu: bool = False

    def get(self, stage: str, key: str, default: float | None = None, why: str = "") -> float:
        for src in (stage, "all"):  # a stage's own key, else the file's `all:` entry
            if key in self.keys.get(src, {}):
                return float(self.keys[src][key])
        got = from_ledger(self.ledgers.get(stage), key)
        if got is not None:
            self.used.append(f"{key} = {got:g} (earlier run's ledger): {stage}")
            return got
        if default is None:
            raise ConfigError(
                f"plan: stage {stage}: {why}; set expect.{stage}.{key}=N (or ledger=RUN_DIR "
                "of an earlier run)"
            )
        if key not in DERIVED:
            self.used.append(f"{key} = {default:g} (default): {stage}")
        return float(default)

    def summary(self) -> list[str]:
        """The counts used, one line per key and value with the stages that used it."""
        groups: dict[str, list[str]] = {}
        for u in self.used:
            head, _, stage = u.rpartition(": ")
            groups.setdefault(head, [])
            if stage not in groups[head]:
                groups[head].append(stage)
        return [f"{head}: {', '.join(st)}" for head, st in groups.items()]


def from_ledger(led: dict[str, Any] | None, key: str) -> float | None:
    """A count read back from a stage's recorded ledger (None when it does not say)."""
    if not led:
        return None
    gen = led.get("generation") or {}
    sample, ev = gen.get("sample") or {}, gen.get("eval") or {}
    calls = sum(v.get("calls", 0) for v in (led.get("verify") or {}).values())
    secs = led.get("seconds") or {}
    got = {
        "tokens": led.get("trained_tokens") if led.get("train_steps") else None,
        "response_tokens": sample.get("response_mean") or None,
        "eval_response_tokens": ev.get("response_mean") or None,
        "prompt_tokens": (sample.get("prompt_tokens", 0) / sample["rollouts"])
        if sample.get("rollouts")
        else None,
        "verify_wall_s": secs.get("verify", 0) / calls if calls and secs.get("verify") else None,
        "seconds": led.get("wall_seconds"),
        "other_s": secs.get("other"),
    }.get(key)
    return float(got) if got is not None else None


def load_expect(recipe: Any, values: dict[str, str], gpu: bool) -> Expect:
    """Expect from plan keys (`expect.<stage>.<key>`), the recipe's .expect.yaml, a ledger."""
    keys: dict[str, dict[str, float]] = {}
    side = Path(str(recipe.path)).with_suffix(".expect.yaml")
    files = [str(side)] if side.is_file() else []
    if side.is_file():
        for st, kv in (read_yaml(str(side), "plan expectations") or {}).items():
            keys.setdefault(st, {}).update({k: float(v) for k, v in (kv or {}).items()})
    for k, v in values.items():
        if not k.startswith("expect."):
            continue
        parts = k.split(".")
        if len(parts) != 3 or parts[0] != "expect":
            raise ConfigError(f"plan: {k}: expected expect.<stage>.<key>=N")
        try:
            keys.setdefault(parts[1], {})[parts[2]] = float(v)
        except ValueError:
            raise ConfigError(f"plan: {k}={v!r}: expected a number") from None
    return Expect(keys=keys, ledgers={}, gpu=gpu, files=files)


def read_ledgers(run_dir: str) -> dict[str, dict[str, Any]]:
    """Each finished stage's ledger in a run folder's manifest ({} when none)."""
    path = Path(run_dir) / "manifest.json"
    if not path.is_file():
        return {}
    stages = json.loads(path.read_text()).get("stages", {})
    return {n: r["ledger"] for n, r in stages.items() if r.get("ledger")}


def count_rows(path: str) -> tuple[int, float] | None:
    """(rows, mean characters of prompt + first trace) of a JSONL file that exists, else None."""
    p = Path(path) if path else None
    if p is None or not p.is_file():
        return None
    n, chars = 0, 0
    for line in p.open():
        if line.strip():
            row = json.loads(line)
            n += 1
            chars += len(str(row.get("prompt", ""))) + len(str((row.get("traces") or [""])[0]))
    return n, chars / max(n, 1)


def other(sc: StageCost, ex: Expect, checkpoints: float = 0.0, s: ModelShape | None = None):
    """The stage's fixed seconds: loading and saving (ASSUMED: on a GPU 10 s of start-up, bf16
    weights loaded and each checkpoint's fp32 weights + AdamW moments (12 bytes a parameter)
    written at 1 GB/s; on the CPU 3 s + 0.3 s a checkpoint; a ledger's `other` replaces them)."""
    n = s.params() if s is not None else 0
    if ex.gpu:
        base, per = 10.0 + 2.0 * n / 1e9, 12.0 * n / 1e9
    else:
        base, per = 3.0, 0.3
    secs = ex.get(sc.name, "other_s", base + per * checkpoints)
    sc.work.append(Work("other", "fixed", seconds=secs))


def gen(
    phase: str,
    s: ModelShape,
    rows: float,
    cap: float,
    mean: float,
    prompt: float,
    engine: str = "hf",
) -> Work:
    return Work(
        phase, "decode", s, tokens=rows * mean, seq=prompt, rows=rows, cap=cap, engine=engine
    )


def verify(phase: str, rows: float, domain: str, ex: Expect, stage: str, workers: int = 2) -> Work:
    """Verifier calls; domain "mix": every domain, `code_share` of them code (default 0.25:
    the world's four domains alike), whose sandbox runs dominate the cost."""
    per = VERIFY_S.get(domain, VERIFY_DEFAULT_S)
    if domain == "mix":
        share = ex.get(stage, "code_share", 0.25)
        per = share * VERIFY_S["code"] + (1 - share) * VERIFY_DEFAULT_S
    if not any("verify_s" in ex.keys.get(src, {}) for src in (stage, "all")):
        wall = ex.get(stage, "verify_wall_s", 0.0)
        if wall:  # a ledger's wall seconds per call: the workers' overlap is already in it
            return Work(phase, "verify", rows=rows, seconds=wall, workers=1)
    per = ex.get(stage, "verify_s", per)
    return Work(phase, "verify", rows=rows, seconds=per, workers=workers)
