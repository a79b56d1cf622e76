"""Stage `reward_model`: a Bradley-Terry reward model for the rubric reward of Instruct RL.

    vibethinker reward_model model=runs/tiny/sft1/final data=runs/tiny/data out=runs/rm

Starts from a (SFT) causal LM, replaces its LM head by a one-logit sequence-classification head
(AutoModelForSequenceClassification), and trains it on preference pairs built from the instruct
problems of `data` (data/world/instruct_open.py `preference_pairs`): each problem's teacher
answer against its labelled wrong answers (wrong content, or ignoring the instruction), a
truncated copy and a rambling, repetitive copy. A seeded `eval_frac` of the PROBLEMS is held out
(no prompt in both); held-out pairwise accuracy is reported overall, per degradation kind and per
prompt source (rule / open). Outputs in `out`: final/ (HF folder; loads with
AutoModelForSequenceClassification; reward_norm.json holds the normalisation of
verifiers/rubric.py), metrics.jsonl (one row per step), eval.json, summary.md.
The paper trains no reward model of its own in the report; everything here is our choice.
"""

from __future__ import annotations

import json
import random
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibethinker import ledger
from vibethinker.config import Checks
from vibethinker.data.io import load_problems
from vibethinker.data.world.instruct_open import preference_pairs
from vibethinker.engines.settings import DeviceFields
from vibethinker.log import get_logger
from vibethinker.stages import register

log = get_logger("stages.reward_model")


@dataclass
class RewardModelConfig(DeviceFields):
    model: str = ""
    """Starting model: a causal-LM HF folder (e.g. the SFT model); its head is replaced."""
    data: str = ""
    """Problems whose instruct prompts give the pairs: a JSONL or a data folder (its train.jsonl)."""
    out: str = "runs/reward_model"
    """Output folder (final/, metrics.jsonl, eval.json, summary.md)."""
    epochs: int = 2
    """Passes over the training pairs. Our choice."""
    batch: int = 16
    """Pairs per optimizer step (the loss is their mean). Our choice."""
    micro_batch: int = 16
    """Pairs per forward (2x sequences: chosen and rejected together), each micro-batch padded
    to its own longest row; gradients accumulate over the step's `batch` pairs (same loss and
    update as one forward). Memory knob only; also the held-out evaluation's pairs per forward."""
    max_tokens_per_micro: int = 0
    """When > 0, instead of `micro_batch`: as many pairs per forward as keep 2 x pairs x their
    longest row <= this many padded tokens (at least one pair). 0: `micro_batch` pairs."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in backward (long texts on GPU; the 3B
    recipe sets it, as for its SFT and RL stages)."""
    lr: float = 3e-4
    """Peak AdamW LR (cosine to `final_lr`). Tiny world: 3e-4; a 1-7B reward model: ~1e-5."""
    final_lr: float = 3e-5
    """LR at the last step."""
    max_len: int = 256
    """Tokens per text (prompt + response, chat-formatted); longer ones keep their end."""
    eval_frac: float = 0.15
    """Fraction of problems held out for pairwise accuracy (seeded)."""
    max_problems: int = 0
    """Use at most this many instruct problems (a seeded sample; 0: all)."""
    max_seconds: float = 0.0
    """Wall-clock cap on training (0: none); the stage then saves what it has."""
    seed: int = 0
    """Seed of the split, the degradations, batch order and the head's init."""

    def __post_init__(self) -> None:
        """Every key's range, when the config is built."""
        c = Checks(self)
        c.at_least(1, "epochs", "batch", "max_len")
        c.at_least(0, "final_lr", "max_problems", "max_seconds")
        c.positive("lr")
        c.fraction("eval_frac", upper_open=True)
        c.device()
        c.done()


def build_pairs(problems: list, seed: int) -> list[dict[str, Any]]:
    """Preference rows of every instruct problem, each tagged with its source (rule / open)."""

    rng = random.Random(f"reward-pairs:{seed}")
    rows = []
    for p in problems:
        for r in preference_pairs(p, rng):
            r["source"] = "rule" if p.instructions else "open"
            rows.append(r)
    return rows


def split_problems(problems: list, frac: float, seed: int) -> tuple[list, list]:
    """(train, held-out) problems; the held-out share is a seeded sample."""
    idx = list(range(len(problems)))
    random.Random(seed).shuffle(idx)
    k = max(1, round(len(problems) * frac)) if frac > 0 else 0
    held = set(idx[:k])
    return (
        [p for i, p in enumerate(problems) if i not in held],
        [p for i, p in enumerate(problems) if i in held],
    )


def breakdown(rows: list[dict], wins: list[float]) -> dict[str, Any]:
    """Held-out accuracy per degradation kind and per prompt source."""
    out: dict[str, Any] = {}
    for key in ("kind", "source"):
        groups: dict[str, list[float]] = {}
        for r, w in zip(rows, wins):
            groups.setdefault(r[key], []).append(w)
        out[key] = {
            k: {"accuracy": round(sum(v) / len(v), 4), "pairs": len(v)}
            for k, v in sorted(groups.items())
        }
    return out


def norm_from(chosen: list[float], rejected: list[float]) -> dict[str, float]:
    """offset = midpoint of the mean chosen and rejected logits, scale = a quarter of their gap
    (verifiers/rubric.py: mean good -> sigmoid(2) = 0.88, mean bad -> 0.12); scale >= 1e-3."""
    mc, mr = sum(chosen) / len(chosen), sum(rejected) / len(rejected)
    return {
        "offset": (mc + mr) / 2,
        "scale": max(abs(mc - mr) / 4, 1e-3),
        "mean_chosen": mc,
        "mean_rejected": mr,
    }


def check_config(cfg: RewardModelConfig) -> None:
    """Refuse bad keys before any loading, naming the key."""
    if not cfg.model or not cfg.data:
        raise ValueError("reward_model: `model` and `data` are required")
    for key in ("epochs", "batch", "micro_batch", "max_len"):
        if getattr(cfg, key) < 1:
            raise ValueError(f"reward_model: {key} must be >= 1, got {getattr(cfg, key)}")
    if cfg.max_tokens_per_micro < 0:
        raise ValueError(
            f"reward_model: max_tokens_per_micro must be >= 0 (0: micro_batch "
            f"pairs per forward), got {cfg.max_tokens_per_micro}"
        )


def load_start(path: str, device: str, gradient_checkpointing: bool = False) -> tuple[Any, Any]:
    """The start model with a fresh one-logit head (a causal-LM folder) or as it is (a
    sequence-classification folder); activation checkpointing enabled as policy.load_policy
    does for SFT and RL (non-reentrant)."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    if not (Path(path) / "config.json").is_file():
        raise FileNotFoundError(f"reward_model: model {path} is not a Hugging Face folder")
    tok = AutoTokenizer.from_pretrained(path)
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # "score.weight newly initialized": intended here
    try:
        model = AutoModelForSequenceClassification.from_pretrained(path, num_labels=1)
    finally:
        hf_logging.set_verbosity(verbosity)
    model.config.pad_token_id = tok.pad_token_id
    model.config.use_cache = False  # a training forward never needs the KV cache
    if gradient_checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    tok.padding_side, tok.truncation_side = "right", "left"
    return model.to(device), tok


def preference_data(cfg: RewardModelConfig) -> tuple[list[dict], list[dict]]:
    """(training pairs, held-out pairs) from the instruct problems with traces of `data` (a
    seeded `max_problems` sample), split by problem; an error when either side is empty."""

    data = Path(cfg.data)
    path = data / "train.jsonl" if data.is_dir() else data
    if not path.is_file():
        raise FileNotFoundError(f"reward_model: {path} not found")
    probs = [p for p in load_problems(path) if p.domain == "instruct" and p.traces]
    if cfg.max_problems and len(probs) > cfg.max_problems:
        probs = random.Random(cfg.seed).sample(probs, cfg.max_problems)
    train_p, held_p = split_problems(probs, cfg.eval_frac, cfg.seed)
    train_rows, held_rows = build_pairs(train_p, cfg.seed), build_pairs(held_p, cfg.seed + 1)
    if not train_rows or not held_rows:
        raise ValueError(
            f"reward_model: {path} gives {len(train_rows)} training and "
            f"{len(held_rows)} held-out pairs (instruct problems with traces "
            "and wrong traces are needed)"
        )
    n_open = sum(r["source"] == "open" for r in train_rows)
    log.info(
        "reward_model: %d problems -> %d training pairs (%d from open prompts), %d held-out",
        len(probs),
        len(train_rows),
        n_open,
        len(held_rows),
    )
    return train_rows, held_rows


@register("reward_model", RewardModelConfig, positional=("model", "data"))
def run(cfg: RewardModelConfig) -> dict[str, str]:
    """Train a Bradley-Terry reward model on the world's preference pairs (rubric reward)."""
    from vibethinker.train import policy
    from vibethinker.train.reward_model import encode_pairs, evaluate_pairs, train_bt

    check_config(cfg)
    t0 = time.time()
    train_rows, held_rows = preference_data(cfg)
    device = policy.resolve_device(cfg.device)
    model, tok = load_start(cfg.model, str(device), cfg.gradient_checkpointing)
    held_enc = encode_pairs(tok, held_rows, cfg.max_len)
    pad = tok.pad_token_id
    before = evaluate_pairs(model, held_enc, pad, cfg.micro_batch)
    hist = train_bt(
        model,
        tok,
        train_rows,
        epochs=cfg.epochs,
        batch=cfg.batch,
        lr=cfg.lr,
        final_lr=cfg.final_lr,
        max_len=cfg.max_len,
        seed=cfg.seed,
        max_seconds=cfg.max_seconds,
        micro_batch=cfg.micro_batch,
        max_tokens_per_micro=cfg.max_tokens_per_micro,
    )
    after = evaluate_pairs(model, held_enc, pad, cfg.micro_batch)
    out = Path(cfg.out)
    final = out / "final"
    norm = save_final(model, tok, final, after)
    with (out / "metrics.jsonl").open("w") as f:
        f.writelines(json.dumps(r) + "\n" for r in hist)
    res = {
        "held_out_accuracy": round(after["accuracy"], 4),
        "held_out_accuracy_at_start": round(before["accuracy"], 4),
        "train_pairs": len(train_rows),
        "held_out_pairs": len(held_rows),
        "steps": len(hist),
        "train_seconds": round(sum(r["seconds"] for r in hist), 2),
        **breakdown(held_rows, after["wins"]),
        "norm": norm,
    }
    (out / "eval.json").write_text(json.dumps(res, indent=1) + "\n")
    summary = write_summary(out / "summary.md", cfg, res, time.time() - t0)
    log.info(
        "reward_model: held-out pairwise accuracy %.3f (start %.3f)",
        res["held_out_accuracy"],
        res["held_out_accuracy_at_start"],
    )
    return {
        "model": str(final),
        "metrics": str(out / "metrics.jsonl"),
        "eval": str(out / "eval.json"),
        "summary": summary,
    }


def save_final(model: Any, tok: Any, final: Path, after: dict) -> dict:
    """The trained model, its tokenizer and its reward normalisation (from the held-out
    rewards `after`) in `final`; the checkpoint counted in the cost ledger. Returns the norm."""
    final.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(final)
    tok.save_pretrained(final)
    norm = norm_from(after["chosen"], after["rejected"])
    (final / "reward_norm.json").write_text(json.dumps(norm, indent=1) + "\n")
    ledger.checkpoint(final)
    return norm


def write_summary(path: Path, cfg: RewardModelConfig, res: dict, wall: float) -> str:
    lines = [
        f"# Reward model (Bradley-Terry) from `{cfg.model}`",
        "",
        f"{res['train_pairs']} training pairs, {res['steps']} steps x {cfg.batch} pairs, lr "
        f"{cfg.lr:g} -> {cfg.final_lr:g}, seed {cfg.seed}; train {res['train_seconds']:.1f} s, "
        f"wall {wall:.0f} s.",
        "",
        f"Held-out pairwise accuracy ({res['held_out_pairs']} pairs, problems unseen in "
        f"training): **{res['held_out_accuracy']:.3f}** (untrained head: "
        f"{res['held_out_accuracy_at_start']:.3f}).",
        "",
        "| held-out pairs | accuracy | pairs |",
        "|---|---:|---:|",
    ]
    for key in ("source", "kind"):
        for k, v in res[key].items():
            lines.append(f"| {key} {k} | {v['accuracy']:.3f} | {v['pairs']} |")
    n = res["norm"]
    lines += [
        "",
        f"Normalisation (reward_norm.json): offset {n['offset']:.3f}, scale "
        f"{n['scale']:.3f} (mean chosen logit {n['mean_chosen']:.3f}, rejected "
        f"{n['mean_rejected']:.3f}).",
    ]
    path.write_text("\n".join(lines) + "\n")
    return str(path)
