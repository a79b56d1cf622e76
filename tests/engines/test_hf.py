"""The hf sampler on a tiny random Qwen2 with a character-level tokenizer built here (no hub)."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.tiny_qwen2 import LONG_PROMPTS, PROMPTS, _assert_teacher_forced, tiny_qwen2
from vibethinker.engines import SamplingParams, make_sampler, truncate_at_stop
from vibethinker.engines.hf import HFSampler
from vibethinker.engines.hf_sampling import nucleus, plan_batches, sample_next


@pytest.fixture(scope="module")
def tiny():
    torch.set_num_threads(1)
    return tiny_qwen2()


def test_plan_batches_respects_budget_and_counts():
    lengths = [5, 30, 12, 7]
    batches = plan_batches(lengths, n=4, max_new_tokens=10, token_budget=130, max_batch_size=64)
    counts = {}
    for b in batches:
        rows = sum(c for _, c in b)
        widest = max(lengths[i] for i, _ in b)
        assert rows * (widest + 10) <= 130 or rows == 1
        for i, c in b:
            counts[i] = counts.get(i, 0) + c
    assert counts == {0: 4, 1: 4, 2: 4, 3: 4}
    assert batches[0][0][0] == 1  # longest prompt first
    # budget smaller than one row still makes progress, one row per batch
    assert all(sum(c for _, c in b) == 1 for b in plan_batches([50], 3, 10, 1, 8))


def test_shapes_n_and_logprobs(tiny):
    model, tok = tiny
    s = make_sampler("hf", model=model, tokenizer=tok)
    out = s.generate(PROMPTS, n=3, params=SamplingParams(max_new_tokens=12, seed=1))
    assert len(out) == 3 and all(len(o) == 3 for o in out)
    for group in out:
        for c in group:
            assert 1 <= len(c.token_ids) <= 12
            assert len(c.logprobs) == len(c.token_ids)
            assert all(lp <= 0 for lp in c.logprobs)
            assert c.finish_reason in ("stop", "length")
            if c.finish_reason == "length":
                assert len(c.token_ids) == 12 and c.truncated
            else:
                assert c.token_ids[-1] in s.eos_ids


def test_logprobs_match_teacher_forcing(tiny):
    """Logprobs are the raw policy's (temperature 1): a full forward over prompt+completion,
    without padding or cache, gives the same numbers."""
    model, tok = tiny
    s = HFSampler(model, tok, token_budget=10_000)
    params = SamplingParams(max_new_tokens=16, seed=3, temperature=0.7, top_p=0.9)
    out = s.generate(PROMPTS, n=2, params=params)
    _assert_teacher_forced(model, s, PROMPTS, out)


def test_seed_determinism_and_variation(tiny):
    model, tok = tiny
    s = HFSampler(model, tok)
    p = SamplingParams(max_new_tokens=10, seed=7)
    a = s.generate(PROMPTS, 2, p)
    b = s.generate(PROMPTS, 2, p)
    c = s.generate(PROMPTS, 2, SamplingParams(max_new_tokens=10, seed=8))
    ids = lambda out: [[x.token_ids for x in g] for g in out]  # noqa: E731
    assert ids(a) == ids(b)
    assert ids(a) != ids(c)


def test_batching_does_not_change_greedy(tiny):
    """Left padding and prefix sharing must not change what a row computes (rows finishing at
    different steps, i.e. compaction: test_compaction_keeps_each_row_its_own_cache)."""
    model, tok = tiny
    greedy = SamplingParams(max_new_tokens=10, temperature=0.0)
    big = HFSampler(model, tok).generate(PROMPTS, 2, greedy)
    one = HFSampler(model, tok, token_budget=1).generate(PROMPTS, 2, greedy)
    assert [[c.token_ids for c in g] for g in big] == [[c.token_ids for c in g] for g in one]
    # and greedy agrees with HF generate (which sees one unpadded prompt at a time)
    for prompt, group in zip(PROMPTS, big):
        p = torch.tensor([HFSampler(model, tok).encode(prompt)])
        ref = model.generate(
            p,
            attention_mask=torch.ones_like(p),
            do_sample=False,
            max_new_tokens=10,
            pad_token_id=tok.pad_token_id,
        )
        assert ref[0, p.shape[1] :].tolist() == group[0].token_ids


def _shrinking_forward(monkeypatch):
    """Record the batch size of every forward of HFSampler (prefill and decode steps)."""
    sizes: list[int] = []
    orig = HFSampler._forward

    def spy(self, input_ids, *a, **kw):
        sizes.append(int(input_ids.shape[0]))
        return orig(self, input_ids, *a, **kw)

    monkeypatch.setattr(HFSampler, "_forward", spy)
    return sizes


@pytest.fixture(scope="module")
def sharp():
    """A tiny model whose greedy decodes differ between prompts (weights scaled up: a random
    init's greedy output is one repeated character)."""
    torch.set_num_threads(1)
    model, tok = tiny_qwen2(seed=3)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(3.0)
    return model, tok


def test_compaction_keeps_each_row_its_own_cache(sharp, monkeypatch):
    """Rows of different prompts stop at different steps (stop strings), so finished rows are
    dropped from the batch mid-decode (checked: the decode batch shrinks). Every row must then
    decode exactly as it does alone: greedy tokens equal a one-row-at-a-time reference without
    compaction, and sampled rows' logprobs equal a teacher-forced forward over prompt + tokens
    (a row that continued on another row's KV cache would not)."""
    model, tok = sharp
    sizes = _shrinking_forward(monkeypatch)
    stop = ["a", "+"]
    greedy = SamplingParams(max_new_tokens=24, temperature=0.0, stop=stop)
    out = HFSampler(model, tok, compact_frac=0.75).generate(LONG_PROMPTS, 2, greedy)
    first = sizes[1]  # sizes[0] is the prefill (one row per prompt)
    assert first == 2 * len(LONG_PROMPTS) and 0 < min(sizes[1:]) < first, sizes
    lens = {len(c.token_ids) for g in out for c in g}
    assert len(lens) > 2, lens  # rows really finished at different steps
    ref = HFSampler(model, tok, token_budget=1, compact_frac=0.0).generate(LONG_PROMPTS, 2, greedy)
    assert [[c.token_ids for c in g] for g in out] == [[c.token_ids for c in g] for g in ref]
    assert [[c.text for c in g] for g in out] == [[c.text for c in g] for g in ref]

    s = HFSampler(model, tok, compact_frac=0.9)
    sizes.clear()
    sampled = s.generate(LONG_PROMPTS, 3, SamplingParams(max_new_tokens=24, seed=5, stop=stop))
    assert 0 < min(sizes[1:]) < sizes[1], sizes
    _assert_teacher_forced(model, s, LONG_PROMPTS, sampled)


def test_temperature_shapes_the_sampling_distribution():
    """sample_next draws from softmax(logits / T): empirical frequencies over many draws match
    it (about 5 standard errors of slack; a fixed seed, so the test is deterministic)."""
    logits = torch.tensor([[0.0, 1.0, 2.0, -1.0]])
    n = 6000
    for temp in (0.5, 1.0, 2.0):
        g = torch.Generator().manual_seed(11)
        p = SamplingParams(temperature=temp, top_p=1.0, top_k=0)
        draws = torch.cat([sample_next(logits.expand(n, -1), p, g)[0]])
        freq = torch.bincount(draws, minlength=4).double() / n
        want = torch.softmax(logits[0].double() / temp, -1)
        assert torch.allclose(freq, want, atol=5 * (0.25 / n) ** 0.5), (temp, freq, want)
        # the logprob returned is the raw policy's (temperature 1), whatever T
        _, lp = sample_next(logits, p, g)
        raw = torch.log_softmax(logits[0], -1)
        assert float(lp) in [pytest.approx(float(x)) for x in raw]


def test_inverse_cdf_edges(monkeypatch):
    """One float64 uniform per row; u = 0 never picks a zero-probability id (right-sided search),
    u -> 1 picks the last id with mass."""
    from vibethinker.engines.hf_sampling import inverse_cdf

    draws = []

    def fake_rand(shape, generator=None, device=None, dtype=None):
        draws.append(dtype)
        return torch.tensor([[0.0], [1.0 - 1e-12]], dtype=dtype)[: shape[0]]

    monkeypatch.setattr(torch, "rand", fake_rand)
    probs = torch.tensor([[0.0, 0.0, 0.7, 0.3, 0.0], [0.0, 0.5, 0.5, 0.0, 0.0]])
    assert inverse_cdf(probs, None).tolist() == [2, 2]
    assert draws == [torch.float64]


def _nucleus_reference(probs: torch.Tensor, top_p: float) -> list[dict[int, float]]:
    """Per row: {token: prob} of the nucleus by a full sort (the slow reference)."""
    out = []
    for row in probs.tolist():
        order = sorted(range(len(row)), key=lambda i: -row[i])
        kept, mass = {}, 0.0
        for i in order:
            if mass >= top_p:
                break
            kept[i] = row[i]
            mass += row[i]
        out.append(kept)
    return out


def test_top_p_fast_path_matches_a_full_sort():
    """A vocabulary of 5000 (above the top-k shortcut's k0 = 64): peaked rows take the top-k
    fast path, flat rows the full sort; both keep exactly the reference nucleus."""
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(6, 5000, generator=g)
    logits[:3] *= 8.0  # peaked: the nucleus is a few tokens
    probs = torch.softmax(logits, -1)
    k0 = 64
    assert bool((probs[:3].amax(-1) * k0 >= 0.9).all())  # these rows qualify for the fast path
    for top_p in (0.5, 0.9):
        for rows in (slice(0, 3), slice(0, 6)):  # all peaked (fast) / mixed (full sort)
            vals, idx = nucleus(probs[rows], top_p, k0)
            got = [{int(i): float(v) for v, i in zip(vr, ir) if v > 0} for vr, ir in zip(vals, idx)]
            want = _nucleus_reference(probs[rows], top_p)
            assert [set(x) for x in got] == [set(x) for x in want]
            for a, b in zip(got, want):
                assert all(a[k] == pytest.approx(b[k], rel=1e-6) for k in b)
    assert nucleus(probs[:3], 0.9)[0].shape[-1] == k0  # peaked rows: the top-k shortcut ran
    assert nucleus(probs, 0.9)[0].shape[-1] == 5000  # flat rows: the full sort
    # a row whose top token alone passes the shortcut's test (0.02 * 64 >= 0.9) but whose top 64
    # hold far less than 0.9: the top-k attempt must fall back to the full sort
    flat = 1 + 0.01 * torch.rand(1, 5000, generator=g)  # nearly flat, no ties
    flat = flat / flat.sum() * 0.98
    flat[0, 7] = 0.02
    rows = torch.cat([probs[:2], flat])
    vals, idx = nucleus(rows, 0.9, k0)
    got = [{int(i) for v, i in zip(vr, ir) if v > 0} for vr, ir in zip(vals, idx)]
    assert got == [set(x) for x in _nucleus_reference(rows, 0.9)]
    assert len(got[2]) > 4000 and vals.shape[-1] == 5000
    # sampling with top-p over the large vocabulary only ever returns nucleus tokens
    peaked = logits[:1].expand(500, -1)
    toks = sample_next(peaked, SamplingParams(top_p=0.5), g)[0]
    assert set(toks.tolist()) <= set(_nucleus_reference(probs[:1], 0.5)[0])


def _one(s, seed, max_new, stop):
    return s.generate(["1+2="], 1, SamplingParams(max_new_tokens=max_new, seed=seed, stop=stop))[0][
        0
    ]


def test_stop_strings_cut_text_and_tokens(tiny):
    model, tok = tiny
    s = HFSampler(model, tok)
    # one row, so the random stream is the same with and without the stop string
    seed = next(i for i in range(50) if len(_one(s, i, 30, []).text) >= 6)
    base = _one(s, seed, 30, [])
    text0 = base.text
    stop = text0[2:4]  # a stop string that occurs in the free-running sample
    c = _one(s, seed, 30, [stop])
    assert c.finish_reason == "stop"
    assert stop not in c.text and c.text == text0[: text0.find(stop)]
    # the tokens end with the token that completed the stop string
    assert stop in s.decode(c.token_ids) and stop not in s.decode(c.token_ids[:-1])
    assert c.token_ids == base.token_ids[: len(c.token_ids)]
    assert len(c.logprobs) == len(c.token_ids)


def test_finish_reason_length_and_top_k_off(tiny):
    model, tok = tiny
    s = HFSampler(model, tok)
    out = s.generate(["abc"], 8, SamplingParams(max_new_tokens=3, seed=0))[0]
    assert all(len(c.token_ids) <= 3 for c in out)
    assert any(c.finish_reason == "length" for c in out)
    # top_k=0 means no truncation: with temperature 1 and top_p 1 every token stays possible
    logits = torch.tensor([[0.0, 0.0, 0.0, 5.0]])
    g = torch.Generator().manual_seed(0)
    seen = {
        sample_next(logits, SamplingParams(top_p=1.0, top_k=0), g)[0].item() for _ in range(400)
    }
    assert seen == {0, 1, 2, 3}
    close = torch.tensor([[0.0, 0.0, 0.0, 1.0]])  # top-1 has only ~47% of the mass
    seen_k1 = {sample_next(close, SamplingParams(top_k=1), g)[0].item() for _ in range(50)}
    assert seen_k1 == {3}
    ranked = torch.tensor([[0.0, 1.0, 2.0, 2.5]])  # top_k=2 keeps exactly ids 3 and 2
    seen_k2 = {sample_next(ranked, SamplingParams(top_k=2), g)[0].item() for _ in range(200)}
    assert seen_k2 == {2, 3}


def test_top_p_keeps_nucleus():
    # probs 0.5, 0.3, 0.15, 0.05: top_p 0.7 keeps the first two (0.5 < 0.7, 0.8 >= 0.7)
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]]))
    g = torch.Generator().manual_seed(0)
    seen = {sample_next(logits, SamplingParams(top_p=0.7), g)[0].item() for _ in range(300)}
    assert seen == {0, 1}


def test_truncate_at_stop():
    assert truncate_at_stop("abc</a>def", ["</a>", "d"]) == ("abc", True)
    assert truncate_at_stop("abc", ["x"]) == ("abc", False)


def test_live_model_mode_is_restored(tiny):
    model, tok = tiny
    model.train()
    HFSampler(model, tok).generate(["1"], 1, SamplingParams(max_new_tokens=2, seed=0))
    assert model.training
    model.eval()


def test_load_from_path(tiny, tmp_path):
    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    s = make_sampler("hf", model=str(tmp_path), device="cpu", dtype="float32")
    out = s.generate(["1+1="], 2, SamplingParams(max_new_tokens=4, seed=0))
    assert len(out[0]) == 2


def test_vllm_engine_clear_error_when_absent():
    import importlib.util

    from vibethinker.engines import SamplerError

    if importlib.util.find_spec("vllm") is not None:
        pytest.skip("vllm is installed")
    with pytest.raises(SamplerError, match="pip install"):
        make_sampler("vllm", model="some/model")


@pytest.mark.gpu
def test_vllm_engine_generates(tiny, tmp_path):
    pytest.importorskip("vllm")
    if not torch.cuda.is_available():
        pytest.skip("vllm needs a GPU")
    model, tok = tiny
    model.save_pretrained(tmp_path)
    tok.save_pretrained(tmp_path)
    s = make_sampler("vllm", model=str(tmp_path), gpu_memory_utilization=0.2)
    out = s.generate(["1+2="], 3, SamplingParams(max_new_tokens=5, seed=0))
    assert len(out[0]) == 3 and all(len(c.token_ids) == len(c.logprobs) for c in out[0])


def test_unknown_engine():
    with pytest.raises(ValueError, match="known engines"):
        make_sampler("nope")


def test_the_cost_ledger_counts_rollouts_tokens_and_decode_steps(tiny):
    from vibethinker import ledger

    model, tok = tiny
    s = make_sampler("hf", model=model, tokenizer=tok, token_budget=64)  # several batches
    params = SamplingParams(max_new_tokens=8, seed=1)
    plain = s.generate(PROMPTS, n=2, params=params)
    ledger.start()
    out = s.generate(PROMPTS, n=2, params=params)
    rec = ledger.stop(1.0)
    assert [[c.token_ids for c in g] for g in out] == [[c.token_ids for c in g] for g in plain]
    g = rec["generation"]["sample"]
    comps = [c for grp in out for c in grp]
    assert g["prompts"] == len(PROMPTS) and g["rollouts"] == len(comps)
    assert g["response_tokens"] == sum(len(c.token_ids) for c in comps)
    assert g["prompt_tokens"] == sum(2 * len(s.encode(p)) for p in PROMPTS)
    assert g["truncation_rate"] == round(sum(c.finish_reason == "length" for c in comps) / 6, 4)
    # each batch runs to its longest row: at least the longest, at most every row's length
    assert max(len(c.token_ids) for c in comps) <= g["decode_steps"] <= g["response_tokens"]
    assert rec["params"] == sum(p.numel() for p in model.parameters())
