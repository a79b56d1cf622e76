"""The construct stage end to end on the embedded world with the simulated teacher; resume, bad
input (seeds, eval files, teacher replies, a failing server) and the openai engine path."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.stub_openai import StubOpenAI
from vibethinker.construct.world_teacher import WorldTeacherSampler
from vibethinker.data.io import DataError, load_problems, save_problems
from vibethinker.data.world import generate
from vibethinker.engines import SamplerError, SamplingParams
from vibethinker.stages import construct as stage
from vibethinker.stages.construct import ConstructConfig
from vibethinker.types import Completion


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("world")
    splits = generate(3, n_train=24, n_probe=1, n_eval=40, domains=["math", "stem", "code"])
    for name in ("train", "eval"):
        save_problems(d / f"{name}.jsonl", splits[name])
    return {"train": str(d / "train.jsonl"), "eval": str(d / "eval.jsonl")}


def cfg(world, out, **kw) -> ConstructConfig:
    teacher = {"data": world["train"], "eval": world["eval"], "n_planted": 2, "plant_rate": 0.3}
    base = dict(
        seeds=world["train"],
        out=str(out),
        teacher_options=teacher,
        n_samples=4,
        eval_sets=[world["eval"]],
        decontam_template_share=0.3,
        chunk=8,
    )
    base.update(kw)
    return ConstructConfig(**base)


def test_world_teacher_construct_end_to_end(world, tmp_path):
    res = stage.run(cfg(world, tmp_path))
    out = load_problems(res["train"])
    assert out and all(p.traces for p in out)
    axes = {p.meta["axis"] for p in out}
    assert "seed" in axes and axes & {"concept_composition", "solving_skeleton", "constraints"}
    for p in out:
        assert {"source_seed", "axis", "pass_rate", "difficulty", "trace_chars"} <= set(p.meta)
        assert len(p.traces) <= 4 and len(set(p.traces)) == len(p.traces)
        if p.meta["axis"] != "seed" and p.domain in ("math", "stem"):
            assert p.answer and "vote_margin" in p.meta
        if p.meta["axis"] != "seed" and p.domain == "code":
            assert p.tests and all(t["output"] for t in p.tests)  # outputs agreed in the sandbox
    funnel = json.loads(Path(res["funnel"]).read_text())
    assert funnel["planted"]["reached"] >= 1
    assert funnel["planted"]["caught"] == funnel["planted"]["reached"]  # planted eval copies
    summary = Path(res["summary"]).read_text()
    assert "| expand | queries |" in summary and "recall 1.00" in summary
    assert (tmp_path / "lengths.png").exists() and (tmp_path / "difficulty.png").exists()


class Flaky:
    """A teacher that fails (SamplerError) on its `fail_at`-th generate call; counts prompts."""

    def __init__(self, inner, fail_at: int | None):
        self.inner, self.fail_at, self.calls, self.prompts = inner, fail_at, 0, []
        self.planted = inner.planted

    def generate(self, prompts, n, params):
        self.calls += 1
        if self.fail_at is not None and self.calls == self.fail_at:
            raise SamplerError("server down")
        self.prompts += prompts
        return self.inner.generate(prompts, n, params)


def test_interrupted_run_resumes_without_redoing_finished_seeds(world, tmp_path, monkeypatch):
    opts = {"data": world["train"], "n_planted": 0}  # planting is teacher state: off here
    straight = load_problems(stage.run(cfg(world, tmp_path / "a", teacher_options=opts))["train"])
    teachers = []

    def fake(c, fail_at):
        t = Flaky(WorldTeacherSampler(**opts), fail_at)
        teachers.append(t)
        return t

    monkeypatch.setattr(stage, "make_teacher", lambda c: fake(c, 5))  # chunk 2, 1st call
    with pytest.raises(SamplerError, match="rerun to resume"):
        stage.run(cfg(world, tmp_path / "b"))
    prog = json.loads((tmp_path / "b" / "progress.json").read_text())
    assert prog["seeds_done"] == 8
    monkeypatch.setattr(stage, "make_teacher", lambda c: fake(c, None))
    resumed = load_problems(stage.run(cfg(world, tmp_path / "b"))["train"])
    first = load_problems(world["train"])[:8]
    sent = "\n".join(p if isinstance(p, str) else str(p) for p in teachers[-1].prompts)
    assert not any(s.prompt in sent for s in first)  # finished seeds not sent again
    assert [p.id for p in resumed] == [p.id for p in straight]


def test_seed_without_supervision(world, tmp_path):
    rows = [json.loads(x) for x in Path(world["train"]).read_text().splitlines()]
    del rows[3]["answer"]
    assert rows[3]["domain"] == "math"
    bad = tmp_path / "seeds.jsonl"
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(DataError, match=r"seeds.jsonl:4: field 'answer'"):
        stage.run(cfg(world, tmp_path / "o", seeds=str(bad)))
    assert not (tmp_path / "o" / "train.jsonl").exists()  # refused before any work
    res = stage.run(cfg(world, tmp_path / "d", seeds=str(bad), on_bad_seed="drop", max_seeds=8))
    assert json.loads(Path(res["funnel"]).read_text())["bad_seeds"] == 1
    # pass: a seed that reads as a Problem but has nothing to verify against (an open instruct
    # prompt: no rules) is copied unchanged with its own traces, counted as passed; the math
    # seed without an answer does not read as a Problem at all, so it is still dropped
    rows.insert(
        2,
        {
            "id": "open-1",
            "domain": "instruct",
            "subdomain": "open",
            "prompt": "Summarize in one sentence: tea is made from leaves.",
            "traces": ["<think>open summary</think>\nTea is brewed from leaves."],
        },
    )
    # ... and decontaminated like constructed ones: a copied record quoting an eval item is dropped
    leak = max(load_problems(world["eval"]), key=lambda p: len(p.prompt))
    rows.insert(
        3,
        {
            "id": "open-leak",
            "domain": "instruct",
            "subdomain": "open",
            "prompt": "Rewrite this.",
            "traces": [f"Sure: {leak.prompt}"],
        },
    )
    bad.write_text("".join(json.dumps(r) + "\n" for r in rows))
    res = stage.run(cfg(world, tmp_path / "p", seeds=str(bad), on_bad_seed="pass", max_seeds=8))
    funnel = json.loads(Path(res["funnel"]).read_text())
    assert funnel["bad_seeds"] == 1 and funnel["io"]["instruct"]["passed"] == [2, 1]
    assert funnel["drops"]["instruct/passed"] == {"eval_overlap": 1}
    assert any(k.endswith(":" + leak.id) for k in funnel["eval_hits"])
    out = {p.id: p for p in load_problems(res["train"])}
    assert out["open-1"].traces == rows[2]["traces"] and not out["open-1"].instructions
    assert "open-leak" not in out


def test_unknown_eval_format_is_an_error_at_start(world, tmp_path):
    with pytest.raises(ValueError, match="unknown format 'bogus'"):
        stage.run(cfg(world, tmp_path, eval_sets=["bogus:x.txt"]))


def test_unreadable_eval_file_is_an_error_before_any_teacher_call(world, tmp_path, monkeypatch):
    """An eval file whose content is in no known format (a CSV given as a plain path), or one that
    is missing: a ValueError naming the entry, raised before the teacher is built."""

    def no_teacher(c):
        raise AssertionError("teacher built before the eval sets were read")

    monkeypatch.setattr(stage, "make_teacher", no_teacher)
    csv = tmp_path / "bench.csv"
    csv.write_text("question,answer\nWhat is 2+2?,4\n")
    for i, (spec, why) in enumerate(
        [
            (str(csv), "cannot read it as 'problems'"),
            (str(tmp_path / "missing.jsonl"), "missing.jsonl"),
            (f"gpqa:{csv}", "cannot read it as 'gpqa'"),
        ]
    ):
        out = tmp_path / f"o{i}"
        with pytest.raises(ValueError, match=why):
            stage.run(cfg(world, out, eval_sets=[world["eval"], spec]))
        assert not (out / "progress.json").exists() and not (out / "train.jsonl").exists()


class Garbage:
    planted = None

    def __init__(self, text: str):
        self.text = text

    def generate(self, prompts, n, params: SamplingParams):
        return [[Completion(text=self.text) for _ in range(n)] for _ in prompts]


@pytest.mark.parametrize("text", ["", "<<<not json, no verdict, no answer>>>"])
def test_empty_or_unparsable_teacher_is_counted_not_fatal(world, tmp_path, monkeypatch, text):
    monkeypatch.setattr(stage, "make_teacher", lambda c: Garbage(text))
    res = stage.run(cfg(world, tmp_path, max_seeds=8, eval_sets=[]))
    assert load_problems(res["train"]) == [] if Path(res["train"]).stat().st_size else True
    drops = json.loads(Path(res["funnel"]).read_text())["drops"]
    exp = drops["math/expand"]
    assert exp == ({"empty": exp["empty"]} if not text else {"no_json": exp["no_json"]})
    assert "math/correct" in drops or "math/sample" in drops


def test_openai_teacher_against_the_stub_server(world, tmp_path):
    inner = WorldTeacherSampler(data=world["train"], n_planted=0)

    def hook(body, path, index):
        prompt = body["messages"][-1]["content"]
        params = SamplingParams(seed=(body.get("seed") or 0) + index)
        return inner.generate([prompt], 1, params)[0][0].text

    with StubOpenAI(hook=hook) as srv:
        c = cfg(
            world,
            tmp_path,
            teacher="openai",
            teacher_base_url=srv.base_url,
            teacher_options={"max_retries": 0},
            max_seeds=8,
            eval_sets=[],
        )
        out = load_problems(stage.run(c)["train"])
        assert srv.n_requests > 0
    assert out and all(p.traces for p in out)
    assert any(p.meta["axis"] != "seed" for p in out)


def test_server_failing_mid_run_is_a_clear_error_then_resume(world, tmp_path):
    inner = WorldTeacherSampler(data=world["train"], n_planted=0)

    def hook(body, path, index):
        return inner.generate([body["messages"][-1]["content"]], 1, SamplingParams())[0][0].text

    c = dict(teacher="openai", teacher_options={"max_retries": 0}, max_seeds=16, eval_sets=[])
    with StubOpenAI(hook=hook) as srv:
        n_first = None
        srv.script = [None] * 10_000
        stage.run(
            cfg(
                world,
                tmp_path / "probe",
                teacher_base_url=srv.base_url,
                max_seeds=8,
                **{k: v for k, v in c.items() if k != "max_seeds"},
            )
        )
        n_first = srv.n_requests  # requests for one chunk
        srv.script = [None] * (n_first + 2) + [500] * 10_000
        with pytest.raises(SamplerError, match="rerun to resume"):
            stage.run(cfg(world, tmp_path / "x", teacher_base_url=srv.base_url, **c))
        srv.script = None
        out = load_problems(
            stage.run(cfg(world, tmp_path / "x", teacher_base_url=srv.base_url, **c))["train"]
        )
    assert json.loads((tmp_path / "x" / "progress.json").read_text())["seeds_done"] == 16
    assert len({p.meta["source_seed"] for p in out}) > 8


def test_pass_domains_copy_records_unchanged(tmp_path):
    splits = generate(3, n_train=16, n_probe=1, n_eval=4, domains=["math", "clr"])
    seeds = tmp_path / "seeds.jsonl"
    save_problems(seeds, splits["train"])
    clr = [p for p in splits["train"] if p.domain == "clr"]
    assert clr
    base = dict(seeds=str(seeds), teacher_options={"n_planted": 0}, n_samples=2, chunk=4)
    out = load_problems(stage.run(ConstructConfig(out=str(tmp_path / "a"), **base))["train"])
    assert {p.domain for p in out} == {"math"}  # default: passed over
    res = stage.run(ConstructConfig(out=str(tmp_path / "b"), pass_domains=["clr"], **base))
    out = load_problems(res["train"])
    assert [p for p in out if p.domain == "clr"] == clr  # copied as they are
    assert json.loads(Path(res["funnel"]).read_text())["io"]["clr"] == {"passed": [len(clr)] * 2}
    with pytest.raises(ValueError, match="both constructed and passed"):
        stage.run(ConstructConfig(out=str(tmp_path / "c"), pass_domains=["math"], **base))


def _contaminated(world, tmp_path) -> tuple[str, str, list[str]]:
    """A finished SFT file and an RL prompt file, each with two copies of eval problems."""
    from dataclasses import replace

    train, ev = load_problems(world["train"]), load_problems(world["eval"])
    leaks = [replace(ev[i], id=f"leak{i}", traces=[ev[i].prompt + " so"]) for i in (0, 1)]
    save_problems(tmp_path / "sft.jsonl", [*train[:10], *leaks])
    rl = [replace(p, traces=None) for p in train[10:20]]
    rl_leaks = [replace(ev[i], id=f"rl_leak{i}", traces=None) for i in (2, 3)]
    save_problems(tmp_path / "rl_math.jsonl", [*rl, *rl_leaks])
    return str(tmp_path / "sft.jsonl"), str(tmp_path / "rl_math.jsonl"), [p.id for p in train]


def _clean_ids(world, c: ConstructConfig, records) -> set[str]:
    """Ids of records none of whose texts overlaps the eval set (the index queried directly)."""
    from vibethinker.construct.decontam import EvalIndex
    from vibethinker.construct.evalsets import eval_items

    index = EvalIndex(
        eval_items(c.eval_sets), c.decontam_n, c.decontam_template_share, c.decontam_template_min
    )
    out = set()
    for p in records:
        if not any(index.hits([p.prompt, *(p.traces or [])])):
            out.add(p.id)
    assert not any(i.startswith(("leak", "rl_leak")) for i in out)  # the planted copies are caught
    return out


def test_decontaminate_mode_runs_no_teacher_and_checks_every_file(world, tmp_path, monkeypatch):
    """mode=decontaminate: no teacher is made; the finished SFT records and the RL prompt file
    each lose exactly their eval copies, in order, with their traces untouched."""
    sft, rl, ids = _contaminated(world, tmp_path)

    def no_teacher(*a, **k):
        raise AssertionError("decontaminate mode made a teacher")

    monkeypatch.setattr(stage, "make_teacher", no_teacher)
    monkeypatch.setattr(stage, "make_sampler", no_teacher)
    c = cfg(world, tmp_path / "out", seeds=sft, files=[rl], mode="decontaminate")
    res = stage.run(c)
    clean = _clean_ids(world, c, [*load_problems(sft), *load_problems(rl)])
    kept = load_problems(res["train"])
    assert [p.id for p in kept] == [i for i in ids[:10] if i in clean]
    assert len(kept) >= 5 and all(p.traces for p in kept)  # the world's own overlaps are few
    assert kept[0].traces == next(p for p in load_problems(sft) if p.id == kept[0].id).traces
    assert [p.id for p in load_problems(res["rl_math"])] == [i for i in ids[10:20] if i in clean]
    funnel = json.loads(Path(res["funnel"]).read_text())
    drops = funnel["drops"]
    assert sum(v["eval_overlap"] for k, v in drops.items() if k.endswith("/decontam_file")) == (
        12 + 12 - len(clean)
    )


def test_build_mode_decontaminates_files_too(world, tmp_path):
    _, rl, ids = _contaminated(world, tmp_path)
    c = cfg(world, tmp_path / "out", files=[rl], max_seeds=4)
    res = stage.run(c)
    clean = _clean_ids(world, c, load_problems(rl))
    assert [p.id for p in load_problems(res["rl_math"])] == [i for i in ids[10:20] if i in clean]
    assert load_problems(res["train"])  # the teacher pipeline ran as before


def test_decontaminate_mode_bad_config(world, tmp_path):
    with pytest.raises(ValueError, match="mode"):
        stage.run(cfg(world, tmp_path, mode="clean"))
    with pytest.raises(ValueError, match="eval_sets"):
        stage.run(cfg(world, tmp_path, mode="decontaminate", eval_sets=[]))
    with pytest.raises(ValueError, match="file names"):
        stage.run(cfg(world, tmp_path, files=["a/x.jsonl", "b/x.jsonl"]))
