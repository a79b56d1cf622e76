"""The RL loop: data order, trainer-vs-engine logprobs, truncation rule, the stage-start filter,
exact resume, a pinned learning curve, and the `rl` stage end to end on a tiny model."""

from __future__ import annotations

import json

import pytest
import torch

from tests.helpers.loop_options import rl_options
from tests.helpers.rl_data import _problems, tiny  # noqa: F401 - the tiny-model fixture
from vibethinker.engines import SamplingParams, make_sampler
from vibethinker.train import checkpoints, policy
from vibethinker.train.rl import train
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.rollout import (
    build_batch,
    draw_prompts,
    prompt_order,
    response_logprobs,
    rollout,
    score_groups,
)
from vibethinker.types import Completion, Score

torch.set_num_threads(1)


def has_seven(problems, responses):
    """A stand-in verifier: 'correct' iff the response contains a 7."""
    return [Score(float("7" in r), "7" in r, "ok") for r in responses]


def has_digit(problems, responses):
    """A stand-in verifier: 'correct' iff the response contains a digit (a random tiny model
    does so about a quarter of the time in 8 tokens, so RL has something to amplify)."""
    return [Score(float(ok), ok, "ok") for ok in (any(ch.isdigit() for ch in r) for r in responses)]


def test_draw_prompts_is_seeded_epoch_permutations():
    n, per = 10, 4
    steps = [draw_prompts(n, s, per, seed=3) for s in range(5)]  # 20 draws = 2 epochs
    flat = [i for s in steps for i in s]
    assert sorted(flat[:10]) == list(range(10)) and sorted(flat[10:]) == list(range(10))
    assert flat[:10] == prompt_order(n, 0, 3) and flat[10:] == prompt_order(n, 1, 3)
    assert draw_prompts(n, 3, per, seed=3) == steps[3]  # depends on the step alone
    assert draw_prompts(n, 0, per, seed=4) != steps[0]


def test_trainer_logprobs_match_engine(tiny):  # noqa: F811
    model, tok = policy.load_policy(tiny, "cpu")
    sampler = make_sampler("hf", model=model, tokenizer=tok)
    probs = _problems(3)
    groups = rollout(
        sampler, probs, lambda p: p.prompt, 4, SamplingParams(max_new_tokens=12, seed=0)
    )
    comps = [c for g in groups for c in g.completions]
    ids = [sampler.encode(g.problem.prompt) for g in groups for _ in g.completions]
    b = build_batch(ids, comps, tok.pad_token_id)
    with torch.no_grad():
        lp, ent = response_logprobs(model, b, with_entropy=True)
    assert torch.allclose(lp[b.mask], b.engine_logp[b.mask], atol=1e-4)
    assert (ent[b.mask] > 0).all() and (lp[~b.mask] == 0).all()
    assert b.mask.sum(-1).tolist() == [len(c.token_ids) for c in comps]
    # chunked + checkpointed LM head (gradients on) = one chunk: same values, same gradients
    grads = []
    for chunk in (10_000, 3):
        model.zero_grad()
        lp2, ent2 = response_logprobs(model, b, with_entropy=True, chunk=chunk)
        (lp2 * torch.linspace(0.1, 1, lp2.shape[1])).sum().backward()
        grads.append(model.get_output_embeddings().weight.grad.clone())
        assert torch.allclose(lp2.detach(), lp, atol=1e-5)
        assert torch.allclose(ent2, ent, atol=1e-5)
    assert torch.allclose(grads[0], grads[1], atol=1e-5)


def test_truncated_reward_rule():
    p = _problems(1)[0]
    from vibethinker.types import Group

    comps = [Completion("7", [5, 6], None, "length"), Completion("7", [5], None, "stop")]
    sc = score_groups([Group(p, list(comps))], has_seven, "zero")
    assert sc.correct.tolist() == [[False, True]] and sc.truncated.tolist() == [[True, False]]
    assert sc.lengths.tolist() == [[2, 1]]
    sc = score_groups([Group(p, list(comps))], has_seven, "verify")
    assert sc.correct.tolist() == [[True, True]]


class _ScriptedSampler:
    """Returns, for prompt i, completions that are correct with a fixed pattern."""

    def __init__(self, patterns):
        self.patterns = patterns

    def generate(self, prompts, n, params):
        return [
            [Completion("7" if ok else "x", [1]) for ok in self.patterns[i][:n]]
            for i in range(len(prompts))
        ]


def test_stage_start_filter_drops_p0_and_p1():
    from vibethinker.stages.rl import filter_prompts

    probs = _problems(4)
    pats = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0]]
    keep, counts = filter_prompts(
        probs, _ScriptedSampler(pats), 4, None, lambda p: p.prompt, has_seven
    )
    assert [p.id for p in keep] == ["p2", "p3"]
    assert counts["dropped_p0"] == 1 and counts["dropped_p1"] == 1 and counts["prompts_out"] == 2
    assert counts["start_accuracy"] == pytest.approx((4 + 0 + 1 + 2) / 16)


def _opts(**kw) -> RLConfig:
    base = dict(
        steps=4,
        prompts_per_step=4,
        group_size=4,
        lr=3e-3,
        final_lr=3e-3,
        max_new_tokens=8,
        save_every=2,
        seed=1,
        advantage="mgpo",
        lambda_mgpo=1.0,
        truncated_reward="verify",
    )
    return rl_options(**{**base, **kw})


def _strip(rows):
    return [{k: v for k, v in r.items() if not k.startswith("t_") and k != "seconds"} for r in rows]


def test_resume_is_exact(tiny, tmp_path):  # noqa: F811
    probs = _problems(12)
    m1, tok = policy.load_policy(tiny, "cpu")
    train(m1, tok, probs, _opts(), tmp_path / "straight", verify=has_digit)
    m2, _ = policy.load_policy(tiny, "cpu")
    r = train(m2, tok, probs, _opts(), tmp_path / "killed", verify=has_digit, stop_at=2)
    assert r["steps_done"] == 2
    m3, _ = policy.load_policy(tiny, "cpu")  # a fresh process: weights from the checkpoint
    r = train(m3, tok, probs, _opts(), tmp_path / "killed", verify=has_digit)
    assert r["resumed_at"] == 2 and r["steps_done"] == 4
    assert sum(x["trained_rows"] for x in r["history"]) > 0  # the run had signal to resume

    def read(d):
        return [json.loads(x) for x in (tmp_path / d / "metrics.jsonl").read_text().splitlines()]

    assert _strip(read("straight")) == _strip(read("killed"))
    for a, b in zip(m1.state_dict().values(), m3.state_dict().values()):
        assert torch.equal(a, b)


def test_rl_learns_a_planted_reward(tiny, tmp_path):  # noqa: F811
    """A pinned learning curve: the rate of responses containing a digit rises under RL."""
    model, tok = policy.load_policy(tiny, "cpu")
    opts = _opts(steps=14, prompts_per_step=6, group_size=8, lr=1e-2, final_lr=1e-2, save_every=0)
    res = train(model, tok, _problems(12), opts, tmp_path / "learn", verify=has_digit)
    acc = [r["accuracy"] for r in res["history"]]
    assert sum(acc[-4:]) / 4 > sum(acc[:4]) / 4 + 0.2, acc
    row = res["history"][-1]
    for key in (
        "reward",
        "mgpo_weight",
        "frac_p01",
        "len_correct",
        "trunc_rate",
        "entropy",
        "kl",
        "clip_frac",
        "ratio_mean",
        "engine_kl",
        "t_generate",
        "t_verify",
        "t_logprobs",
        "t_update",
    ):
        assert key in row
    assert abs(row["engine_kl"]) < 1e-4  # the hf engine's logprobs are the trainer's (fp32)


def test_rl_stage_end_to_end(tiny, tmp_path):  # noqa: F811
    """The stage on a tiny random model (real math verifier: everything wrong, so no update
    carries signal): it runs, evaluates, checkpoints, and writes final/, curves and summary."""
    from vibethinker.data.io import save_problems
    from vibethinker.stages import get

    data = tmp_path / "data"
    data.mkdir()
    save_problems(data / "train.jsonl", _problems(8))
    save_problems(data / "eval.jsonl", _problems(4))
    spec = get("rl")
    assert spec.resumable
    cfg = spec.config_cls(
        model=tiny,
        data=str(data),
        out=str(tmp_path / "rl"),
        steps=2,
        prompts_per_step=2,
        group_size=2,
        max_new_tokens=6,
        filter_rollouts=0,
        eval_every=1,
        eval_n=1,
        device="cpu",
        lr=1e-4,
    )
    outs = spec.fn(cfg)
    from transformers import AutoModelForCausalLM

    # final/ is a plain HF folder holding the trained weights: those of the last checkpoint
    final = AutoModelForCausalLM.from_pretrained(outs["model"])
    last = checkpoints.latest_checkpoint(tmp_path / "rl" / "checkpoints")
    assert last is not None and last.name == "step-000002"
    ckpt = AutoModelForCausalLM.from_pretrained(last)
    for (k, a), b in zip(final.state_dict().items(), ckpt.state_dict().values()):
        assert torch.equal(a, b), k
    text = (tmp_path / "rl" / "summary.md").read_text()
    assert "held-out" in text and "Time per step" in text
    assert (tmp_path / "rl" / "curves.png").stat().st_size > 1000
    evals = [json.loads(x) for x in (tmp_path / "rl" / "evals.jsonl").read_text().splitlines()]
    assert [e["step"] for e in evals] == [0, 1, 2]


def test_mini_batches_use_frozen_old_logprobs(tiny, tmp_path):  # noqa: F811
    """With 2 updates per rollout batch, pi_old is the pre-update policy: the second update sees
    rho != 1; with 1 update rho == 1 exactly (strictly on-policy)."""
    probs = _problems(12)
    for mb, on_policy in ((1, True), (2, False)):
        model, tok = policy.load_policy(tiny, "cpu")
        opts = _opts(steps=2, lr=1e-2, final_lr=1e-2, save_every=0, mini_batches=mb, seed=2)
        res = train(model, tok, probs, opts, tmp_path / f"mb{mb}", verify=has_digit)
        rmax = max(r["ratio_max"] for r in res["history"])
        assert (rmax == 1.0) == on_policy, rmax


def test_long2short_filter_keeps_all_correct_prompts():
    """Long2Short keeps p = 1 prompts (their groups carry the pure length signal) and still
    drops p = 0; the other stages drop both."""
    from vibethinker.stages.rl import filter_prompts

    probs = _problems(4)
    pats = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0]]
    args = (probs, _ScriptedSampler(pats), 4, None, lambda p: p.prompt, has_seven, "zero")
    keep, counts = filter_prompts(*args, keep_solved=True)
    assert [p.id for p in keep] == ["p0", "p2", "p3"]
    assert counts["dropped_p0"] == 1 and counts["dropped_p1"] == 0 and counts["kept_p1"] == 1
    keep, counts = filter_prompts(*args)
    assert [p.id for p in keep] == ["p2", "p3"] and counts["kept_p1"] == 0


def test_rl_stage_filter_follows_long2short(tmp_path, monkeypatch):
    """The stage passes long2short to the filter, and the cached filter is keyed on it."""
    from vibethinker.stages import rl as rl_stage

    data = tmp_path / "data"
    data.mkdir()
    from vibethinker.data.io import save_problems

    save_problems(data / "train.jsonl", _problems(4))
    pats = [[1, 1, 1, 1], [0, 0, 0, 0], [1, 0, 0, 0], [0, 1, 1, 0]]
    cfg = rl_options(data=str(data), out=str(tmp_path / "rl"), filter_rollouts=4, long2short=True)
    keep, _ = rl_stage.training_prompts(cfg, _ScriptedSampler(pats), lambda p: p.prompt, has_seven)
    assert len(keep) == 3
    cfg.long2short = False  # same folder: the cache must not answer for another rule
    keep, _ = rl_stage.training_prompts(cfg, _ScriptedSampler(pats), lambda p: p.prompt, has_seven)
    assert len(keep) == 2


def test_compute_advantages_all_correct_std_only_under_long2short():
    from vibethinker.train.rl_update import compute_advantages
    from vibethinker.train.rollout import Scored

    correct = torch.ones(1, 4, dtype=torch.bool)
    sc = Scored(
        rewards=torch.ones(1, 4),
        correct=correct,
        lengths=torch.tensor([[10, 20, 30, 40]]),
        truncated=torch.zeros(1, 4, dtype=torch.bool),
    )
    small = compute_advantages(sc, rl_options(long2short=True, l2s_lambda=0.2))[0]
    assert small.abs().max().item() == pytest.approx(0.2 * 0.5, rel=1e-4)  # MGPO weight 0.5
    literal = compute_advantages(
        sc, rl_options(long2short=True, l2s_lambda=0.2, l2s_all_correct_std=True)
    )[0]
    assert literal.abs().max().item() > 0.5  # rescaled to unit size by the group's own std


def test_keep_last_prunes_rl_checkpoints(tiny, tmp_path):  # noqa: F811
    model, tok = policy.load_policy(tiny, "cpu")
    opts = _opts(steps=4, save_every=1, keep_last=2)
    train(model, tok, _problems(8), opts, tmp_path / "k", verify=has_digit)
    steps = [s for s, _ in checkpoints.list_checkpoints(tmp_path / "k" / "checkpoints")]
    assert steps == [3, 4]
    model, tok = policy.load_policy(tiny, "cpu")
    train(
        model, tok, _problems(8), _opts(steps=3, save_every=1), tmp_path / "all", verify=has_digit
    )
    assert len(checkpoints.list_checkpoints(tmp_path / "all" / "checkpoints")) == 3


def test_rubric_line_names_the_back_end():
    from vibethinker.reports.rl import rubric_line

    judge = rubric_line("openai:judge@http://127.0.0.1:8001/v1")
    assert "LLM judge" in judge and "helpfulness" in judge and "redundancy" in judge
    bt = rubric_line("hf:runs/x/reward_model/final")
    assert "reward model" in bt and "Bradley-Terry" in bt and "not the paper's" in bt
    assert "none" in rubric_line("")
