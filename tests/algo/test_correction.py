"""The engine-vs-trainer corrections and mismatch measures (algo/correction.py) against numbers
computed by hand in the comments. TRL computes its vllm_importance_sampling_mode weights inline
in its generation step (not a function one can call on tensors), so these are hand cases of the
same rules; its loss then multiplies per-token losses by them, as clipped_surrogate does."""

from __future__ import annotations

import math

import pytest
import torch

from vibethinker.algo.correction import IS_CORRECTIONS, correction_weights, mismatch_sums
from vibethinker.algo.losses import clipped_surrogate, tis_weights
from vibethinker.train.rl_config import CORRECTION_NAMES

L = math.log
# two sequences; ratios pi_old / pi_engine per token: row 0 (4, 0.5, -), row 1 (1.5, 1.5, 0.25)
OLD = torch.tensor([[L(0.8), L(0.2), 0.0], [L(0.6), L(0.3), L(0.1)]])
ENG = torch.tensor([[L(0.2), L(0.4), 0.0], [L(0.4), L(0.2), L(0.4)]])
MASK = torch.tensor([[True, True, False], [True, True, True]])


def _w(name, low=0.0, high=2.0):
    w, changed = correction_weights(name, OLD, ENG, MASK.float(), low, high)
    return w, changed


def test_names_agree_with_the_config():
    assert tuple(IS_CORRECTIONS) == CORRECTION_NAMES


def test_token_tis_is_todays_rule():
    w, changed = _w("token_tis")
    # min(r, 2): 4 -> 2 (changed), 0.5, 1.5, 1.5, 0.25
    assert w[MASK].tolist() == pytest.approx([2.0, 0.5, 1.5, 1.5, 0.25])
    assert changed[MASK].tolist() == [True, False, False, False, False]
    assert torch.equal(w, tis_weights(OLD, ENG, 2.0))
    # a lower bound 0.4 lifts 0.25 to 0.4 (changed)
    w, changed = _w("token_tis", low=0.4)
    assert w[MASK].tolist() == pytest.approx([2.0, 0.5, 1.5, 1.5, 0.4])
    assert changed[MASK].tolist() == [True, False, False, False, True]


def test_sequence_and_geometric_weights():
    # products: row 0 4 * 0.5 = 2, row 1 1.5 * 1.5 * 0.25 = 0.5625
    w, changed = _w("seq_tis", high=1.5)
    assert w.shape == (2, 1) and w.flatten().tolist() == pytest.approx([1.5, 0.5625])
    assert changed.flatten().tolist() == [True, False]
    # geometric means: row 0 sqrt(2) = 1.4142, row 1 0.5625^(1/3) = 0.8255
    w, _ = _w("geo_tis", high=1.4)
    assert w.flatten().tolist() == pytest.approx([1.4, 0.5625 ** (1 / 3)], rel=1e-6)


def test_masks_keep_the_ratio_inside_the_bounds_and_zero_outside():
    # tokens in [0.4, 2]: 4 out, 0.5 in, 1.5 in, 1.5 in, 0.25 out
    w, changed = _w("token_mask", low=0.4)
    assert w[MASK].tolist() == pytest.approx([0.0, 0.5, 1.5, 1.5, 0.0])
    assert changed[MASK].tolist() == [True, False, False, False, True]
    # sequences in [0.6, 3]: 2 kept (weight 2), 0.5625 masked
    w, _ = _w("seq_mask", low=0.6, high=3.0)
    assert w.flatten().tolist() == pytest.approx([2.0, 0.0])
    # geometric in [0.9, 1.5]: 1.4142 kept, 0.8255 masked
    w, _ = _w("geo_mask", low=0.9, high=1.5)
    assert w.flatten().tolist() == pytest.approx([math.sqrt(2), 0.0], rel=1e-6)
    with pytest.raises(ValueError, match="low < high"):
        _w("seq_mask", low=2.0, high=2.0)


def test_sequence_weights_multiply_every_token_of_the_loss():
    """On-policy (rho = 1), A = (1, 1): per-sequence loss -w_i, so loss = -(w_0 + w_1) / 2;
    the stats count a sequence's tokens as changed when its weight was capped."""
    adv = torch.ones(2)
    loss, st = clipped_surrogate(
        OLD, OLD, adv, MASK, engine_logp=ENG, tis_cap=1.5, correction="seq_tis"
    )
    assert float(loss) == pytest.approx(-(1.5 + 0.5625) / 2)
    assert st.tis_capped == 2 and st.tis_sum == pytest.approx(2 * 1.5 + 3 * 0.5625)


def test_mismatch_measures_by_hand():
    """d = log(old / engine) per token: log 4, log .5, log 1.5, log 1.5, log .25.
    k3 = e^d - d - 1; |d|; NeMo-RL's token_mult_prob_error = mean exp|d| =
    (4 + 2 + 1.5 + 1.5 + 4) / 5 = 2.6; the largest ratio 4."""
    ds = [L(4), L(0.5), L(1.5), L(1.5), L(0.25)]
    m = mismatch_sums(OLD, ENG, MASK)
    assert m["kl"] == pytest.approx(sum(math.exp(d) - d - 1 for d in ds), rel=1e-6)
    assert m["absdiff"] == pytest.approx(sum(abs(d) for d in ds), rel=1e-6)
    assert m["mult_err"] / 5 == pytest.approx(2.6, rel=1e-6)
    assert m["ratio_max"] == pytest.approx(4.0, rel=1e-6)
    _, st = clipped_surrogate(OLD, OLD, torch.ones(2), MASK, engine_logp=ENG)
    s = st.summary()
    assert s["token_mult_prob_error"] == pytest.approx(2.6, rel=1e-6)
    assert s["engine_ratio_max"] == pytest.approx(4.0, rel=1e-6)
    assert s["engine_logp_absdiff"] == pytest.approx(sum(abs(d) for d in ds) / 5, rel=1e-6)
    # no engine logprobs: no mismatch (1.0), not 0
    _, st = clipped_surrogate(OLD, OLD, torch.ones(2), MASK)
    assert st.summary()["token_mult_prob_error"] == 1.0
