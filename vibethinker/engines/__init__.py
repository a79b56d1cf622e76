"""Samplers: one interface for everything that samples from a model.

Probing, stage-start filters, RL rollouts, distillation, CLR and evaluation all call
`sampler.generate(prompts, n, params) -> list[list[Completion]]`: for each prompt (a user string,
or a chat as a list of `{"role", "content"}` messages) n completions, each with its text, sampled
token ids, per-token logprobs where the engine knows them, and its finish reason.

Engines are named constructors in a dict, chosen once with `make_sampler("hf", model=...)`:
- `hf`: in-process transformers (CPU or GPU), own KV-cache sampling loop; `engines/hf.py`.
- `openai`: any OpenAI-compatible HTTP server (vLLM, SGLang, llama.cpp); `engines/openai.py`.
- `vllm`: in-process `vllm.LLM` (optional extra, GPU); `engines/vllm.py`.
The construct stage's SIMULATED teacher (no model; the embedded world's generators answer) has
the same interface and lives with the stage that uses it, in `construct/world_teacher.py`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from vibethinker.models.chat import chat_end_token
from vibethinker.types import Completion, Message, Prompt, as_messages  # noqa: F401 (re-exported)


@dataclass
class SamplingParams:
    """Sampling settings. Defaults are the paper's evaluation protocol (docs/PAPER.md): temperature
    1.0, top-p 0.95, top-k off, no extra output cap beyond the model's budget."""

    temperature: float = 1.0  # 0 means greedy
    top_p: float = 0.95  # nucleus sampling; 1.0 = off
    top_k: int = 0  # 0 = off (the paper's protocol; HF's own default of 50 is NOT applied)
    max_new_tokens: int = 1024  # the paper sets no extra cap; ours is the context budget
    stop: list[str] = field(default_factory=list)  # stop strings (excluded from the text)
    seed: int | None = None  # same seed, same prompts, same engine settings -> same samples


class Sampler(Protocol):
    def generate(
        self, prompts: list[Prompt], n: int, params: SamplingParams
    ) -> list[list[Completion]]:
        """[len(prompts)][n] completions."""
        ...


class SamplerError(RuntimeError):
    """A sampler could not produce completions (server down after retries, engine missing)."""


def encode_prompt(tokenizer: Any, prompt: Prompt, use_chat_template: bool) -> list[int]:
    """Prompt -> token ids: through the chat template (with the generation prompt) when the
    tokenizer has one and it is wanted, else the raw text. Shared by the in-process engines."""
    if use_chat_template:
        text = tokenizer.apply_chat_template(
            as_messages(prompt), add_generation_prompt=True, tokenize=False
        )
        return list(tokenizer(text, add_special_tokens=False)["input_ids"])
    text = prompt if isinstance(prompt, str) else "\n".join(m["content"] for m in prompt)
    return list(tokenizer(text)["input_ids"])


def stop_token_ids(model: Any, tokenizer: Any, chat: bool = True) -> list[int]:
    """Every token id that ends a response: the checkpoint's generation_config EOS (an int or a
    list), the tokenizer's EOS and, when prompts go through the chat template, its turn end."""
    ids: set[int] = set()
    gc = getattr(model, "generation_config", None)
    for v in (getattr(gc, "eos_token_id", None), getattr(tokenizer, "eos_token_id", None)):
        if isinstance(v, int):
            ids.add(v)
        elif isinstance(v, (list, tuple)):
            ids.update(int(x) for x in v)
    end = chat_end_token(tokenizer) if chat else None
    if end is not None:
        ids.add(end)
    return sorted(ids)


def truncate_at_stop(text: str, stop: list[str]) -> tuple[str, bool]:
    """Cut `text` before the earliest occurrence of any stop string; (text, whether one hit)."""
    cut = min((i for i in (text.find(s) for s in stop if s) if i >= 0), default=-1)
    return (text[:cut], True) if cut >= 0 else (text, False)


# name -> "module:attribute"; modules import lazily so `vllm` (and torch for `openai`) are only
# needed when that engine is chosen.
ENGINES: dict[str, str] = {
    "hf": "vibethinker.engines.hf:HFSampler",
    "openai": "vibethinker.engines.openai:OpenAISampler",
    "vllm": "vibethinker.engines.vllm:VLLMSampler",
}


def engine_class(engine: str) -> Callable[..., Sampler]:
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; known engines: {', '.join(sorted(ENGINES))}")
    module, attr = ENGINES[engine].split(":")
    return getattr(importlib.import_module(module), attr)


def make_sampler(engine: str, **kw: Any) -> Sampler:
    """Build a sampler by name, e.g. `make_sampler("hf", model="runs/x/sft", device="cpu")`."""
    return engine_class(engine)(**kw)


__all__ = [
    "ENGINES",
    "Completion",
    "Message",
    "Prompt",
    "Sampler",
    "SamplerError",
    "SamplingParams",
    "as_messages",
    "chat_end_token",
    "make_sampler",
    "stop_token_ids",
    "truncate_at_stop",
]
