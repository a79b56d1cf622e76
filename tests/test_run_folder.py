"""A run folder that survives: status from anywhere and after a move, a report rebuild that never
holds less than it replaces, seconds over a stage's attempts, and Ctrl-C that saves training."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from tests.helpers.faults import disk_full  # noqa: F401 - every write fills the disk
from tests.helpers.loop_options import sft_options
from tests.helpers.recipe_env import env  # noqa: F401 - test-only stages
from tests.helpers.sft_data import _problems
from tests.helpers.sft_data import tiny as sft_tiny  # noqa: F401 - the module-scoped tiny model
from vibethinker.cli import main
from vibethinker.recipe import Manifest, execute, explain, load_recipe
from vibethinker.report import write_report
from vibethinker.train import checkpoints, packing, policy, sft

RECIPE = """\
run_dir: runs/r
model: ${run_dir}/m
stages:
  - stage: t_write
    text: hello
  - stage: t_slow
    n: 3
"""


def _relative_run(tmp: Path, monkeypatch) -> Path:
    """The recipe run with a run_dir relative to `tmp` (the working directory), each stage
    folder given a summary and a plot as real stages leave them; returns the recipe path."""
    work = tmp / "work"
    work.mkdir()
    recipe = work / "recipe.yaml"
    recipe.write_text(RECIPE)
    monkeypatch.chdir(work)
    execute(load_recipe("recipe.yaml"), quiet=True)
    for name in ("t_write", "t_slow"):
        (work / "runs/r" / name / "summary.md").write_text(f"# {name}\n\nnumbers of {name}\n")
        (work / "runs/r" / name / "plot.png").write_bytes(b"\x89PNG")
    return recipe


def test_manifest_paths_are_relative_to_the_run_folder(env, tmp_path, monkeypatch):  # noqa: F811
    _relative_run(tmp_path, monkeypatch)
    m = json.loads(Path("runs/r/manifest.json").read_text())
    rec = m["stages"]["t_write"]
    assert rec["dir"] == "t_write" and rec["outputs"]["file"] == "t_write/file.txt"
    assert m["run_dir_abs"] == str((tmp_path / "work/runs/r").resolve())


def test_status_elsewhere_and_after_a_move_keeps_the_report(env, tmp_path, monkeypatch):  # noqa: F811
    _relative_run(tmp_path, monkeypatch)
    assert main(["status", "runs/r"]) == 0
    report = Path("runs/r/report.md").read_text()
    assert "### numbers of t_write" not in report and "numbers of t_write" in report
    assert "![plot](t_slow/plot.png)" in report and report.count("\n## ") == 3  # + Cost
    # from another directory, then after moving the folder: the same report
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    monkeypatch.chdir(tmp_path)
    assert main(["status", "work/runs/r"]) == 0
    assert Path("work/runs/r/report.md").read_text().replace("work/runs/r", "runs/r") == report
    shutil.move(str(tmp_path / "work/runs/r"), str(moved))
    monkeypatch.chdir(moved.parent)
    assert main(["status", "moved"]) == 0
    text = (moved / "report.md").read_text()
    assert text.count("\n## ") == 3 and "![plot](t_write/plot.png)" in text  # + Cost
    assert "t_write/file.txt" in text
    # the moved run is the same run: nothing re-runs when the recipe points at it
    r = load_recipe(str(tmp_path / "work/recipe.yaml"), {"run_dir": str(moved)})
    assert [a for _, a, _ in explain(r)] == ["skip", "skip"]
    # ... and stays so after a run there adopts the folder (its manifest now names `moved`;
    # the recorded configs are rewritten with it, or the next run would see them "changed")
    r = load_recipe(str(tmp_path / "work/recipe.yaml"), {"run_dir": str(moved), "t_slow.n": "6"})
    assert [a for _, a, _ in explain(r)] == ["skip", "run"]
    execute(r, quiet=True)
    assert Manifest(str(moved)).data["run_dir"] == str(moved)
    assert [a for _, a, _ in explain(r)] == ["skip", "skip"]
    config = json.dumps(Manifest(str(moved)).data["stages"])
    assert "runs/r/" not in config and f"{moved}/" in config


def test_a_rebuild_never_holds_less_than_the_report_it_replaces(env, tmp_path, monkeypatch):  # noqa: F811
    _relative_run(tmp_path, monkeypatch)
    before = Path(write_report("runs/r")).read_text()
    shutil.rmtree("runs/r/t_slow")  # a stage folder gone: the rebuild would lose its section
    assert write_report("runs/r") == "runs/r/report.md"
    assert Path("runs/r/report.md").read_text() == before
    rebuilt = Path("runs/r/report.rebuilt.md").read_text()
    assert rebuilt.count("\n## ") == 2 and before.count("\n## ") == 3  # + Cost
    # a stage the recipe no longer has is not a loss: the report is rewritten without it
    man = Manifest("runs/r")
    man.data["order"] = ["t_write"]
    man.save()
    write_report("runs/r")
    assert Path("runs/r/report.md").read_text().count("\n## ") == 2  # + Cost


def test_legacy_manifest_with_cwd_relative_outs_is_found_from_anywhere(tmp_path, monkeypatch):
    run = tmp_path / "a" / "runs" / "r"
    (run / "s1").mkdir(parents=True)
    (run / "s1" / "summary.md").write_text("# s1\n\nhello\n")
    rec = {"stage": "eval", "status": "done", "config": {"out": "runs/r/s1"}, "seconds": 1}
    (run / "manifest.json").write_text(json.dumps({"order": ["s1"], "stages": {"s1": rec}}))
    monkeypatch.chdir(tmp_path)  # not the directory the run started in
    assert "hello" in Path(write_report(str(run))).read_text()


def test_seconds_add_up_over_a_resumed_stages_attempts(env, tmp_path, monkeypatch):  # noqa: F811
    import vibethinker.stages as reg

    tmp, recipe = env
    spec = reg.get("t_slow")
    real, calls = spec.fn, []

    def flaky(cfg):
        calls.append(1)
        if len(calls) == 1:
            import time

            time.sleep(0.4)
            raise KeyboardInterrupt
        return real(cfg)

    monkeypatch.setattr(spec, "fn", flaky)
    with pytest.raises(KeyboardInterrupt):
        execute(load_recipe(str(recipe)), quiet=True)
    execute(load_recipe(str(recipe)), quiet=True)
    rec = Manifest(str(tmp / "run")).data["stages"]["t_slow"]
    assert rec["status"] == "done" and rec["attempts"] == 2 and rec["seconds"] >= 0.4
    assert f"| {rec['seconds']} (2 attempts) |" in Path(write_report(str(tmp / "run"))).read_text()


def test_ctrl_c_saves_a_checkpoint_without_save_every(sft_tiny, tmp_path, monkeypatch):  # noqa: F811
    """SIGINT in step 2 of 6 with save_every=0: the step finishes, a checkpoint at step 2 is
    saved, KeyboardInterrupt follows, and the same call again resumes at step 2."""
    model, tok = policy.load_policy(sft_tiny, "cpu")
    pairs = [(p.prompt, t) for p in _problems(24, seed=3) for t in p.traces]
    samples = packing.build_samples(pairs, tok, 128)
    opts = sft_options(
        epochs=1,
        global_batch=8,
        micro_batch=4,
        lr=1e-3,
        final_lr=1e-4,
        max_len=128,
        save_every=0,
        seed=0,
    )
    real, n = policy.optimizer_step, []

    def step_then_signal(*a, **k):
        n.append(1)
        if len(n) == 2:
            os.kill(os.getpid(), signal.SIGINT)  # Ctrl-C arrives in the middle of step 2
        return real(*a, **k)

    monkeypatch.setattr(policy, "optimizer_step", step_then_signal)
    with pytest.raises(KeyboardInterrupt, match="after step 2"):
        sft.train(model, tok, samples, opts, tmp_path)
    assert [s for s, _ in checkpoints.list_checkpoints(tmp_path / "checkpoints")] == [2]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler  # handler restored
    model, tok = policy.load_policy(sft_tiny, "cpu")
    res = sft.train(model, tok, samples, opts, tmp_path)
    assert res["resumed_at"] == 2 and res["steps"] == 6


def test_epoch_counter_counts_data_epochs_under_max_steps(sft_tiny, tmp_path):  # noqa: F811
    """max_steps=2 of a 6-step epoch: the metrics say epoch 1/3 at the end, not 1.0."""
    model, tok = policy.load_policy(sft_tiny, "cpu")
    pairs = [(p.prompt, t) for p in _problems(24, seed=3) for t in p.traces]
    samples = packing.build_samples(pairs, tok, 128)
    opts = sft_options(
        epochs=1,
        max_steps=2,
        global_batch=8,
        micro_batch=4,
        lr=1e-3,
        final_lr=1e-4,
        max_len=128,
        seed=0,
    )
    sft.train(model, tok, samples, opts, tmp_path)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["epoch"] for r in rows] == [
        pytest.approx(1 / 6, abs=1e-3),
        pytest.approx(1 / 3, abs=1e-3),
    ]


def test_ctrl_c_in_rl_saves_a_checkpoint_at_that_step(tmp_path, monkeypatch):
    """RL with save_every=0: SIGTERM during step 2 of 4 -> checkpoint 2, KeyboardInterrupt,
    and the same call again resumes at step 2."""
    from tests.helpers import rl_loop as t
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.train import rl

    texts = [
        f"{p.prompt} <think>7+{i}={7 + i}</think>\\boxed{{{7 + i}}}"
        for i, p in enumerate(t._problems(40))
    ]
    tiny = build_tiny_model(tmp_path / "tiny", texts, "d1", 300, 0)
    model, tok = policy.load_policy(tiny, "cpu")
    real, n = rl.rl_step, []

    def step_then_signal(lp, step):
        n.append(1)
        if len(n) == 2:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(lp, step)

    monkeypatch.setattr(rl, "rl_step", step_then_signal)
    opts = t._opts(steps=4)
    with pytest.raises(KeyboardInterrupt, match="after step 2"):
        rl.train(model, tok, t._problems(), opts, tmp_path / "rl", verify=t.has_digit)
    assert [s for s, _ in checkpoints.list_checkpoints(tmp_path / "rl" / "checkpoints")] == [2]
    model, _ = policy.load_policy(tiny, "cpu")
    res = rl.train(model, tok, t._problems(), opts, tmp_path / "rl", verify=t.has_digit)
    assert res["resumed_at"] == 2 and res["steps_done"] == 4


@contextlib.contextmanager
def _held(path: Path):
    """The lock file held as another process holds it (its own open file description)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
        yield


def test_a_stage_output_in_use_is_refused(env, tmp_path, capsys):  # noqa: F811
    """Two `vibethinker <stage> ... out=S` at once, two single recipe-stage runs, or a stage
    alone into a folder a running recipe stage writes: the second is refused, nothing of the
    first is touched (the lock is an flock: a second open of the file, as another process
    makes, is refused the same way)."""
    tmp, recipe = env
    out = tmp / "S"
    with _held(tmp / ".S.lock"):
        out.mkdir()
        (out / "theirs.txt").write_text("x")
        assert main(["t_write", f"out={out}", "text=second"]) == 2
        assert "in use by another vibethinker process" in capsys.readouterr().err
        assert not (out / "file.txt").exists()
    assert main(["t_write", f"out={out}", "text=second"]) == 0  # free again
    single = tmp / "run" / "single" / "t_write"
    assert main(["t_write", str(recipe), "text=one"]) == 0
    with _held(single.parent / ".t_write.lock"):
        assert main(["t_write", str(recipe), "text=two"]) == 2  # would delete the folder
    assert (single / "file.txt").read_text() == "one"
    assert main(["t_write", str(recipe), "text=two"]) == 0
    assert (single / "file.txt").read_text() == "two"
    # a recipe run holds each stage's folder while the stage runs
    held = []
    import vibethinker.stages as reg

    spec = reg.get("t_slow")
    real = spec.fn

    def probe(cfg):
        held.append(main(["t_write", f"out={cfg.out}"]))
        return real(cfg)

    spec.fn = probe
    try:
        execute(load_recipe(str(recipe)), quiet=True)
    finally:
        spec.fn = real
    assert held == [2]


@pytest.mark.parametrize("damage", ["{not json", '{"order": ["t_write"]}'])
def test_damaged_manifest(env, tmp_path, monkeypatch, capsys, damage):  # noqa: F811
    """A manifest.json that is not JSON, or is JSON without `stages`: `run` and `status` stop
    with an error naming it and what to do; the full report is not replaced by an empty one."""
    recipe = _relative_run(tmp_path, monkeypatch)
    report = Path(write_report("runs/r")).read_text()
    Path("runs/r/manifest.json").write_text(damage)
    for argv in (["run", str(recipe)], ["status", "runs/r"]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "runs/r/manifest.json: the run's manifest is damaged" in err and "move it" in err
    assert Path("runs/r/report.md").read_text() == report
    assert "manifest is damaged" in Path("runs/r/run.log").read_text()  # the log has it too


@pytest.mark.parametrize("part", ["summary.md", "plot.png"])
def test_a_missing_summary_or_plot_writes_report_rebuilt(env, tmp_path, monkeypatch, part):  # noqa: F811
    _relative_run(tmp_path, monkeypatch)
    before = Path(write_report("runs/r")).read_text()
    Path("runs/r/t_slow", part).unlink()
    assert write_report("runs/r") == "runs/r/report.md"
    assert Path("runs/r/report.md").read_text() == before
    assert len(Path("runs/r/report.rebuilt.md").read_text()) < len(before)


def test_a_full_disk_never_tears_the_report(env, tmp_path, monkeypatch, request):  # noqa: F811
    _relative_run(tmp_path, monkeypatch)
    Path("runs/r/t_slow/summary.md").write_text("# t_slow\n\n" + "numbers " * 2000 + "\n")
    before = Path(write_report("runs/r")).read_text()
    assert len(before) > 8192
    Path("runs/r/t_slow/summary.md").write_text("# t_slow\n\n" + "changed " * 2000 + "\n")
    request.getfixturevalue("disk_full")
    with pytest.raises(OSError, match="report.md: could not write it"):
        write_report("runs/r")
    assert Path("runs/r/report.md").read_text() == before  # whole, not cut at 4 KB


def test_a_failed_stage_is_recorded_and_logged(env, tmp_path, capsys, monkeypatch):  # noqa: F811
    """Disk full inside a stage: one line that says so and what to do (exit 1, no traceback),
    the manifest marks the stage failed, run.log has the error."""
    import errno

    import vibethinker.stages as reg

    tmp, recipe = env
    spec = reg.get("t_slow")

    def full(cfg):
        raise OSError(errno.ENOSPC, "No space left on device", str(Path(cfg.out) / "x"))

    monkeypatch.setattr(spec, "fn", full)
    assert main(["run", str(recipe)]) == 1
    err = capsys.readouterr().err
    assert "the disk is full" in err and "t_slow/x" in err and "free some space" in err
    rec = Manifest(str(tmp / "run")).data["stages"]["t_slow"]
    assert rec["status"] == "failed" and "No space left" in rec["error"]
    assert "the disk is full" in (tmp / "run" / "run.log").read_text()
