"""In-process vLLM sampler (optional extra `pip install vibethinker[vllm]`, GPU).

vLLM is imported only when this engine is built: it pulls its own CUDA torch and pins
transformers, so it is never a core dependency. Prompts go through the tokenizer's chat template
here (as in the hf engine) and are passed to vLLM as token ids, so both engines see the same
tokens. Logprobs are those vLLM reports for the sampled token (`logprobs=0`); by default vLLM
reports them from the raw model (before temperature/top-p), like the hf engine; recent versions
can be asked for processed ones with `logprobs_mode`, which we leave at its default.

Stopping: vLLM stops on the checkpoint's EOS; the chat template's turn end (`<|im_end|>`, what
an SFT'd base model emits) is added as `stop_token_ids`. `max_new_tokens=0` lets vLLM fill the
context (`max_model_len`); `rope_yarn_factor` extends it with YaRN (through `hf_overrides`).
"""

from __future__ import annotations

from typing import Any

from vibethinker.engines import (
    Prompt,
    SamplerError,
    SamplingParams,
    chat_end_token,
    encode_prompt,
)
from vibethinker.types import Completion


def _import_vllm() -> Any:
    try:
        import vllm
    except ImportError as e:
        raise SamplerError(
            "engine 'vllm' needs the vllm package: pip install 'vibethinker[vllm]' "
            "(GPU only; or serve the model with vLLM and use engine=openai)"
        ) from e
    return vllm


class VLLMSampler:
    def __init__(
        self,
        model: str,
        dtype: str = "auto",
        tensor_parallel_size: int = 1,
        gpu_memory_utilization: float = 0.85,
        max_model_len: int | None = None,
        seed: int = 0,
        chat_template: bool = True,
        rope_yarn_factor: float = 0.0,
        rope_original_len: int = 0,
        **llm_kw: Any,
    ):
        vllm = _import_vllm()
        self._vllm = vllm
        kw = dict(
            model=str(model),
            dtype=dtype,
            tensor_parallel_size=tensor_parallel_size,
            gpu_memory_utilization=gpu_memory_utilization,
            seed=seed,
            **llm_kw,
        )
        if max_model_len:
            kw["max_model_len"] = max_model_len
        if rope_yarn_factor and rope_yarn_factor > 1.0:
            from transformers import AutoConfig

            from vibethinker.models import apply_yarn, rope_params

            cfg = apply_yarn(AutoConfig.from_pretrained(str(model)), rope_yarn_factor,
                             rope_original_len)  # fmt: skip
            kw["hf_overrides"] = {
                "rope_scaling": rope_params(cfg),
                "max_position_embeddings": cfg.max_position_embeddings,
            }
        self.llm = vllm.LLM(**kw)
        self.tokenizer = self.llm.get_tokenizer()
        self.use_chat_template = chat_template and getattr(self.tokenizer, "chat_template", None)
        end = chat_end_token(self.tokenizer) if self.use_chat_template else None
        self.stop_ids = [end] if end is not None else []

    def encode(self, prompt: Prompt) -> list[int]:
        return encode_prompt(self.tokenizer, prompt, bool(self.use_chat_template))

    def generate(
        self, prompts: list[Prompt], n: int, params: SamplingParams | None = None
    ) -> list[list[Completion]]:
        params = params or SamplingParams()
        sp = self._vllm.SamplingParams(
            n=n,
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k if params.top_k > 0 else -1,  # vLLM: -1 = off
            max_tokens=params.max_new_tokens or None,  # 0/None: up to max_model_len
            stop=list(params.stop) or None,
            stop_token_ids=list(self.stop_ids) or None,
            seed=params.seed,
            logprobs=0,  # the sampled token's logprob only
        )
        inputs = [{"prompt_token_ids": self.encode(p)} for p in prompts]
        results = self.llm.generate(inputs, sp, use_tqdm=False)
        return [[_completion(o) for o in r.outputs] for r in results]


def _completion(o: Any) -> Completion:
    ids = list(o.token_ids)
    logprobs = None
    if o.logprobs:
        logprobs = [float(step[t].logprob) for step, t in zip(o.logprobs, ids)]
    finish = "length" if o.finish_reason == "length" else "stop"
    return Completion(text=o.text, token_ids=ids, logprobs=logprobs, finish_reason=finish)
