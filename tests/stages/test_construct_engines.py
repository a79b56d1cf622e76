"""The construct stage with real teacher engines instead of the simulated world teacher: `hf` on a
tiny random local model (its replies are garbage, so nearly everything is dropped: the test checks
that every query and trace is accounted for in the funnel, that parse failures are counted by
reason, and that nothing crashes), `vllm` where it is installed and a GPU is present. The
`openai` engine against the stub server is in tests/stages/test_construct.py."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import torch

from tests.helpers.stub_openai import StubOpenAI
from tests.helpers.tiny_qwen2 import tiny_qwen2
from vibethinker.data.io import load_problems, save_problems
from vibethinker.data.world import generate
from vibethinker.models import ContextLengthError
from vibethinker.stages import construct as stage
from vibethinker.stages.construct import ConstructConfig

EXPAND_REASONS = {"empty", "no_json", "bad_field"}
JUDGE_REASONS = {"judge_unparsable", "valid", "incomplete", "ill-posed", "invalid"}


@pytest.fixture(scope="module")
def setup(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("hf_teacher")
    splits = generate(5, n_train=24, n_probe=1, n_eval=12, domains=["math", "stem", "code"])
    two = [[p for p in splits["train"] if p.domain == dom][:2] for dom in ("math", "stem", "code")]
    save_problems(d / "train.jsonl", [p for row in zip(*two) for p in row])  # domains interleaved
    save_problems(d / "eval.jsonl", splits["eval"])
    model, tok = tiny_qwen2(seed=1)
    model.config.max_position_embeddings = 2048  # char-level: the construction prompts are long
    model.save_pretrained(d / "model")
    tok.save_pretrained(d / "model")
    return {
        "train": str(d / "train.jsonl"),
        "eval": str(d / "eval.jsonl"),
        "model": str(d / "model"),
    }


def hf_cfg(setup, out, **kw) -> ConstructConfig:
    base = dict(
        seeds=setup["train"],
        out=str(out),
        teacher="hf",
        teacher_model=setup["model"],
        teacher_options={"device": "cpu", "dtype": "float32"},
        max_new_tokens=8,
        n_samples=2,
        max_seeds=6,
        chunk=4,
        eval_sets=[setup["eval"]],
        decontam_template_share=0.3,
        workers=1,
    )
    base.update(kw)
    return ConstructConfig(**base)


def drops_of(funnel: dict, domain: str, step: str) -> Counter:
    return Counter(funnel["drops"].get(f"{domain}/{step}", {}))


def check_accounting(funnel: dict, seeds: Counter, cfg: ConstructConfig, n_out: Counter) -> None:
    """Every query and trace that enters a step leaves it or is dropped with a reason, and each
    step's input is exactly what the steps before it let through."""
    for d, n_seeds in seeds.items():
        io = {s: tuple(v) for s, v in funnel["io"][d].items()}
        z = (0, 0)
        assert io["seeds"] == (n_seeds, n_seeds)
        e_in, e_out = io.get("expand", z)
        assert e_in == n_seeds  # expand_fraction 1, one expansion per seed
        assert e_in - e_out == sum(drops_of(funnel, d, "expand").values())
        j_in, j_out = io.get("judge", z)
        assert j_in == e_out + (n_seeds if cfg.judge_seeds else 0)
        assert j_in - j_out == sum(drops_of(funnel, d, "judge").values())
        q_in, q_out = io.get("decontam_query", z)
        assert q_in == j_out + (0 if cfg.judge_seeds else n_seeds)
        assert q_in - q_out == sum(drops_of(funnel, d, "decontam_query").values())
        s_in, s_out = io.get("sample", z)
        assert s_in == q_out
        empty = drops_of(funnel, d, "sample")["empty_reply"]
        # a query leaves `sample` only when all its n replies are empty
        assert (s_in - s_out) * cfg.n_samples <= empty <= s_in * cfg.n_samples
        labelled = s_out
        for step in ("vote", "code_tests"):
            i, o = io.get(step, z)
            assert i - o == sum(drops_of(funnel, d, step).values())
            labelled -= i - o
        c_in, c_out = io.get("correct", z)
        assert c_in == labelled * cfg.n_samples  # every sample of every labelled query judged
        assert c_in - c_out == drops_of(funnel, d, "correct")["wrong_or_empty"]
        m_in, m_out = io.get("multipath", z)
        assert m_in == c_out and m_out <= m_in
        r_in, r_out = io.get("repetition", z)
        assert r_in == m_out and r_in - r_out == sum(drops_of(funnel, d, "repetition").values())
        no_trace = drops_of(funnel, d, "kept")["no_trace_left"]
        t_in, t_out = io.get("decontam_trace", z)
        assert t_in == labelled - no_trace
        assert t_in - t_out == sum(drops_of(funnel, d, "decontam_trace").values())
        assert io.get("kept", z) == (t_out, t_out) and t_out == n_out[d]


def seeds_by_domain(setup, n: int) -> Counter:
    return Counter(p.domain for p in load_problems(setup["train"])[:n])


def test_hf_teacher_construct_counts_every_drop(setup, tmp_path):
    c = hf_cfg(setup, tmp_path)
    res = stage.run(c)
    funnel = json.loads(Path(res["funnel"]).read_text())
    out = load_problems(res["train"]) if Path(res["train"]).stat().st_size else []
    check_accounting(funnel, seeds_by_domain(setup, 6), c, Counter(p.domain for p in out))
    expand = sum((drops_of(funnel, d, "expand") for d in funnel["io"]), Counter())
    assert expand and set(expand) <= EXPAND_REASONS  # garbage replies: parse failures by reason
    assert sum(expand.values()) >= 5  # a random 8-token reply is almost never a usable problem
    samples = sum(v for d in funnel["io"] for v in drops_of(funnel, d, "correct").values())
    assert samples > 0  # the seeds' samples reached verification and were judged wrong
    summary = Path(res["summary"]).read_text()
    assert "| seeds | queries |" in summary and "| expand | queries |" in summary


def test_hf_teacher_judge_parse_failures_are_counted(setup, tmp_path):
    c = hf_cfg(setup, tmp_path, judge_seeds=True, max_seeds=4, eval_sets=[])
    res = stage.run(c)
    funnel = json.loads(Path(res["funnel"]).read_text())
    out = load_problems(res["train"]) if Path(res["train"]).stat().st_size else []
    check_accounting(funnel, seeds_by_domain(setup, 4), c, Counter(p.domain for p in out))
    judge = sum((drops_of(funnel, d, "judge") for d in funnel["io"]), Counter())
    assert judge["judge_unparsable"] >= 3 and set(judge) <= JUDGE_REASONS


def test_hf_teacher_with_too_small_a_context_is_a_clear_error(setup, tmp_path):
    with pytest.raises(ContextLengthError, match="max_new_tokens=4096"):
        stage.run(hf_cfg(setup, tmp_path, max_new_tokens=4096))
    assert not (tmp_path / "progress.json").exists()  # nothing recorded as done


def test_openai_teacher_garbage_replies_are_counted(setup, tmp_path):
    """The openai engine against the stub server answering garbage and empty replies (the world
    teacher behind the stub is in tests/stages/test_construct.py)."""
    with StubOpenAI(responses=["{not json at all", "", "VERDICT maybe", "\\boxed{7}"]) as srv:
        c = hf_cfg(
            setup,
            tmp_path,
            teacher="openai",
            teacher_base_url=srv.base_url,
            teacher_options={"max_retries": 0},
        )
        res = stage.run(c)
        assert srv.n_requests > 0
    funnel = json.loads(Path(res["funnel"]).read_text())
    out = load_problems(res["train"]) if Path(res["train"]).stat().st_size else []
    check_accounting(funnel, seeds_by_domain(setup, 6), c, Counter(p.domain for p in out))
    expand = sum((drops_of(funnel, d, "expand") for d in funnel["io"]), Counter())
    assert sum(expand.values()) == 6 and set(expand) <= {"no_json", "empty"}
    empty = sum(drops_of(funnel, d, "sample")["empty_reply"] for d in funnel["io"])
    assert empty > 0  # a quarter of the samples are empty replies


@pytest.mark.gpu
def test_vllm_teacher_construct(setup, tmp_path):
    pytest.importorskip("vllm", reason="vllm is not installed (GPU-only extra)")
    if not torch.cuda.is_available():
        pytest.skip("vllm needs a GPU")
    c = hf_cfg(setup, tmp_path, teacher="vllm", teacher_options={"gpu_memory_utilization": 0.2})
    res = stage.run(c)
    funnel = json.loads(Path(res["funnel"]).read_text())
    out = load_problems(res["train"]) if Path(res["train"]).stat().st_size else []
    check_accounting(funnel, seeds_by_domain(setup, 6), c, Counter(p.domain for p in out))
