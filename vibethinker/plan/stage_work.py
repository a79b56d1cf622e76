"""The work of each stage type for the cost model: counts from the config, the rest from
`Expect` (plan/workload.py names the keys and their sources). A stage type without a model
(data, model, construct with the simulated or a remote teacher) is its `seconds`."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from vibethinker.plan.cost import StageCost, Work
from vibethinker.plan.shapes import ModelShape
from vibethinker.plan.workload import Expect, count_rows, gen, other, verify
from vibethinker.stages.eval import n_profile

CHARS_PER_TOKEN = 4.0  # a JSONL row's characters per token when only the file is known (ASSUMED)
FIXED_S = {"data": 5.0, "model": 10.0}  # CPU seconds of the stages with no model work (ASSUMED)


def _resp(ex: Expect, name: str, cap: float, key: str = "response_tokens") -> float:
    """A stage's mean response length: expected, from a ledger, else half its cap."""
    return ex.get(name, key, cap / 2)


def _ckpt(cfg: Any) -> bool:
    return bool(getattr(cfg, "gradient_checkpointing", False))


def _prompt(ex: Expect, name: str, default: float) -> float:
    return ex.get(name, "prompt_tokens", default)


def sft_tokens(name: str, cfg: Any, ex: Expect) -> tuple[float, float]:
    """(trained tokens of the stage, mean row tokens): expected tokens, else rows x row tokens
    x epochs, rows from the data file when it exists."""
    got = count_rows(cfg.data)
    rows = ex.get(
        name, "rows", got[0] if got else None, f"no row count ({cfg.data} not yet written)"
    )
    per = ex.get(name, "row_tokens", got[1] / CHARS_PER_TOKEN if got else None, "no row length")
    per = min(per, cfg.max_len)
    tokens = ex.get(name, "tokens", cfg.epochs * rows * per)
    return tokens, per


# An eval file's format -> the domain whose n the paper's profile gives (stages/eval.PAPER_N).
FORMAT_DOMAIN = {
    "math": "math",
    "imo-answerbench": "imo-answerbench",
    "gpqa": "stem",
    "livecodebench": "code",
    "humaneval": "code",
    "ifeval": "instruct",
    "ifbench": "instruct",
}


def paper_n(cfg: Any) -> int:
    """Samples per problem of an eval with n = 0 (the paper's per-domain profile): its format's
    domain's n (a mixed file, or an unknown format: the profile's default, 8)."""
    n = n_profile(cfg)
    if isinstance(n, int):
        return n
    dom = FORMAT_DOMAIN.get(getattr(cfg, "format", ""), "")
    return int(n.get(dom, n.get("default", 8)))


def _eval(sc: StageCost, s: ModelShape, ex: Expect, rows: float, cap: float, prompt: float, *more):
    """Held-out sampling and its verification; `more`: the domain and the engine."""
    domain, engine = (list(more) + ["math", "hf"][len(more) :])[:2]
    if rows <= 0:
        return
    mean = ex.get(sc.name, "eval_response_tokens", _resp(ex, sc.name, cap))
    sc.work += [
        gen("eval", s, rows, cap, mean, prompt, engine),
        verify("eval", rows, domain, ex, sc.name),
    ]


def work_sft(sc: StageCost, cfg: Any, s: ModelShape, ex: Expect, ctx: dict[str, Any]) -> None:
    prompt = _prompt(ex, sc.name, ctx["prompt_tokens"])
    if cfg.filter_ref_model:
        n = ex.get(sc.name, "filter_prompts", None, "no count of the prompts its filter samples")
        rows = n * cfg.filter_rollouts
        cap = cfg.filter_max_new_tokens
        sc.work.append(
            gen("sample", s, rows, cap, _resp(ex, sc.name, cap), prompt, cfg.filter_engine)
        )
        sc.work.append(verify("verify", rows, "mix", ex, sc.name))
    tokens, per = sft_tokens(sc.name, cfg, ex)
    sc.work.append(Work("update", "train", s, tokens=tokens, seq=per, recompute=_ckpt(cfg)))
    steps = math.ceil(tokens / per / max(1, cfg.global_batch))
    ctx["steps"][sc.name] = steps
    ctx["save_every"][sc.name] = cfg.save_every
    if cfg.eval_data:
        _eval(sc, s, ex, cfg.eval_limit * cfg.eval_n, cfg.eval_max_new_tokens, prompt, "mix")
    other(sc, ex, steps / cfg.save_every + 1 if cfg.save_every else 1, s)


def work_rl(sc: StageCost, cfg: Any, s: ModelShape, ex: Expect, ctx: dict[str, Any]) -> None:
    prompt = _prompt(ex, sc.name, ctx["prompt_tokens"])
    cap, dom = cfg.max_new_tokens, cfg.domain
    mean = _resp(ex, sc.name, cap)
    if cfg.filter_rollouts:
        n = ex.get(
            sc.name, "filter_prompts", cfg.max_prompts or None, "no prompt count (max_prompts is 0)"
        )
        rows = n * cfg.filter_rollouts
        sc.work += [
            gen("sample", s, rows, cap, mean, prompt, cfg.engine),
            verify("verify", rows, dom, ex, sc.name, cfg.verify_workers),
        ]
    rows = cfg.steps * cfg.prompts_per_step * cfg.group_size
    sc.work += [
        gen("sample", s, rows, cap, mean, prompt, cfg.engine),
        verify("verify", rows, dom, ex, sc.name, cfg.verify_workers),
    ]
    tokens = ex.get(sc.name, "tokens", rows * (prompt + mean))
    sc.work.append(
        Work("update", "train", s, tokens=tokens, seq=prompt + mean, recompute=_ckpt(cfg))
    )
    if cfg.eval_data and cfg.eval_every:
        evals = cfg.steps // cfg.eval_every + 1 + (cfg.steps % cfg.eval_every > 0)
        _eval(sc, s, ex, evals * cfg.eval_limit * cfg.eval_n, cap, prompt, dom, cfg.engine)
    other(sc, ex, cfg.steps / cfg.save_every + 1 if cfg.save_every else 1, s)


def work_distill(sc: StageCost, cfg: Any, s: ModelShape, ex: Expect, ctx: dict[str, Any]) -> None:
    prompt = _prompt(ex, sc.name, ctx["prompt_tokens"])
    cap = cfg.max_new_tokens
    mean = _resp(ex, sc.name, cap)
    for t in cfg.teachers:
        rows = (
            cfg.max_prompts or ex.get(sc.name, "filter_prompts", None, "max_prompts is 0")
        ) * cfg.n_samples
        dom = t.get("domain", "math")
        sc.work += [
            gen("sample", s, rows, cap, mean, prompt, cfg.engine),
            verify("verify", rows, dom, ex, sc.name),
        ]
    kept = sum((cfg.counts or {}).values()) or ex.get(
        sc.name, "rows", None, "no count of kept traces"
    )
    scored = ex.get(sc.name, "scored", kept * 2)  # every correct trace is scored (ASSUMED 2x kept)
    sc.work.append(Work("update", "prefill", s, tokens=scored * (prompt + mean), seq=prompt + mean))
    tokens = ex.get(sc.name, "tokens", cfg.epochs * kept * min(prompt + mean, cfg.max_len))
    sc.work.append(
        Work("update", "train", s, tokens=tokens, seq=prompt + mean, recompute=_ckpt(cfg))
    )
    ctx["steps"][sc.name] = math.ceil(cfg.epochs * kept / max(1, cfg.global_batch))
    if cfg.eval_data:
        models = 1 + (1 + len(cfg.teachers) if cfg.eval_baselines else 0)
        per = (cfg.eval_limit or ex.get(sc.name, "eval_problems", None, "eval_limit is 0")) * 4
        _eval(sc, s, ex, models * per * cfg.eval_n, cfg.eval_max_new_tokens, prompt, "mix")
    other(sc, ex, 2, s)


def work_sampling(sc: StageCost, cfg: Any, s: ModelShape, ex: Expect, ctx: dict[str, Any]) -> None:
    """eval, headline, probe_merge, clr: problems x samples (x models or checkpoints)."""
    prompt = _prompt(ex, sc.name, ctx["prompt_tokens"])
    cap = cfg.max_new_tokens or 1024
    if sc.stage == "headline":
        rows = len(cfg.models) * cfg.limit_per_domain * ex.get(sc.name, "domains", 4) * cfg.n
    elif sc.stage == "probe_merge":
        src = (cfg.sft[0] if isinstance(cfg.sft, list) else cfg.sft) if cfg.sft else ""
        n_ck = ex.get(sc.name, "checkpoints", _checkpoints(src, ctx) or None, "no checkpoint count")
        rows = n_ck * ex.get(sc.name, "eval_problems", None, "no probe problem count") * cfg.n
    elif sc.stage == "clr":
        probs = cfg.limit or ex.get(sc.name, "eval_problems", None, "limit is 0")
        rows = probs * cfg.k * (1 + cfg.repeats) + cfg.claim_eval
    else:
        probs = cfg.limit or ex.get(
            sc.name, "eval_problems", (count_rows(cfg.data) or (None,))[0], "no problem count"
        )
        rows = probs * (cfg.n or ex.get(sc.name, "n", paper_n(cfg)))
    dom = "math" if sc.stage in ("probe_merge", "clr") else "mix"
    _eval(sc, s, ex, rows, cap, prompt, dom, getattr(cfg, "engine", "hf"))
    loads = len(cfg.models) if sc.stage == "headline" else 1  # each model loaded and evaluated
    other(sc, ex, loads if sc.stage in ("probe_merge", "headline") else 0, s)


def _checkpoints(src: str, ctx: dict[str, Any]) -> float:
    for name, steps in ctx["steps"].items():
        if name in src:
            every = ctx["save_every"].get(name) or steps
            return steps // every + 1
    return 0


def work_reward_model(
    sc: StageCost, cfg: Any, s: ModelShape, ex: Expect, ctx: dict[str, Any]
) -> None:
    tokens = ex.get(sc.name, "tokens", None, "no count of its pair tokens")
    sc.work.append(
        Work("update", "train", s, tokens=tokens, seq=cfg.max_len / 2, recompute=_ckpt(cfg))
    )
    other(sc, ex, 1, s)


def work_fixed(
    sc: StageCost, cfg: Any, s: ModelShape | None, ex: Expect, ctx: dict[str, Any]
) -> None:
    default = FIXED_S.get(sc.stage)
    if sc.stage == "construct" and getattr(cfg, "teacher", "") == "openai":
        default = 0.0  # the teacher is a remote server: its hours are the server's
        sc.notes.append("construct: teacher tokens are served remotely (not in device-hours)")
    secs = ex.get(sc.name, "seconds", default, "no model to predict from (its wall seconds)")
    sc.work.append(Work("other", "fixed", seconds=secs))


WORK: dict[str, Callable[..., None]] = {
    "sft": work_sft,
    "rl": work_rl,
    "distill": work_distill,
    "eval": work_sampling,
    "headline": work_sampling,
    "probe_merge": work_sampling,
    "clr": work_sampling,
    "reward_model": work_reward_model,
}
