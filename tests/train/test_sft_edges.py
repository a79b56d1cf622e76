"""SFT loss code (train/sft.py): behaviours that mutation testing (docs/MUTATION.md) found
untested."""

import torch

from vibethinker.train import packing, sft


def _gemma2():
    from transformers import Gemma2Config, Gemma2ForCausalLM

    torch.manual_seed(0)
    small = dict(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        num_key_value_heads=1,
    )
    model = Gemma2ForCausalLM(
        Gemma2Config(**small, head_dim=16, final_logit_softcapping=2.0, attn_implementation="eager")
    ).eval()
    assert sft.backbone_and_head(model) is None  # the model's own forward, not the shortcut
    return model


def test_packed_rows_on_the_full_forward_path_keep_samples_apart():
    """Two samples packed in one row (position ids restart, no 2-D mask, as packing makes them):
    the loss on the soft-capped path is the sum of each sample's own loss."""
    model = _gemma2()
    a, b = [5, 9, 12, 7, 3, 8], [4, 11, 2, 6, 10]
    ids = torch.tensor([a + b])
    labels = ids.clone()
    labels[0, len(a)] = packing.IGNORE  # b's first token is not predicted from a
    batch = {
        "input_ids": ids,
        "labels": labels,
        "attention_mask": None,
        "position_ids": torch.tensor([list(range(len(a))) + list(range(len(b)))]),
    }
    with torch.no_grad():
        got, n = sft.token_loss_sum(model, batch)
        want = sum(
            model(input_ids=torch.tensor([s]), labels=torch.tensor([s])).loss * (len(s) - 1)
            for s in (a, b)
        )
    assert n == len(a) - 1 + len(b) - 1
    assert torch.allclose(got, want, rtol=1e-5), (float(got), float(want))


class _NoBackbone(torch.nn.Module):
    """A causal LM whose decoder is not where base_model_prefix says."""

    base_model_prefix = "decoder"

    def __init__(self):
        super().__init__()
        self.config = type("Cfg", (), {})()
        self.head = torch.nn.Linear(4, 8)

    def get_output_embeddings(self):
        return self.head


def test_no_shortcut_without_a_backbone():
    assert sft.backbone_and_head(_NoBackbone()) is None
