"""The MGPO policy loss and its helpers: pure functions over tensors (docs/PAPER.md, stage 2).

Shapes: N sequences (prompts x G, possibly one micro-batch of them), T response positions
(right-padded), `mask` [N, T] marks real response tokens, `advantages` [N] (one per sequence).

- `clipped_surrogate`: the MGPO objective, as a loss to minimise,
      L = -1/N sum_i 1/|y_i| sum_t min(rho_it A_i, clip(rho_it, 1-e_low, 1+e_high) A_i)
  with rho_it = pi_theta / pi_old per token: each sequence's tokens are averaged first, then
  sequences (the paper's 1/G sum_i 1/|y_i| sum_t, averaged over prompts). Optional extras,
  both off by default:
  * truncated importance sampling (TIS, `engine_logp` and `tis_cap` > 0): when the rollout
    engine's logprobs differ from the trainer's pi_old (different kernels, bf16, a vLLM server),
    the samples come from pi_engine, not pi_old; each token's surrogate is multiplied by the
    detached weight min(pi_old / pi_engine, cap) (Yao et al. 2025, "off-policy RL via TIS"). The
    paper asks for this correction without giving its form or cap; this is our choice. Given
    `engine_logp`, the stats also carry the engine-vs-trainer mismatch k3(engine, pi_old).
  * a KL penalty to a reference model, kl_coef * k3 per token, with Schulman's k3 estimator
    k3 = exp(ref - logp) - (ref - logp) - 1 (non-negative, unbiased for KL(pi || ref) under
    samples from pi). The paper does not publish a KL term; default 0.
  Options beyond the paper, each off by default and each named as its peers name it:
  * `agg` (`LOSS_AGGREGATIONS`): how token losses become the batch loss. "seq_mean" is the
    formula above; "token_mean" divides the sum over all tokens by the batch's token count (TRL
    "dapo"), "seq_mean_token_sum" by N, "seq_mean_token_sum_norm" by N * L_max with L_max the
    response cap, a constant (Dr. GRPO; TRL "dr_grpo");
  * `level` (`RATIO_LEVELS`): "token" (rho_it above) or "sequence", GSPO's one ratio per
    sequence s_i = exp(1/|y_i| sum_t log rho_it), clipped with its own (much smaller) range;
  * `clip_c` > 1, dual clip (verl's clip_ratio_c): for A_i < 0 the objective is max(., c A_i);
  * `correction` (algo/correction.py): the engine-vs-trainer weight's rule, per token (TIS,
    above) or per sequence (product or geometric mean), truncated or masked.
- `tis_weights`, `kl_k3`, `entropy_from_logits`, `masked_mean`: the pieces, separately testable.

`n_seqs` (and `n_tokens` for token_mean) let a caller split a batch into micro-batches: each call
divides by the WHOLE batch's counts (`Norm`), so the summed gradients equal the full-batch one.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from vibethinker.algo.correction import correction_weights, mismatch_sums


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x over the True entries of mask (0 when mask is empty)."""
    m = mask.to(x.dtype)
    return (x * m).sum() / m.sum().clamp(min=1)


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of KL(pi || ref): exp(d) - d - 1 with d = ref - logp (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1.0


def tis_weights(old_logp: torch.Tensor, engine_logp: torch.Tensor, cap: float) -> torch.Tensor:
    """Truncated importance weights min(pi_old / pi_engine, cap) per token, detached."""
    if cap <= 0:
        raise ValueError(f"TIS cap must be > 0, got {cap}")
    return torch.exp(old_logp.detach() - engine_logp.detach()).clamp(max=cap)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """[..., V] logits -> [...] entropy of softmax(logits) in nats."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return -(logp.exp() * logp).sum(-1)


@dataclass
class LossStats:
    """Token-level sums so micro-batches combine exactly (divide by `tokens` at the end)."""

    tokens: int = 0
    clipped: float = 0.0  # tokens where the clipped term was the minimum (and differs)
    dual_clipped: float = 0.0  # tokens where the dual clip's bound clip_c * A was taken
    ratio_sum: float = 0.0
    ratio_max: float = 0.0
    kl_sum: float = 0.0  # sum of k3 over tokens (0 without a reference)
    tis_sum: float = 0.0  # sum of TIS weights (tokens when TIS is off)
    tis_capped: float = 0.0  # tokens whose correction weight the rule changed (capped, masked)
    engine_kl_sum: float = 0.0  # sum of k3(engine, pi_old) over tokens (0 without engine logps)
    engine_tokens: int = 0  # tokens with engine logprobs (the mismatch measures' count)
    engine_absdiff_sum: float = 0.0  # sum of |log pi_old - log pi_engine|
    engine_mult_err_sum: float = 0.0  # sum of exp(|log pi_old - log pi_engine|)
    engine_ratio_max: float = 0.0  # largest pi_old / pi_engine

    def add(self, other: LossStats) -> LossStats:
        return LossStats(
            tokens=self.tokens + other.tokens,
            clipped=self.clipped + other.clipped,
            dual_clipped=self.dual_clipped + other.dual_clipped,
            ratio_sum=self.ratio_sum + other.ratio_sum,
            ratio_max=max(self.ratio_max, other.ratio_max),
            kl_sum=self.kl_sum + other.kl_sum,
            tis_sum=self.tis_sum + other.tis_sum,
            tis_capped=self.tis_capped + other.tis_capped,
            engine_kl_sum=self.engine_kl_sum + other.engine_kl_sum,
            engine_tokens=self.engine_tokens + other.engine_tokens,
            engine_absdiff_sum=self.engine_absdiff_sum + other.engine_absdiff_sum,
            engine_mult_err_sum=self.engine_mult_err_sum + other.engine_mult_err_sum,
            engine_ratio_max=max(self.engine_ratio_max, other.engine_ratio_max),
        )

    def summary(self) -> dict[str, float]:
        n = max(self.tokens, 1)
        return {
            "clip_frac": self.clipped / n,
            "dual_clip_frac": self.dual_clipped / n,
            "ratio_mean": self.ratio_sum / n,
            "ratio_max": self.ratio_max,
            "kl": self.kl_sum / n,
            "tis_mean": self.tis_sum / n,
            "tis_capped_frac": self.tis_capped / n,
            "engine_kl": self.engine_kl_sum / n,
            # NeMo-RL's token_mult_prob_error (1.0: no mismatch, also without engine logprobs)
            "token_mult_prob_error": self.engine_mult_err_sum / self.engine_tokens
            if self.engine_tokens
            else 1.0,
            "engine_logp_absdiff": self.engine_absdiff_sum / max(self.engine_tokens, 1),
            "engine_ratio_max": self.engine_ratio_max,
        }


def token_ratio(logp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """[N, T] rho_it = pi_theta / pi_old per token (PPO, GRPO, the paper)."""
    return torch.exp(logp - old)


def sequence_ratio(logp: torch.Tensor, old: torch.Tensor, m: torch.Tensor) -> torch.Tensor:
    """[N, 1] GSPO's s_i = exp(1/|y_i| sum_t log(pi_theta / pi_old)), the length-normalised
    sequence ratio (Zheng et al. 2025); TRL's importance_sampling_level="sequence"."""
    log_ratio = ((logp - old) * m).sum(-1, keepdim=True) / m.sum(-1, keepdim=True).clamp(min=1)
    return torch.exp(log_ratio)


# The importance ratio by name (the RL config's `policy_loss`: ppo -> token, gspo -> sequence).
RATIO_LEVELS = {"token": token_ratio, "sequence": sequence_ratio}


@dataclass(frozen=True)
class Norm:
    """The WHOLE batch's counts a loss aggregation divides by, so that micro-batches add up."""

    seqs: int | float  # N sequences
    tokens: int | float = 1  # response tokens (token_mean)
    max_len: int = 1  # Dr. GRPO's constant: the response cap (max_new_tokens)


def seq_mean(tok_loss: torch.Tensor, m: torch.Tensor, d: Norm) -> torch.Tensor:
    """The paper's 1/N sum_i 1/|y_i| sum_t (TRL loss_type="grpo", verl seq-mean-token-mean)."""
    per_seq = (tok_loss * m).sum(-1) / m.sum(-1).clamp(min=1)
    return per_seq.sum() / d.seqs


def token_mean(tok_loss: torch.Tensor, m: torch.Tensor, d: Norm) -> torch.Tensor:
    """1/sum_i |y_i| sum_i sum_t over the whole batch's tokens (TRL "dapo", verl token-mean)."""
    return (tok_loss * m).sum() / d.tokens


def seq_mean_token_sum(tok_loss: torch.Tensor, m: torch.Tensor, d: Norm) -> torch.Tensor:
    """1/N sum_i sum_t (verl seq-mean-token-sum): a long sequence weighs by its length."""
    return (tok_loss * m).sum() / d.seqs


def seq_mean_token_sum_norm(tok_loss: torch.Tensor, m: torch.Tensor, d: Norm) -> torch.Tensor:
    """1/(N * L_max) sum_i sum_t with the constant L_max = the response cap (Dr. GRPO; TRL
    "dr_grpo" divides by max_completion_length, verl seq-mean-token-sum-norm)."""
    return (tok_loss * m).sum() / (d.seqs * d.max_len)


# Loss aggregation by name (the RL config's `loss_agg`; STYLE.md 6).
LOSS_AGGREGATIONS = {
    "seq_mean": seq_mean,
    "token_mean": token_mean,
    "seq_mean_token_sum": seq_mean_token_sum,
    "seq_mean_token_sum_norm": seq_mean_token_sum_norm,
}


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    clip_eps: float = 0.2,
    clip_eps_high: float | None = None,
    *,
    engine_logp: torch.Tensor | None = None,
    tis_cap: float = 0.0,
    ref_logp: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    n_seqs: int | None = None,
    correction: str = "token_tis",
    is_low: float = 0.0,
    agg: str = "seq_mean",
    level: str = "token",
    clip_c: float = 0.0,
    n_tokens: int | float | None = None,
    max_len: int = 1,
) -> tuple[torch.Tensor, LossStats]:
    """(scalar loss, stats) of the MGPO clipped surrogate; see the module docstring.

    logp carries gradients; old_logp, engine_logp and ref_logp are treated as constants. TIS
    is on when `engine_logp` is given and `tis_cap` > 0, by the rule `correction` (an entry of
    algo/correction.IS_CORRECTIONS, lower bound `is_low`). `agg` and `level` name entries of
    LOSS_AGGREGATIONS and RATIO_LEVELS; `clip_c` > 1 is the dual clip; `n_seqs`, `n_tokens`
    and `max_len` are the whole batch's counts (`Norm`; this call's by default)."""
    aggregate, ratio_fn = LOSS_AGGREGATIONS[agg], RATIO_LEVELS[level]
    high = clip_eps if clip_eps_high is None else clip_eps_high
    tis = changed = None
    m = mask.to(logp.dtype)
    if engine_logp is not None and tis_cap > 0:
        tis, changed = correction_weights(correction, old_logp, engine_logp, m, is_low, tis_cap)
    adv = advantages.to(logp.dtype)[:, None]
    ratio = ratio_fn(logp, old_logp.detach(), m)
    unclipped = ratio * adv
    clipped = ratio.clamp(1.0 - clip_eps, 1.0 + high) * adv
    obj = torch.minimum(unclipped, clipped)
    dual = None
    if clip_c:
        obj, dual = dual_clip(obj, adv, clip_c)
    if tis is not None:
        obj = obj * tis.detach()
    tok_loss = -obj
    kl = None
    if ref_logp is not None:
        kl = kl_k3(logp, ref_logp.detach())
        if kl_coef:
            tok_loss = tok_loss + kl_coef * kl
    norm = Norm(
        seqs=n_seqs if n_seqs is not None else logp.shape[0],
        tokens=n_tokens if n_tokens is not None else int(mask.sum()),
        max_len=max_len,
    )
    loss = aggregate(tok_loss.expand_as(logp), m, norm)
    stats = _stats(mask, ratio.expand_as(logp), clipped < unclipped, dual, kl, tis, changed)
    if engine_logp is not None:
        _add_mismatch(stats, mismatch_sums(old_logp, engine_logp, mask))
    return loss, stats


def _add_mismatch(stats: LossStats, mis: dict[str, float]) -> None:
    """The engine-vs-trainer measures of `mismatch_sums` into `stats` (over all its tokens)."""
    stats.engine_kl_sum, stats.engine_tokens = mis["kl"], stats.tokens
    stats.engine_absdiff_sum, stats.engine_mult_err_sum = mis["absdiff"], mis["mult_err"]
    stats.engine_ratio_max = mis["ratio_max"]


def dual_clip(
    obj: torch.Tensor, adv: torch.Tensor, clip_c: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """Dual-clip PPO (Ye et al. 2020; verl's clip_ratio_c): for A < 0 the objective is kept
    >= clip_c * A, so a huge ratio on a negative-advantage token cannot blow up its loss.
    Returns (objective, where the bound was taken)."""
    if clip_c <= 1:
        raise ValueError(f"dual-clip constant must be > 1, got {clip_c}")
    bound = clip_c * adv
    hit = (adv < 0) & (obj < bound)
    return torch.where(hit, bound.expand_as(obj), obj), hit


@torch.no_grad()
def _stats(
    mask: torch.Tensor,
    ratio: torch.Tensor,
    clipped: torch.Tensor,
    dual: torch.Tensor | None,
    kl: torch.Tensor | None,
    tis: torch.Tensor | None,
    changed: torch.Tensor | None,
) -> LossStats:
    """The token sums of one call (ratio and clip masks broadcast to [N, T])."""
    sel = mask.bool()
    r = ratio[sel]
    return LossStats(
        tokens=int(sel.sum()),
        clipped=float(clipped.expand_as(mask)[sel].sum()),
        dual_clipped=float(dual.expand_as(mask)[sel].sum()) if dual is not None else 0.0,
        ratio_sum=float(r.sum()),
        ratio_max=float(r.max()) if r.numel() else 0.0,
        kl_sum=float(kl[sel].sum()) if kl is not None else 0.0,
        tis_sum=float(tis.expand_as(mask)[sel].sum()) if tis is not None else float(sel.sum()),
        tis_capped=float(changed.expand_as(mask)[sel].sum()) if changed is not None else 0.0,
    )
