"""Training across processes (train/dist.py): 2 gloo processes on CPU against 1 process.

Each check launches `torchrun --nproc-per-node 2` on this file (its `__main__` is the worker)
and compares with the same run in one process on the same data:
- SFT: two optimizer steps (FSDP2 and DDP) give the same losses, grad norms and weights;
- RL: one MGPO step over fixed rollouts (a scripted sampler: both runs see the same groups)
  gives the same advantages, metrics and weights;
- checkpoints: a 2-process run stopped after step 1 and resumed (by 2 processes, and by 1)
  ends where the straight run ends, and its consolidated folder loads with plain transformers.

Tolerance: the processes sum the same terms in another order (per-rank partial sums, then the
gradient reduction), so fp32 results agree to rounding, not bit for bit: losses and grad norms
to 1e-5 relative, weights to 1e-6 absolute after AdamW steps of lr 1e-3 (a sign flip of a
near-zero gradient would show as a 2e-3 jump).
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.loop_options import rl_options, sft_options
from vibethinker.engines import encode_prompt
from vibethinker.models.tiny import build_tiny_model
from vibethinker.train import checkpoints, dist, packing, policy, rl, sft
from vibethinker.train.sft_config import SFTConfig
from vibethinker.types import Completion, Problem, Score

HERE = Path(__file__).resolve()
RTOL, WTOL = 1e-5, 1e-6


def _pairs(n: int, seed: int = 0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        a, b, c = rng.randint(1, 9), rng.randint(1, 9), rng.randint(1, 9)
        out.append((f"Compute {a}*{b}+{c}.", f"<think>{a * b}+{c}</think>\\boxed{{{a * b + c}}}"))
    return out


def _sft_opts(**kw) -> SFTConfig:
    base = dict(
        epochs=1,
        global_batch=8,
        micro_batch=2,
        lr=1e-3,
        final_lr=1e-4,
        warmup_frac=0.0,
        max_len=64,
        pack=True,
        seed=3,
        max_steps=2,
    )
    base.update(kw)
    return sft_options(**base)


# ----------------------------------------------------------------------------- workers


def run_sft(model_dir: str, out: str | Path, parallel: str = "auto", **kw) -> dict:
    """Two SFT steps (1 or N processes, whatever launched us); the run's stats."""
    model, tok = policy.load_policy(model_dir, "cpu")
    samples = packing.build_samples(_pairs(24, seed=1), tok, 64)
    opts = _sft_opts(parallel=parallel, save_every=kw.pop("save_every", 0))
    stats = sft.train(model, tok, samples, opts, out, **kw)
    checkpoints.save_hf(model, tok, Path(out) / "final")
    return stats


def _problems() -> list[Problem]:
    return [Problem(f"p{i}", "math", f"Compute {i}+{i}.", answer=str(2 * i)) for i in range(8)]


class Scripted:
    """Rollouts fixed by the prompt text (so 1 and N processes see the same groups), with
    made-up engine logprobs (so engine_kl and TIS take part): some groups all correct (no
    gradient), some mixed."""

    def __init__(self, tok):
        self.tok = tok

    def encode(self, prompt):
        return encode_prompt(self.tok, prompt, True)

    def generate(self, prompts, n, params):
        out = []
        for p in prompts:
            i = int(p.split()[1].split("+")[0])
            rng = random.Random(p)
            group = []
            for j in range(n):
                ok = i % 3 == 0 or rng.random() < 0.5
                text = f"<think>{i}+{i}</think>\\boxed{{{2 * i if ok else 2 * i + 1}}}" + "x" * j
                ids = self.tok(text, add_special_tokens=False)["input_ids"]
                lps = [-3.0 - 6.0 * rng.random() for _ in ids]
                group.append(Completion(text=text, token_ids=ids, logprobs=lps))
            out.append(group)
        return out


def boxed_verify(problems, responses):
    return [
        Score(float(ok), ok, "ok")
        for ok in (f"boxed{{{p.answer}}}" in r for p, r in zip(problems, responses))
    ]


# objective options whose reductions span the processes: token counts, refill, dual clip
OBJECTIVES = dict(loss_agg="token_mean", dynamic_sampling=8, clip_ratio_c=1.5, std="sample")


def run_rl(
    model_dir: str, out: str | Path, parallel: str = "auto", options: dict | None = None, **kw
) -> dict:
    """Two MGPO steps over scripted rollouts; the metrics rows."""
    model, tok = policy.load_policy(model_dir, "cpu")
    opts = rl_options(
        **(options or {}),
        steps=2,
        prompts_per_step=4,
        group_size=4,
        lr=1e-3,
        final_lr=1e-4,
        max_new_tokens=16,
        seed=1,
        tis_cap=0.7,
        micro_batch=3,
        parallel=parallel,
        truncated_reward="verify",
    )
    res = rl.train(
        model,
        tok,
        _problems(),
        opts,
        out,
        prompt_fn=lambda p: p.prompt,
        verify=boxed_verify,
        sampler=Scripted(tok),
        **kw,
    )
    checkpoints.save_hf(model, tok, Path(out) / "final")
    return {"history": res["history"]}


def _stream_equals_gather(model_dir: str) -> bool:
    """The weight-sync stream of an FSDP2 model (one tensor gathered at a time) equals the full
    gathered state dict, name for name and value for value, on every process."""
    model, _ = policy.load_policy(model_dir, "cpu")
    model = dist.wrap(model, "fsdp")
    full = dist.full_state_dict(model)
    streamed = [(k, v.cpu()) for k, v in dist.iter_full_params(model)]
    names_equal = [k for k, _ in streamed] == list(full)
    return names_equal and all(torch.equal(v, full[k]) for k, v in streamed)


def _worker(root: str, model_dir: str) -> None:
    """Everything the tests compare, in ONE 2-process launch (process start-up dominates)."""
    import shutil

    dist.init("cpu")
    root_p = Path(root)
    res = {
        "sft_fsdp": run_sft(model_dir, root_p / "sft_fsdp", "fsdp"),
        "sft_ddp": run_sft(model_dir, root_p / "sft_ddp", "ddp"),
        "rl_fsdp": run_rl(model_dir, root_p / "rl_fsdp", "fsdp"),
        "rl_ddp": run_rl(model_dir, root_p / "rl_ddp", "ddp"),
        "rl_objectives": run_rl(model_dir, root_p / "rl_objectives", "fsdp", OBJECTIVES),
    }
    res["stream_equal"] = _stream_equals_gather(model_dir)
    # interrupted after step 1 (sharded checkpoint), then resumed by fresh models
    ckpt = root_p / "ckpt"
    run_sft(model_dir, ckpt, "fsdp", save_every=1, stop_at=1)
    if dist.is_main():
        shutil.copytree(ckpt, root_p / "ckpt_for_one")  # resumed by ONE process in the test
    dist.barrier()
    res["resumed"] = run_sft(model_dir, ckpt, "fsdp", save_every=1)
    if dist.is_main():
        (root_p / "result.json").write_text(json.dumps(res))
    dist.shutdown()


def torchrun(*args: str, n: int = 2) -> None:
    """`torchrun --nproc-per-node n` this file as the worker; fails the test on a non-zero exit."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parents[2])}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        str(n),
        "--master-port",
        str(29500 + os.getpid() % 2000),
        str(HERE),
        *args,
    ]
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(str(folder / "model.safetensors"))


def _same_weights(a: Path, b: Path, tol: float = WTOL) -> None:
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys()
    for k in wa:
        d = float((wa[k] - wb[k]).abs().max())
        assert d <= tol, f"{k}: max |diff| {d:.3g} > {tol}"


def _rows(out: Path) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


# ----------------------------------------------------------------------------- tests


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> str:
    texts = [p + " " + r for p, r in _pairs(64)] + [p.prompt for p in _problems()]
    return build_tiny_model(tmp_path_factory.mktemp("tiny"), texts, "d1", 300, 0)


@pytest.fixture(scope="module")
def two(tiny, tmp_path_factory) -> Path:
    """The 2-process runs (one torchrun launch for all of them)."""
    root = tmp_path_factory.mktemp("two")
    torchrun(str(root), tiny)
    return root


NUMERIC_SKIP = ("t_", "seconds", "tokens_per_s")


def _same_rows(r1: list[dict], r2: list[dict]) -> None:
    assert len(r1) == len(r2) == 2
    for a, b in zip(r1, r2):
        assert a.keys() == b.keys()
        for k, v in a.items():
            if k.startswith(NUMERIC_SKIP) or v is None:
                continue
            assert b[k] == pytest.approx(v, rel=RTOL, abs=1e-7), (a["step"], k, v, b[k])


@pytest.mark.parametrize("parallel", ["fsdp", "ddp"])
def test_sft_two_processes_equal_one(tiny, two, tmp_path, parallel):
    run_sft(tiny, tmp_path / "one")
    r1, r2 = _rows(tmp_path / "one"), _rows(two / f"sft_{parallel}")
    _same_rows(r1, r2)
    assert r1[0]["loss"] != r1[1]["loss"]  # the first step moved the weights
    _same_weights(tmp_path / "one" / "final", two / f"sft_{parallel}" / "final")


@pytest.mark.parametrize("parallel", ["fsdp", "ddp"])
def test_rl_two_processes_equal_one(tiny, two, tmp_path, parallel):
    run_rl(tiny, tmp_path / "one")
    r1, r2 = _rows(tmp_path / "one"), _rows(two / f"rl_{parallel}")
    _same_rows(r1, r2)
    # the scripted groups give gradient (mixed groups), skip rows (all-correct groups) and
    # an engine mismatch (TIS capped somewhere): every reduction is exercised
    assert 0 < r1[0]["trained_rows"] < 16 and r1[0]["grad_norm"] > 0
    assert r1[0]["engine_kl"] > 0 and 0 < r1[0]["tis_capped_frac"] < 1
    _same_weights(tmp_path / "one" / "final", two / f"rl_{parallel}" / "final")


def test_weight_sync_stream_equals_the_gathered_state_dict(two):
    assert json.loads((two / "result.json").read_text())["stream_equal"]


def test_rl_objectives_two_processes_equal_one(tiny, two, tmp_path):
    """token_mean's token count, dynamic sampling's refill (groups kept in draw order) and the
    dual clip give the same steps in 2 processes as in 1."""
    run_rl(tiny, tmp_path / "one", options=OBJECTIVES)
    r1, r2 = _rows(tmp_path / "one"), _rows(two / "rl_objectives")
    _same_rows(r1, r2)
    assert r1[0]["frac_zero_signal"] > 0 and r1[0]["dyn_groups"] == 4, r1[0]
    assert r1[0]["trained_rows"] == 16 and r1[0]["grad_norm"] > 0
    _same_weights(tmp_path / "one" / "final", two / "rl_objectives" / "final")


def test_sharded_checkpoint_resumes_exactly(tiny, two, tmp_path):
    ckpt = two / "ckpt" / "checkpoints"
    assert [s for s, _ in checkpoints.list_checkpoints(ckpt)] == [1, 2]
    assert (ckpt / "step-000001" / checkpoints.SHARDED_DIR).is_dir()
    assert {p.name for p in (ckpt / "step-000001").glob("rng-*.pt")} == {"rng-0.pt", "rng-1.pt"}
    # stopped at 1 and resumed by 2 processes == the straight 2-process run
    _same_rows(_rows(two / "sft_fsdp"), _rows(two / "ckpt"))
    _same_weights(two / "sft_fsdp" / "final", two / "ckpt" / "final", tol=0.0)
    # the same sharded checkpoint resumed by ONE process == the straight 1-process run
    stats = run_sft(tiny, two / "ckpt_for_one")
    assert stats["resumed_at"] == 1
    run_sft(tiny, tmp_path / "one")
    _same_weights(tmp_path / "one" / "final", two / "ckpt_for_one" / "final")


def test_consolidated_folder_loads_with_plain_transformers(two):
    from transformers import AutoModelForCausalLM

    for folder in (two / "sft_fsdp" / "final", two / "ckpt" / "checkpoints" / "step-000001"):
        m = AutoModelForCausalLM.from_pretrained(folder)
        saved = _weights(folder)
        for k, v in m.state_dict().items():
            if k in saved:
                assert torch.equal(v, saved[k]), k
        assert m(torch.tensor([[1, 2, 3]])).logits.isfinite().all()


if __name__ == "__main__":
    _worker(*sys.argv[1:])


# ----------------------------------------------------------------------------- vibethinker run

RUN_RECIPE = """\
# the tiny recipe cut down: data, model, sft and rl (on both processes), eval (rank 0)
run_dir: {run_dir}
model: ${{run_dir}}/model
stages:
  - {{stage: data, kind: tiny, seed: 0, n_train: 200, n_eval: 40}}
  - {{stage: model, kind: tiny, data: "${{data.out}}", out: "${{model}}", size: 1m, seed: 0}}
  - {{stage: sft, model: "${{model}}", data: "${{data.out}}/train.jsonl", max_steps: 2,
     global_batch: 8, micro_batch: 4, max_len: 128, lr: 2e-3}}
  - {{stage: rl, model: "${{sft.out}}/final", data: "${{data.out}}", domain: math, steps: 2,
     prompts_per_step: 4, group_size: 2, max_new_tokens: 16, filter_rollouts: 0,
     max_prompts: 8, eval_every: 0}}
  - {{stage: eval, model: "${{rl.out}}/final", data: "${{data.out}}/eval.jsonl", n: 1, limit: 4,
     max_new_tokens: 16}}
"""


def _torchrun_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(HERE.parents[2])}
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--master-port",
        str(27500 + os.getpid() % 2000),
        "-m",
        "vibethinker.cli",
        *args,
    ]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.slow
def test_torchrun_vibethinker_run_chains_stages(tmp_path):
    """`torchrun --nproc-per-node 2 vibethinker run RECIPE`: sft and rl on both processes, the
    rest on rank 0, one manifest, each stage reading the one before (`${sft.out}`); running it
    again skips everything (~30 s)."""
    recipe = tmp_path / "recipe.yaml"
    run = tmp_path / "run"
    recipe.write_text(RUN_RECIPE.format(run_dir=run))
    p = _torchrun_cli("run", str(recipe), "--quiet")
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-6000:]
    m = json.loads((run / "manifest.json").read_text())["stages"]
    assert {n: r["status"] for n, r in m.items()} == dict.fromkeys(
        ("data", "model", "sft", "rl", "eval"), "done"
    )
    log = (run / "run.log").read_text()
    assert "stage sft (sft): run on 2 processes" in log
    assert "stage rl (rl): run on 2 processes" in log and "stage eval (eval): run\n" in log
    assert len(_rows(run / "sft")) == 2 and len(_rows(run / "rl")) == 2
    assert (run / "rl" / "final" / "config.json").exists() and not (run / "single").exists()
    assert p.stdout.count("run complete:") == 1
    again = _torchrun_cli("run", str(recipe), "--quiet")
    assert again.returncode == 0, again.stderr[-6000:]
    assert (run / "run.log").read_text().count("stage sft: done, skipping") == 1
