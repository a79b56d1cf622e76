"""The engine-vs-trainer mismatch through the loop: measured every step, and the gate
(mismatch_limit, on_mismatch) warns or stops. The hf engine in fp32 is the trainer (error 1.0);
a sampler whose reported logprobs are shifted by +0.5 per token stands in for a drifting
engine: token_mult_prob_error = exp(0.5) = 1.6487, largest ratio pi_old / pi_engine =
exp(-0.5) = 0.6065."""

from __future__ import annotations

import math

import pytest

from tests.helpers.rl_loop import _opts, _problems, has_digit
from tests.train.test_rl_loop import tiny  # noqa: F401
from vibethinker.engines import make_sampler
from vibethinker.reports.rl import mismatch_warning
from vibethinker.train import policy
from vibethinker.train.rl import train
from vibethinker.train.rl_metrics import MismatchError, check_mismatch


class Shifted:
    """The hf sampler, reporting every logprob 0.5 higher than it sampled with."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, prompts, n, params):
        outs = self.inner.generate(prompts, n, params)
        for cs in outs:
            for c in cs:
                c.logprobs = [lp + 0.5 for lp in c.logprobs]
        return outs


def _run(tiny_path, tmp_path, shifted, **kw):
    model, tok = policy.load_policy(tiny_path, "cpu")
    sampler = make_sampler("hf", model=model, tokenizer=tok)
    opts = _opts(steps=1, **kw)
    return train(
        model,
        tok,
        _problems(),
        opts,
        tmp_path,
        verify=has_digit,
        sampler=Shifted(sampler) if shifted else sampler,
    )["history"][0]


def test_mismatch_measured_and_gated(tiny, tmp_path):  # noqa: F811
    same = _run(tiny, tmp_path / "same", False)
    assert same["token_mult_prob_error"] == pytest.approx(1.0, abs=1e-5)
    assert same["mismatch_over"] == 0 and same["engine_logp_absdiff"] < 1e-5
    row = _run(tiny, tmp_path / "warn", True)  # default limit 1.1, warn
    assert row["token_mult_prob_error"] == pytest.approx(math.exp(0.5), rel=1e-5)
    assert row["engine_logp_absdiff"] == pytest.approx(0.5, rel=1e-5)
    assert row["engine_ratio_max"] == pytest.approx(math.exp(-0.5), rel=1e-5)
    assert row["engine_kl"] == pytest.approx(math.exp(-0.5) + 0.5 - 1, rel=1e-4)
    assert row["mismatch_over"] == 1
    with pytest.raises(MismatchError, match="token_mult_prob_error 1.6487 > mismatch_limit 1.1"):
        _run(tiny, tmp_path / "stop", True, on_mismatch="stop")
    off = _run(tiny, tmp_path / "off", True, mismatch_limit=0.0, on_mismatch="stop")
    assert off["mismatch_over"] == 0


def test_check_mismatch_by_hand():
    assert check_mismatch({"token_mult_prob_error": 1.05}, 1.1, "stop", 1) == 0
    assert check_mismatch({"token_mult_prob_error": 1.2}, 1.1, "warn", 1) == 1
    assert check_mismatch({"token_mult_prob_error": 9.0}, 0.0, "stop", 1) == 0
    with pytest.raises(MismatchError):
        check_mismatch({"token_mult_prob_error": 1.2}, 1.1, "stop", 3)


def test_the_stage_warns_with_the_figures():
    cfg = _opts()
    quiet = [{"token_mult_prob_error": 1.0, "mismatch_over": 0}]
    assert mismatch_warning(cfg, quiet) == []
    hist = quiet + [
        {
            "token_mult_prob_error": 1.5,
            "engine_logp_absdiff": 0.4,
            "engine_ratio_max": 3.0,
            "tis_capped_frac": 0.25,
            "mismatch_over": 1,
        }
    ]
    (w,) = mismatch_warning(cfg, hist)
    assert "token_mult_prob_error 1.2500 (limit 1.1)" in w and "steps over the limit 1 of 2" in w
    assert "largest ratio 3.000" in w
