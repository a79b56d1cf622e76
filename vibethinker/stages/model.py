"""Stage `model`: build the embedded world's tiny model (tokenizer + Qwen2 LM) as a HF folder.

`vibethinker model tiny out=DIR data=DATA_DIR size=1m` trains a byte-level BPE tokenizer on the
world's text (prompts and traces), builds a randomly initialised Qwen2-architecture causal LM and
saves both, with the chat template and the paper's sampling defaults, to `out`. The paper starts
from a pretrained Qwen2.5-Coder-3B; here the SFT stages must teach the model everything, which is
the point: each later stage shows its effect from scratch on a laptop CPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from vibethinker.data.io import load_problems
from vibethinker.stages import register

KINDS = ("tiny",)


@dataclass
class ModelConfig:
    kind: str = "tiny"
    """What to build; only "tiny" (the embedded world's model). A real run names its base model
    (e.g. a Qwen2.5-Coder-3B folder) in the recipe's `model:` instead of running this stage."""
    out: str = "runs/model"
    """Output folder: a Hugging Face model folder (safetensors, tokenizer, generation config)."""
    data: str = ""
    """Problem records whose prompts and traces train the tokenizer: a JSONL file or a data
    folder (its train.jsonl when present, else every data file inside)."""
    size: str = "1m"
    """Preset 1m (~1.2M params: 3 layers, hidden 192; our calibrated model), 5m (~5.4M),
    30m (~32M); a depth "dN" (N layers, hidden 64*N); or a count like "10m" (nearest depth)."""
    vocab_size: int = 512
    """Tokenizer size, bytes + merges + 6 special/added tokens (fewer if the text is small).
    Paper: Qwen2.5's 151,646; a small vocabulary suits the tiny world."""
    max_position_embeddings: int = 2048
    """Context length of the model. Paper: 64K tokens for RL (far beyond the tiny world)."""
    seed: int = 0
    """Seed of the weight initialisation; same seed and data give identical files."""


def corpus_texts(data: str) -> list[str]:
    """The text the tokenizer learns from: every prompt, trace, wrong trace and claim."""
    if not data:
        raise ValueError(
            "model: `data` is required (a Problem JSONL file or a data folder, e.g. "
            "the output of `vibethinker data tiny`)"
        )
    path = Path(data)
    if path.is_dir() and (path / "train.jsonl").exists():
        path = path / "train.jsonl"  # the tokenizer sees training text only
    texts: list[str] = []
    for p in load_problems(path):
        texts.append(p.prompt)
        texts.extend(p.traces or [])
        texts.extend(p.wrong_traces or [])
        texts.extend(
            c["text"] for cl in p.claims or [] for c in cl if isinstance(c.get("text"), str)
        )
    return texts


@register("model", ModelConfig, positional=("kind",))
def run(cfg: ModelConfig) -> dict[str, str]:
    """Build the tiny model: tokenizer trained on the world's text plus a Qwen2 causal LM."""
    if cfg.kind not in KINDS:
        raise ValueError(
            f"model: unknown kind {cfg.kind!r}; known: {', '.join(KINDS)}. To use a "
            "real model, set `model:` in the recipe to its folder or hub id."
        )
    from vibethinker.models.tiny import build_tiny_model

    out = build_tiny_model(
        cfg.out,
        corpus_texts(cfg.data),
        cfg.size,
        cfg.vocab_size,
        cfg.seed,
        cfg.max_position_embeddings,
    )
    return {"model": out}
