"""The padding-free RL update (`max_tokens_per_micro`): rows packed end to end with per-sample
positions, micro-batches sized by a token budget. Same logprobs, loss and gradients as the
right-padded path; attention never crosses rows; every row is in exactly one micro-batch."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.helpers.loop_options import rl_options
from vibethinker.train import policy
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.rl_update import frozen_logprobs, token_chunks, update
from vibethinker.train.rollout import build_batch, packed_inputs, response_logprobs
from vibethinker.types import Completion

SMALL = dict(
    vocab_size=97,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
)


def _model(arch: str = "llama"):
    torch.manual_seed(0)
    if arch == "gemma2":  # soft-capped logits: the model's own (whole-logits) forward
        from transformers import Gemma2Config, Gemma2ForCausalLM

        return Gemma2ForCausalLM(
            Gemma2Config(
                **SMALL, head_dim=8, final_logit_softcapping=2.0, attn_implementation="eager"
            )
        )
    from transformers import Qwen2Config, Qwen2ForCausalLM

    model = Qwen2ForCausalLM(Qwen2Config(**SMALL, attn_implementation="sdpa"))
    with torch.no_grad():  # sharpen attention: a random init attends almost uniformly
        for name, p in model.named_parameters():
            if any(k in name for k in ("q_proj", "k_proj")):
                p.mul_(4.0)
    return model


def _batch(n: int = 9, seed: int = 0, engine: bool = False):
    """Rows of very different prompt and response lengths (one response empty)."""
    g = torch.Generator().manual_seed(seed)
    prompts, comps = [], []
    for i in range(n):
        p = int(torch.randint(1, 12, (1,), generator=g))
        r = 0 if i == 3 else int(torch.randint(1, 40 if i % 4 else 6, (1,), generator=g))
        ids = torch.randint(1, 97, (p + r,), generator=g).tolist()
        lp = (-torch.rand(r, generator=g)).tolist() if engine else None
        prompts.append(ids[:p])
        comps.append(Completion("", ids[p:], lp))
    return build_batch(prompts, comps, pad_id=0)


def test_packed_inputs_by_hand():
    b = build_batch([[5, 6], [7]], [Completion("", [8, 9, 10]), Completion("", [11])], pad_id=0)
    ids, pos, at = packed_inputs(b)
    assert ids.tolist() == [[5, 6, 8, 9, 10, 7, 11]]
    assert pos.tolist() == [[0, 1, 2, 3, 4, 0, 1]]
    # row 0's responses are predicted at 1, 2, 3; row 1's single one at 5 (its prompt's end)
    assert at[0].tolist() == [1, 2, 3] and at[1].tolist() == [5, 0, 0]


@pytest.mark.parametrize("arch", ["qwen2", "gemma2"])
def test_packed_logprobs_and_gradients_equal_the_padded_ones(arch):
    model = _model(arch)
    b = _batch()
    out = {}
    for packed in (False, True):
        model.zero_grad()
        lp, ent = response_logprobs(model, b, with_entropy=True, packed=packed)
        (lp * torch.linspace(-1, 2, lp.numel()).view_as(lp)).sum().backward()
        grads = {k: p.grad.clone() for k, p in model.named_parameters() if p.grad is not None}
        out[packed] = (lp.detach(), ent, grads)
    (lp0, e0, g0), (lp1, e1, g1) = out[False], out[True]
    m = b.mask
    assert torch.allclose(lp1, lp0, rtol=1e-5, atol=1e-5)
    assert torch.allclose(e1[m], e0[m], atol=1e-5)  # (off the mask: whatever the path left)
    assert (lp1[~b.mask] == 0).all() and g0.keys() == g1.keys()
    for k in g0:
        scale = float(g0[k].abs().max())
        assert torch.allclose(g1[k], g0[k], rtol=1e-5, atol=1e-5 * scale), k


def test_packing_without_restarting_positions_would_leak(monkeypatch):
    """Control: the same packed row with positions that run on lets attention cross rows, and
    the logprobs change (so the test above can see a leak)."""
    import vibethinker.train.rollout as ro

    model = _model()
    b = _batch()
    with torch.no_grad():
        good, _ = response_logprobs(model, b, packed=True)
        real = ro.packed_inputs

        def leaky(batch):
            ids, pos, at = real(batch)
            return ids, torch.arange(ids.shape[1])[None], at

        monkeypatch.setattr(ro, "packed_inputs", leaky)
        bad, _ = response_logprobs(model, b, packed=True)
    assert float((bad - good).abs().max()) > 1e-2


def test_token_chunks_respect_the_budget_and_cover_each_row_once():
    lengths = torch.tensor([5, 30, 12, 3, 50, 7, 7, 1, 20])
    rows = torch.tensor([0, 1, 2, 4, 5, 6, 7, 8])  # row 3 has no gradient
    chunks = token_chunks(rows, lengths, 32, collective=False)
    got = sorted(i for r, real in chunks for i in r.tolist())
    assert got == rows.tolist() and all(real for _, real in chunks)
    for r, _ in chunks:
        tot = int(lengths[r].sum())
        assert tot <= 32 or len(r) == 1  # only a row longer than the budget goes over, alone
    assert chunks[0][0].tolist() == [4]  # longest first
    assert len(chunks) == 4  # first fit: [50], [30, 1], [20, 12], [7, 7, 5]


class _Capture(torch.optim.SGD):
    """An optimizer that keeps the gradients it is stepped with (and does not move)."""

    def __init__(self, model):
        super().__init__(model.parameters(), lr=0.0)
        self.names = {id(p): k for k, p in model.named_parameters()}
        self.grads: dict[str, torch.Tensor] = {}

    def step(self, closure=None):
        self.grads = {
            self.names[id(p)]: p.grad.clone()
            for g in self.param_groups
            for p in g["params"]
            if p.grad is not None
        }


def _opts(**kw) -> RLConfig:
    base = dict(clip_eps=0.2, tis_cap=2.0, max_grad_norm=0.0, kl_coef=0.05, micro_batch=2)
    return rl_options(**{**base, **kw})


@pytest.mark.parametrize("budget", [40, 64, 1000])
def test_update_packed_equals_padded(budget):
    """One update with a KL term, TIS and an off-policy pi_old (clipping active): the packed,
    token-budget update gives the padded update's loss, stats and gradients (every parameter,
    to 1e-5 of its largest entry); the reference model's logprobs too."""
    base = _model()
    b = _batch(engine=True)
    n = b.mask.shape[0]
    adv = torch.linspace(-1.5, 1.5, n)
    rows = torch.arange(n)
    ref = copy.deepcopy(base).eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.01 * torch.randn_like(p))
    res = {}
    for tokens in (0, budget):
        model = copy.deepcopy(base)
        opts = _opts(max_tokens_per_micro=tokens)
        ref_lp = frozen_logprobs(ref, b, rows, opts.micro_batch, tokens)
        old_lp = frozen_logprobs(ref, b, rows, 3, 0) * 0.5  # some ratios far from 1: clipping
        opt = _Capture(model)
        u = update(model, opt, None, b, adv, rows, opts, old_logp=old_lp, ref_logp=ref_lp)
        res[tokens] = (u, ref_lp, opt.grads)
    (u0, r0, p0), (u1, r1, p1) = res[0], res[budget]
    assert torch.allclose(r1, r0, atol=1e-5)
    assert u1["loss"] == pytest.approx(u0["loss"], rel=1e-5)
    assert u0["clip_frac"] > 0 and u1["clip_frac"] == pytest.approx(u0["clip_frac"])
    for k in ("kl", "entropy", "ratio_mean", "tis_mean", "grad_norm"):
        assert u1[k] == pytest.approx(u0[k], rel=1e-5), k
    assert p0.keys() == p1.keys() and len(p0) == len(list(base.parameters()))
    for k in p0:
        scale = float(p0[k].abs().max())
        assert torch.allclose(p1[k], p0[k], rtol=1e-5, atol=1e-5 * scale), k


def test_the_rl_config_key_defaults_to_the_padded_path_and_refuses_a_negative_budget():
    from vibethinker.train.rl import _check_inputs
    from vibethinker.types import Problem

    assert RLConfig().max_tokens_per_micro == 0
    with pytest.raises(ValueError, match="max_tokens_per_micro"):
        _check_inputs([Problem("p", "math", "q", answer="1")], rl_options(max_tokens_per_micro=-1))


def test_the_loop_with_a_token_budget_takes_the_padded_loops_first_step(tmp_path):
    """`rl.train` with `max_tokens_per_micro` (update, reference-model KL and pi_old forwards
    all packed, two mini-batches) logs the padded run's first step (same rollouts: the sampling
    is seeded and the weights are equal until the first update)."""
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.train.rl import train
    from vibethinker.types import Problem, Score

    probs = [
        Problem(f"p{i}", "math", f"Compute {i}+{i % 5}.", answer=str(i + i % 5)) for i in range(8)
    ]
    tiny = build_tiny_model(
        tmp_path / "tiny", [p.prompt + " 12345 ok" for p in probs] * 4, "d1", 300, 0
    )

    def has_digit(problems, responses):
        return [
            Score(float(ok), ok, "ok") for ok in (any(c.isdigit() for c in r) for r in responses)
        ]

    rows = {}
    for tokens in (0, 48):
        model, tok = policy.load_policy(tiny, "cpu")
        ref = copy.deepcopy(model).eval()
        opts = rl_options(
            steps=1,
            prompts_per_step=4,
            group_size=4,
            max_new_tokens=12,
            seed=1,
            kl_coef=0.1,
            mini_batches=2,
            micro_batch=3,
            truncated_reward="verify",
            max_tokens_per_micro=tokens,
        )
        res = train(
            model,
            tok,
            probs,
            opts,
            tmp_path / f"run{tokens}",
            ref_model=ref,
            prompt_fn=lambda p: p.prompt,
            verify=has_digit,
        )
        rows[tokens] = res["history"][0]
    a, b = rows[0], rows[48]
    assert a["gen_tokens"] == b["gen_tokens"] and a["trained_rows"] == b["trained_rows"] == 16
    for k in ("loss", "kl", "entropy", "ratio_mean", "grad_norm", "clip_frac"):
        assert b[k] == pytest.approx(a[k], rel=1e-4, abs=1e-7), k
