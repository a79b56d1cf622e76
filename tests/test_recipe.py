"""Recipes, overrides, the manifest and resume (with test-only stages)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.recipe_env import RECIPE, env  # noqa: F401 - the fixture with test-only stages
from vibethinker.cli import main
from vibethinker.config import ConfigError
from vibethinker.recipe import Manifest, execute, load_recipe, plan


def test_load_resolves_refs_and_overrides(env):  # noqa: F811
    tmp, recipe = env
    r = load_recipe(str(recipe), {"t_write.text": "yo", "t_slow.n": "7"})
    names = [s.name for s in r.stages]
    assert names == ["t_write", "t_slow", "second"]
    assert r.stages[0].config.text == "yo" and r.stages[1].config.n == 7
    assert r.stages[2].config.text == "yo-again"
    assert r.stages[2].config.out == f"{tmp}/run/m-second"
    assert r.stages[0].config.out == f"{tmp}/run/t_write"


@pytest.mark.parametrize(
    "overrides, match",
    [
        ({"t_slow.n": "many"}, "t_slow.n: expected int"),
        ({"t_slow.bogus": "1"}, "unknown key"),
        ({"nostage.x": "1"}, "expected run_dir="),
    ],
)
def test_bad_overrides(env, overrides, match):  # noqa: F811
    with pytest.raises(ConfigError, match=match):
        load_recipe(str(env[1]), overrides)


def test_bad_reference(env):  # noqa: F811
    tmp, recipe = env
    recipe.write_text(RECIPE.format(run_dir=tmp / "run").replace("${t_write.text}", "${nope.x}"))
    with pytest.raises(ConfigError, match=r"unknown reference \$\{nope.x\}"):
        load_recipe(str(recipe))


def test_run_resume_and_config_change(env):  # noqa: F811
    tmp, recipe = env
    import vt_test_stages as ts

    r = load_recipe(str(recipe), {"t_write.fail": "true"})
    with pytest.raises(KeyboardInterrupt):
        execute(r, quiet=True)
    m = Manifest(r.run_dir).data["stages"]
    assert m["t_write"]["status"] == "interrupted" and "t_slow" not in m
    # resume: the interrupted stage re-runs from a clean folder, then the rest
    r = load_recipe(str(recipe))
    execute(r, quiet=True)
    m = Manifest(r.run_dir).data["stages"]
    assert [m[n]["status"] for n in ("t_write", "t_slow", "second")] == ["done"] * 3
    assert (tmp / "run/t_write/file.txt").read_text() == "hello"
    assert (tmp / "run/m-second/file.txt").read_text() == "hello-again"
    # everything done: nothing runs again
    ts.CALLS.clear()
    assert [a for _, a in plan(r)] == ["skip"] * 3
    execute(r, quiet=True)
    assert ts.CALLS == []
    # a changed config re-runs that stage and everything after it
    r2 = load_recipe(str(recipe), {"t_slow.n": "6"})
    assert [a for _, a in plan(r2)] == ["skip", "run", "run"]
    execute(r2, quiet=True)
    assert ts.CALLS == ["hello-again"]


def test_every_stage_closes_its_vllm_engine_even_when_it_fails(env, monkeypatch):  # noqa: F811
    """vLLM holds one in-process engine at a time and its KV cache keeps its memory (on CPU a
    share of the RAM): an sft2 filter's engine left alive made probe_merge's engine fail to
    start. The runner closes a stage's engine when the stage ends, failed or not."""
    import types

    tmp, recipe = env
    closed = []
    fake = types.SimpleNamespace(close_live=lambda: closed.append(1))
    monkeypatch.setitem(sys.modules, "vibethinker.engines.vllm", fake)
    with pytest.raises(KeyboardInterrupt):
        execute(load_recipe(str(recipe), {"t_write.fail": "true"}), quiet=True)
    assert closed == [1]  # the failed stage's
    execute(load_recipe(str(recipe)), quiet=True)
    assert closed == [1] * 4  # and each of the three that ran


def test_dry_run_cli(env, capsys):  # noqa: F811
    tmp, recipe = env
    assert main(["run", str(recipe), "--dry-run", "t_slow.n=3"]) == 0
    out = capsys.readouterr().out
    assert "[run   ] t_slow (t_slow)" in out and "n=3" in out
    assert not (tmp / "run" / "manifest.json").exists()


def test_single_stage_cli(env, tmp_path, capsys):  # noqa: F811
    out = tmp_path / "alone"
    assert main(["t_write", f"out={out}", "text=solo"]) == 0
    assert (out / "file.txt").read_text() == "solo"
    assert main(["t_write", "txt=solo"]) == 2
    assert "unknown key(s) txt" in capsys.readouterr().err


def test_sigint_mid_stage_then_resume(env):  # noqa: F811
    """A real process interrupted mid-stage leaves a consistent manifest and resumes."""
    tmp, recipe = env
    envv = {**os.environ, "PYTHONPATH": f"{tmp / 'mods'}:{os.environ.get('PYTHONPATH', '')}"}
    cmd = [sys.executable, "-m", "vibethinker.cli", "run", str(recipe), "--quiet"]
    # n is large so that a starved test process (2 loaded cores) still signals mid-stage
    # SIGINT back to its default in the child: a test run started in the background of a
    # non-interactive shell (`cmd &`) inherits SIGINT ignored, and Python then never raises
    # KeyboardInterrupt
    proc = subprocess.Popen(
        [*cmd, "t_slow.sleep=0.3", "t_slow.n=400"],
        env=envv,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    ck = tmp / "run" / "t_slow" / "ckpt.json"

    def step() -> int:  # the stage rewrites the file in place: a torn read counts as 0
        try:
            return json.loads(ck.read_text())["step"]
        except (OSError, ValueError, KeyError):
            return 0

    deadline = time.time() + 60
    while time.time() < deadline and step() < 2:
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    try:
        assert proc.wait(timeout=30) == 130
    finally:
        proc.kill()
    m = json.loads((tmp / "run" / "manifest.json").read_text())["stages"]
    assert m["t_write"]["status"] == "done"
    assert m["t_slow"]["status"] == "interrupted"
    assert "second" not in m
    done_steps = step()
    assert 2 <= done_steps < 400
    subprocess.run([*cmd, "t_slow.sleep=0.0", "t_slow.n=400"], env=envv, check=True, timeout=120)
    m = json.loads((tmp / "run" / "manifest.json").read_text())["stages"]
    assert all(m[n]["status"] == "done" for n in ("t_write", "t_slow", "second"))
    # sleep changed -> config differs -> re-run from scratch is also acceptable; the stage must
    # have either resumed from its checkpoint or restarted cleanly, and finished at 400.
    assert json.loads(ck.read_text())["step"] == 400
    report = Path(tmp / "run" / "report.md").read_text()
    assert "| t_slow | t_slow | done |" in report


def test_resumable_stage_continues_from_checkpoint(env):  # noqa: F811
    tmp, recipe = env
    r = load_recipe(str(recipe))
    out = Path(r.stages[1].config.out)
    out.mkdir(parents=True)
    (out / "ckpt.json").write_text(json.dumps({"step": 3}))
    man = Manifest(r.run_dir)
    from vibethinker.recipe import _config_dict

    man.stage("t_write").update(status="done", config=_config_dict(r.stages[0].config))
    man.stage("t_slow").update(status="running", config=_config_dict(r.stages[1].config))
    man.save()
    assert [a for _, a in plan(r)] == ["skip", "resume", "run"]
    execute(r, quiet=True)
    assert (out / "starts.txt").read_text().split() == ["3"]


# Seconds each capped stage of recipes/tiny.yaml took at most in the recorded 12.6-min demo
# (2026-12-01, README "What the demo shows": every stage ran all its steps within these).
DEMO_SECONDS = {
    "rl_math": 75,
    "rl_l2s": 50,
    "rl_code": 75,
    "rl_stem": 50,
    "rl_instruct": 60,
    "reward_model": 45,
}


def test_demo_trains_a_fixed_amount_with_caps_only_as_a_safety_net():
    """The tiny demo's RL stages stop on their step counts, not on the clock: every cap is at
    least 4x what the stage took on 2 free cores, so a host up to 4x slower trains the same."""
    root = Path(__file__).resolve().parents[1]
    r = load_recipe(str(root / "recipes" / "tiny.yaml"))
    capped = {s.name: s.config.max_seconds for s in r.stages if hasattr(s.config, "max_seconds")}
    assert set(capped) == set(DEMO_SECONDS)
    for name, cap in capped.items():
        assert cap == 0 or cap >= 4 * DEMO_SECONDS[name], (name, cap)


def test_top_level_engine_switches_every_sampling_stage():
    """`vibethinker run recipes/tiny.yaml engine=vllm`: one key for every stage that samples."""
    base = load_recipe("recipes/tiny.yaml")
    r = load_recipe("recipes/tiny.yaml", {"engine": "vllm", "eval_final.engine": "hf"})
    switched = {}
    for s in r.stages:
        for key in ("engine", "filter_engine"):
            if hasattr(s.config, key):
                switched[f"{s.name}.{key}"] = getattr(s.config, key)
    assert switched.pop("eval_final.engine") == "hf"  # a stage's own key wins
    assert switched and set(switched.values()) == {"vllm"}
    kinds = {s.stage for s in r.stages if hasattr(s.config, "engine")}
    assert {"probe_merge", "rl", "distill", "eval", "headline", "clr"} <= kinds
    assert all(getattr(s.config, "engine", "hf") == "hf" for s in base.stages)
