"""Merging: streamed weighted average of HF folders; specialist picking; the stage (its merge is
the weighted average of the specialists it picked). Peak memory: benchmarks/sft.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from vibethinker.algo.merge import normalise_weights
from vibethinker.reports.probe_merge import summary_md
from vibethinker.stages.probe_merge import group_key, merge_plan, pick_specialists
from vibethinker.train.merge import merge_checkpoints, weight_files
from vibethinker.types import Problem

torch.set_num_threads(1)


def _tiny_folder(path: Path, seed: int, shard: str | None = None) -> Path:
    cfg = Qwen2Config(
        vocab_size=64,
        hidden_size=32,
        intermediate_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        tie_word_embeddings=True,
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(cfg)
    kw = {"max_shard_size": shard} if shard else {}
    model.save_pretrained(path, **kw)
    return path


def _tensors(folder: Path) -> dict[str, torch.Tensor]:
    out: dict[str, torch.Tensor] = {}
    for f in sorted(folder.glob("*.safetensors")):
        out.update(load_file(str(f)))
    return out


def test_normalise_weights():
    assert normalise_weights(None, 4) == [0.25] * 4
    assert normalise_weights([1, 3], 2) == [0.25, 0.75]
    assert normalise_weights([0, 2], 2) == [0.0, 1.0]  # a zero weight is allowed
    with pytest.raises(ValueError, match="2 weights for 3 checkpoints"):
        normalise_weights([1, 2], 3)
    with pytest.raises(ValueError, match="non-negative with a positive sum"):
        normalise_weights([-1, 2], 2)
    with pytest.raises(ValueError, match="non-negative with a positive sum"):
        normalise_weights([0, 0], 2)
    with pytest.raises(ValueError, match="merge needs at least one checkpoint"):
        normalise_weights(None, 0)


def test_merged_tensors_are_the_weighted_average(tmp_path):
    folders = [_tiny_folder(tmp_path / f"c{i}", seed=i) for i in range(3)]
    out = merge_checkpoints(folders, tmp_path / "merged", [1.0, 2.0, 1.0])
    merged = _tensors(Path(out))
    inputs = [_tensors(f) for f in folders]
    assert set(merged) == set(inputs[0])
    for name, t in merged.items():
        # 0.25 * a + 0.5 * b + 0.25 * c, computed here independently
        expect = 0.25 * inputs[0][name] + 0.5 * inputs[1][name] + 0.25 * inputs[2][name]
        assert t.dtype == inputs[0][name].dtype
        assert torch.allclose(t, expect, atol=1e-6), name
    model = AutoModelForCausalLM.from_pretrained(out)  # a plain HF folder, config copied
    assert torch.equal(model.model.embed_tokens.weight.data, merged["model.embed_tokens.weight"])


def test_equal_weights_default_and_identity(tmp_path):
    a, b = _tiny_folder(tmp_path / "a", 0), _tiny_folder(tmp_path / "b", 1)
    ta, tb = _tensors(a), _tensors(b)
    avg = _tensors(Path(merge_checkpoints([a, b], tmp_path / "m")))
    for k in ta:
        assert torch.allclose(avg[k], (ta[k] + tb[k]) / 2, atol=1e-6)
    same = _tensors(Path(merge_checkpoints([a], tmp_path / "one")))
    assert all(torch.equal(same[k], ta[k]) for k in ta)
    with pytest.raises(ValueError):
        merge_checkpoints([a, b], a)  # never overwrite an input


def test_sharded_inputs_and_outputs(tmp_path):
    a = _tiny_folder(tmp_path / "a", 0, shard="20KB")
    b = _tiny_folder(tmp_path / "b", 1, shard="20KB")
    assert len(list(a.glob("*.safetensors"))) > 1
    out = Path(merge_checkpoints([a, b], tmp_path / "m", shard_bytes=30_000))
    assert (out / "model.safetensors.index.json").exists()
    assert set(weight_files(out)) == set(weight_files(a))
    ta, tb, tm = _tensors(a), _tensors(b), _tensors(out)
    for k in ta:
        assert torch.allclose(tm[k], (ta[k] + tb[k]) / 2, atol=1e-6)
    AutoModelForCausalLM.from_pretrained(out)


def test_mismatched_architectures_fail(tmp_path):
    a = _tiny_folder(tmp_path / "a", 0)
    b = tmp_path / "b"
    b.mkdir()
    save_file({f"other{i}.weight": torch.zeros(2) for i in range(7)}, str(b / "model.safetensors"))
    with pytest.raises(ValueError, match="tensor names differ") as e:
        merge_checkpoints([a, b], tmp_path / "m")
    msg = str(e.value)  # names the input it compared against and at most 5 of the differences
    assert msg.startswith(f"{b}: tensor names differ from {a}")
    only_a = sorted(weight_files(a))  # all "model.*", so they sort before b's "other*" names
    assert msg.endswith(f"(e.g. {only_a[:5]})")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="no safetensors weights to merge"):
        merge_checkpoints([a, tmp_path / "empty"], tmp_path / "m")
    with pytest.raises(ValueError, match="is one of the inputs"):
        merge_checkpoints([a], a)


def _flat_folder(path: Path, tensors: dict[str, torch.Tensor]) -> Path:
    path.mkdir(parents=True)
    save_file(tensors, str(path / "model.safetensors"))
    (path / "config.json").write_text("{}")
    return path


def test_shards_dtypes_metadata_and_a_reused_output(tmp_path):
    """Four 4000-byte tensors with 8000-byte shards: exactly two shards of two, named in order,
    safetensors metadata format "pt" (what transformers expects), bf16 inputs stay bf16, a
    nested output folder is created and stale shards of an earlier merge are removed."""
    g = torch.Generator().manual_seed(0)
    mk = lambda: {f"w{i}": torch.randn(1000, generator=g) for i in range(4)}  # noqa: E731
    a, b = _flat_folder(tmp_path / "a", mk()), _flat_folder(tmp_path / "b", mk())
    out = tmp_path / "deep" / "er" / "m"
    (out).mkdir(parents=True)
    for stale in ("model-00007.safetensors", "model.safetensors"):
        save_file({"stale": torch.zeros(1)}, str(out / stale))
    merge_checkpoints([a, b], out, shard_bytes=8000)
    shards = sorted(p.name for p in out.glob("*.safetensors"))
    assert shards == ["model-00001.safetensors", "model-00002.safetensors"]
    index = json.loads((out / "model.safetensors.index.json").read_text())
    assert index["weight_map"] == {
        "w0": shards[0],
        "w1": shards[0],
        "w2": shards[1],
        "w3": shards[1],
    }
    assert index["metadata"]["total_size"] == sum((out / x).stat().st_size for x in shards)
    from safetensors import safe_open

    for sh in shards:
        with safe_open(str(out / sh), framework="pt") as h:
            assert h.metadata() == {"format": "pt"}
    ta, tb, tm = _tensors(a), _tensors(b), _tensors(out)
    assert all(torch.allclose(tm[k], (ta[k] + tb[k]) / 2, atol=1e-6) for k in ta)
    # bf16 checkpoints: averaged in fp32, stored back in bf16 (or the dtype asked for)
    c = _flat_folder(tmp_path / "c", {k: v.bfloat16() for k, v in ta.items()})
    d = _flat_folder(tmp_path / "d", {k: v.bfloat16() for k, v in tb.items()})
    half = _tensors(Path(merge_checkpoints([c, d], tmp_path / "nested" / "bf16")))
    tc, td = _tensors(c), _tensors(d)
    for k in tc:
        assert half[k].dtype == torch.bfloat16
        assert torch.equal(half[k], ((tc[k].float() + td[k].float()) / 2).bfloat16())
    f32 = _tensors(Path(merge_checkpoints([c, d], tmp_path / "f32", dtype=torch.float32)))
    assert all(f32[k].dtype == torch.float32 for k in f32)
    assert torch.equal(f32["w0"], (tc["w0"].float() + td["w0"].float()) / 2)


# ----------------------------------------------------------------------------- probe logic


def test_pick_specialists_and_merge_plan():
    table = {
        "s1/step-10": {"a": 0.50, "b": 0.40, "c": 0.30},
        "s1/step-20": {"a": 0.60, "b": 0.40, "c": 0.20},
        "s1/step-30": {"a": 0.55, "b": 0.35, "c": 0.30},
    }
    spec = pick_specialists(table, ["a", "b", "c"])
    # a: step-20 wins; b: tie 10/20 -> the later (20); c: tie 10/30 -> 30.
    assert spec == {"a": "s1/step-20", "b": "s1/step-20", "c": "s1/step-30"}
    plan = dict(merge_plan(spec))
    assert plan == pytest.approx({"s1/step-20": 2 / 3, "s1/step-30": 1 / 3})
    plan = dict(merge_plan(spec, {"c": 2.0}))  # a, b weigh 1 each, c 2
    assert plan == pytest.approx({"s1/step-20": 0.5, "s1/step-30": 0.5})


def test_group_key_modes():
    p = Problem(id="x", domain="math", prompt="", subdomain="algebra")
    q = Problem(id="y", domain="code", prompt="", subdomain="stdio")
    assert [group_key(p, "subdomain"), group_key(q, "subdomain")] == ["math/algebra", "code/stdio"]
    assert [group_key(p, "domain"), group_key(q, "domain")] == ["math", "code"]
    assert [group_key(p, "math-subdomain"), group_key(q, "math-subdomain")] == [
        "math/algebra",
        "code",
    ]


def test_summary_says_when_one_checkpoint_wins_all():
    table = {"c1": {"a": 0.2, "b": 0.1}, "c2": {"a": 0.5, "b": 0.6}, "merged": {"a": 0.5, "b": 0.6}}
    spec = pick_specialists({k: v for k, v in table.items() if k != "merged"}, ["a", "b"])
    md = summary_md(table, ["a", "b"], spec, merge_plan(spec), 4, 8, "c2")
    assert "wins every probe set" in md and "`c2`" in md


# ----------------------------------------------------------------------------- the stage


def test_probe_merge_stage_end_to_end(tmp_path):
    """Two SFT checkpoints of a tiny model, probed on two math subdomains, merged."""
    from tests.helpers.sft_data import _problems
    from vibethinker.data.io import save_problems
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.stages.probe_merge import ProbeMergeConfig, run
    from vibethinker.stages.sft import SFTConfig
    from vibethinker.stages.sft import run as run_sft

    train, probe = _problems(40, seed=1), _problems(8, seed=9)
    save_problems(tmp_path / "train.jsonl", train)
    save_problems(tmp_path / "probe.jsonl", probe)
    tiny = build_tiny_model(
        tmp_path / "tiny", [p.prompt + t for p in train for t in p.traces], "d1", 300, 0
    )
    run_sft(
        SFTConfig(
            model=tiny,
            data=str(tmp_path / "train.jsonl"),
            out=str(tmp_path / "sft"),
            epochs=2,
            global_batch=16,
            micro_batch=4,
            lr=5e-3,
            final_lr=1e-4,
            max_len=128,
            save_every=5,
            device="cpu",
        )
    )
    cfg = ProbeMergeConfig(
        sft=[str(tmp_path / "sft")],
        probe=str(tmp_path / "probe.jsonl"),
        out=str(tmp_path / "pm"),
        k=2,
        n=2,
        max_new_tokens=24,
        workers=1,
        device="cpu",
    )
    outs = run(cfg)
    res = json.loads(Path(outs["table"]).read_text())
    assert res["groups"] == ["math/algebra", "math/arithmetic"]
    assert list(res["table"]) == ["sft/step-000005", "sft/step-000010", "merged"]
    assert set(res["specialists"]) == set(res["groups"])
    assert abs(sum(m["weight"] for m in res["merge"]) - 1) < 1e-9
    # the merged model is the plan's weighted average of the specialists' weights
    merged = _tensors(Path(outs["model"]))
    parts = [(m["weight"], _tensors(Path(m["folder"]))) for m in res["merge"]]
    for name, t in merged.items():
        assert torch.allclose(t, sum(w * p[name] for w, p in parts), atol=1e-6), name
    loaded = AutoModelForCausalLM.from_pretrained(outs["model"])
    assert torch.equal(loaded.model.embed_tokens.weight.data, merged["model.embed_tokens.weight"])
    md = Path(outs["summary"]).read_text()
    assert "| merged |" in md and "Mean Pass@2" in md


def test_probe_merge_stage_merges_the_specialists(tmp_path, monkeypatch):
    """Three checkpoints; the (stubbed) probe makes c1 the algebra specialist and c2 the
    arithmetic one, c0 none: the stage's merge is exactly (c1 + c2) / 2 (weights 1:1), not c0
    nor c1 alone, and probe.json records that plan and the merged row."""
    from vibethinker.data.io import save_problems
    from vibethinker.stages import probe_merge

    folders = [_tiny_folder(tmp_path / f"c{i}", seed=i) for i in range(3)]
    probe = [
        Problem(
            id=f"q{i}",
            domain="math",
            prompt="1+1",
            answer="2",
            subdomain="algebra" if i % 2 else "arithmetic",
        )
        for i in range(4)
    ]
    save_problems(tmp_path / "probe.jsonl", probe)
    scores = {
        "c0": {"math/algebra": 0.2, "math/arithmetic": 0.3},
        "c1": {"math/algebra": 0.9, "math/arithmetic": 0.1},
        "c2": {"math/algebra": 0.4, "math/arithmetic": 0.8},
    }

    def fake_probe(folder, groups, cfg, device):
        assert list(groups) == ["math/algebra", "math/arithmetic"]
        return scores.get(Path(folder).name, {"math/algebra": 0.7, "math/arithmetic": 0.7})

    monkeypatch.setattr(probe_merge, "probe_model", fake_probe)
    cfg = probe_merge.ProbeMergeConfig(
        checkpoints=[str(f) for f in folders],
        probe=str(tmp_path / "probe.jsonl"),
        out=str(tmp_path / "pm"),
        k=1,
        n=1,
        device="cpu",
    )
    outs = probe_merge.run(cfg)
    res = json.loads(Path(outs["table"]).read_text())
    assert res["specialists"] == {"math/algebra": "c1", "math/arithmetic": "c2"}
    assert [(m["checkpoint"], m["weight"]) for m in res["merge"]] == [("c1", 0.5), ("c2", 0.5)]
    assert res["table"]["merged"] == {"math/algebra": 0.7, "math/arithmetic": 0.7}
    assert not res["one_checkpoint_wins_all"]
    merged, ins = _tensors(Path(outs["model"])), [_tensors(f) for f in folders]
    for name, t in merged.items():
        assert torch.allclose(t, (ins[1][name] + ins[2][name]) / 2, atol=1e-6), name
    emb = "model.embed_tokens.weight"  # not c1's (or c0's) weights alone
    assert not any(torch.allclose(merged[emb], x[emb], atol=1e-4) for x in ins)
    md = Path(outs["summary"]).read_text()
    assert "math/algebra -> `c1`" in md and "`c2` 0.50" in md
    # weights: algebra counts 3, arithmetic 1 -> 0.75 c1 + 0.25 c2
    cfg.weights, cfg.out = {"math/algebra": 3.0}, str(tmp_path / "pm3")
    merged = _tensors(Path(probe_merge.run(cfg)["model"]))
    for name, t in merged.items():
        assert torch.allclose(t, 0.75 * ins[1][name] + 0.25 * ins[2][name], atol=1e-6), name
