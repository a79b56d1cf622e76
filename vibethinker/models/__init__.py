"""Models: the embedded world's tiny model (`tiny.py`) and loading any HF causal LM.

`load_model_and_tokenizer` is the one entry point samplers and trainers use, for a local folder
(a tiny model, a checkpoint) or a hub id already in the local cache. Nothing here downloads when
`HF_HUB_OFFLINE=1`; an unreachable hub id gives an error that says what to do.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from vibethinker.log import get_logger

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


def load_model_and_tokenizer(
    name_or_path: str | os.PathLike, device: str = "cpu", dtype: Any = None, **kwargs: Any
) -> tuple[Any, Any]:
    """Load (model, tokenizer) from a local HF folder or a hub id (the local cache when offline).

    `dtype`: None/"auto" keeps the saved dtype; a torch dtype or its name casts. Extra kwargs go
    to `AutoModelForCausalLM.from_pretrained` (e.g. attn_implementation). The tokenizer always
    has a pad token (the EOS when the checkpoint has none). The model is in eval mode.
    """
    from transformers import AutoModelForCausalLM, AutoTokenizer

    name = str(name_or_path)
    local = Path(name).expanduser()
    if local.is_dir():
        name = str(local)
        if not (local / "config.json").exists():
            raise FileNotFoundError(f"{local}: a folder without config.json is not a HF model")
    elif local.exists() or name.startswith((".", "/", "~")) or name.count("/") > 1:
        raise FileNotFoundError(f"{name}: not a model folder (expected a HF folder or a hub id)")
    try:
        tokenizer = AutoTokenizer.from_pretrained(name)
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
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
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


def save_model_and_tokenizer(model: Any, tokenizer: Any, out_dir: str | os.PathLike) -> str:
    """`save_pretrained` both into `out_dir` as a folder other tools load without this package.

    transformers 5 names its tokenizer class "TokenizersBackend", which transformers 4 (and so
    vLLM) does not know; "PreTrainedTokenizerFast" loads the same tokenizer.json in both.
    """
    out = Path(out_dir)
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
    return str(out)
