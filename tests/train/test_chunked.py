"""The chunked LM head + log-softmax (train/chunked.py) against the whole-logits computation:
values, entropies and gradients w.r.t. the hidden states AND the head's weight and bias."""

from __future__ import annotations

import pytest
import torch

from vibethinker.train import chunked


def _reference(h, head, targets):
    logp = torch.log_softmax(head(h).float(), -1)
    return logp.gather(-1, targets[:, None])[:, 0], -(logp.exp() * logp).sum(-1)


def _case(m=37, hidden=16, vocab=300, bias=True, seed=0):
    g = torch.Generator().manual_seed(seed)
    head = torch.nn.Linear(hidden, vocab, bias=bias)
    with torch.no_grad():
        head.weight.copy_(torch.randn(vocab, hidden, generator=g) * 0.5)
        if bias:
            head.bias.copy_(torch.randn(vocab, generator=g))
    h = torch.randn(m, hidden, generator=g, requires_grad=True)
    targets = torch.randint(0, vocab, (m,), generator=g)
    weights = torch.randn(m, generator=g)  # a non-uniform upstream gradient
    return h, head, targets, weights


def _grads(fn, h, head, targets, weights):
    h.grad = None
    head.zero_grad(set_to_none=True)
    tok, ent = fn(h, head, targets)
    (tok * weights).sum().backward()
    bias = head.bias.grad.clone() if head.bias is not None else None
    return tok.detach(), ent.detach(), h.grad.clone(), head.weight.grad.clone(), bias


def _close(a, b, rel=1e-5):
    a, b = a.detach(), b.detach()
    assert torch.allclose(a, b, rtol=rel, atol=rel * float(b.abs().max())), float(
        (a - b).abs().max()
    )


@pytest.mark.parametrize("chunk", [1, 5, 37, 100])
@pytest.mark.parametrize("bias", [True, False])
def test_values_and_gradients_equal_the_whole_logits(chunk, bias):
    h, head, targets, w = _case(bias=bias)
    ref = _grads(_reference, h, head, targets, w)

    def chunk_fn(h, head, t):
        return chunked.token_logprobs(h, head, t, chunk=chunk, with_entropy=True)

    got = _grads(chunk_fn, h, head, targets, w)
    for a, b in zip(got, ref):
        if b is not None:
            _close(a, b)


def test_sum_of_logprobs_is_the_cross_entropy_sum():
    h, head, targets, _ = _case(m=50, vocab=1000)
    tok, ent = chunked.token_logprobs(h, head, targets, chunk=7)
    ce = torch.nn.functional.cross_entropy(head(h), targets, reduction="sum")
    _close(-tok.sum(), ce)
    assert ent is None


def test_frozen_head_and_no_grad():
    h, head, targets, w = _case()
    head.requires_grad_(False)
    tok, _ = chunked.token_logprobs(h, head, targets, chunk=4)
    (tok * w).sum().backward()
    assert head.weight.grad is None and h.grad is not None
    with torch.no_grad():
        tok2, _ = chunked.token_logprobs(h, head, targets, chunk=4)
    _close(tok2, _reference(h, head, targets)[0])


def test_a_head_that_is_not_a_plain_linear_goes_through_the_module():
    """A wrapped head (as peft wraps a LoRA'd lm_head) takes the checkpointed path: same values
    and gradients, including the wrapper's own parameters."""

    class Scaled(torch.nn.Linear):
        def __init__(self, *a, **k):
            super().__init__(*a, **k)
            self.scale = torch.nn.Parameter(torch.tensor(1.5))

        def forward(self, x):
            return super().forward(x) * self.scale

    h, plain, targets, w = _case()
    head = Scaled(plain.in_features, plain.out_features)
    head.load_state_dict(plain.state_dict(), strict=False)
    ref = _grads(_reference, h, head, targets, w)
    s_ref = head.scale.grad.clone()

    def chunk_fn(h, head, t):
        return chunked.token_logprobs(h, head, t, chunk=6, with_entropy=True)

    got = _grads(chunk_fn, h, head, targets, w)
    for a, b in zip(got, ref):
        _close(a, b)
    _close(head.scale.grad, s_ref)


def test_chunk_size_follows_the_vocabulary_and_bad_shapes_are_refused():
    assert chunked.chunk_size(151_936) == chunked.LOGITS_BUDGET // 151_936
    assert chunked.chunk_size(10**9) == chunked.MIN_CHUNK
    h, head, targets, _ = _case()
    with pytest.raises(ValueError, match="targets"):
        chunked.token_logprobs(h, head, targets[:-1])


def test_the_whole_logits_are_never_kept_for_backward():
    """What autograd keeps between forward and backward is the inputs and [M] floats: no
    [positions, vocab] tensor (that is the point of the Function)."""
    h, head, targets, _ = _case(m=64, vocab=5000)
    kept = []

    def pack(t):
        kept.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        tok, _ = chunked.token_logprobs(h, head, targets, chunk=8)
    assert max(kept) <= head.weight.numel() and 64 * 5000 not in kept
    tok.sum().backward()


def test_sft_loss_and_gradients_at_the_real_vocabulary_equal_the_whole_logits_path():
    """SFT's `token_loss_sum` (chunked: 151,936 / LOGITS_BUDGET -> several chunks here) against
    the earlier whole-logits cross-entropy on a random Qwen2 model with Qwen2.5's vocabulary:
    the loss and the gradient of every parameter (embeddings, layers, the untied head)."""
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from vibethinker.train import sft

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=151_936,
        hidden_size=16,
        intermediate_size=32,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
        tie_word_embeddings=False,
    )
    model = Qwen2ForCausalLM(cfg)
    ids = torch.randint(0, cfg.vocab_size, (2, 600))
    labels = ids.clone()
    labels[:, :100] = -100  # a prompt
    batch = {
        "input_ids": ids,
        "labels": labels,
        "attention_mask": None,
        "position_ids": torch.arange(600).expand(2, -1),
    }
    assert chunked.chunk_size(cfg.vocab_size) < 2 * 499  # several chunks

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return float(loss.detach()), {k: p.grad.clone() for k, p in model.named_parameters()}

    got = grads(sft.token_loss_sum(model, batch)[0])
    hidden = model.model(input_ids=ids, position_ids=batch["position_ids"]).last_hidden_state
    sel = labels[:, 1:] != -100
    logits = model.lm_head(hidden[:, :-1][sel]).float()
    want = grads(torch.nn.functional.cross_entropy(logits, labels[:, 1:][sel], reduction="sum"))
    _close(torch.tensor(got[0]), torch.tensor(want[0]))
    for k in want[1]:
        _close(got[1][k], want[1][k])


def test_under_bf16_autocast_the_head_runs_in_bf16_as_head_h_would():
    """(CPU autocast stands in for CUDA's.) The matmuls run in the autocast dtype, the softmax
    in fp32: the values are the plain `head(h)` path's under the same autocast; the gradients
    agree to bf16 rounding (dW is summed over chunks in fp32) and come back in fp32."""
    h, head, targets, w = _case(m=40, hidden=32, vocab=500)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        ref = _grads(_reference, h, head, targets, w)

        def chunk_fn(h, head, t):
            return chunked.token_logprobs(h, head, t, chunk=7, with_entropy=True)

        got = _grads(chunk_fn, h, head, targets, w)
    assert got[0].dtype == torch.float32 and got[3].dtype == torch.float32
    _close(got[0], ref[0], rel=1e-5)
    for a, b in zip(got[2:], ref[2:]):
        _close(a, b, rel=2e-2)
