"""Merging: streamed weighted average of HF folders; peak memory; specialist picking; the stage."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, Qwen2Config, Qwen2ForCausalLM

from vibethinker.algo.merge import merge_checkpoints, normalise_weights, weight_files
from vibethinker.stages.probe_merge import group_key, merge_plan, pick_specialists, summary_md
from vibethinker.types import Problem

torch.set_num_threads(1)


def _tiny_folder(path: Path, seed: int, shard: str | None = None) -> Path:
    cfg = Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True,
    )  # fmt: skip
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
    with pytest.raises(ValueError):
        normalise_weights([1, 2], 3)
    with pytest.raises(ValueError):
        normalise_weights([-1, 2], 2)


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
    save_file({"other.weight": torch.zeros(2)}, str(b / "model.safetensors"))
    with pytest.raises(ValueError, match="tensor names differ"):
        merge_checkpoints([a, b], tmp_path / "m")


_PEAK_SCRIPT = r"""
import json, sys, torch
from pathlib import Path
from vibethinker.algo.merge import merge_checkpoints
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
torch.zeros(1)  # allocator warm
base = rss("VmRSS:")
merge_checkpoints(sys.argv[1:-2], sys.argv[-2], shard_bytes=int(sys.argv[-1]))
print(json.dumps({"base": base, "peak": rss("VmHWM:")}))
"""


def measure_merge_peak(folders: list[Path], out: Path, shard_bytes: int) -> int:
    """Peak resident memory the merge adds over the process baseline, in bytes (own process)."""
    cmd = [sys.executable, "-c", _PEAK_SCRIPT, *map(str, folders), str(out), str(shard_bytes)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    return r["peak"] - r["base"]


def test_merge_peak_memory_stays_near_one_model(tmp_path):
    # 4 checkpoints of 32 MB each (8 tensors of 4 MB): loading them all would add ~128 MB.
    folders = []
    for i in range(4):
        d = tmp_path / f"c{i}"
        d.mkdir()
        g = torch.Generator().manual_seed(i)
        save_file({f"w{j}": torch.randn(1024, 1024, generator=g) for j in range(8)},
                  str(d / "model.safetensors"))  # fmt: skip
        (d / "config.json").write_text("{}")
        folders.append(d)
    model_bytes = 8 * 4 * 1024 * 1024
    one_shard = measure_merge_peak(folders, tmp_path / "m1", shard_bytes=1 << 40)
    small = measure_merge_peak(folders, tmp_path / "m2", shard_bytes=8 << 20)
    # One output shard holds the whole merged model: about one model, never four.
    assert one_shard < 1.6 * model_bytes, one_shard / model_bytes
    # Small shards: less than one model (measured ~0.75: the allocator keeps freed blocks).
    assert small < min(one_shard, model_bytes), (small / model_bytes, one_shard / model_bytes)
    a = _tensors(tmp_path / "m2")
    ins = [_tensors(f) for f in folders]
    assert torch.allclose(a["w3"], sum(t["w3"] for t in ins) / 4, atol=1e-5)


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
    from vibethinker.data.io import save_problems
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.stages.probe_merge import ProbeMergeConfig, run
    from vibethinker.stages.sft import SFTConfig
    from vibethinker.stages.sft import run as run_sft

    sys.path.insert(0, str(Path(__file__).parent))
    from test_sft import _problems

    train, probe = _problems(40, seed=1), _problems(8, seed=9)
    save_problems(tmp_path / "train.jsonl", train)
    save_problems(tmp_path / "probe.jsonl", probe)
    tiny = build_tiny_model(tmp_path / "tiny", [p.prompt + t for p in train for t in p.traces],
                            "d1", 300, 0)  # fmt: skip
    run_sft(SFTConfig(model=tiny, data=str(tmp_path / "train.jsonl"), out=str(tmp_path / "sft"),
                      epochs=2, global_batch=16, micro_batch=4, lr=5e-3, final_lr=1e-4,
                      max_len=128, save_every=5, device="cpu"))  # fmt: skip
    cfg = ProbeMergeConfig(sft=[str(tmp_path / "sft")], probe=str(tmp_path / "probe.jsonl"),
                           out=str(tmp_path / "pm"), k=2, n=2, max_new_tokens=24, workers=1,
                           device="cpu")  # fmt: skip
    outs = run(cfg)
    res = json.loads(Path(outs["table"]).read_text())
    assert res["groups"] == ["math/algebra", "math/arithmetic"]
    assert list(res["table"]) == ["sft/step-000005", "sft/step-000010", "merged"]
    assert set(res["specialists"]) == set(res["groups"])
    assert abs(sum(m["weight"] for m in res["merge"]) - 1) < 1e-9
    AutoModelForCausalLM.from_pretrained(outs["model"])
    assert Path(outs["plot"]).stat().st_size > 1000
    md = Path(outs["summary"]).read_text()
    assert "| merged |" in md and "Mean Pass@2" in md
