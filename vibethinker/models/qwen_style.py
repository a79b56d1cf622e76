"""A random-weight checkpoint with Qwen2.5's real shapes of parts, built locally (no hub).

The tiny model's tokenizer was made to fit the project (its EOS is the chat turn end). A real
base checkpoint is not: Qwen2.5 base's EOS is `<|endoftext|>` (generation_config and tokenizer)
while its chat template ends each turn with `<|im_end|>`, the template has a default system
prompt and no `{% generation %}` block, and the config has 32K positions with no RoPE scaling.
`build_qwen25_style` reproduces exactly those traits at a small size (byte-level BPE trained on
the given text, small dims) so the tests exercise what a user's own checkpoint brings: stopping
on the turn end, the assistant mask without a generation block, context limits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

import torch
from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

from vibethinker.models.tiny import IM_END, IM_START, PAD, train_tokenizer

ENDOFTEXT = PAD  # "<|endoftext|>": Qwen2.5 base's EOS, BOS and pad

# Qwen2.5's chat template without the tool-calling branches (the same text otherwise).
QWEN25_CHAT_TEMPLATE = (
    "{%- if messages[0]['role'] == 'system' %}"
    "{{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}"
    "{%- else %}"
    "{{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful "
    "assistant.<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- for message in messages %}"
    "{%- if (message.role == 'user') or (message.role == 'system' and not loop.first) or "
    "(message.role == 'assistant') %}"
    "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)


def build_qwen25_style(
    out_dir: str | os.PathLike,
    texts: Iterable[str],
    vocab_size: int = 400,
    hidden: int = 128,
    layers: int = 2,
    max_position_embeddings: int = 32768,
    seed: int = 0,
) -> str:
    """Write a Qwen2.5-base-style HF folder (random weights) to `out_dir`; returns its path."""
    tok = train_tokenizer(list(texts), vocab_size)
    tok.eos_token = ENDOFTEXT  # as Qwen2.5 base: the pretraining EOS, not the turn end
    tok.chat_template = QWEN25_CHAT_TEMPLATE
    tok.model_max_length = 131072  # Qwen2.5's tokenizer_config value (not the model's limit)
    ids = {t: tok.convert_tokens_to_ids(t) for t in (ENDOFTEXT, IM_START, IM_END)}
    config = Qwen2Config(
        vocab_size=len(tok),
        hidden_size=hidden,
        intermediate_size=hidden * 11 // 4,  # Qwen2.5-3B: 2048 -> 11008
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,  # grouped-query attention, as Qwen2.5-3B (16 / 2)
        max_position_embeddings=max_position_embeddings,
        rope_theta=1000000.0,
        rms_norm_eps=1e-6,
        tie_word_embeddings=True,  # Qwen2.5-3B ties them
        bos_token_id=ids[ENDOFTEXT],
        eos_token_id=ids[ENDOFTEXT],
        use_sliding_window=False,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config).to(torch.float32)
    model.generation_config = GenerationConfig(
        bos_token_id=ids[ENDOFTEXT], eos_token_id=ids[ENDOFTEXT], max_new_tokens=2048
    )  # Qwen2.5 base's generation_config: EOS <|endoftext|> only
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    # Plain save_pretrained, as the hub checkpoint is (`save_model_and_tokenizer` would add the
    # turn end to the EOS, which is the fix under test).
    model.save_pretrained(out)
    tok.save_pretrained(out)
    return str(out)
