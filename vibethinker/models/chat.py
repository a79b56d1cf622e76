"""Chat-template facts about a tokenizer that every layer above needs (engines stop on the turn
end, SFT packing trains it, saving makes it an EOS). Pure: a tokenizer in, token ids out."""

from __future__ import annotations

from typing import Any


def chat_end_token(tokenizer: Any) -> int | None:
    """The token that closes an assistant turn in the tokenizer's chat template (`<|im_end|>` in
    ChatML/Qwen, `<|eot_id|>` in Llama 3, `<end_of_turn>` in Gemma), or None without a template.

    SFT teaches the model to end its turn with this token, but a base checkpoint's EOS is often
    another one (Qwen2.5 base: `<|endoftext|>`), so every engine must stop on it too. Found by
    rendering a one-turn chat and taking the first token after the assistant's text, when that
    token is a special or added token (plain text there, e.g. a newline, is not a turn end)."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    marker = "VIBETHINKER_TURN_MARKER"
    msgs = [{"role": "user", "content": "u"}, {"role": "assistant", "content": marker}]
    try:
        text = tokenizer.apply_chat_template(msgs, tokenize=False)
    except Exception:  # templates that refuse a final assistant turn
        return None
    at = text.rfind(marker)
    if at < 0:
        return None
    tail = text[at + len(marker) :].lstrip(" ")
    ids = tokenizer(tail, add_special_tokens=False)["input_ids"] if tail else []
    if not ids:
        return None
    special = set(getattr(tokenizer, "all_special_ids", []) or [])
    added = set(getattr(tokenizer, "added_tokens_decoder", {}) or {})
    return int(ids[0]) if ids[0] in special | added else None
