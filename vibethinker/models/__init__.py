"""Models: the embedded world's tiny model (`tiny.py`) and loading any HF causal LM.

`load_model_and_tokenizer` is the one entry point samplers and trainers use, for a local folder
(a tiny model, a checkpoint) or a hub id already in the local cache. Nothing here downloads when
`HF_HUB_OFFLINE=1`; an unreachable hub id gives an error that says what to do.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import Any

from vibethinker import ledger
from vibethinker.log import get_logger
from vibethinker.models.chat import chat_end_token
from vibethinker.models.hub import hub_load_kwargs

log = get_logger("models")


def _resolve_dtype(dtype: Any) -> Any:
    """None -> "auto" (the dtype the checkpoint was saved in); "bf16"/"bfloat16"/... -> torch."""
    import torch

    if dtype is None or dtype == "auto":
        return "auto"
    if isinstance(dtype, torch.dtype):
        return dtype
    aliases = {"bf16": "bfloat16", "fp16": "float16", "half": "float16", "fp32": "float32"}
    name = aliases.get(str(dtype), str(dtype)).removeprefix("torch.")
    value = getattr(torch, name, None)
    if not isinstance(value, torch.dtype):
        raise ValueError(f"dtype={dtype!r}: expected e.g. float32, bfloat16, float16 or auto")
    return value


class ContextLengthError(ValueError):
    """A run asks for more positions (prompt + response) than the model has."""


def max_positions(config: Any) -> int | None:
    """Positions the model was built for (after any RoPE scaling in its config)."""
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if value else None


def rope_params(config: Any) -> dict[str, Any]:
    """The config's RoPE settings (`rope_parameters` in transformers 5, `rope_scaling` before)."""
    value = getattr(config, "rope_parameters", None)
    if value is None:
        value = getattr(config, "rope_scaling", None)
    return dict(value or {})


def apply_yarn(config: Any, factor: float, original_len: int = 0) -> Any:
    """Extend the context of `config` (before the model is built) with YaRN RoPE scaling.

    Positions become `original_len * factor`; `original_len` defaults to the config's
    max_position_embeddings (the pretraining length). Qwen2.5 documents YaRN with factor 4 and
    original length 32768 for 128K. The saved checkpoint keeps the setting, so vLLM and plain
    transformers load it with the same positions."""
    if factor <= 1.0:
        raise ValueError(f"rope_yarn_factor must be > 1 to extend the context, got {factor}")
    orig = int(
        original_len
        or rope_params(config).get("original_max_position_embeddings")
        or config.max_position_embeddings
    )
    params = {
        "rope_type": "yarn",
        "factor": float(factor),
        "original_max_position_embeddings": orig,
    }
    if hasattr(config, "rope_parameters"):  # transformers >= 5
        theta = rope_params(config).get("rope_theta", getattr(config, "rope_theta", 10000.0))
        config.rope_parameters = {**params, "rope_theta": theta}
    else:
        config.rope_scaling = {**params, "type": "yarn"}
    config.max_position_embeddings = int(orig * factor)
    return config


def check_context(config: Any, needed: int, what: str) -> None:
    """Refuse a run that needs more positions than the model has, saying how to fix it."""
    limit = max_positions(config)
    if limit is None or needed <= limit:
        return
    scaled = rope_params(config).get("rope_type") not in (None, "default")
    fix = (
        "lower it, or extend the context with RoPE scaling: "
        f"rope_yarn_factor={math.ceil(needed / limit * 4) / 4:g} rope_original_len={limit}"
        if not scaled
        else "the model's RoPE scaling already gives this limit; raise rope_yarn_factor or lower it"
    )
    raise ContextLengthError(
        f"{what} needs {needed:,} positions (prompt + response) but the model has "
        f"max_position_embeddings {limit:,}; running past the trained positions gives garbage "
        f"silently, so this is refused: {fix}"
    )


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike,
    device: str = "cpu",
    dtype: Any = None,
    rope_yarn_factor: float = 0.0,
    rope_original_len: int = 0,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """Load (model, tokenizer) from a local HF folder or a hub id (the local cache when offline).

    `dtype`: None/"auto" keeps the saved dtype; a torch dtype or its name casts.
    `rope_yarn_factor` > 1 extends the context with YaRN (`apply_yarn`) before the model is
    built. Extra kwargs go to `AutoModelForCausalLM.from_pretrained` (e.g. attn_implementation).
    The tokenizer always has a pad token (the EOS when the checkpoint has none). The model is in
    eval mode.
    """
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    name = str(name_or_path)
    local = Path(name).expanduser()
    if local.is_dir():
        name = str(local)
        if not (local / "config.json").exists():
            raise FileNotFoundError(f"{local}: a folder without config.json is not a HF model")
    elif local.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(f"{name}: not a model folder (expected a HF folder or a hub id)")
    hub = {} if local.is_dir() else hub_load_kwargs(name)  # cached, downloadable, or fail now
    try:
        tokenizer = AutoTokenizer.from_pretrained(name, **hub)
        if rope_yarn_factor and rope_yarn_factor > 1.0:
            config = apply_yarn(
                AutoConfig.from_pretrained(name, **hub), rope_yarn_factor, rope_original_len
            )
            kwargs["config"] = config
        kwargs.update(hub)
        model = AutoModelForCausalLM.from_pretrained(name, dtype=_resolve_dtype(dtype), **kwargs)
    except OSError as e:
        if local.is_dir():
            raise
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("", "0")
        raise OSError(
            f"could not load hub model {name!r}"
            f"{' (HF_HUB_OFFLINE=1: only the local cache is used)' if offline else ''}. "
            f"Download it where the hub is reachable (`hf download {name} --local-dir DIR`) "
            f"and pass the folder DIR instead. Cause: {e}"
        ) from e
    check_finite_weights(model, name)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    add_turn_end_to_eos(model, tokenizer)
    model.to(device)
    model.eval()
    log.info(
        "loaded %s (%s params, %s) on %s",
        name,
        f"{sum(p.numel() for p in model.parameters()):,}",
        model.dtype,
        device,
    )
    return model, tokenizer


def check_finite_weights(model: Any, name: str) -> None:
    """Refuse a model with NaN or infinite weights (a diverged run, a damaged file): sampled or
    trained, it would only score 0 or train on NaN, with no word of why."""
    import torch

    weights = [(n, p) for n, p in model.named_parameters() if p.is_floating_point()]
    bad = [n for n, p in weights if p.device.type != "meta" and not torch.isfinite(p).all()]
    if bad:
        raise ValueError(
            f"{name}: the model has non-finite (NaN or infinite) weights in {len(bad)} "
            f"tensor(s), e.g. {bad[0]}: it comes from a run that diverged or its files are "
            "damaged; use an earlier checkpoint"
        )


def check_finite_files(folder: str | Path, name: str) -> None:
    """`check_finite_weights` for a checkpoint folder an engine loads by itself (vLLM): reads the
    safetensors files one tensor at a time (no model built). A hub id or a folder without
    safetensors files is left to the engine."""
    import torch
    from safetensors import safe_open

    files = sorted(Path(folder).glob("*.safetensors")) if Path(folder).is_dir() else []
    for f in files:
        with safe_open(str(f), framework="pt") as st:
            for key in st.keys():
                t = st.get_tensor(key)
                if t.is_floating_point() and not torch.isfinite(t).all():
                    raise ValueError(
                        f"{name}: the model has non-finite (NaN or infinite) weights, e.g. "
                        f"{key} in {f.name}: it comes from a run that diverged or its files are "
                        "damaged; use an earlier checkpoint"
                    )


def add_turn_end_to_eos(model: Any, tokenizer: Any) -> list[int]:
    """Make the chat template's turn end (e.g. `<|im_end|>`) an EOS of the model's
    generation_config, after the EOS ids it already has; returns the EOS ids.

    A base checkpoint (Qwen2.5 base: EOS `<|endoftext|>`) stops only on its pretraining EOS, but
    SFT teaches it to end each assistant turn with the template's turn end: without this, every
    tool that reads generation_config (transformers `generate`, `transformers serve`, vLLM)
    samples past the answer up to the token cap."""
    gc = getattr(model, "generation_config", None)
    if gc is None:
        return []
    eos = gc.eos_token_id
    ids = [eos] if isinstance(eos, int) else list(eos or [])
    if not ids and getattr(tokenizer, "eos_token_id", None) is not None:
        ids = [tokenizer.eos_token_id]
    end = chat_end_token(tokenizer)
    if end is not None and end not in ids:
        ids.append(end)
    if ids:
        gc.eos_token_id = ids[0] if len(ids) == 1 else ids
    return ids


def save_model_and_tokenizer(model: Any, tokenizer: Any, out_dir: str | os.PathLike) -> str:
    """`save_pretrained` both into `out_dir` as a folder other tools load without this package.

    The generation_config's EOS carries the chat template's turn end (`add_turn_end_to_eos`).
    transformers 5 names its tokenizer class "TokenizersBackend", which transformers 4 (and so
    vLLM) does not know; "PreTrainedTokenizerFast" loads the same tokenizer.json in both.
    """
    out = Path(out_dir)
    add_turn_end_to_eos(model, tokenizer)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    cfg_path = out / "tokenizer_config.json"
    if cfg_path.exists():
        cfg = json.loads(cfg_path.read_text())
        if cfg.get("tokenizer_class") == "TokenizersBackend":
            cfg["tokenizer_class"] = "PreTrainedTokenizerFast"
        for key in ("is_local", "local_files_only"):  # load-time flags leaked into the file
            cfg.pop(key, None)
        cfg_path.write_text(json.dumps(cfg, indent=2, ensure_ascii=False) + "\n")
    ledger.checkpoint(out)
    return str(out)
