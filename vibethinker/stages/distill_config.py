"""The `distill` stage's config and its checks (docs/PAPER.md, stage 4), below the stage module
and its parts (`distill.py`, `distill_candidates.py`, `distill_select.py`), which all read it:
kept apart so that no two of them import each other."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from vibethinker.config import PROMPT_STYLE_NAMES, Checks, ConfigError
from vibethinker.engines.settings import (
    DeviceFields,
    EngineChoice,
    NucleusFields,
    RopeFields,
    ServerFields,
)
from vibethinker.types import DOMAINS

TEACHER_KEYS = ("model", "data", "domain")
TEACHER_OPTIONAL = ("base_url",)  # engine=openai: this teacher's server (else `base_url`)
SELECTORS = ("lp", "random")


# The teachers' sampling keys (temperature, top_p, max_new_tokens), the engine, server, YaRN and
# device keys are declared once, in engines/settings.py; distill's own default and notes are here.
DISTILL_SAMPLING = NucleusFields.with_defaults(
    max_new_tokens=4096,
    notes={
        "temperature": "distill: the teachers' (and the student's eval samples').",
        "top_p": "distill: the teachers' (and the student's eval samples'); top-k off.",
        "max_new_tokens": "distill: each teacher response's; a cut response is dropped (it has "
        "no final answer). Paper: no cap beyond the context (64K); ours is a budget knob.",
    },
)
DISTILL_SERVER = ServerFields.with_defaults(
    notes={
        "base_url": "distill (engine=openai): the teachers' server; a teacher's own "
        "`base_url` key overrides it."
    }
)

DISTILL_ENGINE = EngineChoice.with_defaults(
    notes={"engine": "distill: the teachers' (openai: a teacher's `model` is the served name)."}
)
DISTILL_ROPE = RopeFields.with_defaults(
    notes={
        "rope_yarn_factor": "distill: the student's, for scoring and SFT, when max_len exceeds "
        "its positions (the RL teachers may have been extended the same way)."
    }
)


@dataclass
class DistillConfig(DISTILL_SAMPLING, DISTILL_ENGINE, DISTILL_SERVER, DISTILL_ROPE, DeviceFields):
    teachers: list[dict[str, str]] = field(default_factory=list)
    """The specialists: a list of {model, data, domain}: a HF folder or hub id (for engine=openai
    the served model name), its prompts (Problem JSONL or a data folder: its train.jsonl; only
    prompts of `domain` are used) and the domain whose verifier judges it. Paper: the Math
    (Long2Short), Code and STEM RL checkpoints."""
    student: str = ""
    """The student's starting checkpoint (HF folder or hub id), which scores S_LP and is trained.
    Paper: unpublished. recipes/vibethinker-3b.yaml: the merged SFT model (the `probe_merge`
    output RL started from), which still holds the broad SFT spectrum that the sequential RL
    stages eroded. recipes/tiny.yaml: SFT stage 1's model, because on the tiny world stage 2
    already narrows it (code forgotten) and a student from sft1 kept code and instruct while it
    took the math specialist's gain (measured; the recipe's comment has the figures).
    Required (no default path)."""
    out: str = "runs/distill"
    """Output folder (candidates.jsonl, selected.jsonl, funnel.json, s_lp.png, sft/, summary.md)."""
    n_samples: int = 8
    """Responses sampled per prompt by each teacher. Paper: unpublished; our choice, 8 (the RL
    group size, enough for several distinct correct paths per prompt)."""
    max_prompts: int = 0
    """At most this many prompts per teacher (a seeded sample; 0: all of its domain)."""
    prompt_style: str = "paper"
    """User turn for sampling, scoring and SFT: "paper" (the domain's evaluation prompt) or "raw"."""
    select: str = "lp"
    """Selection: "lp" (learning potential, the paper) or "random" (same count per domain and
    length bucket at random among traces passing the length filter: the reviewers' baseline)."""
    n_buckets: int = 4
    """Length buckets per domain, edges at the quantiles of response tokens. Paper: unpublished;
    our choice, 4 (quartiles: short, medium, long, very long traces each keep their share)."""
    min_tokens: int = 8
    """Drop traces with fewer response tokens than this (the paper drops "very short" traces,
    threshold unpublished); our choice, 8 (a bare answer without reasoning)."""
    outlier_pct: float = 95.0
    """Drop S_LP above this percentile of the domain (the paper's "extreme high-score outliers",
    often garbled or off-distribution traces; 100: none). Paper: unpublished; our choice, 95."""
    band_lo_pct: float = 50.0
    """Within each bucket keep S_LP from this percentile ... Paper: "prefer middle-to-high
    scores", unpublished; our choice, the median."""
    band_hi_pct: float = 100.0
    """... up to this one (of the bucket, after the outlier cut). Our choice: 100."""
    shares: dict[str, float] = field(default_factory=dict)
    """Domain mix as proportions, e.g. {math: 0.5, code: 0.25, stem: 0.25}: the largest mix with
    these shares that the kept traces allow (domains not named get none). Paper: unpublished;
    empty (with `counts` empty): every domain keeps all its selected traces."""
    counts: dict[str, int] = field(default_factory=dict)
    """Domain mix as counts: at most counts[d] traces of domain d (instead of `shares`)."""
    on_empty_domain: str = "error"
    """A domain whose teachers end with no kept trace: "error" (stop before training, naming the
    teachers and domain) or "warn" (train on the other domains, warning in the log and summary)."""
    score_tokens: int = 2048
    """Tokens per S_LP scoring forward (traces packed end to end, no grad, bf16 on GPU). Results
    do not depend on it. A forward's rows are as wide as its longest prompt + traces unit, so
    smaller forwards pad less: on CPU 2048 scored the benchmark's traces ~1.5x faster than 8192
    (BENCHMARKS.md); on a GPU raise it to fill memory (the 3B recipe: 32768)."""
    epochs: int = 2
    """SFT passes over the selection. Paper: unpublished; our choice, 2 (stage 2's count: a
    small, verified, focused set)."""
    max_steps: int | None = None
    """Optional cap on SFT optimizer steps."""
    global_batch: int = 128
    """SFT samples per optimizer step. Paper: unpublished for stage 4; stage 1's 128."""
    micro_batch: int = 4
    """SFT rows per forward (memory knob)."""
    lr: float = 5e-5
    """SFT peak learning rate. Paper: unpublished for stage 4; stage 1's 5e-5."""
    final_lr: float = 8e-8
    """SFT learning rate at the last step (cosine). Stage 1's 8e-8."""
    warmup_frac: float = 0.05
    """SFT linear warm-up fraction. Stage 1's 5%."""
    max_len: int = 4096
    """SFT context (prompt + trace); longer traces are dropped before selection (counted)."""
    save_every: int = 0
    """SFT checkpoint every k steps (0: only the last); resume restarts from the last one."""
    gradient_checkpointing: bool = False
    """SFT: recompute activations in backward (long traces on GPU)."""
    report_to: str = "none"
    """Experiment tracking of the SFT metrics (as the sft stage's `report_to`)."""
    eval_data: str = ""
    """Held-out problems (Problem JSONL) to report the student's sampled Pass@1 on, per domain,
    after SFT (empty: no report). The paper's protocol (T=1.0, top-p 0.95)."""
    eval_limit: int = 0
    """At most this many eval problems per domain (the first ones, as the rl stage's held-out
    eval takes them, so the student's figure on a domain sits next to that specialist's); 0: all."""
    eval_n: int = 4
    """Samples per eval problem (avg@n = Pass@1)."""
    eval_max_new_tokens: int = 256
    """Token cap of each eval sample."""
    eval_baselines: bool = False
    """Also evaluate the student's starting checkpoint on every domain and each teacher on its
    own domain, on the same problems: the report's student vs start vs specialists table."""
    seed: int = 0
    """Seed of the random baseline, SFT order and evaluation sampling (and, unless
    `sample_seed` is set, of prompt and teacher sampling)."""
    sample_seed: int = -1
    """Seed of prompt and teacher sampling (-1: `seed`). Fix it to vary only selection, SFT and
    evaluation across seeds over one candidate pool (scripts/distill_evidence.py does)."""

    def __post_init__(self) -> None:
        """Every key's range, when the config is built (check_config adds the data checks)."""
        c = Checks(self)
        c.at_least(
            1,
            "n_samples",
            "max_new_tokens",
            "n_buckets",
            "score_tokens",
            "epochs",
            "max_steps",
            "global_batch",
            "micro_batch",
            "max_len",
            "eval_n",
            "eval_max_new_tokens",
        )
        c.at_least(
            0,
            "max_prompts",
            "min_tokens",
            "final_lr",
            "save_every",
            "rope_yarn_factor",
            "rope_original_len",
            "eval_limit",
            "temperature",
        )
        c.at_least(-1, "sample_seed")
        c.positive("lr")
        c.in_range("top_p", 0, 1)
        c.fraction("warmup_frac", upper_open=True)
        for k in ("outlier_pct", "band_lo_pct", "band_hi_pct"):
            if not 0 <= getattr(self, k) <= 100:
                c.bad(k, "must be a percentile in [0, 100]")
        if self.band_lo_pct > self.band_hi_pct:
            c.bad("band_lo_pct", f"must be <= band_hi_pct={self.band_hi_pct}")
        c.one_of("engine", ("hf", "openai", "vllm"))
        c.one_of("select", SELECTORS)
        c.one_of("on_empty_domain", ("error", "warn"))
        c.one_of("prompt_style", PROMPT_STYLE_NAMES)
        c.device()
        c.report_to()
        c.done()


# ----------------------------------------------------------------------------- checks


def _looks_local(name: str) -> bool:
    """A path rather than a hub id ("org/name"): the loader's own rule (models/__init__.py)."""
    return name.startswith((".", "/", "~")) or name.count("/") > 1 or Path(name).exists()


def check_config(cfg: DistillConfig) -> None:
    """Refuse a bad config before anything is sampled, naming the teacher and domain."""
    if not cfg.teachers:
        raise ConfigError("distill: `teachers` is empty (a list of {model, data, domain})")
    if not cfg.student:
        raise ConfigError("distill: `student` is required (the starting checkpoint)")
    if cfg.select not in SELECTORS:
        raise ConfigError(f"distill: select must be one of {SELECTORS}, got {cfg.select!r}")
    if cfg.on_empty_domain not in ("error", "warn"):
        raise ConfigError("distill: on_empty_domain must be error or warn")
    for i, t in enumerate(cfg.teachers):
        missing = [k for k in TEACHER_KEYS if not t.get(k)]
        extra = sorted(set(t) - set(TEACHER_KEYS) - set(TEACHER_OPTIONAL))
        if missing or extra:
            raise ConfigError(
                f"distill: teachers[{i}] = {t}: needs the keys {TEACHER_KEYS}, "
                f"optionally {TEACHER_OPTIONAL} (missing {missing}, unknown "
                f"{extra})"
            )
        if t["domain"] not in DOMAINS:
            raise ConfigError(
                f"distill: teachers[{i}] domain {t['domain']!r} is not one of {DOMAINS}"
            )
        if cfg.engine != "openai" and _looks_local(t["model"]) and not Path(t["model"]).is_dir():
            raise FileNotFoundError(
                f"distill: teacher {t['model']} (domain {t['domain']}): "
                "model folder not found (did its RL stage run?)"
            )
        if not Path(t["data"]).exists():
            raise FileNotFoundError(
                f"distill: teacher {t['model']} (domain {t['domain']}): data {t['data']} not found"
            )
    if _looks_local(cfg.student) and not Path(cfg.student).is_dir():
        raise FileNotFoundError(f"distill: student {cfg.student} not found")
