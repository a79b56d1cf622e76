"""Model shapes for the memory planner: from a folder's config.json, or a built-in table of the
Qwen2.5 sizes for hub ids (the planner runs offline, with no hub).

Parameter counts follow the Qwen2 architecture exactly (q/k/v projections with bias, o_proj and
the SwiGLU MLP without, two RMSNorms per layer and a final one, the LM head tied to the
embedding or not): Qwen2.5-1.5B gives 1,543,714,304, as its safetensors do.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from vibethinker.config import ConfigError


@dataclass(frozen=True)
class ModelShape:
    """The numbers of a decoder-only LM that decide its memory."""

    name: str  # where the shape came from (hub id, folder)
    layers: int
    hidden: int
    intermediate: int
    heads: int
    kv_heads: int
    vocab: int
    tied: bool  # LM head shares the embedding matrix
    head_dim: int = 0  # 0: hidden // heads

    @property
    def dim(self) -> int:
        """Per-head width."""
        return self.head_dim or self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of K (and of V) per token: kv heads x head dim."""
        return self.kv_heads * self.dim

    def linears(self) -> list[tuple[int, int]]:
        """(in, out) of one layer's linear maps: q, k, v, o, gate, up, down."""
        h, kv, q, i = self.hidden, self.kv_dim, self.heads * self.dim, self.intermediate
        return [(h, q), (h, kv), (h, kv), (q, h), (h, i), (h, i), (i, h)]

    def layer_params(self) -> int:
        biases = self.heads * self.dim + 2 * self.kv_dim  # q, k, v biases (Qwen2)
        return sum(a * b for a, b in self.linears()) + biases + 2 * self.hidden

    def embed_params(self) -> int:
        return self.vocab * self.hidden

    def params(self) -> int:
        head = 0 if self.tied else self.embed_params()
        return self.layers * self.layer_params() + self.embed_params() + head + self.hidden

    def lora_params(self, r: int) -> int:
        """Adapter parameters of rank r on every linear of every layer ("all-linear")."""
        return self.layers * sum(r * (a + b) for a, b in self.linears())


def _qwen(
    name: str,
    layers: int,
    hidden: int,
    inter: int,
    heads: int,
    kv: int,
    vocab: int = 151936,
    tied: bool = True,
) -> ModelShape:
    return ModelShape(name, layers, hidden, inter, heads, kv, vocab, tied)


# The Qwen2.5 family's published config.json values (base, Instruct, Coder and Math variants share
# the decoder shape of their size; VibeThinker-1.5B is a Qwen2.5-Math-1.5B fine-tune).
KNOWN: dict[str, ModelShape] = {
    "0.5b": _qwen("Qwen2.5-0.5B", 24, 896, 4864, 14, 2),
    "1.5b": _qwen("Qwen2.5-1.5B", 28, 1536, 8960, 12, 2),
    "3b": _qwen("Qwen2.5-3B", 36, 2048, 11008, 16, 2),
    "7b": _qwen("Qwen2.5-7B", 28, 3584, 18944, 28, 4, vocab=152064, tied=False),
}
_HUB = re.compile(
    r"^(?:qwen|weiboai)/(?:qwen2\.5|vibethinker)(?:-coder|-math)?-(\d+(?:\.\d+)?b)", re.IGNORECASE
)


def from_config_json(path: Path) -> ModelShape:
    """The shape in a HF config.json; a missing key is an error naming the file and key."""
    cfg = json.loads(path.read_text())
    cfg = cfg.get("text_config", cfg)
    keys = (
        "num_hidden_layers",
        "hidden_size",
        "intermediate_size",
        "num_attention_heads",
        "vocab_size",
    )
    missing = [k for k in keys if k not in cfg]
    if missing:
        raise ConfigError(f"{path}: no {', '.join(missing)} (not a decoder-only LM config?)")
    return ModelShape(
        name=str(path.parent),
        layers=int(cfg["num_hidden_layers"]),
        hidden=int(cfg["hidden_size"]),
        intermediate=int(cfg["intermediate_size"]),
        heads=int(cfg["num_attention_heads"]),
        kv_heads=int(cfg.get("num_key_value_heads") or cfg["num_attention_heads"]),
        vocab=int(cfg["vocab_size"]),
        tied=bool(cfg.get("tie_word_embeddings", False)),
        head_dim=int(cfg.get("head_dim") or 0),
    )


def lookup(model: str) -> ModelShape | None:
    """The shape of `model` (a folder with config.json, or a known Qwen2.5 hub id); None when
    neither (e.g. a folder an earlier stage has not written yet)."""
    if not model:
        return None
    cfg = Path(model) / "config.json"
    if cfg.is_file():
        return from_config_json(cfg)
    m = _HUB.match(model.strip())
    if m and m.group(1).lower() in KNOWN:
        known = KNOWN[m.group(1).lower()]
        return ModelShape(model, *[getattr(known, f) for f in _FIELDS])
    return None


_FIELDS = ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab", "tied", "head_dim")


def resolve(model: str, fallback: ModelShape | None, where: str) -> ModelShape:
    """`lookup(model)`, else the recipe's base shape (a later stage's folder, e.g.
    ${probe2.out}/merged, has the base model's architecture); an error when neither."""
    shape = lookup(model)
    if shape is not None:
        return shape
    if fallback is not None:
        return fallback
    sizes = ", ".join(f"Qwen/Qwen2.5-{k.upper()}" for k in KNOWN)
    raise ConfigError(
        f"{where}: model {model!r} is neither a folder with config.json nor a known hub id "
        f"({sizes}, -Coder/-Math/-Instruct variants); pass model=FOLDER"
    )
