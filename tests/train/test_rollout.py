"""The trainer's tensors (train/rollout.py): behaviours that mutation testing (docs/MUTATION.md)
found untested. The reference is one unpadded forward per row."""

import pytest
import torch

from tests.helpers.loop_options import rl_options
from tests.helpers.rl_data import _problems, tiny  # noqa: F401 - the tiny-model fixture
from vibethinker.train import policy
from vibethinker.train.rl import train
from vibethinker.train.rl_metrics import step_metrics
from vibethinker.train.rollout import build_batch, response_logprobs, score_groups
from vibethinker.train.sft import backbone_and_head
from vibethinker.types import Completion, Group, Score

SMALL = dict(
    vocab_size=64,
    hidden_size=32,
    intermediate_size=64,
    num_hidden_layers=1,
    num_attention_heads=2,
    num_key_value_heads=1,
)
# rows of different prompt and response lengths: the long-prompt row's short response makes
# its predicting positions run past the padded width (the index is clamped there)
PROMPTS = [[3, 4, 5, 6, 7, 8, 9], [10, 11], [12, 13, 14]]
RESPONSES = [[20], [21, 22, 23, 24, 25, 26], [27, 28]]


def _model(arch: str):
    torch.manual_seed(0)
    if arch == "gemma2":  # soft-capped logits: the model's own forward, not the shortcut
        from transformers import Gemma2Config, Gemma2ForCausalLM

        model = Gemma2ForCausalLM(
            Gemma2Config(
                **SMALL, head_dim=16, final_logit_softcapping=2.0, attn_implementation="eager"
            )
        )
        with torch.no_grad():
            model.lm_head.weight.mul_(50.0)  # logits well past the cap, so capping matters
        assert backbone_and_head(model) is None
    else:
        from transformers import LlamaConfig, LlamaForCausalLM

        model = LlamaForCausalLM(LlamaConfig(**SMALL))
        assert backbone_and_head(model) is not None
    return model.eval()


def _reference(model, prompts, responses):
    """Per row: [T_i] logprobs of the response tokens and [T_i] entropies, one row at a time."""
    out = []
    for p, r in zip(prompts, responses):
        with torch.no_grad():
            logits = model(input_ids=torch.tensor([p + r])).logits[0].float()
        logp = torch.log_softmax(logits[len(p) - 1 : len(p) - 1 + len(r)], -1)
        out.append((logp[torch.arange(len(r)), r], -(logp.exp() * logp).sum(-1)))
    return out


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_response_logprobs_match_one_row_at_a_time(arch):
    model = _model(arch)
    comps = [Completion("", r) for r in RESPONSES]
    batch = build_batch(PROMPTS, comps, pad_id=0)
    with torch.no_grad():
        lp, ent = response_logprobs(model, batch, with_entropy=True)
    assert lp.shape == ent.shape == (3, 6)
    for i, (want_lp, want_ent) in enumerate(_reference(model, PROMPTS, RESPONSES)):
        k = len(RESPONSES[i])
        assert torch.allclose(lp[i, :k], want_lp, atol=1e-5), (i, lp[i], want_lp)
        assert torch.allclose(ent[i, :k], want_ent, atol=1e-5), (i, ent[i], want_ent)
        assert (lp[i, k:] == 0).all()
    # gradients reach the weights through the logprobs (the loss needs them)
    model.zero_grad()
    response_logprobs(model, batch)[0].sum().backward()
    assert model.get_output_embeddings().weight.grad.abs().sum() > 0


def test_build_batch_layout():
    comps = [Completion("", r, [-0.5] * len(r)) for r in RESPONSES]
    b = build_batch(PROMPTS, comps, pad_id=63)
    assert b.input_ids.shape == (3, 8) and b.response_ids.shape == (3, 6)
    assert b.input_ids[1].tolist() == [10, 11, 21, 22, 23, 24, 25, 26]
    assert b.input_ids[0].tolist() == [3, 4, 5, 6, 7, 8, 9, 20]
    assert b.input_ids[2].tolist() == [12, 13, 14, 27, 28, 63, 63, 63]  # right-padded with pad_id
    assert b.attention_mask.tolist()[2] == [1, 1, 1, 1, 1, 0, 0, 0]
    # the integer dtypes transformers documents for ids and the 2-D attention mask
    assert b.input_ids.dtype == b.attention_mask.dtype == b.response_ids.dtype == torch.long
    assert b.prompt_lens.tolist() == [7, 2, 3]
    assert b.response_ids[2].tolist() == [27, 28, 0, 0, 0, 0]  # responses pad with 0
    assert b.mask.sum(-1).tolist() == [1, 6, 2] and b.mask.dtype == torch.bool
    assert b.engine_logp is not None and b.engine_logp.dtype == torch.float32
    assert b.engine_logp[2].tolist() == [-0.5, -0.5, 0, 0, 0, 0]


def test_build_batch_engine_logprobs_only_when_every_row_has_them():
    full = [Completion("", [5, 6], [-1.0, -2.0]), Completion("", [7], [-3.0])]
    assert build_batch([[1], [2]], full, 0).engine_logp is not None
    missing = [full[0], Completion("", [7], None)]
    assert build_batch([[1], [2]], missing, 0).engine_logp is None
    short = [full[0], Completion("", [7, 8], [-3.0])]  # fewer logprobs than tokens
    assert build_batch([[1], [2]], short, 0).engine_logp is None


def test_build_batch_with_empty_responses():
    """Responses with no tokens: one (masked) response column, nothing trained, and the
    logprobs are all zero."""
    comps = [Completion("", []), Completion("", [], [])]
    b = build_batch([[1, 2], [3]], comps, pad_id=0)
    assert b.response_ids.shape == (2, 1) and not b.mask.any()
    assert b.input_ids.tolist() == [[1, 2], [3, 0]]
    lp, _ = response_logprobs(_model("llama"), b)
    assert lp.shape == (2, 1) and (lp == 0).all()


@pytest.mark.parametrize("arch", ["llama", "gemma2"])
def test_one_token_responses_keep_the_batch_shape(arch):
    model = _model(arch)
    b = build_batch([[1, 2], [3]], [Completion("", [9]), Completion("", [8])], pad_id=0)
    with torch.no_grad():
        lp, ent = response_logprobs(model, b, with_entropy=True)
    assert lp.shape == ent.shape == (2, 1)
    want = _reference(model, [[1, 2], [3]], [[9], [8]])
    assert torch.allclose(lp[:, 0], torch.cat([w[0] for w in want]), atol=1e-5)


def _one_error(problems, responses):
    # as verify_batch returns them: one item failed twice, one recovered on its retry
    died = "retried after verifier_error:WorkerDied"
    return [
        Score(0.0, False, "verifier_error:WorkerDied", died),
        Score(1.0, True, "ok", died),
    ] + [Score(1.0, True, "ok") for _ in responses[2:]]


def test_verifier_errors_are_counted_per_step_and_warned(caplog):
    """A response the verifier could not judge (after batch.py's retry) is scored 0 but never
    silently: the step's metrics count it (`verifier_errors`) and the log warns."""
    groups = [Group(q, [Completion("7", [5], None, "stop")] * 2) for q in _problems(2)]
    sc = score_groups(groups, _one_error, "zero")
    assert sc.verifier_error.tolist() == [[True, False], [False, False]]
    assert sc.verifier_retried.tolist() == [[True, True], [False, False]]
    row = step_metrics(groups, sc, torch.ones(2))
    assert (row["verifier_errors"], row["verifier_retried"]) == (1, 2)
    assert "1 of 4 responses got no verdict" in caplog.text
    assert "verifier_error:WorkerDied" in caplog.text


def test_the_rl_metrics_row_carries_verifier_errors(tiny, tmp_path):  # noqa: F811
    model, tok = policy.load_policy(tiny, "cpu")
    opts = rl_options(steps=1, prompts_per_step=2, group_size=2, max_new_tokens=4, eval_every=0)
    res = train(model, tok, _problems(4), opts, tmp_path, verify=_one_error)
    assert (res["history"][0]["verifier_errors"], res["history"][0]["verifier_retried"]) == (1, 2)
