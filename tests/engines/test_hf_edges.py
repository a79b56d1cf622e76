"""hf engine sampling: behaviours that mutation testing (docs/MUTATION.md) found untested."""

import torch

from vibethinker.engines import SamplingParams
from vibethinker.engines.hf_sampling import nucleus, sample_next

LOGITS = torch.tensor([[0.0, 0.5, 1.0, 1.5, -0.5]]).expand(300, -1)


def _draw(params: SamplingParams, seed: int, global_seed: int) -> list[int]:
    torch.manual_seed(global_seed)  # the global stream must not matter
    g = torch.Generator().manual_seed(seed)
    return sample_next(LOGITS, params, g)[0].tolist()


def test_sampling_draws_from_the_given_generator_only():
    """Same generator seed, different global RNG state: the same tokens (with and without top-p);
    another generator seed: other tokens."""
    for params in (SamplingParams(top_p=1.0), SamplingParams(top_p=0.9)):
        a = _draw(params, seed=3, global_seed=0)
        assert a == _draw(params, seed=3, global_seed=12345)
        assert a != _draw(params, seed=4, global_seed=0)
        assert len(set(a)) > 1  # really sampled


def test_negative_top_k_is_off_like_zero():
    """vLLM's "off" (-1) leaves the distribution alone, like 0: the same draws."""
    off = _draw(SamplingParams(top_k=0, top_p=1.0), seed=5, global_seed=0)
    assert _draw(SamplingParams(top_k=-1, top_p=1.0), seed=5, global_seed=0) == off
    assert len(set(off)) == 5


def test_nucleus_drops_a_token_once_the_mass_before_it_equals_top_p():
    """Exact binary fractions: the mass ranked before a token reaching top_p exactly drops it."""
    probs = torch.tensor([[0.125, 0.5, 0.25, 0.125]])
    vals, idx = nucleus(probs, 0.5)
    kept = {int(i) for v, i in zip(vals[0], idx[0]) if v > 0}
    assert kept == {1}
    vals, idx = nucleus(probs, 0.75)
    assert {int(i) for v, i in zip(vals[0], idx[0]) if v > 0} == {1, 2}
    # and through sample_next: top_p = 0.5 only ever returns the 0.5 token
    g = torch.Generator().manual_seed(0)
    toks = sample_next(torch.log(probs).expand(200, -1), SamplingParams(top_p=0.5), g)[0]
    assert set(toks.tolist()) == {1}
