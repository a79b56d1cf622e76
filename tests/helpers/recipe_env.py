"""Test-only stages (`t_write`, `t_slow`) in a module the registry loads, and a recipe over
them: the `env` fixture of the recipe, CLI and run-folder tests."""

import pytest

STAGE_MODULE = '''
"""Test-only stages: `write` writes a file; `slow` counts to n, checkpointing each step."""
import json, os, time
from dataclasses import dataclass
from pathlib import Path
from vibethinker.config import runtime
from vibethinker.stages import register

CALLS = []

@dataclass
class WriteConfig:
    out: str = "runs/w"
    """where"""
    text: str = "hi"
    """what to write"""
    fail: bool = False
    """raise instead"""
    workers: int = runtime(1)
    """cannot change results"""

@register("t_write", WriteConfig)
def run_write(cfg):
    """Write a file."""
    CALLS.append(cfg.text)
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    (Path(cfg.out) / "partial").write_text("x")
    if cfg.fail:
        raise KeyboardInterrupt
    (Path(cfg.out) / "file.txt").write_text(cfg.text)
    return {"file": str(Path(cfg.out) / "file.txt")}

@dataclass
class SlowConfig:
    out: str = "runs/s"
    """where"""
    n: int = 5
    """steps"""
    sleep: float = 0.0
    """seconds per step"""

@register("t_slow", SlowConfig, resumable=True)
def run_slow(cfg):
    """Count with checkpoints."""
    ck = Path(cfg.out) / "ckpt.json"
    Path(cfg.out).mkdir(parents=True, exist_ok=True)
    start = json.loads(ck.read_text())["step"] if ck.exists() else 0
    with open(Path(cfg.out) / "starts.txt", "a") as f:
        f.write(f"{start}\\n")
    for step in range(start, cfg.n):
        time.sleep(cfg.sleep)
        ck.write_text(json.dumps({"step": step + 1}))
    return {"ckpt": str(ck)}
'''


RECIPE = """\
# Run: vibethinker run recipe.yaml
run_dir: {run_dir}
model: ${{run_dir}}/m
stages:
  - stage: t_write
    text: hello
  - stage: t_slow
    n: 5
  - stage: t_write
    name: second
    text: ${{t_write.text}}-again
    out: ${{model}}-second
"""


@pytest.fixture
def env(tmp_path, monkeypatch):
    mod = tmp_path / "mods" / "vt_test_stages.py"
    mod.parent.mkdir()
    mod.write_text(STAGE_MODULE)
    monkeypatch.syspath_prepend(str(mod.parent))
    monkeypatch.setenv("VIBETHINKER_STAGE_MODULES", "vt_test_stages")
    import vibethinker.stages as reg

    reg.load_all()
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(RECIPE.format(run_dir=tmp_path / "run"))
    return tmp_path, recipe
