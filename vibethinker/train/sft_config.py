"""The `sft` stage's configuration, owned by the training loop (`train/sft.py`) so that the loop
never imports a stage; `stages/sft.py` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass, field

from vibethinker.config import PROMPT_STYLE_NAMES, Checks, runtime
from vibethinker.engines.settings import DeviceFields, RopeFields

# The device and YaRN keys are declared once, in engines/settings.py; SFT's note is here.
SFT_ROPE = RopeFields.with_defaults(
    notes={"rope_yarn_factor": "sft: needed when max_len exceeds the model's positions."}
)


@dataclass
class SFTConfig(SFT_ROPE, DeviceFields):
    model: str = ""
    """Starting model: a HF folder or hub id (stage 2 starts from stage 1's `final`)."""
    data: str = ""
    """Training problems with `traces`: a JSONL file or a data folder (its train.jsonl); several
    as a comma-separated list (mixed by `data_probs`)."""
    data_probs: list[float] = field(default_factory=list)
    """Sampling weights of the `data` list, OpenRLHF-style (empty: concatenate): dataset i gives
    round(w_i / sum(w) * total) records, oversampled when smaller (data/io.py load_mixture)."""
    out: str = "runs/sft"
    """Output folder (checkpoints/, final/, metrics.jsonl, loss.png, summary.md)."""
    epochs: int = 5
    """Passes over the data. Paper: 5 (stage 1), 2 (stage 2)."""
    max_steps: int | None = None
    """Optional cap on optimizer steps (the schedule then spans the capped run)."""
    global_batch: int = 128
    """Samples (traces) per optimizer step, packed or not. Paper: 128."""
    micro_batch: int = 4
    """Rows per forward pass (packed rows of max_len tokens, or single samples); gradients
    accumulate to the global batch. Memory knob only; not in the paper."""
    lr: float = 5e-5
    """Peak learning rate. Paper: 5e-5."""
    final_lr: float = 8e-8
    """Learning rate at the last step, reached by cosine decay. Paper: 8e-8."""
    warmup_frac: float = 0.05
    """Fraction of steps of linear warm-up. Paper: 5%."""
    max_len: int = 4096
    """Tokens per packed row and per sample (prompt + trace): the SFT context. Must fit the
    model's positions (after RoPE scaling). Paper: unpublished; the RL context is 64K."""
    overlong: str = "drop"
    """Samples longer than max_len: "drop" (counted in the summary; a cut trace would train no
    final answer and no end token) or "cut" (keep the first max_len tokens). Paper: silent."""
    report_to: str = "none"
    """Experiment tracking of the per-step metrics: none, tensorboard, wandb, trackio, or a
    comma list (log.py). Offline when the service is unreachable."""
    pack: bool = True
    """Pack several samples per row (attention and positions stay per sample). Paper: packing."""
    save_every: int = 0
    """Save a checkpoint every k steps (0: only the last). Paper: k unpublished."""
    keep_last: int = runtime(0)
    """Keep the optimizer state of only the last N checkpoints (0: all keep it). Older ones keep
    their weights, which probe_merge probes (the paper probes every checkpoint); the optimizer
    state is most of a 3B checkpoint (fp32 moments: tens of GB). Not in the paper."""
    max_grad_norm: float = 1.0
    """Gradient clipping (global L2 norm). Paper: unpublished; 1.0 is customary."""
    weight_decay: float = 0.0
    """AdamW weight decay. Paper: unpublished."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward to save memory (long sequences on GPU)."""
    lora_r: int = 0
    """LoRA rank through peft (0: full fine-tuning, the paper's setting). Only the adapters then
    train; final/ and checkpoints are saved merged (plain HF folders), the adapter in adapter/."""
    lora_alpha: float = 32.0
    """LoRA alpha (the update is scaled by alpha / r). Our choice: 32."""
    lora_targets: str = "all-linear"
    """Modules given adapters: "all-linear" or a comma list (q_proj,k_proj,v_proj,o_proj)."""
    domains: list[str] = field(default_factory=list)
    """Train only on these domains (empty: all). With one domain, it is also the domain of rows
    that have none (TRL-style data: data/shapes.py); otherwise such rows are `chat` (general
    dialogue, SFT-only: a `{"messages": [...]}` row trains as it is)."""
    answer_key: str = ""
    """The data's gold-answer column when it is not `answer` (e.g. `gold`); only the stage-2
    filter reads answers (data/shapes.py lists the shapes read)."""
    min_trace_tokens: int = 0
    """Stage-2 filter: drop traces shorter than this many tokens (0: off). Paper: 5K."""
    filter_ref_model: str = ""
    """Stage-2 filter: reference model sampled on each prompt (empty: off). Paper:
    VibeThinker-1.5B; the tiny recipe uses stage 1's model."""
    filter_rollouts: int = 8
    """Stage-2 filter: rollouts per prompt from the reference model. Paper: 8."""
    filter_min_error: float = 0.75
    """Stage-2 filter: keep prompts whose reference error rate is at least this (drop those
    below). Paper: 0.75."""
    filter_max_new_tokens: int = 1024
    """Stage-2 filter: token cap of each reference rollout."""
    filter_engine: str = "hf"
    """Stage-2 filter: sampler engine for the reference model (hf, vllm, openai)."""
    filter_truncated_reward: str = "zero"
    """Stage-2 filter: how a reference rollout cut at filter_max_new_tokens is judged, as the
    rl stage's `truncated_reward`: "zero" (an error) or "verify" (score the cut text). How many
    keep/drop decisions depend on this is reported (`truncation_decisions`)."""
    prompt_style: str = "paper"
    """User turn of each sample: "paper" (the evaluation prompt of the problem's domain, so the
    model is trained on what it is asked at test time) or "raw" (the stored prompt)."""
    eval_data: str = ""
    """Optional: problems to report sampled Pass@1 on after training (e.g. eval.jsonl)."""
    eval_n: int = 4
    """Samples per eval problem for that report."""
    eval_limit: int = 200
    """At most this many eval problems (the first ones) for that report."""
    eval_max_new_tokens: int = 256
    """Token cap of each eval sample."""
    seed: int = 0
    """Seed of data order and sampling."""
    parallel: str = runtime("auto")
    """Under torchrun (N processes; docs/SCALING.md): "fsdp" (FSDP2: weights, gradients and
    optimizer state sharded), "ddp" (full replicas) or "auto" (FSDP2; DDP for LoRA). The global
    batch, LR schedule and loss normalisation do not depend on N. Ignored in one process."""

    def __post_init__(self) -> None:
        check_sft(self)


def check_sft(cfg: SFTConfig) -> None:
    """Every key's range and the cross-key rules; one error naming each bad key (config.Checks)."""
    c = Checks(cfg)
    c.at_least(
        1,
        "epochs",
        "max_steps",
        "global_batch",
        "micro_batch",
        "max_len",
        "filter_rollouts",
        "filter_max_new_tokens",
        "eval_n",
        "eval_max_new_tokens",
    )
    c.positive("lr")
    c.at_least(
        0,
        "final_lr",
        "rope_yarn_factor",
        "rope_original_len",
        "save_every",
        "max_grad_norm",
        "weight_decay",
        "lora_r",
        "min_trace_tokens",
        "eval_limit",
    )
    c.fraction("warmup_frac", upper_open=True)
    c.fraction("filter_min_error")
    if cfg.lora_r:
        c.positive("lora_alpha")
    c.domains("domains", train_only=True)
    c.one_of("overlong", ("drop", "cut"))
    c.one_of("filter_engine", ("hf", "vllm", "openai"))
    c.one_of("filter_truncated_reward", ("zero", "verify"))
    c.one_of("prompt_style", PROMPT_STYLE_NAMES)
    c.one_of("parallel", ("auto", "fsdp", "ddp"))
    c.device()
    c.report_to()
    c.data_probs()
    c.done()
