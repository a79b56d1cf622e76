"""The hf sampler's static path (preallocated KV cache, fixed-shape decode steps; CUDA graphs on
GPU) runs the same code on CPU: its tokens, logprobs and finish reasons must equal the plain
path's."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny_qwen2 import LONG_PROMPTS, PROMPTS, _assert_teacher_forced, tiny_qwen2
from vibethinker.engines import SamplingParams
from vibethinker.engines.hf import HFSampler


@pytest.fixture(scope="module")
def sharp():
    """Weights scaled up so greedy decodes differ between prompts and rows end at different
    steps (a random init's greedy output is one repeated character)."""
    torch.set_num_threads(1)
    model, tok = tiny_qwen2(seed=3)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model, tok


def _same(a, b, tol=1e-4):
    for ga, gb in zip(a, b, strict=True):
        for x, y in zip(ga, gb, strict=True):
            assert x.token_ids == y.token_ids
            assert x.text == y.text
            assert x.finish_reason == y.finish_reason
            assert torch.allclose(torch.tensor(x.logprobs), torch.tensor(y.logprobs), atol=tol)


def test_static_greedy_equals_plain(sharp):
    """Left-padded prompts of different lengths, n=2, stop strings ending rows at different
    steps: the same tokens, texts, finish reasons and logprobs as the plain loop."""
    model, tok = sharp
    greedy = SamplingParams(max_new_tokens=20, temperature=0.0, stop=["a", "+"])
    plain = HFSampler(model, tok, static_cache=False).generate(LONG_PROMPTS, 2, greedy)
    static = HFSampler(model, tok, static_cache=True, sync_every=4)
    assert static.static_cache
    out = static.generate(LONG_PROMPTS, 2, greedy)
    _same(plain, out)
    assert len({len(c.token_ids) for g in out for c in g}) > 2  # rows ended at different steps
    # no stop strings: every row runs to the cap (or EOS) exactly as the plain loop
    g2 = SamplingParams(max_new_tokens=13, temperature=0.0)
    _same(HFSampler(model, tok).generate(PROMPTS, 3, g2), static.generate(PROMPTS, 3, g2))


def test_static_eos_stops_rows(sharp):
    """A row that samples an EOS ends there with finish_reason "stop" (EOS kept as its last
    token), while the others continue: forced here by making one character an EOS id."""
    model, tok = sharp
    greedy = SamplingParams(max_new_tokens=16, temperature=0.0)
    ref = HFSampler(model, tok).generate(LONG_PROMPTS, 1, greedy)
    first = ref[0][0].token_ids[2]  # a token some row emits mid-way
    outs = []
    for static in (False, True):
        s = HFSampler(model, tok, static_cache=static)
        s.eos_ids = [*s.eos_ids, first]
        outs.append(s.generate(LONG_PROMPTS, 1, greedy))
    _same(*outs)
    fins = {c.finish_reason for g in outs[1] for c in g}
    assert fins == {"stop", "length"}, fins
    assert all(c.token_ids[-1] == first for g in outs[1] for c in g if c.finish_reason == "stop")


def test_static_sampled_logprobs_and_reuse(sharp):
    """Sampled rows' logprobs equal a teacher-forced forward (each row decodes on its own
    cache); a second call of the same shape reuses the buffers and still agrees; a seed
    reproduces its samples."""
    model, tok = sharp
    s = HFSampler(model, tok, static_cache=True)
    p = SamplingParams(max_new_tokens=12, seed=5, temperature=0.8, top_p=0.9)
    a = s.generate(LONG_PROMPTS, 2, p)
    _assert_teacher_forced(model, s, LONG_PROMPTS, a)
    dec = s._decoder
    b = s.generate(LONG_PROMPTS, 2, p)
    assert s._decoder is dec  # same shape: buffers kept
    _same(a, b, tol=0.0)


def test_static_off_by_default_and_env(sharp, monkeypatch):
    model, tok = sharp
    monkeypatch.delenv("VIBETHINKER_HF_STATIC", raising=False)
    assert not HFSampler(model, tok).static_cache
    monkeypatch.setenv("VIBETHINKER_HF_STATIC", "1")
    s = HFSampler(model, tok)
    assert s.static_cache and not s.cuda_graphs  # no graphs on CPU
