"""A tiny random Qwen2 with a character-level tokenizer built here (no hub), the prompts the hf
sampler tests use, and the teacher-forcing check of a sampler's logprobs."""

from __future__ import annotations

import torch

CHARS = list("0123456789+-*=;{}\\abcdefghijklmnopqrstuvwxyz .,?':")


SPECIAL = ["<pad>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "\\boxed{"]


TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}:{{ m['content'] }}<|im_end|>{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant:{% endif %}"
)


def tiny_qwen2(seed: int = 0, hidden: int = 64, layers: int = 2):
    """A random 2-layer Qwen2 and a char-level tokenizer with a chat template."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    vocab = {t: i for i, t in enumerate(SPECIAL + CHARS)}
    tk = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    tk.add_special_tokens(SPECIAL[:3])
    tk.add_tokens(SPECIAL[3:])
    tk.pre_tokenizer = pre_tokenizers.Split("", "isolated")
    tk.decoder = decoders.Fuse()
    tok = PreTrainedTokenizerFast(tokenizer_object=tk, pad_token="<pad>", eos_token="<|im_end|>")
    tok.chat_template = TEMPLATE
    torch.manual_seed(seed)
    cfg = Qwen2Config(
        vocab_size=len(vocab),
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        eos_token_id=tok.eos_token_id,
        pad_token_id=tok.pad_token_id,
    )
    return Qwen2ForCausalLM(cfg).eval(), tok


PROMPTS = ["1+2=", "what is 3*4? answer with a number", [{"role": "user", "content": "9-5"}]]


def _assert_teacher_forced(model, sampler, prompts, out):
    """Each completion's logprobs equal a plain forward over its prompt + tokens."""
    for prompt, group in zip(prompts, out):
        p_ids = sampler.encode(prompt)
        for c in group:
            ids = torch.tensor([p_ids + c.token_ids])
            with torch.no_grad():
                logp = torch.log_softmax(model(ids).logits[0].float(), -1)
            pos = torch.arange(len(p_ids) - 1, ids.shape[1] - 1)
            want = logp[pos, torch.tensor(c.token_ids)]
            assert torch.allclose(torch.tensor(c.logprobs), want, atol=1e-4), (prompt, c.text)


LONG_PROMPTS = ["1+2=", "abc", "what is 3*4?", "9-5", "hello there", "x", "7*7=", "the end"]
