"""The report's headline: stage lines and story checks on constructed scores, the `headline`
stage end to end on tiny random models (table, plot, json, the report's top), its resume cache,
checkpoint identity, bad input."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from vibethinker.config import ConfigError
from vibethinker.evaluate.headline import (
    Row,
    build_headline,
    parse_rows,
    pick_problems,
    stage_line,
)
from vibethinker.reports.headline import headline_markdown
from vibethinker.stages import get
from vibethinker.stages import headline as stage

# 8 math problems of varied difficulty, 8 code problems
DOMAINS = ["math"] * 8 + ["code"] * 8
SFT1 = [0.1 * (i % 4) for i in range(8)] + [0.8] * 8
RL_MATH = [s + 0.5 for s in SFT1[:8]] + [0.3] * 8  # math +0.5 everywhere, code -0.5 everywhere


def _rows() -> list[Row]:
    return [Row("sft1", "a"), Row("rl_math", "b", "math"), Row("rl_code", "b", "code")]


def test_lines_and_story_on_constructed_scores():
    scores = {"sft1": SFT1, "rl_math": RL_MATH, "rl_code": RL_MATH}
    h = build_headline(_rows(), scores, DOMAINS, n=4, same_as={"rl_code": "rl_math"})
    assert h["columns"] == ["math", "code", "all"]
    cells = h["rows"][0]["cells"]
    assert cells["code"] == {"mean": 0.8, "lo": 0.8, "hi": 0.8, "n_problems": 8, "n_samples": 32}
    assert cells["math"]["mean"] == pytest.approx(0.15)
    assert cells["math"]["lo"] < 0.15 < cells["math"]["hi"]
    texts = [ln["text"] for ln in h["lines"]]
    # math +0.5 and code -0.5 on every problem: both beyond noise; `all` nets to 0: within
    assert texts[0] == (
        "rl_math (vs sft1): math +0.500 [+0.500, +0.500] (beyond noise); "
        "code -0.500 [-0.500, -0.500] (beyond noise); others within noise (all)"
    )
    assert (
        texts[1]
        == "rl_code (vs rl_math): the same checkpoint as rl_math (evaluated once): no change"
    )
    assert texts[2].startswith("final: rl_code (vs sft1): math +0.500")
    assert h["not_holding"] == [
        "rl_code is WORSE than sft1 on code: code -0.500 [-0.500, -0.500], beyond noise",
        "rl_code is the same checkpoint as rl_math (the stage changed nothing), so it does not "
        "beat it on code",
    ]
    held = [c["text"] for c in h["checks"] if c["holds"]]
    assert held == [
        "rl_code beats sft1 on math: math +0.500 [+0.500, +0.500]",
        "rl_math beats sft1 on math: math +0.500 [+0.500, +0.500]",
    ]
    md = headline_markdown({**h, "protocol": {"problems_per_domain": {"math": 8, "code": 8}}})
    assert "| rl_code (= rl_math, same checkpoint) | 0.650 [" in md
    assert "## Where the story does not hold\n\n- rl_code is WORSE than sft1 on code" in md


def test_within_noise_and_a_story_that_holds():
    a = [0.0, 1.0, 0.5, 0.25] * 5
    b = [0.25, 0.75, 0.5, 0.5] * 5  # +0.25, -0.25, 0, +0.25: better on average, not resolved
    h = build_headline(
        [Row("sft1", "a"), Row("x", "b", "all")], {"sft1": a, "x": b}, ["math"] * 20, n=2
    )
    assert h["lines"][0]["text"].startswith("x (vs sft1): no change beyond noise (math +0.062 [-")
    assert h["not_holding"][0].startswith("x does not beat sft1 on math beyond noise: math +0.062")
    up = [x + 0.1 for x in a]
    h = build_headline([Row("sft1", "a"), Row("x", "b")], {"sft1": a, "x": up}, ["math"] * 20, 2)
    assert h["not_holding"] == [] and h["checks"][0]["holds"]
    assert "Nowhere: every check below holds beyond noise." in headline_markdown(h)


def test_parse_rows_forms_and_errors():
    rows = parse_rows({"sft1": "p/a", "rl_math": {"model": "p/b", "domain": "math"}})
    assert rows == [Row("sft1", "p/a"), Row("rl_math", "p/b", "math")]
    rows = parse_rows([{"name": "a", "model": "x"}, {"name": "b", "model": "y", "start": "a"}])
    assert rows[1].start == "a"
    bad = [
        ([{"name": "a"}], "missing \\['model'\\]"),
        ([{"name": "a", "model": "x", "dom": "math"}], "unknown \\['dom'\\]"),
        ([{"name": "a", "model": "x"}, {"name": "a", "model": "y"}], "used twice"),
        ([{"name": "a", "model": "x", "start": "b"}], "must name an earlier row"),
        ([{"name": "a", "model": "x", "domain": "poetry"}], "domain must be one of"),
        ([], "is empty"),
        ("sft1", "must be a list"),
    ]
    for value, msg in bad:
        with pytest.raises(ConfigError, match=msg):
            parse_rows(value)


def test_pick_problems_first_per_domain():
    from vibethinker.types import Problem

    ps = [Problem(f"{d}{i}", d, "q") for i in range(5) for d in ("math", "stem", "clr")]
    got = pick_problems(ps, 2)
    assert [p.id for p in got] == ["math0", "stem0", "math1", "stem1"]
    assert len(pick_problems(ps, 0)) == 10


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> dict[str, str]:
    """A small held-out file (math + stem) and two tiny random models (different seeds)."""
    from vibethinker.data.io import save_problems
    from vibethinker.data.world import generate
    from vibethinker.models.tiny import build_tiny_model

    root = tmp_path_factory.mktemp("headline")
    splits = generate(0, 30, 1, 6, ["math", "stem"])
    save_problems(root / "eval.jsonl", splits["eval"])
    a = build_tiny_model(root / "a", [p.prompt for p in splits["train"]], "1m", 300, 0)
    shutil.copytree(a, root / "b")  # b: a's tokenizer, a's weights plus noise
    f = next((root / "b").glob("*.safetensors"))
    gen = torch.Generator().manual_seed(1)
    tensors = {k: v + 0.05 * torch.randn(v.shape, generator=gen) for k, v in load_file(f).items()}
    save_file(tensors, f, metadata={"format": "pt"})
    return {"root": str(root), "data": str(root / "eval.jsonl"), "a": a, "b": str(root / "b")}


def _cfg(tiny, out, **kw) -> stage.HeadlineConfig:
    base = dict(
        models=[
            {"name": "sft1", "model": tiny["a"]},
            {"name": "rl_math", "model": tiny["b"], "domain": "math"},
        ],
        data=tiny["data"],
        out=str(out),
        limit_per_domain=3,
        n=2,
        max_new_tokens=8,
        n_boot=200,
        device="cpu",
        workers=1,
    )
    base.update(kw)
    return stage.HeadlineConfig(**base)


def test_stage_end_to_end_report_top_and_resume(tiny, tmp_path, monkeypatch):
    from vibethinker.report import write_report

    out = tmp_path / "headline"
    outputs = get("headline").fn(_cfg(tiny, out))
    assert set(outputs) == {"headline", "plot", "table", "summary"}
    assert Path(outputs["plot"]).stat().st_size > 1000
    h = json.loads(Path(outputs["headline"]).read_text())
    assert [r["name"] for r in h["rows"]] == ["sft1", "rl_math"]
    assert h["columns"] == ["math", "stem", "all"]
    for r in h["rows"]:
        assert len(r["scores"]) == 6 and not r["cached"]
        assert r["cells"]["math"]["n_problems"] == 3 and r["cells"]["all"]["n_samples"] == 12
        for c in r["cells"].values():
            assert 0.0 <= c["lo"] <= c["mean"] <= c["hi"] <= 1.0
    assert len(h["lines"]) == 1 and h["lines"][0]["text"].startswith("rl_math (vs sft1): ")
    table = Path(outputs["table"]).read_text()
    assert (
        "| after stage | math | stem | all |" in table and "Where the story does not hold" in table
    )

    # the report: the headline at the very top, the plot linked from the run dir
    rec = {"stage": "headline", "status": "done", "config": {"out": str(out)}, "seconds": 1}
    man = {"recipe": "r.yaml", "order": ["headline"], "stages": {"headline": rec}}
    (tmp_path / "manifest.json").write_text(json.dumps(man))
    report = Path(write_report(str(tmp_path))).read_text()
    top = report.index("## Headline: held-out accuracy after each stage")
    assert top < report.index("Recipe: `r.yaml`") and report.count("headline.png") == 1
    assert "![headline](headline/headline.png)" in report
    assert "### Where the story does not hold" in report

    # resume: every model comes from the cache (sampling again would fail)
    def no_sampling(*a, **k):
        raise AssertionError("sampled a cached model")

    monkeypatch.setattr(stage, "score_model", no_sampling)
    h2 = json.loads(Path(get("headline").fn(_cfg(tiny, out))["headline"]).read_text())
    assert all(r["cached"] for r in h2["rows"])
    assert [r["scores"] for r in h2["rows"]] == [r["scores"] for r in h["rows"]]
    with pytest.raises(AssertionError, match="sampled a cached model"):  # another protocol
        get("headline").fn(_cfg(tiny, out, n=3))
    with pytest.raises(AssertionError, match="sampled a cached model"):  # hf: batching = samples
        get("headline").fn(_cfg(tiny, out, token_budget=64))

    # interrupted after the first model: only the missing one is sampled
    (out / "models" / "rl_math.json").unlink()
    sampled = []

    def fake(cfg, row, problems):
        sampled.append(row.name)
        return {
            "ids": [p.id for p in problems],
            "scores": [1.0] * len(problems),
            "seconds": 0.0,
            "accuracy": 1.0,
        }

    monkeypatch.setattr(stage, "score_model", fake)
    h3 = json.loads(Path(get("headline").fn(_cfg(tiny, out))["headline"]).read_text())
    assert sampled == ["rl_math"] and [r["cached"] for r in h3["rows"]] == [True, False]


def test_report_without_headline_is_unchanged(tmp_path):
    from vibethinker.report import write_report

    rec = {"stage": "eval", "status": "done", "config": {"out": str(tmp_path / "e")}, "seconds": 1}
    (tmp_path / "manifest.json").write_text(
        json.dumps({"recipe": "r.yaml", "order": ["e"], "stages": {"e": rec}})
    )
    report = Path(write_report(str(tmp_path))).read_text()
    assert report.startswith("# Run report: ") and "Headline" not in report
    assert report.splitlines()[2].startswith("Recipe: `r.yaml`")


def test_same_checkpoint_is_evaluated_once_and_missing_model_is_named(tiny, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(tiny["a"], copy)
    rows = [Row("rl_l2s", tiny["a"]), Row("rl_code", str(copy)), Row("rl_stem", tiny["b"])]
    assert stage.same_as_map(rows) == {"rl_code": "rl_l2s"}
    weights = next(copy.glob("*.safetensors"))
    data = bytearray(weights.read_bytes())
    data[-1] ^= 1  # one flipped bit: another model
    weights.write_bytes(bytes(data))
    assert stage.same_as_map(rows) == {}
    cfg = _cfg(tiny, tmp_path / "h", models={"sft1": tiny["a"], "rl_math": str(tmp_path / "no")})
    with pytest.raises(FileNotFoundError, match=f"stage 'rl_math' was not found at {tmp_path}/no"):
        get("headline").fn(cfg)


def test_stage_line_names_every_column_within_noise():
    d = {
        "math": {"diff": 0.1, "lo": 0.05, "hi": 0.15, "beyond": True},
        "code": {"diff": 0.0, "lo": -0.1, "hi": 0.1, "beyond": False},
        "all": {"diff": 0.05, "lo": -0.01, "hi": 0.11, "beyond": False},
    }
    assert stage_line("rl_math", "sft2", d) == (
        "rl_math (vs sft2): math +0.100 [+0.050, +0.150] (beyond noise); others within noise "
        "(code, all)"
    )


def test_headline_prints_each_stages_training_steps(tmp_path):
    """A stage a wall-clock cap stopped short shows it in the table (`35/60 (capped)`), next to
    stages that ran all their steps; a model without a training folder shows `-`."""
    from vibethinker.reports.headline import training_steps

    rl = tmp_path / "rl_math"
    (rl / "final").mkdir(parents=True)
    (rl / "steps.json").write_text(json.dumps({"done": 35, "planned": 60, "capped": True}))
    sft = tmp_path / "sft1"
    (sft / "final").mkdir(parents=True)
    (sft / "metrics.jsonl").write_text("".join(json.dumps({"step": i}) + "\n" for i in (1, 2, 3)))
    (sft / "stats.json").write_text(json.dumps({"steps": 3}))
    assert training_steps(rl / "final") == {"done": 35, "planned": 60, "capped": True}
    assert training_steps(sft / "final") == {"done": 3, "planned": 3, "capped": False}
    assert training_steps(tmp_path / "merged" / "x") is None
    h = build_headline(
        [Row("sft1", "a"), Row("rl_math", "b", "math")],
        {"sft1": [0.5, 0.5], "rl_math": [0.5, 1.0]},
        ["math", "math"],
        2,
        n_boot=50,
    )
    for r, st in zip(h["rows"], (training_steps(sft / "final"), training_steps(rl / "final"))):
        r["steps"] = st
    md = headline_markdown(h)
    assert "| after stage | math | all | steps |" in md
    assert md.count(" 3/3 |") == 1 and "| 35/60 (capped) |" in md


def test_rl_summary_explains_its_own_eval_and_a_capped_run(tmp_path):
    """The RL summary says why its held-out figures can differ from the headline's, and a run
    the wall-clock cap stopped short says so loudly (summary and warnings)."""
    from vibethinker.reports.rl import cap_warning, write_summary
    from vibethinker.train.rl_config import RLConfig

    cfg = RLConfig(
        model="m", data="d", domain="code", steps=25, max_seconds=75, eval_limit=40, eval_n=2
    )
    row = {
        "step": 1,
        "seconds": 1.0,
        "accuracy": 0.5,
        "trained_rows": 4,
        **{f"t_{k}": 0.1 for k in ("generate", "verify", "logprobs", "update")},
    }
    res = {
        "history": [row],
        "evals": [{"step": 0, "accuracy": 0.713}, {"step": 11, "accuracy": 0.637}],
        "resumed_at": 0,
        "steps_done": 11,
    }
    text = Path(write_summary(tmp_path / "s.md", cfg, res, {}, 80.0)).read_text()
    assert "the first 40 code problems x 2 samples" in text and "headline is the comparison" in text
    assert "stopped training after 11/25 steps" in text
    assert cap_warning(cfg, 11) in text


# ----------------------------------------------------------------------------- report polish


def test_a_summarys_images_link_from_the_report_once(tmp_path):
    """The construct summary's own image line (links relative to its folder) is rewritten to
    links relative to the report, and its plots are not appended a second time."""
    from vibethinker.report import write_report

    out = tmp_path / "construct"
    out.mkdir()
    (out / "summary.md").write_text(
        "# construct\n\n![lengths](lengths.png) ![difficulty](difficulty.png)\n"
    )
    for name in ("lengths", "difficulty", "funnel"):
        (out / f"{name}.png").write_bytes(b"\x89PNG")
    rec = {"stage": "construct", "status": "done", "dir": "construct", "seconds": 1}
    (tmp_path / "manifest.json").write_text(
        json.dumps({"order": ["construct"], "stages": {"construct": rec}})
    )
    report = Path(write_report(str(tmp_path))).read_text()
    assert "![lengths](construct/lengths.png) ![difficulty](construct/difficulty.png)" in report
    assert report.count("lengths.png") == 1 and report.count("difficulty.png") == 1
    assert "![funnel](construct/funnel.png)" in report  # a plot the summary does not show


def _figures(monkeypatch) -> list:
    import matplotlib.figure

    figs = []
    monkeypatch.setattr(
        matplotlib.figure.Figure, "savefig", lambda self, *a, **k: figs.append(self)
    )
    return figs


def test_histograms_are_bars_side_by_side():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from vibethinker.reports.construct import draw_histograms

    fig, ax = plt.subplots()
    draw_histograms(ax, {"math": Counter({0: 3, 20: 5}), "code": Counter({20: 2, 40: 1})})
    assert not ax.lines and len(ax.patches) == 6  # 2 domains x 3 bins, no joined lines
    xs = sorted(round(p.get_x() + p.get_width() / 2, 3) for p in ax.patches)
    assert len(set(xs)) == 6  # no bar hides another
    plt.close(fig)


def test_rl_panels_have_y_labels_and_clr_labels_sit_off_the_markers(tmp_path, monkeypatch):
    from vibethinker.reports.clr import plot as clr_plot
    from vibethinker.reports.rl import plot_curves

    figs = _figures(monkeypatch)
    hist = [{"step": s, "reward": 0.5, "accuracy": 0.5, "mgpo_weight": 0.9} for s in (1, 2)]
    plot_curves(hist, [{"step": 0, "accuracy": 0.4}], tmp_path / "c.png", "t")
    assert all(ax.get_ylabel() for ax in figs[-1].axes)
    rows = [{"k": k, "clr_tokens": 100 * k, "clr": 0.5} for k in (1, 2)]
    comp = {
        "rows": rows,
        "maj_curve": [{"tokens": 100, "accuracy": 0.4}],
        "avg": {"tokens": 50, "accuracy": 0.3},
    }
    clr_plot(tmp_path / "clr.png", comp, "t")
    notes = [t for t in figs[-1].axes[0].texts if t.get_text().startswith("k=")]
    assert len(notes) == 2 and all(t.get_position() != (0, 0) and t.xyann != t.xy for t in notes)


def test_eval_log_names_only_the_domains_present():
    from vibethinker.reports.eval import n_text
    from vibethinker.stages.eval import PAPER_N

    assert n_text(PAPER_N, {"math"}) == "math 64"
    assert n_text(PAPER_N, ["code", "math"]) == "math 64, code 8" and n_text(4, {"x"}) == "4"
