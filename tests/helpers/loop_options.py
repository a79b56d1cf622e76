"""The training loops' configs as the loop tests (and the run-folder, log and vLLM tests) build
them: the stage configs themselves (RLConfig, SFTConfig), with the few values that keep a loop
small on the tiny model set here, explicitly, instead of in a second config class."""

from __future__ import annotations

from typing import Any

from vibethinker.train.rl_config import RLConfig
from vibethinker.train.sft_config import SFTConfig

# The values the loops had standalone before they read the stage configs: a tiny-world learning
# rate and token cap (RL), one short epoch of small micro-batches (SFT). A test's own keys win.
RL_LOOP = {"lr": 1e-4, "final_lr": 1e-5, "max_new_tokens": 256}
SFT_LOOP = {"epochs": 1, "micro_batch": 8, "max_len": 2048}


def rl_options(**kw: Any) -> RLConfig:
    """An RLConfig with RL_LOOP under the test's own keys."""
    return RLConfig(**{**RL_LOOP, **kw})


def sft_options(**kw: Any) -> SFTConfig:
    """An SFTConfig with SFT_LOOP under the test's own keys."""
    return SFTConfig(**{**SFT_LOOP, **kw})
