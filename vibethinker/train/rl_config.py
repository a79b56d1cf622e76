"""The `rl` stage's configuration, owned by the training loop (`train/rl.py`) so that the loop
never imports a stage; `stages/rl.py` re-exports it."""

from __future__ import annotations

from dataclasses import dataclass, field

from vibethinker.config import PROMPT_STYLE_NAMES, Checks, runtime
from vibethinker.engines.settings import DeviceFields, EngineChoice, NucleusFields, RopeFields

# The rollouts' sampling keys (temperature, top_p, max_new_tokens) and the engine, device and
# YaRN keys are declared once, in engines/settings.py; RL's own defaults and notes are here.
RL_SAMPLING = NucleusFields.with_defaults(
    max_new_tokens=65536,
    top_p=1.0,
    notes={
        "temperature": "RL: the rollouts' temperature (paper: unpublished for training).",
        "top_p": "RL: we choose 1.0 (untruncated, so rollouts follow the policy the loss "
        "differentiates).",
        "max_new_tokens": "RL: the response cap (the RL context); a cut response gets "
        "`truncated_reward`. Paper: 64K from the first step (not 16K -> 32K).",
    },
)


RL_ENGINE = EngineChoice.with_defaults(
    notes={
        "engine": "rl: the rollout engine, hf (in-process transformers on the trainer's "
        "weights) or vllm (engines/vllm.py; the trainer's weights are pushed to it after every "
        "optimizer step, its logprobs feed TIS and `engine_kl`). Paper: silent (vLLM-class "
        "engines are the norm)."
    }
)
RL_ROPE = RopeFields.with_defaults(
    notes={
        "rope_yarn_factor": "rl: needed when the longest prompt + max_new_tokens exceeds the "
        "model's positions."
    }
)

# The names in vibethinker.algo.advantages.ADVANTAGE_ESTIMATORS (kept here so that configs need
# not import torch; tests/algo/test_advantages.py checks that the two agree).
ADVANTAGE_NAMES = ("mgpo", "grpo", "mgpo_norm")
# likewise algo/advantages.GROUP_STD and algo/losses.LOSS_AGGREGATIONS (tests check they agree)
STD_NAMES = ("population", "sample")
LOSS_AGG_NAMES = ("seq_mean", "token_mean", "seq_mean_token_sum", "seq_mean_token_sum_norm")
POLICY_LOSS_NAMES = ("ppo", "gspo")
CORRECTION_NAMES = ("token_tis", "seq_tis", "geo_tis", "token_mask", "seq_mask", "geo_mask")


@dataclass
class RLConfig(RL_SAMPLING, RL_ENGINE, RL_ROPE, DeviceFields):
    model: str = ""
    """Starting policy: a HF folder or hub id (the SFT model, or the previous RL stage's final)."""
    data: str = ""
    """Training prompts: a Problem JSONL file or a data folder (its train.jsonl); several as a
    comma-separated list (mixed by `data_probs`)."""
    data_probs: list[float] = field(default_factory=list)
    """Sampling weights of the `data` list, OpenRLHF-style (empty: concatenate): dataset i gives
    round(w_i / sum(w) * total) prompts, oversampled when smaller (data/io.py load_mixture)."""
    domain: str = "math"
    """Which domain's prompts and verifier: math, code, stem or instruct. Paper: math, then
    code, then stem, as separate stages (not a mixture). Several, comma-separated (`math,stem`):
    mixed-domain RL (not in the paper; the ablation baseline), one pool of every listed domain's
    prompts (each verified by its own domain's verifier), each step's prompts drawn from the
    pool (max_prompts split equally over the domains), so each step's domain mix follows the
    filtered prompt counts; not with instruct."""
    out: str = "runs/rl"
    """Output folder (final/, checkpoints/, metrics.jsonl, evals.jsonl, curves.png, summary.md)."""
    steps: int = 100
    """Optimizer steps (one rollout batch each). Paper: unpublished."""
    prompts_per_step: int = 16
    """Prompts per step (batch size). Paper: unpublished; 16 in our CPU calibration."""
    group_size: int = 8
    """G, responses sampled per prompt. Paper: unpublished; we choose 8."""
    lr: float = 1e-6
    """Peak AdamW learning rate. Paper: unpublished; 1e-6 is common for 1-7B RL; the tiny world
    uses 1e-4 (our calibration: slightly high late, hence the decay)."""
    final_lr: float = 1e-7
    """LR at the last step (cosine decay from `lr`). Paper: unpublished; a fixed value, not
    derived from `lr`: the default 1e-7 is the default lr / 10 (set both when changing lr)."""
    warmup_frac: float = 0.0
    """Fraction of steps of linear warm-up. Paper: unpublished; we choose 0."""
    clip_eps: float = 0.2
    """PPO clip epsilon e (rho clipped to [1-e, 1+e_high]). Paper: unpublished; 0.2 (PPO)."""
    clip_eps_high: float = 0.0
    """Upper clip bound 1+e_high (0: same as clip_eps). Paper: unpublished."""
    kl_coef: float = 0.0
    """Weight of the k3 KL penalty to the starting model. Paper: unpublished; off (0)."""
    log_ref_kl: bool = False
    """Load the starting model as a frozen reference to LOG KL(pi || ref) every step even when
    kl_coef is 0 (one extra no-grad forward per step)."""
    advantage: str = "mgpo"
    """Advantage estimator: "mgpo" (exp(-lambda D_ME) group weight), "grpo", or "mgpo_norm" (MGPO
    with its weights rescaled to mean 1 over the groups that carry gradient: GRPO's step size;
    an ablation arm, not the paper)."""
    lambda_mgpo: float = 1.0
    """MGPO lambda (0 is GRPO). Paper: unpublished; we choose 1.0 (weight 0.73 at p = 1/8)."""
    std_scale: bool = True
    """Divide centred rewards by the group std (+eps). Paper: yes (A_i formula)."""
    adv_eps: float = 1e-6
    """eps in (r - mean) / (std + eps). Paper: unpublished."""
    std: str = "population"
    """Group std of the advantages: "population" (divide by G) or "sample" (by G - 1; TRL's
    GRPOTrainer and verl use it: their advantages are sqrt((G-1)/G) times ours, x0.935 at G = 8,
    which acts like an LR change when comparing runs). Paper: writes std(r), silent on which;
    our default population (every figure so far was made with it). MGPO weights unchanged."""
    loss_agg: str = "seq_mean"
    """How per-token losses become the batch loss: "seq_mean" (the paper's 1/G sum_i 1/|y_i|
    sum_t, averaged over prompts; TRL "grpo", verl seq-mean-token-mean), "token_mean" (one mean
    over all the batch's tokens: TRL's default "dapo", verl token-mean; no per-sequence length
    bias), "seq_mean_token_sum" (1/N sum_i sum_t; verl), "seq_mean_token_sum_norm" (Dr. GRPO:
    sum over tokens / (N * max_new_tokens), a constant normaliser; TRL "dr_grpo"). Paper:
    seq_mean (the default)."""
    policy_loss: str = "ppo"
    """The ratio the clip acts on: "ppo" (per-token rho, clipped to [1-clip_eps, 1+clip_eps_high];
    the paper) or "gspo" (GSPO: one sequence ratio exp(mean_t log rho), clipped to
    [1-gspo_clip_low, 1+gspo_clip_high]; TRL importance_sampling_level="sequence", verl
    loss_mode gspo; pair with loss_agg seq_mean as GSPO does). Not in the paper."""
    gspo_clip_low: float = 3e-4
    """policy_loss=gspo: lower clip range of the sequence ratio. GSPO paper / verl: 3e-4."""
    gspo_clip_high: float = 4e-4
    """policy_loss=gspo: upper clip range of the sequence ratio. GSPO paper / verl: 4e-4."""
    clip_ratio_c: float = 0.0
    """Dual-clip constant c (> 1; 0: off): for A < 0 the objective is bounded below by c * A, so
    a token with a huge ratio and a negative advantage cannot dominate the loss (Ye et al. 2020;
    verl's clip_ratio_c, 3.0 there). Not in the paper; off by default."""
    overlong_buffer: int = 0
    """DAPO's soft overlong punishment (0: off): responses longer than max_new_tokens - this
    many tokens get a reward term falling linearly to -overlong_penalty at max_new_tokens
    (verl overlong_buffer.len; TRL get_soft_overlong_punishment's soft_punish_cache). The
    verdict (MGPO's p) is unchanged. Not in the paper."""
    overlong_penalty: float = 1.0
    """overlong_buffer > 0: the penalty at the cap (verl overlong_buffer.penalty_factor; DAPO 1)."""
    mask_truncated: bool = False
    """Drop responses cut at max_new_tokens from the loss (their tokens carry no gradient and do
    not count in token_mean's denominator; they still count in the group's advantages and in
    1/N): TRL's mask_truncated_completions, DAPO's overlong filtering. Not in the paper (which
    gives a cut response `truncated_reward`); off by default."""
    dynamic_sampling: int = 0
    """Per-step dynamic sampling (DAPO; verl filter_groups; open-instruct active sampling), 0:
    off (the paper: only the stage-start filter). > 0: a step whose groups do not all carry
    signal (rewards not all equal) draws more prompts, prompts_per_step at a time from a
    separate seeded stream, keeps only groups with signal and stops at prompts_per_step of
    them or after this many extra prompts (x group_size rollouts; counted in the step's
    dyn_extra_prompts). The step then trains on the groups with signal it holds (up to
    prompts_per_step). frac_zero_signal (first draw) is logged either way."""
    long2short: bool = False
    """Long2Short reward shift among correct responses (docs/PAPER.md stage 3)."""
    l2s_lambda: float = 0.2
    """Long2Short lambda. Paper: 0.2."""
    l2s_all_correct_std: bool = False
    """Long2Short with std_scale: divide an ALL-correct group's shifted rewards by their own std,
    as the paper's A_i formula does when applied literally (true). Then every such group's
    advantages have unit size whatever l2s_lambda is (lambda 0.02, 0.2 and 1.0 train alike).
    False (default): such groups are centred but not divided, so their advantages are the
    shift itself, within +-l2s_lambda (times the MGPO weight); mixed groups are divided as
    usual. Paper: silent on this case; our default, measured in docs/EVIDENCE.md."""
    truncated_reward: str = "zero"
    """Reward of responses cut at max_new_tokens: "zero" (incorrect) or "verify" (score the cut
    text), in training AND in the stage-start filter. Paper: unpublished; we choose zero (a cut
    response gave no final answer)."""
    report_to: str = "none"
    """Experiment tracking of the per-step metrics: none, tensorboard, wandb, trackio, or a
    comma list (log.py)."""
    tis_cap: float = 2.0
    """Truncated importance sampling cap C on pi_old / pi_engine per token (0: off). Paper: it
    only "refers to off-policy / rollout-mismatch stabilisation" and names no method; TIS and
    C = 2 are our choices."""
    is_correction: str = "token_tis"
    """The engine-vs-trainer correction, on when tis_cap > 0 and the engine returns logprobs
    (algo/correction.py): "token_tis" (min(pi_old / pi_engine, C) per token; TRL token_truncate),
    "seq_tis" (one truncated weight per sequence, the product of its ratios; TRL
    sequence_truncate), "geo_tis" (their geometric mean, truncated), or the rejection forms
    "token_mask", "seq_mask", "geo_mask" (the ratio kept inside [is_low, tis_cap], 0 outside;
    TRL token_mask / sequence_mask, whose default is sequence_mask with cap 3). Paper: only
    "refers to off-policy / rollout-mismatch stabilisation", no method; our default token_tis."""
    is_low: float = 0.0
    """Lower bound of the correction's ratio (0: none): truncated up to it (*_tis) or masked below
    it (*_mask). TRL vllm_importance_sampling_clip_min; verl rollout_rs_threshold_lower."""
    mismatch_limit: float = 1.1
    """Engine-vs-trainer mismatch gate on a step's token_mult_prob_error (mean over tokens of
    exp|log pi_engine - log pi_trainer|; 1.0 is none), 0: off. Default 1.1, NeMo-RL's CI gate
    (median over a run < 1.1); the hf engine in fp32 sits at 1.0. Logged every step with the k3
    KL (engine_kl; NeMo-RL gates its mean < 0.01-0.02), mean |delta logp|, the largest ratio and
    the share of tokens past the correction's bounds (tis_capped_frac)."""
    on_mismatch: str = "warn"
    """What passing mismatch_limit does: "warn" (a log warning and a count in the stage's
    warnings) or "stop" (the stage stops with the figures: the run is not on-policy any more)."""
    filter_rollouts: int = 8
    """Stage-start filter: rollouts per prompt with the starting model; prompts with accuracy 0
    or 1 are dropped (0: no filter), except under `long2short`, which keeps p = 1 prompts (their
    all-correct groups carry the pure length signal; the paper's shift acts among correct
    responses) and drops only p = 0. Paper: the filter yes, n unpublished; we choose 8."""
    max_prompts: int = 0
    """Use at most this many training prompts of the domain (a seeded sample; 0: all)."""
    on_empty_filter: str = "error"
    """When the stage-start filter keeps no prompt (the start model never or always solves every
    one): "error" stops the run; "skip" passes the start model through unchanged as final/ and
    warns in the log, summary.md and warnings.json (for demos and sweeps where one domain may be
    out of reach). Not in the paper; error by default so nothing is silently skipped."""
    eval_data: str = ""
    """Held-out problems (JSONL or data folder: its eval.jsonl); empty: the `data` folder's
    eval.jsonl when there is one."""
    eval_every: int = 0
    """Evaluate held-out avg@n every m steps (and at start and end; 0: never)."""
    eval_n: int = 4
    """Samples per held-out problem (avg@n). Paper protocol: 64 (math)."""
    eval_limit: int = 100
    """At most this many held-out problems of the domain (the first ones)."""
    save_every: int = 0
    """Checkpoint every k steps (0: only at the end). Resume restarts from the last one."""
    keep_last: int = runtime(0)
    """Keep only the last N checkpoints under checkpoints/ (older ones are deleted after each
    save; final/ is never touched); 0 keeps all. A 3B checkpoint with optimizer state is tens
    of GB. Not in the paper."""
    max_seconds: float = 0.0
    """Wall-clock cap on the training loop (0: none); the stage then ends early, checkpointed."""
    micro_batch: int = 64
    """Sequences per forward/backward (gradients accumulate over the batch), right-padded to the
    batch's longest row. Memory knob; unused when `max_tokens_per_micro` > 0."""
    max_tokens_per_micro: int = 0
    """Padding-free update: > 0 packs the rows (prompt + response) end to end into micro-batches
    of at most this many tokens (longest first, first fit; a longer row goes alone), each one
    packed row with per-sample positions, so a micro-batch's memory and time follow its tokens
    (verl's dynamic batch size / ppo_max_token_len_per_gpu). Also used by the reference and
    pi_old logprob forwards. 0: `micro_batch` padded rows (the earlier path). Same loss and
    gradients either way (to rounding). Paper: silent; a memory/speed knob, our default 0."""
    mini_batches: int = 1
    """Optimizer steps per rollout batch. 1 = strictly on-policy (the paper's setting)."""
    max_grad_norm: float = 1.0
    """Gradient clipping (global L2 norm). Paper: unpublished."""
    gradient_checkpointing: bool = False
    """Recompute activations in backward to save memory (long responses on GPU)."""
    lora_r: int = 0
    """LoRA rank through peft (0: full fine-tuning, the paper's setting). Only the adapters then
    train; final/ and checkpoints are saved merged (plain HF folders), the adapter in adapter/."""
    lora_alpha: float = 32.0
    """LoRA alpha (the update is scaled by alpha / r). Our choice: 32."""
    lora_targets: str = "all-linear"
    """Modules given adapters: "all-linear" or a comma list (q_proj,k_proj,v_proj,o_proj)."""
    weight_decay: float = 0.0
    """AdamW weight decay. Paper: unpublished."""
    prompt_style: str = "paper"
    """User turn: "paper" (the evaluation prompt of the domain) or "raw"."""
    verify_workers: int = runtime(2)
    """Verifier worker processes/threads."""
    math_judge: str = ""
    """LLM judge as a second opinion for math rewards, `MODEL@BASE_URL` (OpenAI-compatible; key
    from OPENAI_API_KEY): asked only where the rules cannot decide or say wrong; cached in `out`.
    Paper: math-verify plus an LLM judge (for evaluation; silent for RL). Empty = rules only."""
    rule_reward: str = "partial"
    """Instruct prompts with rules (train/rewards.py): "strict" (1 when every constraint holds,
    else 0) or "partial" (fraction held). Paper: silent. Default partial (the verifier's value);
    the recipes use strict (IFEval's headline metric; reward and MGPO verdict then agree)."""
    rubric_model: str = ""
    """Rubric reward for open instruct prompts: `hf:PATH` (a local sequence-classification reward
    model, e.g. the reward_model stage's final/) or `openai:MODEL@BASE_URL` (an LLM judge, key
    from OPENAI_API_KEY). Empty: open prompts score 0 and the filter drops them."""
    rubric_prompt: str = ""
    """The LLM judge's rubric prompt file (empty: vibethinker/prompts/rubric_judge.txt)."""
    rubric_weight: float = 0.0
    """Weight w of the rubric on prompts WITH rules: (1 - w) * rule + w * rubric. Paper: silent
    (rules for explicit constraints); our default 0."""
    rubric_threshold: float = 0.5
    """An open prompt's response counts as correct for MGPO's p(q) when its rubric value (in
    [0, 1]) is >= this (rule prompts: every constraint holds). Paper: silent; our choice."""
    rule_completion: bool = False
    """Rule prompts also pass a task-completion check (docs/PAPER.md stage 5: the report's rule
    validators check format, order, item count, keywords *and completion*): the rubric back-end
    (`rubric_model`) judges whether the answer carries out the task, formatting aside (an LLM
    judge with `completion_prompt`; a reward model's value); below `completion_threshold` the
    rule reward is 0 and the response counts as wrong for MGPO's p. Paper: names completion
    among the rules, not how it is checked. Off by default (rules alone); the 3B recipe sets it."""
    completion_prompt: str = ""
    """The completion judge's prompt file (empty: vibethinker/prompts/completion_judge.txt; a
    0-10 "score" of whether the answer does the task, formatting ignored)."""
    completion_threshold: float = 0.5
    """A rule prompt's answer is complete when the completion value (in [0, 1]) is >= this; a
    failed judge call scores `rubric_fail_value`. Paper: silent; our choice."""
    rubric_fail_value: float = 0.0
    """Reward of a response whose rubric call failed (endpoint down/slow past its retries,
    unparseable reply); counted per step as rubric_fail. Our choice: 0 (as an unanswered one)."""
    rubric_batch: int = 16
    """Responses per reward-model forward (hf back-end)."""
    judge_timeout_s: float = 60.0
    """Per-request timeout of the LLM judge (openai back-end), seconds."""
    judge_retries: int = 4
    """Retries of a failed judge request (exponential backoff) before it counts as failed."""
    seed: int = 0
    """Seed of prompt order, rollouts and the filter."""
    vllm_mode: str = runtime("colocate")
    """engine=vllm: "colocate" (an in-process vLLM in every trainer process) or "server" (a
    running `vllm serve` at vllm_url, started as docs/SCALING.md says)."""
    vllm_url: str = runtime("")
    """engine=vllm, vllm_mode=server: the server's OpenAI address, e.g. http://host:8000/v1."""
    vllm_sync_dir: str = runtime("")
    """vllm_mode=server: a folder the trainer and the server both see, where rank 0 writes the
    weights after each step (empty: out/engine_weights)."""
    vllm_sync: str = runtime("file")
    """vllm_mode=server: how the weights reach the server after each step: "file" (rank 0 writes
    them to vllm_sync_dir, the server reads them) or "group" (rank 0 streams them tensor by
    tensor over a gloo process group with the server's workers: no file, no shared
    filesystem)."""
    vllm_sync_host: str = runtime("127.0.0.1")
    """vllm_sync=group: the trainer's address as the server sees it."""
    vllm_sync_port: int = runtime(0)
    """vllm_sync=group: the trainer's port for the group's store (0: a free port)."""
    vllm_gpu_memory_utilization: float = runtime(0.3)
    """vllm_mode=colocate on CUDA: the fraction of GPU memory vLLM may take (the trainer keeps
    the rest)."""
    vllm_dtype: str = "auto"
    """engine=vllm, colocate: the sampler's dtype: auto (bfloat16 on CUDA, float32 on CPU), bfloat16
    or float32. The trainer keeps its own dtype, so bfloat16 here is the training-inference
    mismatch of a real run (a bf16 sampler, an fp32 trainer); `engine_kl` measures it every step."""
    vllm_sleep: bool = runtime(True)
    """vllm_mode=colocate on CUDA: put vLLM to sleep between rollouts (weights to CPU, KV cache
    freed) so that the update gets the memory; vLLM's sleep mode is CUDA-only."""
    parallel: str = runtime("auto")
    """Under torchrun (N processes; docs/SCALING.md): "fsdp" (FSDP2: weights, gradients and
    optimizer state sharded), "ddp" (full replicas) or "auto" (FSDP2; DDP for LoRA). The global
    batch, LR schedule and loss normalisation do not depend on N. Ignored in one process."""

    def __post_init__(self) -> None:
        check_rl(self)


def check_rl(cfg: RLConfig) -> None:
    """Every key's range and cross-key rule; one error naming each bad key, in this call order."""
    c = Checks(cfg)
    _check_sizes(c, cfg)
    _check_ranges(c, cfg)
    _check_choices(c, cfg)
    c.done()


def _check_sizes(c: Checks, cfg: RLConfig) -> None:
    """The domain list, then the counts: steps, batch sizes, the group and the filter's rollouts."""
    c.domains("domain")
    if "," in cfg.domain and "instruct" in cfg.domain.split(","):
        c.bad("domain", "instruct cannot be mixed with other domains (its rewards differ)")
    c.at_least(
        1,
        "steps",
        "prompts_per_step",
        "max_new_tokens",
        "eval_n",
        "micro_batch",
        "mini_batches",
        "rubric_batch",
    )
    if cfg.group_size < 2:
        c.bad(
            "group_size",
            "must be >= 2 (with one response per prompt every advantage is 0: nothing trains)",
        )
    if cfg.filter_rollouts < 0 or cfg.filter_rollouts == 1:
        c.bad(
            "filter_rollouts",
            "must be 0 (off) or >= 2 (one rollout has accuracy 0 or 1: "
            "the filter would drop every prompt)",
        )


def _check_ranges(c: Checks, cfg: RLConfig) -> None:
    """The numeric keys' ranges: rates, coefficients, caps, intervals, fractions, LoRA alpha."""
    c.positive("lr", "temperature", "judge_timeout_s")
    c.at_least(
        0,
        "final_lr",
        "clip_eps_high",
        "kl_coef",
        "lambda_mgpo",
        "adv_eps",
        "l2s_lambda",
        "rope_yarn_factor",
        "rope_original_len",
        "tis_cap",
        "gspo_clip_low",
        "gspo_clip_high",
        "clip_ratio_c",
        "overlong_buffer",
        "overlong_penalty",
        "dynamic_sampling",
        "is_low",
        "mismatch_limit",
        "max_prompts",
        "eval_every",
        "eval_limit",
        "save_every",
        "max_seconds",
        "max_grad_norm",
        "lora_r",
        "weight_decay",
        "judge_retries",
        "verify_workers",
    )
    c.in_range("clip_eps", 0, 1)
    c.in_range("top_p", 0, 1)
    c.in_range("vllm_gpu_memory_utilization", 0, 1)
    c.fraction("warmup_frac", upper_open=True)
    c.fraction("rubric_weight", "rubric_threshold", "rubric_fail_value", "completion_threshold")
    if cfg.rule_completion and not cfg.rubric_model:
        c.bad("rule_completion", "needs rubric_model (the judge or reward model that checks it)")
    if cfg.lora_r:
        c.positive("lora_alpha")


def _check_choices(c: Checks, cfg: RLConfig) -> None:
    """The named choices, the vllm server's address, the device, the trackers, the data weights."""
    c.one_of("advantage", ADVANTAGE_NAMES)
    c.one_of("std", STD_NAMES)
    c.one_of("loss_agg", LOSS_AGG_NAMES)
    c.one_of("policy_loss", POLICY_LOSS_NAMES)
    c.one_of("is_correction", CORRECTION_NAMES)
    c.one_of("on_mismatch", ("warn", "stop"))
    if cfg.tis_cap and cfg.is_low >= cfg.tis_cap:
        c.bad("is_low", "must be below tis_cap (the correction's bounds [is_low, tis_cap])")
    if cfg.clip_ratio_c and cfg.clip_ratio_c <= 1:
        c.bad("clip_ratio_c", "must be 0 (off) or > 1 (dual clip bound c * A for A < 0)")
    if cfg.overlong_buffer > cfg.max_new_tokens:
        c.bad("overlong_buffer", "must be <= max_new_tokens (the punished tail of the response)")
    c.one_of("truncated_reward", ("zero", "verify"))
    c.one_of("on_empty_filter", ("error", "skip"))
    c.one_of("prompt_style", PROMPT_STYLE_NAMES)
    c.one_of("rule_reward", ("strict", "partial"))
    c.one_of("engine", ("hf", "vllm"))
    c.one_of("vllm_mode", ("colocate", "server"))
    c.one_of("vllm_dtype", ("auto", "bfloat16", "float32"))
    c.one_of("vllm_sync", ("file", "group"))
    c.one_of("parallel", ("auto", "fsdp", "ddp"))
    if cfg.engine == "vllm" and cfg.vllm_mode == "server" and not cfg.vllm_url:
        c.bad("vllm_url", "required with engine=vllm vllm_mode=server (the server's address)")
    c.device()
    c.report_to()
    c.data_probs()
