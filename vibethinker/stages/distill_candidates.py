"""Stage `distill`'s candidate pool: each teacher samples its domain's prompts, the verifier keeps
the correct untruncated responses, exact duplicates go, and the student scores every kept trace
(S_LP, train/lp_score.py). The pool is cached in out/candidates.jsonl under a key of the settings
that shape it (`candidates_key`). The stage (stages/distill.py) holds the config and the run.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import random
import time
from pathlib import Path
from typing import Any

from vibethinker import verifiers
from vibethinker.data.io import load_problems, problem_from_dict, problem_to_dict
from vibethinker.engines import make_sampler
from vibethinker.evaluate import PROMPT_STYLES
from vibethinker.log import get_logger
from vibethinker.models import check_context, load_model_and_tokenizer
from vibethinker.stages.distill_config import DistillConfig
from vibethinker.types import Candidate, Problem

log = get_logger("stages.distill")  # the stage's logger: the same records as before


def sample_seed(cfg: DistillConfig) -> int:
    """The seed of prompt and teacher sampling: `sample_seed`, or `seed` when it is -1."""
    return cfg.seed if cfg.sample_seed == -1 else cfg.sample_seed


def teacher_prompts(cfg: DistillConfig, teacher: dict[str, str]) -> list[Problem]:
    """The teacher's prompts: its domain's problems of its data (a seeded `max_prompts` sample)."""
    path = Path(teacher["data"])
    if path.is_dir():
        path = path / "train.jsonl"
    problems = load_problems(path)
    mine = [p for p in problems if p.domain == teacher["domain"]]
    if not mine:
        have = sorted({p.domain for p in problems})
        raise ValueError(
            f"distill: teacher {teacher['model']} (domain {teacher['domain']}): "
            f"{path} has no prompt of domain {teacher['domain']!r} (it has "
            f"{have or 'no problems'})"
        )
    if cfg.max_prompts and len(mine) > cfg.max_prompts:
        mine = random.Random(sample_seed(cfg)).sample(mine, cfg.max_prompts)
    return mine


def make_teacher_sampler(cfg: DistillConfig, teacher: dict[str, str]) -> Any:
    """The teacher's Sampler (a function of its own so tests can put a stand-in here)."""
    kw: dict[str, Any] = {"model": teacher["model"]}
    if cfg.engine == "openai":
        kw["base_url"] = teacher.get("base_url") or cfg.base_url
    elif cfg.engine == "hf":
        from vibethinker.train.policy import resolve_device

        kw["device"] = resolve_device(cfg.device)
    return make_sampler(cfg.engine, **kw)


def sample_teacher(
    cfg: DistillConfig, teacher: dict[str, str], problems: list[Problem]
) -> tuple[list[Candidate], dict]:
    """Sample, verify, keep correct untruncated responses: (candidates, counts)."""
    import torch

    prompt_fn = PROMPT_STYLES[cfg.prompt_style]
    params = cfg.sampling_params(seed=sample_seed(cfg))
    sampler = make_teacher_sampler(cfg, teacher)
    outs = sampler.generate([prompt_fn(p) for p in problems], cfg.n_samples, params)
    del sampler  # free the teacher before the next one (or the student) loads
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    flat = [(p, c) for p, cs in zip(problems, outs) for c in cs]
    scores = verifiers.verify_batch([p for p, _ in flat], [c.text for _, c in flat])
    cands = [
        Candidate(p, c.text, teacher["model"])
        for (p, c), s in zip(flat, scores)
        if s.correct and not c.truncated
    ]
    counts = {
        "prompts": len(problems),
        "sampled": len(flat),
        "truncated": sum(c.truncated for _, c in flat),
        "correct": len(cands),
    }
    log.info(
        "distill: teacher %s (%s): %d prompts, %d sampled, %d correct",
        teacher["model"],
        teacher["domain"],
        len(problems),
        len(flat),
        len(cands),
    )
    return cands, counts


def dedupe(cands: list[Candidate]) -> list[Candidate]:
    """Drop exact duplicates (same problem, same response text), keeping the first."""
    seen: set[tuple[str, str]] = set()
    out = []
    for c in cands:
        key = (c.problem.id, c.text)
        if key not in seen:
            seen.add(key)
            out.append(c)
    return out


def score_candidates(cfg: DistillConfig, cands: list[Candidate]) -> None:
    """Fill `s_lp`, `tokens` (|y|) and `length` (prompt + trace) of each candidate; traces over
    max_len (which SFT would drop) are not scored (s_lp None)."""
    from vibethinker.train import packing, policy
    from vibethinker.train.lp_score import score_samples

    device = policy.resolve_device(cfg.device)
    model, tok = load_model_and_tokenizer(
        cfg.student,
        device=device,
        dtype="float32",
        rope_yarn_factor=cfg.rope_yarn_factor,
        rope_original_len=cfg.rope_original_len,
        attn_implementation="sdpa",
    )
    check_context(model.config, cfg.max_len, f"distill max_len={cfg.max_len}")
    model.eval()
    prompt_fn = PROMPT_STYLES[cfg.prompt_style]
    samples = []
    for c in cands:
        ids, mask = packing.encode_chat(tok, prompt_fn(c.problem), c.text)
        samples.append(packing.Sample(ids, mask))
        c.s_lp, c.tokens, c.length = None, sum(mask), len(ids)
    fit = [i for i, s in enumerate(samples) if len(s.ids) <= cfg.max_len]
    t0 = time.time()
    scored = score_samples(
        model, [samples[i] for i in fit], tok.pad_token_id, device, cfg.score_tokens
    )
    for i, (v, _) in zip(fit, scored):
        cands[i].s_lp = v
    log.info(
        "distill: scored %d traces under the student in %.1f s (%d over max_len=%d)",
        len(fit),
        time.time() - t0,
        len(cands) - len(fit),
        cfg.max_len,
    )


def candidates_key(cfg: DistillConfig) -> dict[str, Any]:
    """The settings that shape the candidate pool (its cache key in candidates.json)."""
    keys = (
        "teachers",
        "student",
        "engine",
        "n_samples",
        "max_prompts",
        "max_new_tokens",
        "temperature",
        "top_p",
        "prompt_style",
        "rope_yarn_factor",
        "rope_original_len",
        "max_len",
    )
    return {**{k: getattr(cfg, k) for k in keys}, "seed": sample_seed(cfg)}


def load_or_build_candidates(cfg: DistillConfig, out: Path) -> tuple[list[Candidate], dict]:
    """Sample + verify + dedupe + score, cached in out/candidates.jsonl under a key of the
    settings that shape it (a resumed run does not re-sample the teachers)."""
    key = candidates_key(cfg)
    cache, meta = out / "candidates.jsonl", out / "candidates.json"
    if cache.exists() and meta.exists() and json.loads(meta.read_text())["key"] == key:
        log.info("distill: reusing the scored candidates %s", cache)
        rows = [json.loads(x) for x in cache.read_text().splitlines() if x.strip()]
        got = [
            Candidate(**{**r, "problem": problem_from_dict(r["problem"], cache, i + 1)})
            for i, r in enumerate(rows)
        ]
        return got, json.loads(meta.read_text())["sampling"]
    cands: list[Candidate] = []
    sampling: dict[str, dict[str, int]] = {}
    prompts = [teacher_prompts(cfg, t) for t in cfg.teachers]  # every data check first
    for t, problems in zip(cfg.teachers, prompts):
        got, counts = sample_teacher(cfg, t, problems)
        cands += got
        agg = sampling.setdefault(t["domain"], {})
        for k, v in counts.items():
            agg[k] = agg.get(k, 0) + v
    for d in sampling:
        sampling[d]["deduplicated"] = 0
    before = {d: sum(c.problem.domain == d for c in cands) for d in sampling}
    cands = dedupe(cands)
    for d in sampling:
        sampling[d]["deduplicated"] = before[d] - sum(c.problem.domain == d for c in cands)
    if cands:
        score_candidates(cfg, cands)
    out.mkdir(parents=True, exist_ok=True)
    with open(cache, "w", encoding="utf-8") as f:
        for c in cands:
            row = {**dataclasses.asdict(c), "problem": problem_to_dict(c.problem)}
            f.write(json.dumps(row) + "\n")
    meta.write_text(json.dumps({"key": key, "sampling": sampling}, indent=1) + "\n")
    return cands, sampling
