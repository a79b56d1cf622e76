"""The embedded world's model: a locally trained tokenizer plus a small Qwen2 causal LM.

Nothing here downloads. `build_tiny_model` writes a plain Hugging Face folder (safetensors,
tokenizer, chat template, generation config) that `AutoModelForCausalLM` / `AutoTokenizer` load
with `HF_HUB_OFFLINE=1`, exactly like a real checkpoint, so every later stage runs one code path.

Choices, and why:
- Byte-level BPE with Qwen2's pre-tokenizer regex: any text round-trips exactly (bytes are the
  fallback) and digits are always single tokens (`\\p{N}` matches one digit), which arithmetic
  needs: a merged "408" would hide the digit structure the model must learn.
- `<think>`, `</think>` and `\\boxed{` are single *non-special* added tokens: one step each to
  emit, and they decode back into text (special tokens would vanish with skip_special_tokens).
- ChatML turns as in Qwen2.5 (`<|im_start|>role\\n...<|im_end|>\\n`); the assistant content plus
  its closing `<|im_end|>` sit inside `{% generation %}` so transformers returns the assistant-only
  loss mask, and the model learns to emit the EOS that ends its turn.
- Sizes form one family indexed by depth d (as in nanochat): d layers, hidden 64*d, FFN ~8/3 of
  hidden (rounded to 64), head_dim 32 (64 from hidden 512 up), about 3 query heads per KV head.
  d=3 is our calibrated ~1.2M model. A size such as "10m" picks the depth whose
  exact parameter count (with this vocabulary) is nearest in log scale.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import GenerationConfig, PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

from vibethinker.log import get_logger
from vibethinker.models import save_model_and_tokenizer

log = get_logger("models.tiny")

PAD, IM_START, IM_END = "<|endoftext|>", "<|im_start|>", "<|im_end|>"
SPECIAL_TOKENS = (PAD, IM_START, IM_END)  # ids 0, 1, 2
TEXT_TOKENS = ("<think>", "</think>", "\\boxed{")  # single tokens that decode into text
# Qwen2's pre-tokenizer pattern: `\p{N}` (one digit per piece) is what splits numbers into digits.
QWEN2_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)

# ChatML as in Qwen2.5, without Qwen's default system prompt (the paper is silent on one; the
# tiny world needs none). The generation block drives `return_assistant_tokens_mask`.
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{%- if message['role'] == 'assistant' %}"
    "{{- '<|im_start|>assistant\\n' }}"
    "{% generation %}{{- message['content'] + '<|im_end|>' }}{% endgeneration %}"
    "{{- '\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

# Named presets -> depth of the family below. "1m" is our calibrated model.
PRESETS = {"1m": 3, "5m": 5, "30m": 9}
MAX_DEPTH = 24


# ----------------------------------------------------------------------------- tokenizer


def train_tokenizer(texts: Iterable[str], vocab_size: int = 512) -> PreTrainedTokenizerFast:
    """Train a byte-level BPE tokenizer (Qwen2-style) on `texts`; deterministic for given texts.

    `vocab_size` counts everything (256 bytes, merges, special and added tokens); a small corpus
    may give fewer merges, so the result can be smaller. Needs vocab_size >= 262.
    """
    extra = len(SPECIAL_TOKENS) + len(TEXT_TOKENS)
    n_bytes = len(pre_tokenizers.ByteLevel.alphabet())
    if vocab_size < n_bytes + extra:
        raise ValueError(
            f"vocab_size={vocab_size} is below the byte alphabet + specials ({n_bytes + extra})"
        )
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size - len(TEXT_TOKENS),  # the text tokens are added after training
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),  # every byte: any text encodes
        min_frequency=2,
        show_progress=False,
    )
    # The corpus is cut at the text tokens, as encoding will cut it, so no merge is spent on them.
    cut = re.compile("|".join(re.escape(t) for t in TEXT_TOKENS))
    texts = list(texts)
    pieces = [piece for t in texts for piece in cut.split(t) if piece]
    # Role names appear in every chat-formatted example; weight them so they merge into tokens.
    pieces += ["system", "user", "assistant"] * (len(texts) // 2 + 2)
    tok.train_from_iterator(pieces, trainer=trainer)
    # Added after training (training resets the added vocabulary); non-special, so they decode.
    tok.add_tokens([AddedToken(t, special=False, normalized=False) for t in TEXT_TOKENS])
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        eos_token=IM_END,  # ends an assistant turn, as in Qwen2.5-Instruct
        pad_token=PAD,
        chat_template=CHAT_TEMPLATE,
        model_max_length=2048,
        clean_up_tokenization_spaces=False,  # exact round-trip of math text
    )


# ----------------------------------------------------------------------------- model config


def depth_shape(depth: int) -> dict[str, int]:
    """The architecture of family member `depth` (see module docstring)."""
    hidden = 64 * depth
    head_dim = 32 if hidden < 512 else 64
    heads = hidden // head_dim
    # About 3 query heads per KV head (grouped-query attention as in Qwen2), a divisor of heads.
    kv = max([k for k in range(1, heads + 1) if heads % k == 0 and k <= max(1, heads / 3)])
    return {
        "num_hidden_layers": depth,
        "hidden_size": hidden,
        "intermediate_size": 64 * max(1, round(hidden * 8 / 3 / 64)),
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
    }


def count_params(shape: dict[str, int], vocab_size: int, tied: bool = True) -> int:
    """Exact parameter count of a Qwen2ForCausalLM with this shape (q/k/v biases, RMSNorms)."""
    h, f, L = shape["hidden_size"], shape["intermediate_size"], shape["num_hidden_layers"]
    kv_dim = shape["num_key_value_heads"] * (h // shape["num_attention_heads"])
    attn = (h * h + h) + 2 * (h * kv_dim + kv_dim) + h * h  # q, k, v with bias; o without
    layer = attn + 3 * h * f + 2 * h  # gate, up, down; two RMSNorms
    emb = vocab_size * h * (1 if tied else 2)
    return L * layer + emb + h  # + final norm


def parse_size(size: str | int) -> float:
    """'1m' -> 1e6, '800k' -> 8e5, '1.5M' -> 1.5e6, 1200000 -> 1.2e6."""
    s = str(size).strip().lower().replace("_", "")
    m = re.fullmatch(r"(\d+(?:\.\d+)?)([kmb]?)", s)
    if not m:
        raise ValueError(
            f"size={size!r}: expected a preset ({', '.join(PRESETS)}), a depth "
            "like 'd4', or a parameter count like '10m', '800k', '1200000'"
        )
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6, "b": 1e9}[m.group(2)]


def resolve_depth(size: str | int, vocab_size: int) -> int:
    """Preset name, 'dN', or a parameter count -> the family depth (nearest in log scale)."""
    s = str(size).strip().lower()
    if s in PRESETS:
        return PRESETS[s]
    if re.fullmatch(r"d\d+", s):
        depth = int(s[1:])
        if not 1 <= depth <= MAX_DEPTH:
            raise ValueError(f"size={size!r}: depth must be in 1..{MAX_DEPTH}")
        return depth
    target = parse_size(s)
    return min(
        range(1, MAX_DEPTH + 1),
        key=lambda d: abs(math.log(count_params(depth_shape(d), vocab_size) / target)),
    )


def tiny_config(
    size: str | int,
    vocab_size: int,
    max_position_embeddings: int = 2048,
    bos_token_id: int | None = 0,
    eos_token_id: int | None = 2,
    pad_token_id: int | None = 0,
    **overrides: Any,
) -> Qwen2Config:
    """A Qwen2Config for `size` (see `resolve_depth`); `overrides` set any config field."""
    shape = depth_shape(resolve_depth(size, vocab_size))
    shape.update({k: v for k, v in overrides.items() if k in shape})
    rest = {k: v for k, v in overrides.items() if k not in shape}
    return Qwen2Config(
        vocab_size=vocab_size,
        max_position_embeddings=max_position_embeddings,
        tie_word_embeddings=True,  # at this size the embedding is a large share of the params
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        use_sliding_window=False,
        dtype="float32",  # bf16 autocast was ~2x slower on the calibration CPU
        **shape,
        **rest,
    )


def sampling_config(eos_token_id: int, pad_token_id: int, bos_token_id: int | None = None):
    """The paper's sampling protocol: temperature 1.0, top-p 0.95, top-k off (HF defaults to 50)."""
    return GenerationConfig(
        bos_token_id=bos_token_id,
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        do_sample=True,
        temperature=1.0,
        top_p=0.95,
        top_k=0,
    )


# ----------------------------------------------------------------------------- build


def build_tiny_model(
    out_dir: str | os.PathLike,
    texts: Iterable[str],
    size: str | int = "1m",
    vocab_size: int = 512,
    seed: int = 0,
    max_position_embeddings: int = 2048,
) -> str:
    """Train the tokenizer on `texts`, build a randomly initialised model, save both to `out_dir`.

    Deterministic: the same texts, size, vocab_size and seed give identical files.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    texts = list(texts)
    if not texts:
        raise ValueError("build_tiny_model: no text to train the tokenizer on")
    tokenizer = train_tokenizer(texts, vocab_size)
    tokenizer.model_max_length = max_position_embeddings
    ids = {t: tokenizer.convert_tokens_to_ids(t) for t in SPECIAL_TOKENS}
    config = tiny_config(
        size,
        len(tokenizer),
        max_position_embeddings,
        bos_token_id=ids[PAD],  # as Qwen2: no BOS is prepended, the id is <|endoftext|>
        eos_token_id=ids[IM_END],
        pad_token_id=ids[PAD],
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = sampling_config(ids[IM_END], ids[PAD], ids[PAD])
    save_model_and_tokenizer(model, tokenizer, out)
    n_params = sum(p.numel() for p in model.parameters())
    n_tokens = sum(len(tokenizer(t, add_special_tokens=False).input_ids) for t in texts)
    info = {
        "kind": "tiny",
        "size": str(size),
        "depth": config.num_hidden_layers,
        "params": n_params,
        "vocab_size": len(tokenizer),
        "vocab_size_requested": vocab_size,
        "max_position_embeddings": max_position_embeddings,
        "seed": seed,
        "n_texts": len(texts),
        "chars_per_token": round(sum(map(len, texts)) / max(n_tokens, 1), 3),
        "architecture": {k: getattr(config, k) for k in depth_shape(1)},
    }
    (out / "vibethinker_model.json").write_text(json.dumps(info, indent=2) + "\n")
    (out / "model_card.md").write_text(_model_card(info))
    log.info(
        "tiny model: %s params, vocab %d, depth %d -> %s",
        f"{n_params:,}",
        len(tokenizer),
        config.num_hidden_layers,
        out,
    )
    return str(out)


def _model_card(info: dict[str, Any]) -> str:
    arch = ", ".join(f"{k}={v}" for k, v in info["architecture"].items())
    return (
        f"# vibethinker tiny model ({info['size']})\n\n"
        "A randomly initialised Qwen2-architecture causal LM with a byte-level BPE tokenizer\n"
        "trained on the embedded world's text (digits split, `<think>`, `</think>`, `\\boxed{`\n"
        "as single tokens). Built by `vibethinker model tiny`; no download involved.\n\n"
        f"- parameters: {info['params']:,} (tied embeddings, fp32)\n"
        f"- vocabulary: {info['vocab_size']} tokens ({info['chars_per_token']} chars/token)\n"
        f"- architecture: {arch}\n"
        f"- context: {info['max_position_embeddings']} tokens\n"
        f"- seed: {info['seed']}\n"
        "- sampling defaults (generation_config.json): temperature 1.0, top-p 0.95, top-k off\n"
    )
