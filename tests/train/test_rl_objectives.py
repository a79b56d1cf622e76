"""The RL update's objective options through the loop's own update path (update_all), each
against a hand-written SGD step: uneven mini-batches divide by their own rows, token_mean
divides by the whole batch's tokens across micro-batches, mask_truncated drops cut responses,
and per-step dynamic sampling refills a step with groups that carry signal."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.rl_loop import _opts
from tests.train.test_rl_loop import _assert_same_params, _groups, _params, _sgd_loop, tiny  # noqa: F401
from vibethinker.algo.advantages import GROUP_STD
from vibethinker.algo.losses import LOSS_AGGREGATIONS
from vibethinker.train import policy
from vibethinker.train.rl import logprob_inputs, update_all
from vibethinker.train.rl_config import LOSS_AGG_NAMES, POLICY_LOSS_NAMES, STD_NAMES
from vibethinker.train.rl_update import POLICY_LOSSES
from vibethinker.train.rollout import response_logprobs


def _sgd_reference(tiny_path, tb, parts, adv, lr, loss_fn):  # noqa: F811
    """Apply one SGD step per part of rows, each with loss_fn(logp, sub, adv_part, part)."""
    ref_model, _ = policy.load_policy(tiny_path, "cpu")
    for part in parts:
        ref_model.zero_grad()
        sub = tb.rows(part)
        logp, _ = response_logprobs(ref_model, sub)
        loss_fn(logp, sub, adv[part], part).backward()
        with torch.no_grad():
            for p in ref_model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
    return ref_model


def _on_policy_seq_mean(n):
    # rho = 1 on-policy: -(1/n) sum_i A_i mean_t log pi (the value is what gives the gradient)
    return lambda logp, sub, a, part: -(a * (logp * sub.mask).sum(-1) / sub.mask.sum(-1)).sum() / n


def test_uneven_mini_batches_divide_by_their_own_rows(tiny):  # noqa: F811
    """16 rows in 3 mini-batches: rows 0-5, 6-10, 11-15, each update the mean over ITS rows
    (6, 5, 5). The old code divided each by 16 // 3 = 5, the first step 6/5 too large. Each
    later update is off-policy (ratios from the frozen pi_old): the reference uses the full
    clipped surrogate."""
    adv = torch.linspace(-1.5, 1.6, 16)
    lr = 1.0
    model, tok = policy.load_policy(tiny, "cpu")
    lp = _sgd_loop(model, tok, _opts(mini_batches=3, micro_batch=4), lr=lr)
    tb, rows, old_lp, _ = logprob_inputs(lp, _groups(lp, n_prompts=4), adv)
    update_all(lp, tb, adv, rows, old_lp, None)
    parts = torch.arange(16).tensor_split(3)
    assert [p.numel() for p in parts] == [6, 5, 5]

    def loss_fn(logp, sub, a, part):
        ratio = torch.exp(logp - old_lp[part])
        obj = torch.minimum(ratio * a[:, None], ratio.clamp(0.8, 1.2) * a[:, None])
        return -((obj * sub.mask).sum(-1) / sub.mask.sum(-1)).sum() / part.numel()

    ref = _sgd_reference(tiny, tb, parts, adv, lr, loss_fn)
    _assert_same_params(_params(model), _params(ref), 1e-5)


def test_token_mean_divides_by_all_tokens_across_micro_batches(tiny):  # noqa: F811
    """loss_agg=token_mean: -1/(all tokens of ALL rows, zero-advantage rows included) sum_i A_i
    sum_t log pi, the same whatever the micro-batch size (TRL "dapo"'s num_items_in_batch)."""
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0, 0, 0, 0, 2.0, -2.0, 1.0, -1.0])
    model, tok = policy.load_policy(tiny, "cpu")
    lp = _sgd_loop(model, tok, _opts(micro_batch=3, loss_agg="token_mean"), lr=1.0)
    tb, rows, old_lp, _ = logprob_inputs(lp, _groups(lp), adv)
    update_all(lp, tb, adv, rows, old_lp, None)
    total = int(tb.mask.sum())
    assert total > int(tb.mask[rows].sum())  # the zero rows' tokens count

    def loss_fn(logp, sub, a, part):
        return -(a[:, None] * logp * sub.mask).sum() / total

    ref = _sgd_reference(tiny, tb, [torch.arange(12)], adv, 1.0, loss_fn)
    _assert_same_params(_params(model), _params(ref), 1e-6)


def test_mask_truncated_drops_cut_responses(tiny):  # noqa: F811
    """mask_truncated: a response cut at max_new_tokens trains nothing; the others' step is
    unchanged (still 1/N over all N rows)."""
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 0.2, -0.2, 2.0, -2.0, 1.0, -1.0])
    model, tok = policy.load_policy(tiny, "cpu")
    lp = _sgd_loop(model, tok, _opts(micro_batch=5, mask_truncated=True), lr=1.0)
    groups = _groups(lp)
    for i, c in enumerate(c for g in groups for c in g.completions):
        c.finish_reason = "length" if i in (1, 4, 5, 10) else "stop"  # as if cut
    cut = torch.tensor([c.truncated for g in groups for c in g.completions])
    tb, rows, old_lp, _ = logprob_inputs(lp, groups, adv)
    assert rows.tolist() == torch.nonzero(~cut).flatten().tolist()
    u = update_all(lp, tb, adv, rows, old_lp, None)
    assert u["trained_rows"] == int((~cut).sum())
    keep = torch.nonzero(~cut).flatten()
    ref = _sgd_reference(tiny, tb, [keep], adv, 1.0, _on_policy_seq_mean(12))
    _assert_same_params(_params(model), _params(ref), 1e-6)


@pytest.mark.parametrize("bad", [dict(clip_ratio_c=0.5), dict(loss_agg="x"), dict(std="x")])
def test_objective_keys_are_checked(bad):
    with pytest.raises(ValueError):
        _opts(**bad)


def test_config_names_agree_with_the_functions():
    assert LOSS_AGG_NAMES == tuple(LOSS_AGGREGATIONS)
    assert STD_NAMES == tuple(GROUP_STD)
    assert POLICY_LOSS_NAMES == tuple(POLICY_LOSSES)
