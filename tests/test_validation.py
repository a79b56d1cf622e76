"""Bad keys are refused when the config is built: every problem named in one message, with the
allowed range, before any output folder is created or any model loads."""

import json

import pytest

from vibethinker.cli import main
from vibethinker.config import ConfigError, make_config
from vibethinker.stages.eval import EvalConfig
from vibethinker.train.rl_config import RLConfig
from vibethinker.train.sft_config import SFTConfig

ROW = {"id": "m1", "domain": "math", "prompt": "1+1?", "answer": "2", "traces": ["\\boxed{2}"]}


@pytest.fixture
def files(tmp_path):
    data = tmp_path / "train.jsonl"
    data.write_text(json.dumps(ROW) + "\n")
    # A model path that does not exist: a run that got past validation would fail on it instead.
    return tmp_path, f"model={tmp_path / 'no_model'}", f"data={data}", f"out={tmp_path / 'out'}"


@pytest.mark.parametrize(
    "argv, key, hint",
    [
        (["rl", "domain=maths"], "domain", "did you mean math?"),
        (["rl", "domain=math,cod"], "domain", "did you mean code?"),
        (["sft", "device=gpu"], "device", "cuda"),
        (["sft", "global_batch=0"], "global_batch", ">= 1"),
        (["sft", "micro_batch=0"], "micro_batch", ">= 1"),
        (["rl", "micro_batch=0"], "micro_batch", ">= 1"),
        (["rl", "group_size=0"], "group_size", ">= 2"),
        (["rl", "group_size=1"], "group_size", ">= 2"),
        (["rl", "steps=0"], "steps", ">= 1"),
        (["rl", "lr=-1"], "lr", "> 0"),
        (["sft", "lr=-1"], "lr", "> 0"),
        (["sft", "warmup_frac=2"], "warmup_frac", "[0, 1)"),
        (["rl", "warmup_frac=2"], "warmup_frac", "[0, 1)"),
        (["eval", "n=-2"], "n", ">= 0"),
        (["eval", "domains=maths"], "domains", "did you mean math?"),
        (["sft", "domains=math,stme"], "domains", "did you mean stem?"),
        (["rl", "advantage=ppo"], "advantage", "mgpo"),
        (["rl", "filter_rollouts=1"], "filter_rollouts", "0 (off) or >= 2"),
        (["eval", "top_p=0"], "top_p", "(0, 1]"),
        (["rl", "data_probs=0.5,0.5"], "data_probs", "2 weight(s) for 1 dataset"),
    ],
)
def test_bad_key_is_refused_before_anything_runs(files, capsys, argv, key, hint):
    tmp, model, data, out = files
    assert main([argv[0], model, data, out, *argv[1:]]) == 2
    err = capsys.readouterr().err
    assert f"{key}=" in err and hint in err, err
    assert "no_model" not in err  # refused before the model was looked at
    assert not (tmp / "out").exists()


def test_every_problem_in_one_message(files, capsys):
    tmp, model, data, out = files
    assert main(["rl", model, data, out, "steps=0", "lr=-1", "group_size=1", "device=gpu"]) == 2
    err = capsys.readouterr().err
    for key in ("steps=0", "lr=-1", "group_size=1", "device='gpu'"):
        assert key in err, err
    assert "4 problems" in err


def test_recipe_names_the_stage_and_writes_nothing(tmp_path, capsys):
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        f"run_dir: {tmp_path / 'run'}\nstages:\n  - stage: rl\n    name: rl_math\n"
        "    model: m\n    data: d\n    steps: 0\n"
    )
    assert main(["run", str(recipe)]) == 2
    err = capsys.readouterr().err
    assert "rl_math" in err and "steps=0" in err
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize(
    "cls, values",
    [
        (RLConfig, {}),
        (SFTConfig, {}),
        (EvalConfig, {}),
        (RLConfig, {"domain": "math,stem", "device": "cuda:1", "group_size": 2}),
        (SFTConfig, {"domains": ["clr", "math"], "max_steps": None, "device": "cpu"}),
        (EvalConfig, {"n": 0, "device": "", "domains": ["code"]}),
    ],
)
def test_defaults_and_good_values_pass(cls, values):
    make_config(cls, values)


def test_direct_construction_is_checked_too():
    with pytest.raises(ConfigError, match=r"steps=0: must be >= 1"):
        RLConfig(steps=0)
    with pytest.raises(ConfigError, match=r"instruct cannot be mixed"):
        RLConfig(domain="math,instruct")


def test_prompt_style_names_match_the_prompt_functions():
    from vibethinker.config import PROMPT_STYLE_NAMES
    from vibethinker.evaluate import PROMPT_STYLES as functions

    assert set(PROMPT_STYLE_NAMES) == set(functions)


# ---- data problems are reported before any model loads ---------------------------------------
def _rows(path, rows):
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_sft_trl_rows_missing_fields_all_named_before_the_model(tmp_path, capsys):
    """A row without a domain trains as `chat` (SFT needs no verifier, issue 41 item 4); a row
    without its prompt is still refused, naming the field, before any model loads."""
    data = _rows(tmp_path / "trl.jsonl", [{"completion": "2", "answer": "2"}])
    argv = ["sft", f"model={tmp_path / 'no_model'}", f"data={data}", f"out={tmp_path / 'o'}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "trl.jsonl:1: field 'prompt'" in err and "messages" in err, err
    assert "no_model" not in err and not (tmp_path / "o").exists()
    ok = _rows(tmp_path / "ok.jsonl", [{"prompt": "1+1?", "completion": "2"}])
    assert (
        main(["sft", f"model={tmp_path / 'no_model'}", f"data={ok}", f"out={tmp_path / 'o2'}"]) == 2
    )
    assert "no_model" in capsys.readouterr().err  # past the data check, at the model


def test_sft_without_traces_says_so_before_the_model(tmp_path, capsys):
    data = _rows(tmp_path / "t.jsonl", [{"prompt": "1+1?", "answer": "2"}])
    argv = ["sft", f"model={tmp_path / 'no_model'}", f"data={data}", "domains=math"]
    assert main([*argv, f"out={tmp_path / 'o'}"]) == 2
    err = capsys.readouterr().err
    assert "has a trace" in err and "longer than max_len" not in err and "no_model" not in err


def test_rl_rows_without_gold_are_refused_before_the_model(tmp_path, capsys):
    data = _rows(tmp_path / "t.jsonl", [{"prompt": "1+1?", "solution": "two"}])
    argv = ["rl", f"model={tmp_path / 'no_model'}", f"data={data}", f"out={tmp_path / 'o'}"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "t.jsonl:1: field 'answer'" in err and "answer_key" in err and "no_model" not in err


def test_rl_trl_rows_pass_the_data_check(tmp_path, capsys):
    rows = [{"prompt": f"{i}+1?", "solution": f"so \\boxed{{{i + 1}}}"} for i in range(3)]
    data = _rows(tmp_path / "t.jsonl", rows)
    argv = ["rl", f"model={tmp_path / 'no_model'}", f"data={data}", f"out={tmp_path / 'o'}"]
    assert main(argv) == 2
    assert "no_model" in capsys.readouterr().err  # got as far as the model


# ---- a hub id: from the cache, downloaded, or refused at once --------------------------------
def test_uncached_hub_id_fails_at_once_when_the_hub_is_unreachable(tmp_path):
    """Before, transformers' retries took ~50 s to say the same (measured on this machine)."""
    import os
    import subprocess
    import sys
    import time

    env = {
        k: v for k, v in os.environ.items() if k not in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")
    }
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT="http://127.0.0.1:9")  # refused at once
    code = (
        "from vibethinker.models import load_model_and_tokenizer\n"
        "try:\n    load_model_and_tokenizer('someorg/somemodel')\n"
        "except OSError as e:\n    print(type(e).__name__, e)\n"
    )
    t0 = time.time()
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    ).stdout
    assert time.time() - t0 < 30, "fell back to transformers' retries"
    assert "HubUnavailableError" in out and "the hub (http://127.0.0.1:9) is unreachable" in out
    assert "hf download someorg/somemodel --local-dir DIR" in out


def test_hub_kwargs_cached_reachable_offline(monkeypatch):
    from vibethinker.models import hub

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setattr(hub, "is_cached", lambda repo: True)
    monkeypatch.setattr(hub, "hub_reachable", lambda url: False)
    assert hub.hub_load_kwargs("a/b") == {"local_files_only": True}  # no retries on the cache
    monkeypatch.setattr(hub, "hub_reachable", lambda url: True)
    assert hub.hub_load_kwargs("a/b") == {}
    monkeypatch.setattr(hub, "is_cached", lambda repo: False)
    assert hub.hub_load_kwargs("a/b") == {}  # transformers downloads it
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(hub.HubUnavailableError, match="HF_HUB_OFFLINE"):
        hub.hub_load_kwargs("a/b")


@pytest.mark.parametrize(
    "stage, values, expect",
    [
        (
            "distill",
            {"n_samples": 0, "band_lo_pct": 90, "band_hi_pct": 80},
            ["n_samples=0: must be >= 1", "band_lo_pct=90.0: must be <= band_hi_pct=80.0"],
        ),
        ("distill", {"select": "lpp"}, ["did you mean lp?"]),
        ("probe_merge", {"by": "subdomian", "k": 0}, ["did you mean subdomain?", "k=0"]),
        ("reward_model", {"eval_frac": 1.5, "device": "gpu"}, ["eval_frac=1.5", "device='gpu'"]),
        ("headline", {"n": 0, "conf": 1.5}, ["n=0", "conf=1.5"]),
    ],
)
def test_other_training_and_eval_stages_check_their_keys(stage, values, expect):
    from vibethinker import stages

    with pytest.raises(ConfigError) as e:
        make_config(stages.get(stage).config_cls, values, stage)
    assert str(e.value).startswith(f"{stage}: ")
    for text in expect:
        assert text in str(e.value), e.value
