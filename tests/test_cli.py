"""The command line a first-time user meets: flags, help, single-stage runs from a recipe, status,
why a stage re-runs, and one-line errors."""

import json
import re
from pathlib import Path

import pytest

from tests.helpers.recipe_env import env  # noqa: F401 - test-only stages and a recipe
from vibethinker.cli import hub_hint, main
from vibethinker.recipe import Manifest, execute, explain, load_recipe


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "{recipe}", "--dryrun"],
        ["run", "{recipe}", "--bogus", "t_slow.n=3"],
        ["t_write", "out={tmp}/x", "--verbose"],
        ["t_write", "--text=hi"],
    ],
)
def test_unknown_flags_rejected_before_anything_runs(env, capsys, argv):  # noqa: F811
    tmp, recipe = env
    argv = [a.format(recipe=recipe, tmp=tmp) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: unknown option")
    assert not (tmp / "run").exists() and not (tmp / "x").exists()


def test_typo_of_a_flag_suggests_the_flag(env, capsys):  # noqa: F811
    assert main(["run", str(env[1]), "--dryrun"]) == 2
    assert "did you mean --dry-run?" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv, expect",
    [
        (["--help"], "usage:"),
        (["-h"], "usage:"),
        (["help"], "usage:"),
        (["run", "--help"], "usage: vibethinker run"),
        (["run", "{recipe}", "--help"], "usage: vibethinker run"),
        (["run", "{recipe}", "t_slow.n=3", "-h"], "usage: vibethinker run"),
        (["t_write", "--help"], "usage: vibethinker t_write"),
        (["t_write", "text=x", "-h"], "usage: vibethinker t_write"),
        (["second", "{recipe}", "--help"], "usage: vibethinker t_write"),
        (["status", "--help"], "usage: vibethinker status"),
    ],
)
def test_help_in_every_position_runs_nothing(env, capsys, argv, expect):  # noqa: F811
    tmp, recipe = env
    assert main([a.format(recipe=recipe) for a in argv]) == 0
    assert expect in capsys.readouterr().out
    assert not (tmp / "run").exists()


def test_bare_command_exits_nonzero_with_usage(capsys):
    assert main([]) == 2
    assert "usage:" in capsys.readouterr().err


def test_single_stage_from_recipe_leaves_the_recipe_run_alone(env, capsys):  # noqa: F811
    tmp, recipe = env
    execute(load_recipe(str(recipe)), quiet=True)
    before = (tmp / "run" / "manifest.json").read_text()
    assert main(["t_write", str(recipe), "text=adhoc"]) == 0
    # the recipe's folder and manifest are untouched; the run went to <run_dir>/single/<name>
    assert (tmp / "run" / "t_write" / "file.txt").read_text() == "hello"
    assert (tmp / "run" / "manifest.json").read_text() == before
    single = tmp / "run" / "single" / "t_write"
    assert (single / "file.txt").read_text() == "adhoc"
    rec = json.loads((single / "single_run.json").read_text())
    assert rec["status"] == "done" and rec["config"]["text"] == "adhoc"
    assert "writing to" in capsys.readouterr().out
    # a stage name picks one entry among several of one type
    assert main(["second", str(recipe)]) == 0
    assert (tmp / "run" / "single" / "second" / "file.txt").read_text() == "hello-again"
    # an explicit out= into a recipe stage's folder is refused
    assert main(["t_write", str(recipe), f"out={tmp}/run/t_slow/x"]) == 2
    assert "inside recipe stage t_slow" in capsys.readouterr().err
    assert [a for _, a, _ in explain(load_recipe(str(recipe)))] == ["skip"] * 3


def test_status_table_and_report(env, capsys):  # noqa: F811
    tmp, recipe = env
    execute(load_recipe(str(recipe)), quiet=True)
    (tmp / "run" / "report.md").unlink(missing_ok=True)
    assert main(["status", str(tmp / "run")]) == 0
    out = capsys.readouterr().out
    assert "t_slow" in out and "done" in out and "stage" in out.splitlines()[1]
    assert (tmp / "run" / "report.md").exists()
    assert main(["status", str(recipe), "--no-report"]) == 0
    assert main(["status", str(tmp / "nope")]) == 2


def test_dry_run_says_why_and_runtime_fields_do_not_rerun(env, capsys):  # noqa: F811
    tmp, recipe = env
    r = load_recipe(str(recipe))
    assert [w for _, _, w in explain(r)] == ["not run yet"] + [
        "an earlier stage (t_write) re-runs"
    ] * 2
    execute(r, quiet=True)
    # workers is declared runtime: it cannot change results, so nothing re-runs
    r2 = load_recipe(str(recipe), {"t_write.workers": "8"})
    assert [a for _, a, _ in explain(r2)] == ["skip"] * 3
    r3 = load_recipe(str(recipe), {"t_slow.n": "9"})
    why = [w for _, _, w in explain(r3)]
    assert why[1] == "config changed: n 5 -> 9" and why[2] == "an earlier stage (t_slow) re-runs"
    assert main(["run", str(recipe), "t_slow.n=9", "--dry-run"]) == 0
    assert "config changed: n 5 -> 9" in capsys.readouterr().out
    man = Manifest(str(tmp / "run"))
    man.stage("t_slow")["status"] = "interrupted"
    man.save()
    assert explain(r)[1][1:] == ("resume", "last run interrupted; resumes from its checkpoints")


def test_offline_hub_id_is_one_line_with_the_download_command():
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        try:
            raise LocalEntryNotFoundError("Cannot find the requested files in the disk cache")
        except LocalEntryNotFoundError as e:
            raise OSError(
                "We couldn't connect to 'https://huggingface.co' to load the files, and couldn't "
                "find them in the cached files. Check your connection or see offline mode for "
                "Qwen/Qwen2.5-Coder-3B."
            ) from e
    except OSError as e:
        msg = hub_hint(e, {"model": "Qwen/Qwen2.5-Coder-3B"})
    assert msg and "\n" not in msg
    assert "hf download Qwen/Qwen2.5-Coder-3B --local-dir DIR" in msg
    assert hub_hint(ValueError("lr must be positive")) is None


def test_offline_hub_id_through_the_cli(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    data = tmp_path / "d.jsonl"
    data.write_text('{"id": "a", "domain": "math", "prompt": "1+1", "answer": "2"}\n')
    rc = main(["eval", "nobody-org/no-such-model", str(data), f"out={tmp_path}/e", "n=1"])
    err = capsys.readouterr().err
    lines = [x for x in err.splitlines() if x.startswith("error:")]
    assert rc == 2 and len(lines) == 1 and "Traceback" not in err
    assert "hf download nobody-org/no-such-model --local-dir DIR" in lines[0]


def test_stage_help_marks_runtime_fields(env, capsys):  # noqa: F811
    assert main(["t_write", "--help"]) == 0
    out = capsys.readouterr().out
    assert "workers=1  (int; runtime" in out


def test_report_nests_stage_headings(tmp_path):
    from vibethinker.report import nest_headings

    assert nest_headings("# RL\n\ntext\n## part\n```\n# code\n```") == (
        "### RL\n\ntext\n#### part\n```\n# code\n```"
    )


def test_unknown_command_or_stage_suggests_the_name(env, capsys):  # noqa: F811
    tmp, recipe = env
    assert main(["statu", str(tmp / "run")]) == 2
    assert "did you mean status?" in capsys.readouterr().err
    assert main(["secnd", str(recipe)]) == 2
    assert "did you mean second?" in capsys.readouterr().err


def test_status_flags_a_stage_left_running_by_a_dead_process(env, capsys):  # noqa: F811
    tmp, recipe = env
    execute(load_recipe(str(recipe)), quiet=True)
    man = Manifest(str(tmp / "run"))
    man.stage("t_slow")["status"] = "running"
    man.save()
    assert main(["status", str(tmp / "run"), "--no-report"]) == 0
    assert "has no live process" in capsys.readouterr().out


ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def _local_links(md: Path) -> list[Path]:
    return [(md.parent / h).resolve() for h in LINK.findall(md.read_text()) if "://" not in h]


def test_readme_links_resolve_and_terms_are_explained():
    """No citation of files the repository lacks (DESIGN.md, STYLE.md, a bare PAPER.md); the
    paper, docs/PAPER.md, REAL_WORLD.md and the docs index are linked; every local link opens
    (docs/PAPER.md is written on another branch: checked once it exists); the glossary explains
    the terms the README uses."""
    readme = (ROOT / "README.md").read_text()
    for absent in ("DESIGN.md", "STYLE.md", "(PAPER.md)", " PAPER.md"):
        assert absent not in readme, absent
    for link in (
        "https://arxiv.org/abs/2606.16140",
        "(docs/PAPER.md)",
        "(docs/REAL_WORLD.md)",
        "(docs/README.md)",
    ):
        assert link in readme, link
    for md in (ROOT / "README.md", ROOT / "docs" / "README.md"):
        for p in _local_links(md):
            assert p.exists() or p == ROOT / "docs" / "PAPER.md", f"{md.name}: {p}"
    glossary = readme[readme.index("## Glossary") :]
    for term in ("**MGPO**", "**D_ME**", "**S_LP**", "**CLR**", "**demoN**", "**issue N**"):
        assert term in glossary, term


def test_docs_index_links_every_document():
    index = ROOT / "docs" / "README.md"
    linked = set(_local_links(index))
    for doc in [*(ROOT / "docs").glob("*.md"), ROOT / "BENCHMARKS.md"]:
        assert doc.resolve() in linked or doc == index, doc.name


def test_openmp_threads_sleep_while_waiting_unless_the_user_says_otherwise():
    """The CLI sets OMP_WAIT_POLICY=PASSIVE before torch (and its OpenMP) loads: importing the
    CLI must not import torch, and a value the user set is kept."""
    import os
    import subprocess
    import sys

    code = (
        "import os, sys; from vibethinker.cli import main; assert 'torch' not in sys.modules; "
        "main(['stages']); import torch; print('POLICY', os.environ['OMP_WAIT_POLICY'])"
    )
    clean = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    out = subprocess.run([sys.executable, "-c", code], env=clean, capture_output=True, text=True)
    assert "POLICY PASSIVE" in out.stdout, out.stderr[-2000:]
    from vibethinker.threads import configure

    assert configure({"OMP_WAIT_POLICY": "ACTIVE"}) == "ACTIVE"
    assert configure({}) == "PASSIVE"
    opt_out = {"VIBETHINKER_WAIT_POLICY": "default"}
    assert configure(opt_out) == "default" and "OMP_WAIT_POLICY" not in opt_out


def test_interrupt_outside_training_does_not_claim_a_checkpoint(env, capsys):  # noqa: F811
    """Ctrl-C while a stage loads its model or filters prompts saves nothing: the CLI says so
    (it used to say sft, rl and distill had saved a checkpoint)."""
    tmp, recipe = env
    assert main(["t_write", f"out={tmp}/x", "fail=true"]) == 130
    err = capsys.readouterr().err
    assert "nothing of the step that was running was saved" in err and "checkpoint was" not in err
    assert main(["run", str(recipe), "t_write.fail=true"]) == 130
    log = (tmp / "run" / "run.log").read_text()
    assert "nothing of this stage is saved" in log and "checkpoint at the step" not in log


def test_interrupt_in_training_names_the_checkpoint(tmp_path, capsys, monkeypatch):
    import os
    import signal

    from tests.helpers.sft_data import _problems
    from vibethinker.data.io import save_problems
    from vibethinker.models.tiny import build_tiny_model
    from vibethinker.train import policy

    texts = [p.prompt + " " + t for p in _problems(16) for t in p.traces]
    tiny = build_tiny_model(tmp_path / "tiny", texts, "d1", 300, 0)
    save_problems(tmp_path / "train.jsonl", _problems(16, seed=3))
    real, n = policy.optimizer_step, []

    def step_then_signal(*a, **k):
        n.append(1)
        if len(n) == 2:
            os.kill(os.getpid(), signal.SIGINT)
        return real(*a, **k)

    monkeypatch.setattr(policy, "optimizer_step", step_then_signal)
    out = tmp_path / "s"
    argv = ["sft", f"model={tiny}", f"data={tmp_path}/train.jsonl", f"out={out}", "max_steps=4"]
    assert main([*argv, "global_batch=8", "micro_batch=4", "max_len=128", "device=cpu"]) == 130
    err = capsys.readouterr().err
    assert f"a checkpoint was saved (step 2 in {out}/checkpoints/step-000002)" in err


def test_verify_an_empty_or_non_utf8_file_says_so(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert main(["verify", str(empty), f"out={tmp_path}/v.jsonl"]) == 2
    assert f"{empty} holds no rows to verify" in capsys.readouterr().err
    assert not (tmp_path / "v.jsonl").exists()
    bad = tmp_path / "bad.jsonl"
    row = {"id": "a", "domain": "math", "prompt": "1+1?", "answer": "2", "response": "2"}
    bad.write_bytes((json.dumps(row) + "\n").encode() + b'{"id": "b\xff"}\n')
    assert main(["verify", str(bad), f"out={tmp_path}/v.jsonl"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:2:" in err and "not valid UTF-8" in err
