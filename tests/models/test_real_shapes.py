"""Real-model shapes: a random-weight Qwen2.5-base-style checkpoint whose EOS
(`<|endoftext|>`) differs from the chat turn end (`<|im_end|>`), with Qwen's template (default
system prompt, no generation block) and 32K positions, through sft -> rl -> eval on CPU; plus the
context-length rules (positions, YaRN, "up to the context") on the same kind of checkpoint."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import torch
import yaml

from vibethinker.data.io import save_problems
from vibethinker.engines import SamplingParams, chat_end_token, make_sampler
from vibethinker.models import ContextLengthError, load_model_and_tokenizer
from vibethinker.models.qwen_style import build_qwen25_style
from vibethinker.types import Problem

torch.set_num_threads(1)
ROOT = Path(__file__).resolve().parents[2]


def _problems(n: int, seed: int = 0, start: int = 0) -> list[Problem]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        a, b = rng.randint(0, 9), rng.randint(0, 9)
        out.append(
            Problem(
                id=f"q{start + i}",
                domain="math",
                prompt=f"what is {a}+{b}?",
                answer=str(a + b),
                traces=[f"<think>{a}+{b}={a + b}</think>\\boxed{{{a + b}}}"],
            )
        )
    return out


@pytest.fixture(scope="module")
def qwen(tmp_path_factory) -> str:
    texts = [p.prompt + " " + p.traces[0] for p in _problems(200)]
    return build_qwen25_style(tmp_path_factory.mktemp("qwen") / "base", texts)


def test_checkpoint_has_real_style_traits(qwen):
    """The fixture is what a Qwen2.5 base checkpoint brings (else the tests below prove little)."""
    model, tok = load_model_and_tokenizer(qwen)
    gc = json.loads((Path(qwen) / "generation_config.json").read_text())
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert tok.eos_token == "<|endoftext|>" and gc["eos_token_id"] == tok.eos_token_id != end
    assert chat_end_token(tok) == end
    assert "You are Qwen" in tok.apply_chat_template(
        [{"role": "user", "content": "x"}], tokenize=False
    )
    assert model.config.max_position_embeddings == 32768
    # the loader makes the turn end an EOS of the in-memory generation config
    assert end in model.generation_config.eos_token_id


def test_samplers_stop_on_the_turn_end(qwen):
    s = make_sampler("hf", model=qwen, device="cpu")
    _, tok = load_model_and_tokenizer(qwen)
    assert tok.convert_tokens_to_ids("<|im_end|>") in s.eos_ids
    assert tok.eos_token_id in s.eos_ids


# ----------------------------------------------------------------------------- context


def test_context_refused_past_positions_and_yarn_extends_it(qwen, tmp_path):
    s = make_sampler("hf", model=qwen, device="cpu")
    with pytest.raises(ContextLengthError, match="rope_yarn_factor"):
        s.generate(["hi"], 1, SamplingParams(max_new_tokens=32768))
    y = make_sampler("hf", model=qwen, device="cpu", rope_yarn_factor=2.0)
    assert y.context_len == 65536
    rope = y.model.config.rope_parameters
    assert rope["rope_type"] == "yarn" and rope["factor"] == 2.0
    assert rope["original_max_position_embeddings"] == 32768
    assert y.response_budget(100, SamplingParams(max_new_tokens=32768)) == 32768
    # a saved checkpoint keeps the scaling (vLLM and plain transformers load the same positions)
    from vibethinker.models import save_model_and_tokenizer

    save_model_and_tokenizer(y.model, y.tokenizer, tmp_path / "yarn")
    cfg = json.loads((tmp_path / "yarn" / "config.json").read_text())
    assert cfg["max_position_embeddings"] == 65536
    assert (cfg.get("rope_parameters") or cfg.get("rope_scaling"))["rope_type"] == "yarn"
    with pytest.raises(ContextLengthError):
        make_sampler("hf", model=qwen, device="cpu", context_len=40000)


def test_zero_max_new_tokens_fills_the_context(tmp_path):
    texts = [p.prompt + " " + p.traces[0] for p in _problems(50)]
    small = build_qwen25_style(tmp_path / "small", texts, max_position_embeddings=96)
    s = make_sampler("hf", model=small, device="cpu")
    s.eos_ids = []  # a random model: make sure it runs to the bound
    prompt_len = len(s.encode("what is 1+2?"))
    (c,) = s.generate(["what is 1+2?"], 1, SamplingParams(max_new_tokens=0, seed=0))[0]
    assert c.finish_reason == "length" and len(c.token_ids) == 96 - prompt_len


def test_rl_stage_refuses_a_cap_past_the_positions(qwen, tmp_path):
    from vibethinker.stages import get
    from vibethinker.stages.rl import RLConfig

    save_problems(tmp_path / "train.jsonl", _problems(4))
    cfg = RLConfig(
        model=qwen,
        data=str(tmp_path),
        out=str(tmp_path / "rl"),
        steps=1,
        max_new_tokens=65536,
        device="cpu",
        verify_workers=1,
    )
    with pytest.raises(ContextLengthError, match="rope_yarn_factor"):
        get("rl").fn(cfg)
    assert not (tmp_path / "rl" / "prompts.jsonl").exists()  # refused before any rollout


def test_3b_recipe_fits_its_context():
    """recipes/vibethinker-3b.yaml: Qwen2.5-Coder-3B has 32K positions; every 64K RL stage
    extends them with YaRN (and every other sampling cap leaves room for the prompt)."""
    recipe = yaml.safe_load((ROOT / "recipes" / "vibethinker-3b.yaml").read_text())
    positions = 32768
    for st in recipe["stages"]:
        if st["stage"] == "rl":
            factor = st.get("rope_yarn_factor", 0) or 1
            orig = st.get("rope_original_len") or positions
            assert st["max_new_tokens"] + 2048 <= orig * factor, st["name"]
        for key in ("max_new_tokens", "filter_max_new_tokens"):
            if st["stage"] != "rl" and key in st and not st.get("rope_yarn_factor"):
                if key == "filter_max_new_tokens":
                    continue  # the reference model (VibeThinker-1.5B) has its own positions
                assert st[key] + 1024 <= positions, (st["name"], key)
        if st["stage"] == "sft":
            assert st["max_len"] <= positions


# ----------------------------------------------------------------------------- sft -> rl -> eval


@pytest.mark.slow  # ~1 minute on one core
def test_sft_rl_eval_on_a_real_style_checkpoint(qwen, tmp_path):
    from vibethinker.stages import get
    from vibethinker.stages.eval import EvalConfig
    from vibethinker.stages.rl import RLConfig
    from vibethinker.stages.sft import SFTConfig

    train = _problems(160, seed=1)
    long_one = Problem(
        id="long",
        domain="math",
        prompt="what is 1+1?",
        answer="2",
        traces=["<think>" + "1+1=2;" * 200 + "</think>\\boxed{2}"],
    )
    save_problems(tmp_path / "train.jsonl", [*train, long_one])
    save_problems(tmp_path / "eval.jsonl", _problems(8, seed=2, start=1000))

    sft_cfg = SFTConfig(
        model=qwen,
        data=str(tmp_path / "train.jsonl"),
        out=str(tmp_path / "sft"),
        epochs=8,
        global_batch=16,
        micro_batch=16,
        max_len=192,
        lr=3e-3,
        final_lr=3e-4,
        prompt_style="raw",
        device="cpu",
    )
    sft_out = get("sft").fn(sft_cfg)
    stats = json.loads((tmp_path / "sft" / "stats.json").read_text())
    assert stats["samples_dropped_overlong"] == 1 and stats["samples_cut"] == 0
    assert stats["final_loss"] < 0.5 * stats["first_loss"]
    # the saved checkpoint stops on the turn end wherever it is loaded (generate, serve, vLLM)
    gc = json.loads((Path(sft_out["model"]) / "generation_config.json").read_text())
    _, tok = load_model_and_tokenizer(sft_out["model"])
    end = tok.convert_tokens_to_ids("<|im_end|>")
    assert isinstance(gc["eos_token_id"], list) and end in gc["eos_token_id"]
    assert tok.eos_token_id in gc["eos_token_id"]
    # ... and so do our samplers: answers end at <|im_end|>, not at the token cap
    s = make_sampler("hf", model=sft_out["model"], device="cpu")
    outs = s.generate(
        [p.prompt for p in _problems(6, seed=3)],
        2,
        SamplingParams(max_new_tokens=64, temperature=0.0),
    )
    comps = [c for cs in outs for c in cs]
    assert all(c.finish_reason == "stop" and c.token_ids[-1] == end for c in comps)
    assert all("\\boxed{" in c.text and "<|im_end|>" not in c.text for c in comps)

    rl_cfg = RLConfig(
        model=sft_out["model"],
        data=str(tmp_path),
        out=str(tmp_path / "rl"),
        steps=2,
        prompts_per_step=4,
        group_size=4,
        max_new_tokens=48,
        lr=1e-4,
        final_lr=1e-5,
        filter_rollouts=0,
        prompt_style="raw",
        device="cpu",
        verify_workers=1,
    )
    rl_out = get("rl").fn(rl_cfg)
    rows = [json.loads(x) for x in open(rl_out["metrics"])]
    assert len(rows) == 2 and all(r["trunc_rate"] < 0.5 for r in rows)

    ev_cfg = EvalConfig(
        model=rl_out["model"],
        data=str(tmp_path / "eval.jsonl"),
        n=2,
        k=[1, 2],
        max_new_tokens=48,
        prompt_style="raw",
        device="cpu",
        workers=1,
        out=str(tmp_path / "eval"),
    )
    ev = json.loads(Path(get("eval").fn(ev_cfg)["summary"]).read_text())
    m = ev["metrics"]["all"]
    assert m["samples"] == 16 and m["truncation_rate"] < 0.5
    assert 0 < m["mean_tokens"] < 48


def test_vllm_engine_stops_on_the_turn_end_and_fills_the_context(qwen, monkeypatch):
    """The vllm engine's settings (vLLM itself needs a GPU or a separate CPU venv): the turn
    end goes in as stop_token_ids, max_new_tokens=0 leaves max_tokens to max_model_len, YaRN
    goes through hf_overrides."""
    from types import SimpleNamespace

    from vibethinker.engines import vllm as vllm_engine

    _, tok = load_model_and_tokenizer(qwen)
    seen: dict = {}

    class LLM:
        def __init__(self, **kw):
            seen["llm"] = kw

        def get_tokenizer(self):
            return tok

        def generate(self, inputs, sp, use_tqdm=False):
            seen["sp"] = sp
            out = SimpleNamespace(token_ids=[5, 6], logprobs=None, finish_reason="stop", text="x")
            return [SimpleNamespace(outputs=[out]) for _ in inputs]

    fake = SimpleNamespace(LLM=LLM, SamplingParams=lambda **kw: kw)
    monkeypatch.setattr(vllm_engine, "_import_vllm", lambda: fake)
    s = make_sampler("vllm", model=qwen, rope_yarn_factor=2.0)
    s.generate(["hi"], 2, SamplingParams(max_new_tokens=0, seed=1))
    assert seen["sp"]["stop_token_ids"] == [tok.convert_tokens_to_ids("<|im_end|>")]
    assert seen["sp"]["max_tokens"] is None and seen["sp"]["n"] == 2
    over = seen["llm"]["hf_overrides"]
    assert over["max_position_embeddings"] == 65536 and over["rope_scaling"]["factor"] == 2.0
    s.close()  # the stand-in engine leaves the process's one-engine slot (engines/vllm.py)
    assert vllm_engine._LIVE == []
