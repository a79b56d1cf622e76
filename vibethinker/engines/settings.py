"""The sampling and engine settings that several stage configs share, declared once.

Stage configs stay flat (recipe keys such as `rl_math.temperature`): they take these blocks by
dataclass inheritance, so a block's fields are the stage's own keys, with the block's type, its
docstring and its default. Each key is declared in exactly one block (tests/engines/
test_settings.py fails when a config class re-declares one):

    SamplingFields   temperature, max_new_tokens                          (probe_merge)
      NucleusFields    + top_p                                            (rl, distill, construct)
        TopKFields       + top_k                                          (eval, clr, headline)
    DeviceFields     device                 (rl, sft, reward_model, distill, probe_merge)
    EngineChoice     engine                                  (rl, distill, probe_merge)
    RopeFields       rope_yarn_factor, rope_original_len                  (rl, sft, distill)
    ServerFields     base_url                                             (distill)
      OpenAIFields     + endpoint, concurrency, timeout, tokenizer
    LocalEngineFields  EngineChoice + DeviceFields + dtype, token_budget, context_len (headline)
      EngineFields       + RopeFields + OpenAIFields; make_engine()       (eval, clr)

A stage whose default differs from the block's says so where it names the block, with
`with_defaults`, which changes defaults only (no new key, same type and docstring; a `runtime(v)`
value also marks the key runtime for that stage) and may add a stage's note to a field's
docstring (`vibethinker <stage> --help` shows both):

    class RLConfig(NucleusFields.with_defaults(max_new_tokens=65536, top_p=1.0)): ...

`sampling_params()` builds the engines' SamplingParams from the block and `make_engine()` the
sampler from EngineFields, so no stage spells either out field by field.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vibethinker.config import Block, runtime
from vibethinker.engines import Sampler, SamplingParams, make_sampler

# ----------------------------------------------------------------------------- sampling


@dataclass
class SamplingFields(Block):
    temperature: float = 1.0
    """Sampling temperature. Paper: 1.0 (its evaluation protocol)."""
    max_new_tokens: int = 1024
    """Cap on the tokens of each sampled response. Where the stage allows 0 (eval, clr,
    headline): no extra cap, a response may fill the model's context."""

    def _sampling_values(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "max_new_tokens": self.max_new_tokens}

    def sampling_params(self, seed: int | None = None, **over: Any) -> SamplingParams:
        """The engines' SamplingParams from this block's fields (a field the stage does not have
        keeps SamplingParams' default: top-p 0.95, top-k off), with `seed` and `over` on top
        (stop strings; a stage's second cap such as eval_max_new_tokens)."""
        return SamplingParams(**{**self._sampling_values(), "seed": seed, **over})


@dataclass
class NucleusFields(SamplingFields):
    top_p: float = 0.95
    """Nucleus (top-p) sampling; 1.0 = off. Paper: 0.95 (its evaluation protocol)."""

    def _sampling_values(self) -> dict[str, Any]:
        return {**super()._sampling_values(), "top_p": self.top_p}


@dataclass
class TopKFields(NucleusFields):
    top_k: int = 0
    """Top-k sampling, 0 = off. Paper: off."""

    def _sampling_values(self) -> dict[str, Any]:
        return {**super()._sampling_values(), "top_k": self.top_k}


# ----------------------------------------------------------------------------- device


@dataclass
class DeviceFields(Block):
    device: str = runtime("auto")
    """Where the stage's model runs (for eval, clr and headline: the hf engine's): cpu, cuda,
    cuda:N, mps, or auto (cuda when available; empty is auto where the stage allows it)."""


# ----------------------------------------------------------------------------- engines


@dataclass
class EngineChoice(Block):
    engine: str = "hf"
    """Sampler: hf (in-process transformers), openai (HTTP server), vllm (in-process, GPU)."""


@dataclass
class RopeFields(Block):
    rope_yarn_factor: float = 0.0
    """Extend the model's context with YaRN RoPE scaling by this factor (0: off), when the tokens
    it must hold exceed its max_position_embeddings (otherwise refused); checkpoints a stage
    saves keep it. Qwen2.5 documents factor 4 (32K -> 128K)."""
    rope_original_len: int = 0
    """YaRN's original (pretraining) length; 0: the model's max_position_embeddings."""


@dataclass
class ServerFields(Block):
    base_url: str = "http://127.0.0.1:8000/v1"
    """openai engine: the server's base URL (API key from OPENAI_API_KEY)."""


@dataclass
class OpenAIFields(ServerFields):
    endpoint: str = "chat"
    """openai engine: chat (the server applies the chat template) or completions."""
    concurrency: int = runtime(8)
    """openai engine: requests in flight."""
    timeout: float = runtime(600.0)
    """openai engine: seconds per request before a retry."""
    tokenizer: str = ""
    """openai engine: the served model's tokenizer folder (default: `model` when it is a local
    folder): adds the chat template's turn end as a stop string and counts tokens when the
    server reports none."""


@dataclass
class LocalEngineFields(EngineChoice, DeviceFields):
    dtype: str = "auto"
    """hf/vllm engine: auto (fp32 on CPU, the checkpoint's dtype on GPU), bfloat16, float32."""
    token_budget: int = 131072
    """hf engine: rows x (prompt + max_new_tokens) per batch; bounds KV-cache memory."""
    context_len: int = 0
    """hf engine: prompt + response token bound; 0 = the model's max_position_embeddings
    (after RoPE scaling). More than the model's positions is refused without rope_yarn_factor."""


@dataclass
class EngineFields(LocalEngineFields, RopeFields, OpenAIFields):
    """Every engine key of a stage that samples with any engine; `make_engine` builds it."""

    def make_engine(self, model: str, seed: int = 0) -> Sampler:
        """The sampler these fields describe, for `model` (a folder or hub id; the served model
        name for openai); `seed` seeds the vllm engine."""
        rope = {
            "rope_yarn_factor": self.rope_yarn_factor,
            "rope_original_len": self.rope_original_len,
        }
        if self.engine == "hf":
            return make_sampler(
                "hf",
                model=model,
                device=None if self.device in ("", "auto") else self.device,
                dtype=self.dtype,
                token_budget=self.token_budget,
                context_len=self.context_len,
                **rope,
            )
        if self.engine == "openai":
            tok = self.tokenizer or (model if (Path(model) / "config.json").exists() else "")
            return make_sampler(
                "openai",
                base_url=self.base_url,
                model=model,
                endpoint=self.endpoint,
                concurrency=self.concurrency,
                timeout=self.timeout,
                tokenizer=tok or None,
            )
        kw = {"max_model_len": self.context_len} if self.context_len else {}
        return make_sampler(self.engine, model=model, dtype=self.dtype, seed=seed, **kw, **rope)
