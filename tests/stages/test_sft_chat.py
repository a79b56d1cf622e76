"""General dialogue in SFT (issue 41 item 4): rows without a verifier take the SFT-only domain
`chat`; a TRL conversational row (`{"messages": [...]}` alone) trains in `vibethinker sft`;
construct carries `chat` rows through its decontamination; RL, eval and probing never take
them."""

from __future__ import annotations

import json

import pytest
import torch

from vibethinker.data.io import load_problems, save_problems, select
from vibethinker.models.tiny import build_tiny_model
from vibethinker.types import TRAIN_ONLY_DOMAINS, Problem

torch.set_num_threads(1)

CHAT = [
    {
        "messages": [
            {"role": "user", "content": f"Hello, how are you {i}?"},
            {"role": "assistant", "content": f"I am fine, thank you {i}."},
        ]
    }
    for i in range(6)
]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [f"Hello, how are you {i}? I am fine, thank you {i}." for i in range(40)]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)


def _rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_conversational_rows_read_as_chat_in_sft(tmp_path):
    from vibethinker.stages.sft import read_training_data
    from vibethinker.train.sft_config import SFTConfig

    data = _rows(tmp_path / "chat.jsonl", [*CHAT, {"prompt": "1+1?", "completion": "2"}])
    probs = read_training_data(SFTConfig(data=str(data)))
    assert {p.domain for p in probs} == {"chat"} and "chat" in TRAIN_ONLY_DOMAINS
    assert probs[0].traces == ["I am fine, thank you 0."] and probs[0].id == "chat.jsonl-1"
    math_only = read_training_data(SFTConfig(data=str(data), domains=["math"]))
    assert {p.domain for p in math_only} == {"math"}  # one named domain stays the default
    assert select(probs) == []  # eval / probing never take them
    _rows(tmp_path / "bad.jsonl", [{"id": "x", "domain": "chat", "prompt": "hi"}])
    with pytest.raises(ValueError, match="traces"):  # a chat row needs its reply
        load_problems(tmp_path / "bad.jsonl")


def test_sft_trains_on_trl_conversational_rows(tiny, tmp_path, capsys):
    """Before: "field 'domain': required" and exit 2 before any model loaded."""
    from vibethinker.cli import main

    data = _rows(tmp_path / "chat.jsonl", CHAT)
    argv = [
        "sft",
        f"model={tiny}",
        f"data={data}",
        f"out={tmp_path / 'sft'}",
        "epochs=1",
        "global_batch=2",
        "micro_batch=2",
        "max_len=64",
        "device=cpu",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    stats = json.loads((tmp_path / "sft" / "stats.json").read_text())
    assert stats["samples"] == 6
    assert (tmp_path / "sft" / "final" / "config.json").exists()


def test_construct_passes_chat_rows_through_decontamination(tmp_path):
    from vibethinker.stages import construct as stage
    from vibethinker.stages.construct import ConstructConfig

    leak = "Prove that the sum of the first n odd numbers equals n squared for every n"
    ev = [Problem("e1", "math", leak, answer="n^2")]
    save_problems(tmp_path / "eval.jsonl", ev)
    chat = [
        Problem("c1", "chat", "Tell me a joke about cats please", traces=["Why did the cat sit?"]),
        Problem("c2", "chat", "Say something nice", traces=[f"Sure: {leak}."]),
    ]
    save_problems(tmp_path / "seeds.jsonl", chat)
    cfg = ConstructConfig(
        out=str(tmp_path / "out"),
        seeds=str(tmp_path / "seeds.jsonl"),
        mode="decontaminate",
        eval_sets=[str(tmp_path / "eval.jsonl")],
        domains=["math"],
        pass_domains=["chat"],
    )
    out = load_problems(stage.run(cfg)["train"])
    assert [p.id for p in out] == ["c1"]  # the reply sharing a 10-gram with the eval set is dropped
