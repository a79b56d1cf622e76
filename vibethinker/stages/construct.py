"""Stage `construct` (docs/PAPER.md stage 0): seed problems + a teacher -> curriculum-ready SFT data.

`vibethinker construct seeds=DATA/train.jsonl teacher=openai teacher_model=M eval_sets=[...]`
streams the seeds in chunks through vibethinker/construct/pipeline.py: query expansion along the
four axes, the teacher's query-quality verdicts, 10-gram decontamination of the queries, n
teacher samples per query, majority vote (pseudo-labels), agreed sandbox tests for expanded code,
trace verification, multi-path selection, the repetition filter, decontamination of the traces.
Outputs (in `out`): train.jsonl (Problem records with `traces` and curriculum `meta`: source_seed,
axis, vote_margin, pass_rate, difficulty, trace_chars), funnel.json, summary.md, lengths.png,
difficulty.png. Memory stays flat in the number of seeds (one chunk in memory; the eval index is
the only other structure). Each finished chunk is appended and recorded in progress.json, so an
interrupted run resumes after the last finished chunk. The default teacher, `world`, is the
SIMULATED teacher of construct/world_teacher.py (no LLM); docs/CONSTRUCT.md lists every choice.

`mode=decontaminate` runs no teacher step: the seed file's records (finished SFT data with their
traces) are kept or dropped by the 10-gram index alone and written to train.jsonl. In both modes
every file of `files` (e.g. the RL prompt files) is decontaminated the same way and written to
out/<its file name>, so every training file of a recipe passes one index.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field, fields
from itertools import chain
from pathlib import Path
from typing import Any

from vibethinker.construct.decontam import EvalIndex, split_clean
from vibethinker.construct.evalsets import eval_items
from vibethinker.construct.expand import AXES, load_template, supervision_error
from vibethinker.construct.funnel import Funnel
from vibethinker.construct.pipeline import Context, Settings, build_chunk
from vibethinker.construct.progress import Progress
from vibethinker.construct.world_teacher import WorldTeacherSampler
from vibethinker.data.io import (
    DataError,
    _files,
    _iter_rows,
    problem_from_dict,
    problem_to_dict,
    split_file,
)
from vibethinker.engines import SamplerError, SamplingParams, make_sampler
from vibethinker.engines.settings import NucleusFields
from vibethinker.log import get_logger
from vibethinker.reports.construct import write_summary
from vibethinker.stages import register
from vibethinker.types import DOMAINS

log = get_logger("stages.construct")


# The teacher's sampling keys (temperature, top_p, max_new_tokens) are declared once, in
# engines/settings.py; construct's own default and notes are here.
CONSTRUCT_SAMPLING = NucleusFields.with_defaults(
    max_new_tokens=4096,
    notes={
        "temperature": "construct: the teacher's (paper: unpublished).",
        "top_p": "construct: the teacher's.",
        "max_new_tokens": "construct: the teacher's response cap (paper: unpublished).",
    },
)


@dataclass
class ConstructConfig(CONSTRUCT_SAMPLING):
    seeds: str = ""
    """Seed problems (Problem JSONL file, folder, or a `data` stage folder: its train.jsonl). Each
    needs reliable supervision: math an answer, stem a gold letter and choices, code tests, instruct
    instructions."""
    out: str = "runs/construct"
    """Output folder: train.jsonl, funnel.json, progress.json, summary.md, plots."""
    domains: list[str] = field(default_factory=lambda: ["math", "code", "stem", "instruct"])
    """Seed domains to construct from; records of other domains in the seed file are passed over."""
    pass_domains: list[str] = field(default_factory=list)
    """Records of these domains (e.g. the world's `clr` judge-task examples, which have no
    construction path) are copied to train.jsonl unchanged, so that the SFT stages read one file;
    counted in the funnel's `passed` row; decontaminated like constructed records (a prompt or
    trace sharing an n-gram with an eval item drops the record). Empty: passed over, not written
    (our choice)."""
    teacher: str = "world"
    """Teacher engine (vibethinker.engines.ENGINES): openai, hf, vllm, or world (SIMULATED, no LLM)."""
    teacher_model: str = ""
    """openai: served model name; hf/vllm: model folder. Unused by world."""
    teacher_base_url: str = "http://127.0.0.1:8000/v1"
    """openai engine: the server's base URL."""
    teacher_options: dict[str, Any] = field(default_factory=dict)
    """Extra engine keyword arguments (world: error_rate, ill_posed_rate, n_planted, ...; its
    data/eval default to seeds/eval_sets)."""
    axes: list[str] = field(default_factory=lambda: list(AXES))
    """Expansion axes (paper: concept_composition, solving_skeleton, constraints, evaluation_objective)."""
    expansions_per_seed: int = 1
    """New problems per expanded seed; axes cycle with the seed's position (paper: unpublished)."""
    expand_fraction: float = 1.0
    """Share of seeds that get expanded, chosen by a hash of the seed id (0 = no expansion)."""
    keep_seeds: bool = True
    """Also distill the seeds themselves (their trusted labels); false = expansions only."""
    judge_seeds: bool = False
    """Send seeds through the query-quality judge too (they are trusted by default)."""
    n_samples: int = 8
    """Teacher samples per query for the vote and the traces (paper: 'several'; unpublished)."""
    vote_min_margin: float = 0.25
    """Pseudo-label kept only if (top cluster - runner-up) / n_samples >= this (paper: silent)."""
    code_min_agree: float = 0.5
    """Expanded code: a test input is kept when this share of all samples give the same output."""
    code_min_tests: int = 2
    """Expanded code: fewer agreed tests than this drops the problem."""
    max_traces: int = 4
    """Multi-path: at most m distinct correct traces per query (paper: 'several')."""
    path_max_overlap: float = 0.8
    """Multi-path: a trace whose word n-gram Jaccard with a kept one is >= this is the same path."""
    path_ngram: int = 3
    """Multi-path: n of the word n-grams compared."""
    rep_min_words: int = 30
    """Repetition filter: traces shorter than this (words) are not judged."""
    rep_max_dup_line: float = 0.3
    """Repetition filter: most allowed share of duplicated lines (Gopher: 0.30)."""
    rep_max_top: float = 0.4
    """Repetition filter: most allowed char share of the top 2/3/4-gram (Gopher: 0.20-0.16; traces repeat more)."""
    rep_max_dup: float = 0.6
    """Repetition filter: most allowed char share of duplicated 5..10-grams (Gopher: 0.15-0.10)."""
    eval_sets: list[str] = field(default_factory=list)
    """Eval sets to decontaminate against: `path` (Problem JSONL), `format:path` (math, aime, gpqa,
    livecodebench, humaneval, ifeval, ifbench), `humaneval`/`ifbench` alone (packaged files),
    `pkg:<package>/<file>` for a file in an installed package (construct/evalsets.py)."""
    decontam_n: int = 10
    """Decontamination n-gram size in normalised words (paper: 10)."""
    decontam_template_share: float = 0.05
    """n-grams in more than this share of eval items are template, not content (1.0 = keep all)."""
    decontam_template_min: int = 3
    """... and in at least this many eval items."""
    chunk: int = 256
    """Seeds per chunk: the unit of streaming and of resume."""
    max_seeds: int = 0
    """Use only the first N seeds (0 = all)."""
    on_bad_seed: str = "error"
    """A seed without supervision: error (at start, naming file/line/field), drop (counted), or
    pass (copied to train.jsonl unchanged with its own traces, counted in the funnel's `passed`
    row and decontaminated; e.g. the world's open instruct prompts, which have no rules to
    verify)."""
    workers: int = 2
    """Verification worker processes / sandbox threads."""
    expand_prompt: str = ""
    """Expansion prompt template file (default: prompts/construct_expand.txt)."""
    judge_prompt: str = ""
    """Query-quality judge template file (default: prompts/construct_judge.txt)."""
    seed: int = 0
    """Sampling seed (teacher requests carry seed + chunk offsets) and the expansion draw."""
    mode: str = "build"
    """build: the whole pipeline with the teacher (expansion, judge, vote, traces) and the
    decontamination. decontaminate: no teacher: the seeds' records (finished data with traces)
    are only decontaminated (prompt, traces, wrong traces) and written to train.jsonl."""
    files: list[str] = field(default_factory=list)
    """More training files (Problem JSONL; e.g. RL prompt files), decontaminated in either mode
    and written to out/<file name> (names must differ and not be train.jsonl). Paper: the RL
    data was strictly decontaminated against the benchmarks."""


def iter_seeds(
    path: str, on_bad: str, domains: list[str], pass_domains: tuple[str, ...] | list[str] = ()
) -> Iterator[tuple[int, Any, int, bool]]:
    """Stream (index, Problem, line, copy) from the seed file(s). A seed without supervision
    raises a DataError naming file, line and field (on_bad=error), comes as (index, None, line,
    False) (drop), or as (index, Problem, line, True) (pass: copied, not constructed; a record
    that does not parse is dropped). Records of `pass_domains` come with copy=True (no
    supervision check); those of other domains (e.g. the world's `clr` examples) are passed over."""
    i = 0
    for f in _files(split_file(path, "train.jsonl")):
        for line, row in _iter_rows(f):
            if isinstance(row, DataError):
                raise row
            dom = row.get("domain") if isinstance(row, dict) else None
            if dom not in domains and dom not in pass_domains:
                continue
            copy = dom in pass_domains
            try:
                p = problem_from_dict(row, f, line, (), set())
                missing = None if copy else supervision_error(p)
                if missing and on_bad == "pass":
                    copy = True
                elif missing:
                    raise DataError(
                        f, line, missing, f"a {p.domain} seed needs reliable supervision"
                    )
            except DataError:
                if on_bad == "error":
                    raise
                yield i, None, line, False
                i += 1
                continue
            yield i, p, line, copy
            i += 1


def settings(cfg: ConstructConfig) -> Settings:
    """The pipeline's typed settings, taken from the config by field name."""
    return Settings(
        **{f.name: getattr(cfg, f.name) for f in fields(Settings)} | {"axes": tuple(cfg.axes)}
    )


def make_teacher(cfg: ConstructConfig) -> Any:
    kw = dict(cfg.teacher_options)
    if cfg.teacher == "openai":
        kw.setdefault("base_url", cfg.teacher_base_url)
        kw.setdefault("model", cfg.teacher_model or "default")
    elif cfg.teacher in ("hf", "vllm"):
        kw.setdefault("model", cfg.teacher_model)
    elif cfg.teacher == "world":  # the simulated teacher knows the seeds, plants from eval sets
        kw.setdefault("data", cfg.seeds)
        kw.setdefault("eval", list(cfg.eval_sets))
        return WorldTeacherSampler(**kw)
    return make_sampler(cfg.teacher, **kw)


def _check(cfg: ConstructConfig) -> None:
    other = [d for d in cfg.domains if d not in DOMAINS]
    if other:
        raise ValueError(
            f"construct domains {other} are not verifiable; known: {', '.join(DOMAINS)}"
        )
    both = sorted(set(cfg.domains) & set(cfg.pass_domains))
    if both:
        raise ValueError(f"domains {both} are both constructed and passed through (pass_domains)")
    bad = [a for a in cfg.axes if a not in AXES]
    if bad:
        raise ValueError(f"unknown axes {bad}; known: {', '.join(AXES)}")
    if cfg.on_bad_seed not in ("error", "drop", "pass"):
        raise ValueError(f"on_bad_seed must be error, drop or pass, got {cfg.on_bad_seed!r}")
    if not cfg.seeds:
        raise ValueError("construct needs seeds=<Problem JSONL or data folder>")
    if cfg.mode not in ("build", "decontaminate"):
        raise ValueError(f"construct mode must be build or decontaminate, got {cfg.mode!r}")
    names = [Path(f).name for f in cfg.files]
    if len(set(names)) < len(names) or "train.jsonl" in names:
        raise ValueError(
            f"construct files {cfg.files}: their file names must differ and not be "
            "train.jsonl (each is written to out/<file name>)"
        )
    if cfg.mode == "decontaminate" and not cfg.eval_sets:
        raise ValueError("construct mode=decontaminate needs eval_sets (nothing to check against)")
    if cfg.n_samples < 1 or cfg.max_traces < 1 or cfg.chunk < 1:
        raise ValueError("n_samples, max_traces and chunk must be >= 1")


def _save_json(path: Path, obj: Any) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(obj, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def _decontam_records(records: list, ctx: Context, step: str = "passed") -> list:
    """Records copied through (pass_domains, on_bad_seed=pass, mode=decontaminate, `files`) are
    decontaminated too: a record whose prompt, trace or wrong trace shares an n-gram with an
    eval item is dropped, counted under `step` / eval_overlap."""
    kept, bad = split_clean(records, ctx.index)
    for k, h in bad.items():
        ctx.eval_hits.update(h)
        ctx.funnel.drop(records[k].domain, step, "eval_overlap")
    return kept


def _iter_records(path: str) -> Iterator[Any]:
    """Every record of a Problem JSONL file or folder; a bad line is an error naming it."""
    for f in _files(Path(path)):
        for line, row in _iter_rows(f):
            if isinstance(row, DataError):
                raise row
            yield problem_from_dict(row, f, line, (), set())


def decontaminate_file(src: str, dst: Path, ctx: Context) -> dict[str, int]:
    """Stream `src` through the index into `dst` (chunk by chunk); counts in `decontam_file`."""
    n_in = n_out = 0
    tmp = dst.with_name(dst.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        batch: list = []
        for rec in chain(_iter_records(src), [None]):  # streamed: memory flat in the file size
            if rec is not None:
                batch.append(rec)
            if batch and (rec is None or len(batch) >= ctx.settings.chunk):
                kept = _decontam_records(batch, ctx, "decontam_file")
                for d, n in Counter(p.domain for p in batch).items():
                    ctx.funnel.step(d, "decontam_file", n, sum(p.domain == d for p in kept))
                f.writelines(
                    json.dumps(problem_to_dict(p), ensure_ascii=False) + "\n" for p in kept
                )
                n_in, n_out = n_in + len(batch), n_out + len(kept)
                batch = []
    os.replace(tmp, dst)
    log.info("decontaminated %s -> %s: %d of %d records kept", src, dst, n_out, n_in)
    return {"in": n_in, "out": n_out}


@register("construct", ConstructConfig, resumable=True)
def run(cfg: ConstructConfig) -> dict[str, str]:
    """Build SFT data from seeds with a teacher (expand, judge, vote, verify, multi-path, filters)."""
    _check(cfg)
    out = Path(cfg.out)
    out.mkdir(parents=True, exist_ok=True)
    if cfg.on_bad_seed == "error":  # a bad seed is an error before any teacher call
        for _ in iter_seeds(cfg.seeds, "error", cfg.domains, cfg.pass_domains):
            pass
    index = eval_index(cfg)
    if cfg.mode == "decontaminate":
        ctx = Context(None, SamplingParams(), "", "", index, settings(cfg))
        decontaminate_file(str(split_file(cfg.seeds, "train.jsonl")), out / "train.jsonl", ctx)
        hist: dict[str, dict] = {"lengths": {}, "difficulty": {}}
        return _finish(cfg, out, ctx, Progress(), hist, 0)
    return _build(cfg, out, index)


def eval_index(cfg: ConstructConfig) -> EvalIndex | None:
    """The n-gram index of the eval sets (None without eval sets), its size logged."""
    items = eval_items(cfg.eval_sets)
    index = (
        EvalIndex(items, cfg.decontam_n, cfg.decontam_template_share, cfg.decontam_template_min)
        if items
        else None
    )
    if index is not None:
        log.info(
            "eval index: %d items, %d n-grams (%d template n-grams left out)",
            index.n_items,
            len(index),
            index.template_grams,
        )
    return index


def teacher_context(cfg: ConstructConfig, index: EvalIndex | None, state: Progress) -> Context:
    """The pipeline's context: the teacher, its templates, and the counts saved in `state`."""
    ctx = Context(
        sampler=make_teacher(cfg),
        params=cfg.sampling_params(),
        expand_template=load_template(cfg.expand_prompt or None, "construct_expand.txt"),
        judge_template=load_template(cfg.judge_prompt or None, "construct_judge.txt"),
        index=index,
        settings=settings(cfg),
        funnel=Funnel(state.funnel),
        eval_hits=Counter(state.eval_hits),
    )
    ctx.planted.update(state.planted)
    return ctx


def _build(cfg: ConstructConfig, out: Path, index: EvalIndex | None) -> dict[str, str]:
    """mode=build: stream the seeds chunk by chunk through the pipeline, resuming from progress."""
    prog_path, data_path = out / "progress.json", out / "train.jsonl"
    state = Progress.load(prog_path)
    with open(data_path, "a+b") as f:  # drop a chunk that was half written when we stopped
        f.truncate(state.bytes)
    if state.seeds_done:
        log.info("resuming after %d finished seeds", state.seeds_done)
    ctx = teacher_context(cfg, index, state)
    hist = {
        "lengths": {d: Counter(v) for d, v in state.lengths.items()},
        "difficulty": {d: Counter(v) for d, v in state.difficulty.items()},
    }
    chunk: list = []
    for i, p, line, copy in iter_seeds(cfg.seeds, cfg.on_bad_seed, cfg.domains, cfg.pass_domains):
        if cfg.max_seeds and i >= cfg.max_seeds:
            break
        if i < state.seeds_done:
            continue
        chunk.append((i, p, line, copy))
        if len(chunk) >= cfg.chunk:
            _flush(cfg, out, ctx, state, hist, chunk)
    if chunk:
        _flush(cfg, out, ctx, state, hist, chunk)
    n_bad = state.bad_seeds
    if n_bad:
        log.warning("%d seed(s) dropped: no supervision (on_bad_seed=drop) or unreadable", n_bad)
    return _finish(cfg, out, ctx, state, hist, n_bad)


def _add_histograms(hist: dict, done: list) -> None:
    """Count the constructed problems' trace lengths (20-char bins) and difficulties per domain."""
    for p in done:
        for c in p.meta["trace_chars"]:
            hist["lengths"].setdefault(p.domain, Counter())[str(c // 20 * 20)] += 1
        hist["difficulty"].setdefault(p.domain, Counter())[str(p.meta["difficulty"])] += 1


def _flush(
    cfg: ConstructConfig, out: Path, ctx: Context, state: Progress, hist: dict, chunk: list
) -> None:
    """Build one chunk, append it to train.jsonl, record it in progress.json, empty `chunk`."""
    good = [(i, p) for i, p, _, copy in chunk if p is not None and not copy]
    passed = [p for _, p, _, copy in chunk if p is not None and copy]
    n_bad = state.bad_seeds + sum(p is None for _, p, _, _ in chunk)
    try:
        done = build_chunk(good, ctx, cfg.seed * 1_000_003 + 3 * (chunk[0][0] // cfg.chunk))
    except SamplerError as e:
        raise SamplerError(
            f"teacher failed on seeds {chunk[0][0]}..{chunk[-1][0]}: {e}; "
            f"{state.seeds_done} seeds are saved, rerun to resume"
        ) from e
    passed_in = Counter(p.domain for p in passed)
    passed = _decontam_records(passed, ctx)
    passed_out = Counter(p.domain for p in passed)
    for d, n in passed_in.items():
        ctx.funnel.step(d, "passed", n, passed_out[d])
    with open(out / "train.jsonl", "ab") as f:
        for p in done + passed:
            f.write((json.dumps(problem_to_dict(p), ensure_ascii=False) + "\n").encode())
        state.bytes = f.tell()
    _add_histograms(hist, done)
    state.seeds_done, state.funnel, state.bad_seeds = (
        chunk[-1][0] + 1,
        ctx.funnel.state(),
        n_bad,
    )
    state.eval_hits, state.planted = dict(ctx.eval_hits), dict(ctx.planted)
    state.lengths = {d: dict(c) for d, c in hist["lengths"].items()}
    state.difficulty = {d: dict(c) for d, c in hist["difficulty"].items()}
    state.save(out / "progress.json")
    log.info(
        "seeds %d..%d: %d problems kept, %d copied through",
        chunk[0][0],
        chunk[-1][0],
        len(done),
        len(passed),
    )
    chunk.clear()


def _finish(cfg: ConstructConfig, out: Path, ctx: Context, state: Progress, hist: dict, n_bad: int):
    """Decontaminate `files`, write funnel.json and summary.md; the stage's outputs."""
    outputs = {"train": str(out / "train.jsonl")}
    for src in cfg.files:
        decontaminate_file(src, out / Path(src).name, ctx)
        outputs[Path(src).stem] = str(out / Path(src).name)
    _save_json(
        out / "funnel.json",
        {
            **ctx.funnel.state(),
            "bad_seeds": n_bad,
            "eval_hits": dict(ctx.eval_hits),
            "planted": ctx.planted,
        },
    )
    write_summary(out, cfg, ctx, state, hist)
    return {**outputs, "funnel": str(out / "funnel.json"), "summary": str(out / "summary.md")}
