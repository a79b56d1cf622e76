"""State files (issue 37 part 2): a 0-byte or torn state file never blocks a rerun. An empty
filter.json / filters.json / single_run.json is recomputed with a warning naming it; a torn last
line of metrics.jsonl / evals.jsonl (disk full mid-append) is dropped with a warning; a write
that fails (disk full) leaves the old file whole and names it."""

from __future__ import annotations

import json
import logging

import pytest

from tests.helpers import sft_data
from tests.helpers.faults import disk_full  # noqa: F401 - every write fills the disk
from tests.helpers.recipe_env import env  # noqa: F401 - test-only stages
from vibethinker import statefile
from vibethinker.cli import main
from vibethinker.data.io import save_problems
from vibethinker.train import checkpoints

tiny = sft_data.tiny  # the module-scoped tiny model (a fixture)


def test_torn_last_line_is_dropped_a_bad_middle_line_is_named(tmp_path, caplog):
    f = tmp_path / "metrics.jsonl"
    f.write_text('{"step": 1}\n{"step": 2}\n{"st')
    with caplog.at_level(logging.WARNING):
        assert statefile.read_jsonl(f) == [{"step": 1}, {"step": 2}]
    assert f"{f}: line 3 is torn" in caplog.text
    f.write_text('{"step": 1}\n{"st\n{"step": 3}\n')
    with pytest.raises(ValueError, match=f"{f}:2: not a JSON row"):
        statefile.read_jsonl(f)


def test_empty_or_corrupt_json_is_absent_with_a_warning(tmp_path, caplog):
    f = tmp_path / "filter.json"
    f.write_text("")
    with caplog.at_level(logging.WARNING):
        assert statefile.read_json(f) is None
        f.write_text('{"key": ')
        assert statefile.read_json(f) is None
    assert f"{f} is empty" in caplog.text and "not valid JSON" in caplog.text


def test_a_full_disk_leaves_the_old_file_whole(tmp_path, disk_full):  # noqa: F811
    f = tmp_path / "state.json"
    f.write_text('{"ok": 1}\n')
    with pytest.raises(OSError, match=f"{f}: could not write it"):
        statefile.write_text(f, "x" * 10_000)
    assert f.read_text() == '{"ok": 1}\n' and [p.name for p in tmp_path.iterdir()] == [f.name]


def test_torn_metrics_and_evals_lines_do_not_block_a_resume(tmp_path, caplog):
    for name in ("metrics.jsonl", "evals.jsonl"):
        f = tmp_path / name
        f.write_text('{"step": 1, "loss": 2.0}\n{"step": 2, "loss": 1.5}\n{"step": 3, "lo')
        with caplog.at_level(logging.WARNING):
            assert [r["step"] for r in checkpoints.rows_upto(f, 2)] == [1, 2]
        assert f.read_text().count("\n") == 2 and name in caplog.text


def test_sft_stage_reruns_over_an_empty_filters_json_and_a_torn_metrics_line(
    tiny, tmp_path, caplog
):
    from vibethinker.stages.sft import SFTConfig, run

    data = tmp_path / "train.jsonl"
    save_problems(data, sft_data._problems(16, seed=3))
    out = tmp_path / "sft"
    cfg = SFTConfig(
        model=tiny,
        data=str(data),
        out=str(out),
        max_steps=2,
        global_batch=8,
        micro_batch=4,
        max_len=128,
        save_every=1,
        device="cpu",
    )
    run(cfg)
    (out / "filters.json").write_text("")  # 0 bytes: a crash before the data reached the disk
    with open(out / "metrics.jsonl", "a") as f:
        f.write('{"step": 3, "lo')  # disk full mid-append
    with caplog.at_level(logging.WARNING):
        assert run(cfg)["model"]
    said = caplog.text
    assert "filters.json is empty" in said and "metrics.jsonl: line 3 is torn" in said
    assert json.loads((out / "filters.json").read_text())["counts"]["problems_out"] == 16


def test_rl_filter_cache_over_an_empty_filter_json(tmp_path, caplog):
    from vibethinker.stages.rl import training_prompts
    from vibethinker.train.rl_config import RLConfig

    (tmp_path / "data").mkdir()
    save_problems(tmp_path / "data" / "train.jsonl", sft_data._problems(6))
    cfg = RLConfig(model="m", data=str(tmp_path / "data"), out=str(tmp_path / "rl"))
    cfg.filter_rollouts = 0
    first, _ = training_prompts(cfg, None, None, None)
    (tmp_path / "rl" / "filter.json").write_text("")
    with caplog.at_level(logging.WARNING):
        again, counts = training_prompts(cfg, None, None, None)
    assert [p.id for p in again] == [p.id for p in first] and counts["prompts_in"] == 6
    assert "filter.json is empty" in caplog.text


def test_single_run_over_an_empty_record(env, capsys):  # noqa: F811
    tmp, recipe = env
    assert main(["t_write", str(recipe), "text=one"]) == 0
    marker = tmp / "run" / "single" / "t_write" / "single_run.json"
    marker.write_text("")
    assert main(["t_write", str(recipe), "text=one"]) == 0
    assert json.loads(marker.read_text())["status"] == "done"
