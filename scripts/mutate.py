"""Mutation testing of the core (`make mutate`; not in CI: it takes tens of minutes).

mutmut 3 plants one small bug at a time (an operator, a constant, a dropped argument) in the
functions below and runs the tests that cover each; a mutant that no test fails on "survives".
It mutates a copy (`mutants/`) of the tree it runs in, and this script runs it in a throw-away
copy of the repository under --work (default /tmp/vibethinker-mutate), never in the working
tree, so tests run elsewhere never see a mutated file. One target at a time, tests selected per
target, one worker by default (the machines are small and shared).

    python scripts/mutate.py                      # every target, report in docs/MUTATION.md
    python scripts/mutate.py listed algo.losses --jobs 2   # `listed`: the hand-written mutants

Surviving mutants that cannot change behaviour are listed in EQUIVALENT with the reason; the
report counts them apart. Anything else that survives is a missing test: write it. To look at one:
`cd /tmp/vibethinker-mutate/<target> && mutmut show <name>`.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Target:
    path: str  # the module to mutate
    functions: tuple[str, ...]  # mutant-name globs (mutmut's x_<function> / xǁClassǁmethod)
    tests: tuple[str, ...]  # the tests that should kill its mutants


TARGETS: dict[str, Target] = {
    "algo.advantages": Target(
        "vibethinker/algo/advantages.py", ("*",), ("tests/algo/test_advantages.py",)
    ),
    "algo.losses": Target("vibethinker/algo/losses.py", ("*",), ("tests/algo/test_losses.py",)),
    "algo.passk": Target("vibethinker/algo/passk.py", ("*",), ("tests/algo/test_passk.py",)),
    "algo.merge": Target("vibethinker/algo/merge.py", ("*",), ("tests/train/test_merge.py",)),
    "train.merge": Target("vibethinker/train/merge.py", ("*",), ("tests/train/test_merge.py",)),
    "train.sft": Target(
        "vibethinker/train/sft.py",
        ("*x_token_loss_sum*", "*x_train_step*", "*x_backbone_and_head*"),
        (
            "tests/train/test_sft.py",
            "tests/train/test_policy.py",
            "tests/train/test_lora.py",
            "tests/train/test_sft_edges.py",
        ),
    ),
    "train.rollout": Target(
        "vibethinker/train/rollout.py",
        ("*x_build_batch*", "*x_response_logprobs*", "*x__hidden_and_head*", "*x__chunk_logp*"),
        ("tests/train/test_rl_loop.py", "tests/train/test_rl.py", "tests/train/test_rollout.py"),
    ),
    "train.rl_update": Target(
        "vibethinker/train/rl_update.py",
        ("*x_compute_advantages*", "*x_trained_rows*", "*x_update__*", "*x_frozen_logprobs*"),
        ("tests/train/test_rl_loop.py", "tests/train/test_rl.py"),
    ),
    "train.rl": Target(
        "vibethinker/train/rl.py",
        ("*x_update_all*", "*x_logprob_inputs*"),
        ("tests/train/test_rl_loop.py", "tests/train/test_rl.py"),
    ),
    "engines.hf_sampling": Target(
        "vibethinker/engines/hf_sampling.py",
        ("*x_sample_next*", "*x_nucleus*", "*x_inverse_cdf*"),
        ("tests/engines/test_hf.py", "tests/engines/test_hf_edges.py"),
    ),
    "engines.hf": Target(
        "vibethinker/engines/hf.py",
        ("*_sample_batch*",),
        ("tests/engines/test_hf.py", "tests/engines/test_hf_edges.py"),
    ),
    "stages.probe_merge": Target(
        "vibethinker/stages/probe_merge.py",
        ("*x_pick_specialists*", "*x_merge_plan*"),  # run(): the `listed` merge mutant
        ("tests/train/test_merge.py", "tests/stages/test_probe_merge.py"),
    ),
    "verifiers.math": Target(
        "vibethinker/verifiers/math.py",
        ("*",),
        ("tests/verifiers/test_math.py", "tests/verifiers/test_math_edges.py"),
    ),
}

# Surviving mutants judged equivalent (no input can tell them apart), with the reason. Names are
# mutmut's, stable while the function's source does not change; re-check them when it does.
_DIM = "dim +1 for -1: the tensors are always [B, G], so both name the last axis"
_HF2D = "dim +1 for -1 (a squeeze, gather, sort, softmax or shape index): the logits are always "
"[B, V] and the draws [B, 1], so both name the last axis"
EQUIVALENT: dict[str, str] = {
    "vibethinker.algo.advantages.x_batch_accuracy__mutmut_2": _DIM,
    "vibethinker.algo.advantages.x_batch_advantages__mutmut_20": _DIM,
    "vibethinker.algo.advantages.x_batch_advantages__mutmut_32": _DIM,
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_9": _DIM,
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_30": _DIM,
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_49": _DIM,
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_20": "2/L for 1/L: the shift divides "
    "by the largest deviation and the tolerance is relative, so scaling s changes nothing",
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_34": "n_c clamped at 2: only groups "
    "with n_c < 2 see it, and those are inactive whatever s_bar is",
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_53": "`|` for `&`: with n_c < 2 the "
    "deviation (hence denom) is 0, so the second test is false anyway",
    "vibethinker.algo.advantages.x_batch_long2short__mutmut_56": ">= for > against the tolerance: "
    "differs only when denom equals 1e-12 * s_bar exactly",
    "vibethinker.algo.losses.x_clipped_surrogate__mutmut_63": _DIM + " ([N, T] here)",
    "vibethinker.algo.losses.x_clipped_surrogate__mutmut_67": _DIM + " ([N, T] here)",
    "vibethinker.algo.losses.x_clipped_surrogate__mutmut_21": "mask.to(None) keeps a bool mask; "
    "bool * float and bool sums promote to the same values",
    "vibethinker.algo.losses.x_clipped_surrogate__mutmut_23": "advantages.to(None): the product "
    "with the ratio promotes to the same dtype and values",
    "vibethinker.algo.losses.x_masked_mean__mutmut_2": "mask.to(None): bool promotes as above",
    "vibethinker.algo.passk.x__rest_weight__mutmut_42": "x beyond the cluster size s: comb(s, x) "
    "is 0, so those terms add nothing",
    "vibethinker.algo.passk.x_majority_vote__mutmut_10": "every total starts at 1 instead of 0: "
    "the same shift for all keys keeps the argmax and its ties",
    "vibethinker.algo.passk.x_majority_vote__mutmut_13": "2 per unweighted vote: a uniform scale "
    "keeps the argmax and its ties",
    "vibethinker.algo.passk.x_pass_at_k__mutmut_11": "the early return is a shortcut: when "
    "n - c < k the product contains the factor 1 - k/k = 0 and gives 1.0 exactly",
    **{
        f"vibethinker.train.merge.x_merge_checkpoints__mutmut_{i}": "the index JSON's indentation "
        "(same content)"
        for i in (151, 153, 154)
    },
    "vibethinker.train.sft.x_train_step__mutmut_6": "labels[:, 2:] for [:, 1:]: position 1 is "
    "always inside the chat template's prompt, so never a trained label",
    "vibethinker.train.sft.x_train_step__mutmut_10": "autocast_context(None): the same no-op as "
    "for a CPU device (differs on CUDA only; the tests run on CPU)",
    "vibethinker.train.sft.x_train_step__mutmut_17": "batch.to(None) is a no-op like .to(cpu) on "
    "CPU (differs on CUDA only)",
    **{
        f"vibethinker.engines.hf_sampling.x_nucleus__mutmut_{i}": "the top-k shortcut's entry test only "
        "decides speed: a wrong 'yes' falls back to the full sort, a wrong 'no' sorts fully; the "
        "nucleus is the same (a dim +1/-1 of a 2-D tensor, or a boundary equality, likewise)"
        for i in (9, 10, 11, 15, 16, 18)
    },
    "vibethinker.algo.passk.x_maj_at_k__mutmut_4": "the error message wrapped in XX..XX still "
    "says what is wrong",
    "vibethinker.engines.hf_sampling.x_inverse_cdf__mutmut_6": _DIM,
    "vibethinker.engines.hf_sampling.x_inverse_cdf__mutmut_11": "device=None: the same CPU tensor (differs "
    "on CUDA only)",
    "vibethinker.engines.hf_sampling.x_inverse_cdf__mutmut_15": "no device: the same CPU tensor (differs "
    "on CUDA only)",
    "vibethinker.algo.advantages.x_grpo_advantages__mutmut_1": "GRPO ignores lambda (its default "
    "included)",
    "vibethinker.algo.advantages.x_grpo_advantages__mutmut_7": "lambda left to "
    "batch_advantages' default, which is 0",
    # engines.hf_sampling: judged on vibethinker/engines/hf.py as of commit 1594a05, before these
    # functions moved unchanged to hf_sampling.py (docs/MUTATION.md)
    **{
        f"vibethinker.engines.hf_sampling.x_sample_next__mutmut_{i}": _HF2D
        for i in (7, 13, 26, 31, 33, 51, 66, 72, 84, 86)
    },
    "vibethinker.engines.hf_sampling.x_sample_next__mutmut_18": "top_k >= 0 for > 0: top_k = 0 is falsy, "
    "so the first test already skips it",
    "vibethinker.engines.hf_sampling.x_sample_next__mutmut_45": 'float("-INF") is float("-inf")',
    **{
        f"vibethinker.engines.hf_sampling.x_sample_next__mutmut_{i}": "top_p = 1.0 also through the "
        "nucleus (<= 1.0 or < 2.0): the same distribution, sampled in sorted order; it differs "
        "only for a token whose preceding float32 mass rounds to 1.0 (below float32 resolution)"
        for i in (53, 54)
    },
    **{
        f"vibethinker.engines.hf_sampling.x_nucleus__mutmut_{i}": _HF2D
        for i in (7, 25, 26, 31, 39, 41, 49, 51, 60)
    },
    "vibethinker.engines.hf_sampling.x_nucleus__mutmut_33": "> for >= in the shortcut's mass check: at "
    "a top-k mass of exactly top_p the full sort runs instead and keeps the same nucleus",
    "vibethinker.engines.hf_sampling.x_inverse_cdf__mutmut_31": _HF2D,
    "vibethinker.engines.hf_sampling.x_inverse_cdf__mutmut_35": _HF2D,
    "vibethinker.engines.hf_sampling.x_inverse_cdf__mutmut_34": "the clamp guards u * total rounding up to "
    "the total (u within 2**-53 of 1): torch.rand never gives such a u for any seed, so a wrong "
    "bound is unreachable",
    "vibethinker.train.merge.x_merge_checkpoints__mutmut_88": 'src_dtype starts "" instead of '
    "None: both are falsy, so the first tensor's dtype is taken either way",
    "vibethinker.algo.merge.x_normalise_weights__mutmut_4": "the error message wrapped in XX..XX "
    "still says what is wrong",
    "vibethinker.train.sft.x_backbone_and_head__mutmut_32": "base_model_prefix's default is never "
    "read: every transformers model class defines it",
    # train.rollout (docs/MUTATION.md)
    "vibethinker.train.rollout.x__hidden_and_head__mutmut_1": "always the full-logits path: the "
    "same logprobs (it is what the shortcut is checked against), only more memory",
    "vibethinker.train.rollout.x__hidden_and_head__mutmut_51": "no attention mask: rows are "
    "right-padded and attention is causal, so no real position ever sees a pad",
    "vibethinker.train.rollout.x__chunk_logp__mutmut_8": "dim +1 for -1 on [M, V] logits",
    "vibethinker.train.rollout.x_response_logprobs__mutmut_50": "checkpointing a single chunk "
    "too: the same values and gradients, recomputed",
    "vibethinker.train.rollout.x_response_logprobs__mutmut_59": "reentrant checkpointing: the "
    "same gradients while the hidden states require grad (always, when training)",
    "vibethinker.train.rollout.x_response_logprobs__mutmut_75": "dtype=None is float32, the "
    "logprobs' dtype (the head's logits are cast to float)",
    "vibethinker.train.rollout.x_build_batch__mutmut_65": "the logprobs' tensor defaults to "
    "float32, and assigning into the float32 buffer casts anyway",
    "vibethinker.train.rollout.x_response_logprobs__mutmut_96": "the default dtype, float32, is "
    "the entropies' dtype",
    "vibethinker.train.rollout.x_response_logprobs__mutmut_86": "`ents` is never empty (the loop "
    "runs at least once), so the fallback is unreachable",
}

RESULT = re.compile(r"^\s*(\S+__mutmut_\d+): (.+)$")


def copy_tree(dst: Path, rev: str = "") -> None:
    """The repository as git sees it into `dst`: the working tree's tracked and untracked but not
    ignored files (never virtualenvs, runs or caches), or commit `rev` when given."""
    dst.mkdir(parents=True)
    if rev:
        tar = subprocess.run(["git", "archive", rev], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(dst)], input=tar.stdout, check=True)
        return
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    for rel in files.decode().split("\0"):
        src = ROOT / rel
        if rel and src.is_file():  # a tracked file deleted in the working tree is skipped
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dst / rel)


@dataclass(frozen=True)
class Listed:
    """A hand-written mutant: `old` replaced by `new` in `path` must make
    `tests` fail."""

    path: str
    old: str
    new: str
    tests: tuple[str, ...]


def _rl(*names: str) -> tuple[str, ...]:
    return tuple(f"tests/train/test_rl_loop.py::{n}" for n in names)


LISTED: dict[str, Listed] = {
    "sft: no next-token shift": Listed(
        "vibethinker/train/sft.py",
        "token_logprobs(hidden[:, :-1][sel],",
        "token_logprobs(hidden[:, 1:][sel],",
        ("tests/train/test_sft.py::test_token_loss_is_the_models_own_next_token_loss",),
    ),
    "hf: compaction swaps rows' KV caches": Listed(
        "vibethinker/engines/hf.py",
        "cache.batch_select_indices(idx)\n",
        "cache.batch_select_indices(idx.flip(0))\n",
        ("tests/engines/test_hf.py::test_compaction_keeps_each_row_its_own_cache",),
    ),
    "hf: temperature ignored": Listed(
        "vibethinker/engines/hf_sampling.py",
        "z = logits / params.temperature",
        "z = logits",
        ("tests/engines/test_hf.py::test_temperature_shapes_the_sampling_distribution",),
    ),
    "hf: top-p fast path trusted without its mass check": Listed(
        "vibethinker/engines/hf_sampling.py",
        "if not bool((vals.sum(-1) >= top_p).all()):",
        "if False:",
        ("tests/engines/test_hf.py::test_top_p_fast_path_matches_a_full_sort",),
    ),
    "rl: 1/N over trained rows only": Listed(
        "vibethinker/train/rl.py",
        "seqs, toks = dist.all_sum([part.numel(), int(tb.mask[part].sum())])",
        "seqs, toks = dist.all_sum([torch.isin(part, rows).sum(), int(tb.mask[part].sum())])",
        _rl(
            "test_update_gradient_is_the_mean_over_all_sequences",
            "test_mini_batches_use_the_frozen_pi_old_and_their_share_of_n",
        ),
    ),
    "rl: pi_old is the current policy": Listed(
        "vibethinker/train/rl_update.py",
        "old = old_logp[r].to(device) if old_logp is not None else logp.detach()",
        "old = logp.detach()",
        _rl("test_mini_batches_use_the_frozen_pi_old_and_their_share_of_n"),
    ),
    "rl: Long2Short ignored": Listed(
        "vibethinker/train/rl_update.py",
        "    if opts.long2short:",
        "    if False:",
        _rl("test_long2short_through_the_loop"),
    ),
    "rl: KL against the policy, not the reference": Listed(
        "vibethinker/train/rl.py",
        "lp.ref_model, tb, rows,",
        "lp.model, tb, rows,",
        _rl("test_reference_model_and_kl_through_the_loop"),
    ),
    "rl: TIS cap ignored": Listed(
        "vibethinker/train/rl_update.py",
        "tis_cap=opts.tis_cap,",
        "tis_cap=0.0,",
        _rl("test_tis_weights_and_cap_through_the_loop"),
    ),
    "rl: max_seconds ignored": Listed(
        "vibethinker/train/rl.py",
        "out_of_time = opts.max_seconds and",
        "out_of_time = False and",
        _rl("test_max_seconds_stops_checkpointed_and_resumes"),
    ),
    "rl: one update instead of mini_batches": Listed(
        "vibethinker/train/rl.py",
        "for part in torch.arange(adv.numel()).tensor_split(opts.mini_batches):",
        "for part in [torch.arange(adv.numel())]:",
        _rl("test_mini_batches_use_the_frozen_pi_old_and_their_share_of_n"),
    ),
    "rl: uneven mini-batches divide by N // mini_batches": Listed(
        "vibethinker/train/rl.py",
        "n_seqs=max(1, int(seqs)),",
        "n_seqs=max(1, adv.numel() // opts.mini_batches),",
        ("tests/train/test_rl_objectives.py::test_uneven_mini_batches_divide_by_their_own_rows",),
    ),
    "rl: token_mean divides by the trained rows' tokens": Listed(
        "vibethinker/train/rl.py",
        "int(tb.mask[part].sum())])",
        "int(tb.mask[rows].sum())])",
        (
            "tests/train/test_rl_objectives.py::"
            "test_token_mean_divides_by_all_tokens_across_micro_batches",
        ),
    ),
    "rl: std_scale ignored": Listed(
        "vibethinker/train/rl_update.py",
        "std_scale=opts.std_scale",
        "std_scale=True",
        _rl("test_loop_advantages_match_the_reference"),
    ),
    "rl: grpo runs MGPO": Listed(
        "vibethinker/algo/advantages.py",
        '{"grpo": grpo_advantages,',
        '{"grpo": mgpo_advantages,',
        _rl("test_loop_advantages_match_the_reference"),
    ),
    "rl: resume does not check options": Listed(
        "vibethinker/train/rl.py",
        "options=resume_options(opts),",
        "options={},",
        _rl("test_resume_refuses_changed_options"),
    ),
    "math: a 0.05 tolerance on decimals": Listed(
        "vibethinker/verifiers/math.py",
        "    g_dec, p_dec = decimal_places(gold), decimal_places(pred)\n",
        "    return bool(diff <= 0.05)\n",
        ("tests/verifiers/test_math.py::test_a_decimal_is_not_an_exact_fraction",),
    ),
    "probe_merge: merge returns the first checkpoint": Listed(
        "vibethinker/stages/probe_merge.py",
        "[w for _, w in plan])",
        "[1.0] + [0.0] * (len(plan) - 1))",
        ("tests/train/test_merge.py::test_probe_merge_stage_merges_the_specialists",),
    ),
}


def run_listed(work: Path, rev: str = "") -> dict[str, object]:
    """Apply each LISTED mutant to a copy of the tree and run its tests: each must fail."""
    dst = work / "listed"
    if dst.exists():
        shutil.rmtree(dst)
    copy_tree(dst, rev)
    env = {**os.environ, "PYTHONPATH": str(dst), "PYTHONDONTWRITEBYTECODE": "1"}
    where = subprocess.run(
        [sys.executable, "-c", "import vibethinker; print(vibethinker.__file__)"],
        cwd=dst,
        env=env,
        capture_output=True,
        text=True,
    ).stdout
    if not where.startswith(str(dst)):
        sys.exit(f"the copy's tests would import vibethinker from {where.strip()}, not {dst}")
    t0, survived, killed = time.time(), [], 0
    for name, m in LISTED.items():
        f = dst / m.path
        orig = f.read_text()
        if orig.count(m.old) != 1:
            survived.append(f"{name}: pattern not found once in {m.path} (update LISTED)")
            continue
        f.write_text(orig.replace(m.old, m.new))
        try:
            res = subprocess.run(
                [sys.executable, "-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *m.tests],
                cwd=dst,
                env=env,
                capture_output=True,
                text=True,
            )
        finally:
            f.write_text(orig)
        ok = res.returncode == 1  # tests ran and failed (not a collection or usage error)
        killed += ok
        print(f"  {'killed  ' if ok else 'SURVIVED'} {name}", flush=True)
        if not ok:
            survived.append(f"{name}: pytest exit {res.returncode}")
    return {
        "target": "listed",
        "module": "hand-written mutants",
        "functions": [],
        "tests": [],
        "mutants": len(LISTED),
        "killed": killed,
        "equivalent": 0,
        "survived": survived,
        "minutes": round((time.time() - t0) / 60, 1),
    }


def prepare(name: str, t: Target, work: Path, rev: str = "") -> Path:
    """A fresh copy of the repository for `name` (the working tree, or commit `rev`), with a
    [tool.mutmut] section for it."""
    dst = work / name
    if dst.exists():
        shutil.rmtree(dst)
    copy_tree(dst, rev)
    sel = ", ".join(json.dumps(x) for x in t.tests)
    conf = (
        "\n[tool.mutmut]\n"
        'source_paths = ["vibethinker"]\n'
        f"only_mutate = [{json.dumps(t.path)}]\n"
        f"pytest_add_cli_args_test_selection = [{sel}]\n"
        'pytest_add_cli_args = ["-p", "no:cacheprovider", "-x", "-q"]\n'
        "use_git_change_detection = false\n"
    )
    with (dst / "pyproject.toml").open("a") as f:
        f.write(conf)
    with (dst / "tests" / "conftest.py").open("a") as f:  # the copy's only
        f.write(_SELECT_HOOK)
    return dst


# mutmut selects tests by node id; pytest cannot select again some parametrized ids (backslashes,
# `$`, `|` in tests/verifiers/test_math.py's), a usage error that stops the run. In the copy, such
# an id runs all cases of its test function instead (a mutant's verdict needs only the exit code).
_SELECT_HOOK = """

def pytest_configure(config):  # added by scripts/mutate.py to its copy of the tree
    if "[" in "".join(config.args):
        config.args[:] = list(dict.fromkeys(a.split("[")[0] for a in config.args))
"""


def run_target(
    name: str,
    t: Target,
    work: Path,
    jobs: int,
    sample: int = 0,
    seed: int = 0,
    only: list[str] | None = None,
    rev: str = "",
) -> dict[str, object]:
    """Run mutmut on one target: all its mutants, `sample` of them drawn at random, or the
    `only` ones named (re-checking earlier survivors)."""
    dst = prepare(name, t, work, rev)
    mutmut = [sys.executable, "-m", "mutmut"]
    env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}
    t0 = time.time()
    globs = [f"{t.path[:-3].replace('/', '.')}.{g}" if g != "*" else "*" for g in t.functions]
    names, every = globs, []
    picked: set[str] | None = None
    if only is not None:
        names = sorted({n for n in only if any(_match(n, g) for g in globs)})
        picked = set(names)
        if not names:
            return {
                "target": name,
                "module": t.path,
                "mutants": 0,
                "killed": 0,
                "equivalent": 0,
                "survived": [],
                "minutes": 0.0,
                "rev": rev,
            }
    elif sample:
        every = [n for n in generate(dst, env) if any(_match(n, g) for g in globs)]
        if len(every) > sample:
            picked = set(random.Random(seed).sample(sorted(every), sample))
            names = sorted(picked)
            print(f"  sampled {sample} of {len(every)} mutants (seed {seed})", flush=True)
    log = (dst / "mutmut.log").open("w")
    subprocess.run(
        [*mutmut, "run", "--max-children", str(jobs), *names],
        cwd=dst,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        check=False,
    )
    res = subprocess.run(
        [*mutmut, "results", "--all", "true"],
        cwd=dst,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    status: dict[str, str] = {}
    for line in res.stdout.splitlines():
        m = RESULT.match(line)
        if m and any(_match(m.group(1), g) for g in globs):
            if picked is None or m.group(1) in picked:
                status[m.group(1)] = m.group(2).strip()
    unchecked = sorted(k for k, v in status.items() if v == "not checked")  # an interrupted run
    for k in unchecked:
        del status[k]
    survived = sorted(k for k, v in status.items() if v != "killed")
    equivalent = [k for k in survived if k in EQUIVALENT]
    return {
        "target": name,
        "module": t.path,
        "functions": list(t.functions),
        "tests": list(t.tests),
        "mutants": len(status),
        "killed": sum(v == "killed" for v in status.values()),
        "equivalent": len(equivalent),
        "survived": [f"{k}: {status[k]}" for k in survived if k not in EQUIVALENT],
        "minutes": round((time.time() - t0) / 60, 1),
        "sampled_from": len(every) if every and picked is not None else None,
        "only": only is not None,
        "rev": rev or "working tree",
        "not_checked": len(unchecked),
    }


_GENERATE = """
import os, mutmut.__main__ as m
from mutmut.mutation.trampoline import set_mutant_under_test
set_mutant_under_test("mutant_generation")
os.makedirs("mutants", exist_ok=True)
m.copy_src_dir(); m.copy_also_copy_files(); m.setup_source_paths()
m.store_lines_covered_by_tests(); m.create_mutants(1)
"""


def generate(dst: Path, env: dict[str, str]) -> list[str]:
    """Every mutant name mutmut would make in `dst` (generation only, no test run)."""
    res = subprocess.run(
        [sys.executable, "-c", _GENERATE], cwd=dst, env=env, capture_output=True, text=True
    )
    if res.returncode:
        sys.exit(f"mutmut could not generate mutants in {dst}:\n{res.stderr[-3000:]}")
    names: list[str] = []
    for meta in (dst / "mutants").rglob("*.meta"):
        names += json.loads(meta.read_text())["exit_code_by_key"]
    return names


def _match(name: str, glob: str) -> bool:
    import fnmatch

    return fnmatch.fnmatch(name, glob)


def report(rows: list[dict[str, object]]) -> str:
    lines = [
        "| target | module | mutants | killed | survived | equivalent | minutes |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        n = f"{r['mutants']} of {r['sampled_from']}" if r.get("sampled_from") else r["mutants"]
        n = f"{n} (re-check)" if r.get("only") else n
        lines.append(
            f"| {r['target']} | `{r['module']}` | {n} | {r['killed']} | "
            f"{len(r['survived'])} | {r['equivalent']} | {r['minutes']} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("targets", nargs="*", help=f"default: all of listed, {', '.join(TARGETS)}")
    ap.add_argument("--work", default="/tmp/vibethinker-mutate")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default="", help="also write the per-target results here")
    ap.add_argument(
        "--sample",
        type=int,
        default=0,
        help="run at most this many mutants per target, drawn at random (0: all)",
    )
    ap.add_argument("--seed", type=int, default=0, help="the --sample draw's seed")
    ap.add_argument(
        "--only",
        default="",
        help="a file of mutant names, one a line: run only those (re-check survivors)",
    )
    ap.add_argument(
        "--tests",
        nargs="+",
        default=[],
        help="run these tests instead of the target's (a quick re-check with new tests)",
    )
    ap.add_argument(
        "--rev", default="", help="mutate this commit (git archive) instead of the working tree"
    )
    ap.add_argument(
        "--nice",
        type=int,
        default=19,
        help="niceness added to this process and its children (shared machines)",
    )
    args = ap.parse_args()
    if args.nice:
        os.nice(args.nice)
    names = args.targets or ["listed", *TARGETS]
    unknown = [n for n in names if n not in TARGETS and n != "listed"]
    if unknown:
        sys.exit(f"unknown targets {unknown}; known: {', '.join(TARGETS)}")
    work = Path(args.work)
    only = Path(args.only).read_text().split() if args.only else None
    work.mkdir(parents=True, exist_ok=True)
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    rows = []
    for n in names:
        print(f"mutate: {n} ...", flush=True)
        t = TARGETS.get(n)
        if t is not None and args.tests:
            t = Target(t.path, t.functions, tuple(args.tests))
        r = (
            run_listed(work, args.rev)
            if t is None
            else run_target(n, t, work, args.jobs, args.sample, args.seed, only, args.rev)
        )
        rows.append(r)
        print(
            f"  {r['killed']}/{r['mutants']} killed, {len(r['survived'])} survived, "
            f"{r['equivalent']} equivalent ({r['minutes']} min)",
            flush=True,
        )
        for s in r["survived"]:
            print("   survived:", s)
        if args.json:
            Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")
    print()
    print(report(rows))


if __name__ == "__main__":
    main()
