"""The RL loop's wiring, checked against the formulas rather than "it ran": the update's gradient
is the paper's 1/N over ALL sequences; several mini-batches use the frozen pi_old; and every
option (GRPO, std_scale=False, Long2Short, a reference model with KL, TIS, max_seconds, resume
with changed options) is run through `train` with its effect asserted."""

from __future__ import annotations

import copy
import math
from types import SimpleNamespace

import pytest
import torch

from tests.helpers.reference import advantages, long2short_rewards, surrogate_loss
from tests.helpers.rl_loop import _opts, _problems, has_digit
from vibethinker.engines import SamplingParams, make_sampler
from vibethinker.models.tiny import build_tiny_model
from vibethinker.train import checkpoints, policy, rl_engine
from vibethinker.train import rl as rl_loop
from vibethinker.train.rl import logprob_inputs, train, update_all
from vibethinker.train.rl_update import trained_rows
from vibethinker.train.rollout import response_logprobs, rollout
from vibethinker.types import Score


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [
        f"{p.prompt} <think>7+{i}={7 + i}</think>\\boxed{{{7 + i}}}"
        for i, p in enumerate(_problems(40))
    ]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)


def always(problems, responses):
    return [Score(1.0, True, "ok") for _ in responses]


def _sgd_loop(model, tok, opts, lr):
    """The pieces of rl.Loop that logprob_inputs / update_all use, with plain SGD (a parameter's
    change is then -lr * its gradient) and no LR schedule."""
    sampler = make_sampler("hf", model=model, tokenizer=tok)
    return SimpleNamespace(
        model=model,
        tokenizer=tok,
        sampler=sampler,
        opts=opts,
        prompt_fn=lambda p: p.prompt,
        ref_model=None,
        optimizer=torch.optim.SGD(model.parameters(), lr=lr),
        scheduler=None,
    )


def _groups(lp, n_prompts=3, g=4, seed=0):
    params = SamplingParams(max_new_tokens=6, seed=seed)
    return rollout(lp.sampler, _problems(n_prompts), lp.prompt_fn, g, params)


def _params(model):
    return {k: v.detach().clone() for k, v in model.named_parameters()}


def _assert_same_params(a, b, atol):
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst <= atol, worst


def test_update_gradient_is_the_mean_over_all_sequences(tiny):
    """Rows with A = 0 are skipped in the forward but still count in 1/N: the step equals the
    policy gradient -1/N sum_i A_i mean_t grad log pi(y_it) over ALL N rows (rho = 1 on-policy),
    for any micro-batch size."""
    model, tok = policy.load_policy(tiny, "cpu")
    start = _params(model)
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 0, 0, 0, 0, 2.0, -2.0, 1.0, -1.0])
    lp = _sgd_loop(model, tok, _opts(micro_batch=3), lr=1.0)
    tb, rows, old_lp, ref_lp = logprob_inputs(lp, _groups(lp), adv)
    assert rows.tolist() == [0, 1, 2, 3, 8, 9, 10, 11] and old_lp is None and ref_lp is None
    u = update_all(lp, tb, adv, rows, old_lp, ref_lp)
    assert u["trained_rows"] == 8 and u["ratio_max"] == 1.0
    # the reference: the same policy gradient by hand, over all 12 rows
    ref_model, _ = policy.load_policy(tiny, "cpu")
    logp, _ = response_logprobs(ref_model, tb)
    per_seq = (logp * tb.mask).sum(-1) / tb.mask.sum(-1)
    (-(adv * per_seq).sum() / adv.numel()).backward()
    want = {k: start[k] - p.grad for k, p in ref_model.named_parameters() if p.grad is not None}
    _assert_same_params({k: v for k, v in _params(model).items() if k in want}, want, 1e-6)
    # and nothing changed where there is no gradient
    assert all(torch.equal(v, start[k]) for k, v in _params(model).items() if k not in want)


def test_mini_batches_use_the_frozen_pi_old_and_their_share_of_n(tiny):
    """Two updates per rollout batch: pi_old is the policy BEFORE the first update, so the
    second update's ratios differ from 1; each update divides by its share of the N rows."""
    adv = torch.tensor([1.0, -1.0, 0.5, -0.5, 1.5, -1.5, 0.2, -0.2, 2.0, -2.0, 1.0, -1.0])
    lr = 2.0
    model, tok = policy.load_policy(tiny, "cpu")
    lp = _sgd_loop(model, tok, _opts(mini_batches=2, micro_batch=4), lr=lr)
    tb, rows, old_lp, _ = logprob_inputs(lp, _groups(lp), adv)
    with torch.no_grad():
        frozen, _ = response_logprobs(model, tb)
    assert old_lp is not None and torch.allclose(old_lp, frozen, atol=1e-6)
    u = update_all(lp, tb, adv, rows, old_lp, None)
    assert u["trained_rows"] == 12 and u["ratio_max"] > 1.001, u  # the 2nd update is off-policy
    # the reference: two hand-written SGD steps on the clipped surrogate, pi_old frozen
    ref_model, _ = policy.load_policy(tiny, "cpu")
    for part in rows.tensor_split(2):
        ref_model.zero_grad()
        sub = tb.rows(part)
        logp, _ = response_logprobs(ref_model, sub)
        ratio = torch.exp(logp - frozen[part])
        a = adv[part][:, None]
        obj = torch.minimum(ratio * a, ratio.clamp(0.8, 1.2) * a)
        loss = -((obj * sub.mask).sum(-1) / sub.mask.sum(-1)).sum() / 6  # share = 12 / 2
        assert float(loss.detach()) == pytest.approx(
            surrogate_loss(logp.detach(), frozen[part], adv[part], sub.mask, 6), abs=1e-6
        )
        loss.backward()
        with torch.no_grad():
            for p in ref_model.parameters():
                if p.grad is not None:
                    p -= lr * p.grad
    _assert_same_params(_params(model), _params(ref_model), 1e-5)


def _spy_advantages(monkeypatch):
    """Record (Scored, advantages, weights) of every step of `train`."""
    seen = []
    orig = rl_loop.compute_advantages

    def spy(sc, opts):
        adv, w = orig(sc, opts)
        seen.append((sc, adv, w))
        return adv, w

    monkeypatch.setattr(rl_loop, "compute_advantages", spy)
    return seen


@pytest.mark.parametrize(
    "kw",
    [
        dict(advantage="grpo", lambda_mgpo=3.0),
        dict(advantage="mgpo", lambda_mgpo=2.0),
        dict(advantage="mgpo", lambda_mgpo=1.0, std_scale=False),
    ],
    ids=["grpo", "mgpo", "mgpo-no-std"],
)
def test_loop_advantages_match_the_reference(tiny, tmp_path, monkeypatch, kw):
    """Through `train`: each step's advantages and weights are the reference's for the verified
    rewards of that step (GRPO ignores lambda; std_scale=False only centres)."""
    seen = _spy_advantages(monkeypatch)
    model, tok = policy.load_policy(tiny, "cpu")
    res = train(model, tok, _problems(), _opts(**kw), tmp_path / "run", verify=has_digit)
    assert len(seen) == 2
    lam = 0.0 if kw["advantage"] == "grpo" else kw["lambda_mgpo"]
    any_weighted = False
    for (sc, adv, w), row in zip(seen, res["history"]):
        want_adv, want_w = advantages(
            sc.rewards.tolist(), sc.correct.tolist(), lam, std_scale=kw.get("std_scale", True)
        )
        assert w.tolist() == pytest.approx(want_w, abs=1e-6)
        assert adv.tolist() == [pytest.approx(a, abs=1e-5) for a in want_adv]
        assert row["mgpo_weight"] == pytest.approx(sum(want_w) / len(want_w), abs=1e-6)
        any_weighted |= min(want_w) < 1.0
    assert any_weighted == (lam > 0)  # the run had groups MGPO down-weights


class _VariedLengths:
    """Wraps the live hf sampler and cuts sample j of each group after 1 + (3j mod 7) tokens
    (a random tiny model rarely ends on its own): prefixes of on-policy samples, so their
    logprobs stay the policy's, with lengths that differ within a group."""

    def __init__(self, inner):
        self.inner = inner

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, prompts, n, params):
        from vibethinker.types import Completion

        out = []
        for group in self.inner.generate(prompts, n, params):
            cut = []
            for j, c in enumerate(group):
                k = min(len(c.token_ids), 1 + (3 * j) % 7)
                cut.append(
                    Completion(
                        self.inner.decode(c.token_ids[:k]), c.token_ids[:k], c.logprobs[:k], "stop"
                    )
                )
            out.append(cut)
        return out


def test_long2short_through_the_loop(tiny, tmp_path, monkeypatch):
    """Every response correct: without Long2Short no group has signal (no row trained); with it,
    shorter correct responses get larger advantages, as the reference shift gives."""
    seen = _spy_advantages(monkeypatch)
    orig = rl_engine.make_sampler
    monkeypatch.setattr(rl_engine, "make_sampler", lambda *a, **kw: _VariedLengths(orig(*a, **kw)))
    model, tok = policy.load_policy(tiny, "cpu")
    opts = _opts(long2short=True, l2s_lambda=0.2, advantage="grpo", group_size=6)
    res = train(model, tok, _problems(), opts, tmp_path / "l2s", verify=always)
    spread = 0
    for sc, adv, _ in seen:
        for r, c, n, a in zip(
            sc.rewards.tolist(), sc.correct.tolist(), sc.lengths.tolist(), adv.tolist()
        ):
            shifted = long2short_rewards(r, c, n, 0.2)
            # all-correct groups are centred, not divided by their std (l2s_all_correct_std)
            ref = advantages([shifted], [c], 0.0, std_scale=not all(c))[0][0]
            assert a == [pytest.approx(x, abs=1e-5) for x in ref]
            if len(set(n)) > 1:
                spread += 1
                shortest, longest = n.index(min(n)), n.index(max(n))
                assert a[shortest] > 0 > a[longest]
    assert spread > 0 and sum(r["trained_rows"] for r in res["history"]) > 0
    model2, _ = policy.load_policy(tiny, "cpu")
    plain = train(
        model2,
        tok,
        _problems(),
        _opts(advantage="grpo", group_size=6),
        tmp_path / "plain",
        verify=always,
    )
    assert sum(r["trained_rows"] for r in plain["history"]) == 0


def test_reference_model_and_kl_through_the_loop(tiny, tmp_path):
    """kl is KL(pi || ref) from the reference model: 0 at step 1 against a copy of the start,
    > 0 against another model; with kl_coef every row trains (the KL term has a gradient)."""
    model, tok = policy.load_policy(tiny, "cpu")
    ref = copy.deepcopy(model).eval()
    res = train(
        model,
        tok,
        _problems(),
        _opts(kl_coef=0.1),
        tmp_path / "kl",
        ref_model=ref,
        verify=has_digit,
    )
    h = res["history"]
    assert h[0]["kl"] == pytest.approx(0.0, abs=1e-7) and h[1]["kl"] > 1e-6
    assert [r["trained_rows"] for r in h] == [16, 16]
    model2, _ = policy.load_policy(tiny, "cpu")
    other = copy.deepcopy(model2).eval()
    with torch.no_grad():
        for p in other.parameters():
            p.add_(0.05 * torch.randn_like(p))
    res = train(
        model2,
        tok,
        _problems(),
        _opts(kl_coef=0.0),
        tmp_path / "kl_other",
        ref_model=other,
        verify=has_digit,
    )
    assert res["history"][0]["kl"] > 1e-4
    assert res["history"][0]["trained_rows"] < 16  # no KL gradient: zero-advantage rows skipped


def test_tis_weights_and_cap_through_the_loop(tiny, tmp_path):
    """The hf engine's logprobs equal the trainer's (fp32), so pi_old / pi_engine = 1 per token:
    a cap of 0.5 caps every token and halves the gradient; a cap of 2 changes nothing."""
    out = {}
    for cap in (0.0, 0.5, 2.0):
        model, tok = policy.load_policy(tiny, "cpu")
        opts = _opts(tis_cap=cap, steps=1)
        out[cap] = train(model, tok, _problems(), opts, tmp_path / f"tis{cap}", verify=has_digit)[
            "history"
        ][0]
    assert out[0.0]["trained_rows"] > 0 and abs(out[0.0]["engine_kl"]) < 1e-5
    assert out[0.5]["tis_capped_frac"] == 1.0 and out[0.5]["tis_mean"] == pytest.approx(0.5)
    assert out[2.0]["tis_capped_frac"] == 0.0 and out[2.0]["tis_mean"] == pytest.approx(1.0, 1e-4)
    assert out[0.5]["grad_norm"] == pytest.approx(0.5 * out[0.0]["grad_norm"], rel=1e-4)
    assert out[2.0]["grad_norm"] == pytest.approx(out[0.0]["grad_norm"], rel=1e-4)


def test_max_seconds_stops_checkpointed_and_resumes(tiny, tmp_path):
    model, tok = policy.load_policy(tiny, "cpu")
    opts = _opts(steps=3, max_seconds=1e-9)
    res = train(model, tok, _problems(), opts, tmp_path / "cap", verify=has_digit)
    assert res["steps_done"] == 1 and len(res["history"]) == 1
    assert [s for s, _ in checkpoints.list_checkpoints(tmp_path / "cap" / "checkpoints")] == [1]
    model2, _ = policy.load_policy(tiny, "cpu")
    res = train(model2, tok, _problems(), _opts(steps=3), tmp_path / "cap", verify=has_digit)
    assert res["resumed_at"] == 1 and res["steps_done"] == 3


def test_resume_refuses_changed_options(tiny, tmp_path):
    """As SFT: a checkpoint written with other run-shaping options is not silently continued;
    options that only say when to save, evaluate or stop may change."""
    model, tok = policy.load_policy(tiny, "cpu")
    train(model, tok, _problems(), _opts(steps=3), tmp_path / "r", verify=has_digit, stop_at=1)
    for changed in (dict(lr=5e-3), dict(advantage="grpo"), dict(steps=4), dict(mini_batches=3)):
        m, _ = policy.load_policy(tiny, "cpu")
        with pytest.raises(ValueError, match="other options"):
            opts = _opts(**{"steps": 3, **changed})
            train(m, tok, _problems(), opts, tmp_path / "r", verify=has_digit)
    m, _ = policy.load_policy(tiny, "cpu")
    res = train(
        m,
        tok,
        _problems(),
        _opts(steps=3, save_every=1, max_seconds=3600.0),
        tmp_path / "r",
        verify=has_digit,
    )
    assert res["resumed_at"] == 1 and res["steps_done"] == 3


def test_trained_rows():
    adv = torch.tensor([0.0, 1.0, 0.0, -2.0])
    assert trained_rows(adv, 0.0).tolist() == [1, 3]
    assert trained_rows(adv, 0.1).tolist() == [0, 1, 2, 3]
    assert math.isclose(float(adv.sum()), -1.0)
