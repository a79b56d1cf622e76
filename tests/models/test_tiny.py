"""The tiny model: tokenizer, chat template / assistant mask, sizes, offline loading, determinism."""

from __future__ import annotations

import hashlib
import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from vibethinker.models import load_model_and_tokenizer
from vibethinker.models.tiny import (
    PRESETS,
    count_params,
    depth_shape,
    resolve_depth,
    tiny_config,
    train_tokenizer,
)
from vibethinker.stages.model import ModelConfig, corpus_texts, run

torch.set_num_threads(1)

TRACES = [
    "<think>12*34=408;408+5=413</think>\\boxed{413}",
    "<think>Let x = 7. Then 3x - 4 = 21 - 4 = 17.</think>The answer is \\boxed{17}.",
    "<think>\n(-3)^2 = 9, so 9 + 0.25 = 9.25\n</think>\n\\boxed{\\frac{37}{4}}",
]


def _problems(n: int = 24, seed: int = 0) -> list[dict]:
    """Synthetic world-like math records: a prompt and two traces along different paths."""
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        a, b, c = rng.randint(2, 99), rng.randint(2, 99), rng.randint(2, 9)
        ans = a * c + b
        rows.append(
            {
                "id": f"m{i}",
                "domain": "math",
                "subdomain": "arithmetic",
                "prompt": f"Compute {a}*{c}+{b}. Put the final answer in \\boxed{{}}.",
                "answer": str(ans),
                "traces": [
                    f"<think>{a}*{c}={a * c};{a * c}+{b}={ans}</think>\\boxed{{{ans}}}",
                    f"<think>{c}*{a}={a * c};{b}+{a * c}={ans}</think>\\boxed{{{ans}}}",
                ],
            }
        )
    return rows


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("world")
    with open(d / "train.jsonl", "w") as f:
        for r in _problems():
            f.write(json.dumps(r) + "\n")
    # An eval split the tokenizer must not read (its prompts hold a marker word).
    with open(d / "eval.jsonl", "w") as f:
        f.write(json.dumps({**_problems(1)[0], "prompt": "Zyzzyva " * 50}) + "\n")
    return d


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory, data_dir) -> Path:
    out = tmp_path_factory.mktemp("tiny") / "model"
    res = run(ModelConfig(kind="tiny", out=str(out), data=str(data_dir), size="1m", seed=3))
    assert res == {"model": str(out)}
    return out


@pytest.fixture(scope="module")
def tok(data_dir):
    return train_tokenizer(corpus_texts(str(data_dir)) + TRACES, 512)


def _hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ------------------------------------------------------------------------- tokenizer


def test_corpus_reads_train_split_only(data_dir):
    texts = corpus_texts(str(data_dir))
    assert len(texts) == 24 * 3  # prompt + 2 traces each
    assert not any("Zyzzyva" in t for t in texts)


def test_tokenizer_round_trips_and_splits_digits(tok):
    odd = "héllo wörld 🙂\ttab  two spaces\n\ndef f(x):\n    return x**2  # ok\n"
    for text in TRACES + [odd, "1234567890 -0.5e10"]:
        ids = tok(text, add_special_tokens=False).input_ids
        assert tok.decode(ids) == text
        pieces = [tok.decode([i]) for i in ids]
        # Every token holding a digit is exactly that one digit.
        assert all(len(p) == 1 for p in pieces if any(ch.isdigit() for ch in p)), pieces
    assert tok("<think>", add_special_tokens=False).input_ids == [
        tok.convert_tokens_to_ids("<think>")
    ]
    for t in ("<think>", "</think>", "\\boxed{", "<|im_start|>", "<|im_end|>", "<|endoftext|>"):
        assert len(tok(t, add_special_tokens=False).input_ids) == 1, t
    ids = tok(TRACES[0] + "<|im_end|>", add_special_tokens=False).input_ids
    # Text tokens decode into text; special tokens are dropped by skip_special_tokens.
    assert tok.decode(ids, skip_special_tokens=True) == TRACES[0]
    assert len(tok) <= 512 and tok.eos_token == "<|im_end|>" and tok.pad_token == "<|endoftext|>"


def test_tokenizer_rejects_tiny_vocab():
    with pytest.raises(ValueError, match="vocab_size"):
        train_tokenizer(["abc"], 100)


def test_assistant_mask_covers_exactly_assistant_turns(tok):
    msgs = [
        {"role": "system", "content": "You are a careful solver."},
        {"role": "user", "content": "Compute 2+3."},
        {"role": "assistant", "content": TRACES[0]},
        {"role": "user", "content": "And 7-4?"},
        {"role": "assistant", "content": TRACES[2]},
    ]
    enc = tok.apply_chat_template(
        msgs, tokenize=True, return_dict=True, return_assistant_tokens_mask=True
    )
    ids, mask = enc["input_ids"], enc["assistant_masks"]
    assert len(ids) == len(mask)
    text = tok.decode(ids)
    assert text.startswith("<|im_start|>system\nYou are a careful solver.<|im_end|>\n")
    spans, start = [], None
    for i, m in enumerate(mask + [0]):
        if m and start is None:
            start = i
        if not m and start is not None:
            spans.append((start, i))
            start = None
    # Each span is the assistant content plus its closing <|im_end|>, nothing more or less.
    assert [tok.decode(ids[a:b]) for a, b in spans] == [t + "<|im_end|>" for t in TRACES[::2]]
    for a, b in spans:
        assert tok.decode(ids[:a]).endswith("<|im_end|>\n<|im_start|>assistant\n")
        assert ids[b - 1] == tok.convert_tokens_to_ids("<|im_end|>")
    prompt = tok.apply_chat_template(msgs[:2], tokenize=False, add_generation_prompt=True)
    assert prompt.endswith("<|im_end|>\n<|im_start|>assistant\n")


# ------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("size", ["d1", "d2", *PRESETS])
def test_count_params_is_exact(size):
    cfg = tiny_config(size, vocab_size=300)
    with torch.device("meta"):  # no memory, no init: only shapes
        from transformers import Qwen2ForCausalLM

        model = Qwen2ForCausalLM(cfg)
    actual = sum(p.numel() for p in model.parameters())
    assert actual == count_params(depth_shape(cfg.num_hidden_layers), 300)


def test_size_resolution():
    assert depth_shape(3) == {
        "num_hidden_layers": 3,
        "hidden_size": 192,
        "intermediate_size": 512,
        "num_attention_heads": 6,
        "num_key_value_heads": 2,
    }  # the calibrated 1.2M model
    assert [resolve_depth(s, 512) for s in ("1m", "5m", "30m", "d4")] == [3, 5, 9, 4]
    assert resolve_depth("10m", 512) == 6  # 9.6M is the nearest member in log scale
    assert resolve_depth("1200000", 512) == 3
    for d in (3, 5, 9):  # presets land near their names
        n = count_params(depth_shape(d), 512)
        assert 0.8 < n / {3: 1.2e6, 5: 5e6, 9: 30e6}[d] < 1.2, (d, n)
    with pytest.raises(ValueError, match="size"):
        resolve_depth("huge", 512)
    cfg = tiny_config("1m", 512, max_position_embeddings=4096, num_hidden_layers=2)
    assert cfg.num_hidden_layers == 2 and cfg.hidden_size == 192
    assert cfg.max_position_embeddings == 4096 and cfg.tie_word_embeddings


# ------------------------------------------------------------------------- the built folder


def test_built_folder(model_dir):
    info = json.loads((model_dir / "vibethinker_model.json").read_text())
    cfg = json.loads((model_dir / "config.json").read_text())
    gen = json.loads((model_dir / "generation_config.json").read_text())
    tcfg = json.loads((model_dir / "tokenizer_config.json").read_text())
    assert 1.0e6 < info["params"] < 1.4e6 and info["seed"] == 3 and info["depth"] == 3
    assert cfg["model_type"] == "qwen2" and cfg["num_hidden_layers"] == 3
    assert cfg["hidden_size"] == 192 and cfg["intermediate_size"] == 512
    assert (cfg["num_attention_heads"], cfg["num_key_value_heads"]) == (6, 2)
    assert cfg["tie_word_embeddings"] and cfg["vocab_size"] == info["vocab_size"]
    assert cfg["max_position_embeddings"] == 2048
    assert (cfg["eos_token_id"], cfg["pad_token_id"]) == (2, 0)
    # The paper's sampling protocol; HF's default top_k=50 must be off.
    assert gen["do_sample"] and gen["temperature"] == 1.0 and gen["top_p"] == 0.95
    assert gen["top_k"] == 0 and gen["eos_token_id"] == 2 and gen["pad_token_id"] == 0
    assert tcfg["tokenizer_class"] == "PreTrainedTokenizerFast"  # loads in transformers 4 too
    assert (model_dir / "model.safetensors").exists() and (model_dir / "model_card.md").exists()


def test_loads_offline_and_generates(model_dir):
    script = f"""
import json, torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from vibethinker.models import load_model_and_tokenizer
d = {str(model_dir)!r}
tok = AutoTokenizer.from_pretrained(d)
model = AutoModelForCausalLM.from_pretrained(d)
msgs = [{{"role": "user", "content": "Compute 2*3+4."}}]
enc = tok.apply_chat_template(msgs, add_generation_prompt=True, return_tensors="pt",
                              return_dict=True)
torch.manual_seed(0)
out = model.generate(**enc, max_new_tokens=12, min_new_tokens=12)
m2, t2 = load_model_and_tokenizer(d)
try:
    load_model_and_tokenizer("no-such-org/no-such-model")
    err = ""
except OSError as e:
    err = str(e)
print(json.dumps({{"new": out.shape[1] - enc["input_ids"].shape[1], "dtype": str(model.dtype),
    "top_k": model.generation_config.top_k, "eval": not m2.training, "err": err}}))
"""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    assert res["new"] == 12 and res["dtype"] == "torch.float32" and res["top_k"] == 0
    assert res["eval"]
    assert "no-such-org/no-such-model" in res["err"] and "--local-dir" in res["err"]


def test_load_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_model_and_tokenizer(tmp_path)
    with pytest.raises(FileNotFoundError):
        load_model_and_tokenizer(tmp_path / "missing")
    with pytest.raises(ValueError, match="dtype"):
        from vibethinker.models import _resolve_dtype

        _resolve_dtype("float7")


def test_deterministic_given_seed(tmp_path, data_dir, model_dir):
    a = tmp_path / "a"
    run(ModelConfig(out=str(a), data=str(data_dir), size="1m", seed=3))
    assert _hash(a / "model.safetensors") == _hash(model_dir / "model.safetensors")
    assert _hash(a / "tokenizer.json") == _hash(model_dir / "tokenizer.json")
    b = tmp_path / "b"
    run(ModelConfig(out=str(b), data=str(data_dir / "train.jsonl"), size="1m", seed=4))
    assert _hash(b / "model.safetensors") != _hash(model_dir / "model.safetensors")
    assert _hash(b / "tokenizer.json") == _hash(model_dir / "tokenizer.json")


def test_stage_errors(tmp_path, data_dir):
    with pytest.raises(ValueError, match="unknown kind"):
        run(ModelConfig(kind="huge", out=str(tmp_path / "x"), data=str(data_dir)))
    with pytest.raises(ValueError, match="data"):
        run(ModelConfig(out=str(tmp_path / "y")))
