"""Stage `distill`: batched S_LP against a one-at-a-time reference, the stage end to end on the
tiny world (teachers stand in by a sampler that writes the world's traces), bad input."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from vibethinker.data.io import load_problems, save_problems
from vibethinker.data.world import generate
from vibethinker.evaluate import paper_prompt
from vibethinker.models import load_model_and_tokenizer
from vibethinker.models.tiny import build_tiny_model
from vibethinker.stages import distill, distill_candidates, distill_select
from vibethinker.train import lp_score, packing
from vibethinker.types import Completion

N_SAMPLES = 4


@pytest.fixture(scope="module")
def world(tmp_path_factory) -> dict[str, str]:
    """Tiny world data (math + stem) and a tiny random model that plays every role."""
    root = tmp_path_factory.mktemp("distill")
    splits = generate(0, 40, 2, 10, ["math", "stem"])
    save_problems(root / "data" / "train.jsonl", splits["train"])
    texts = [p.prompt + " " + t for p in splits["train"] for t in p.traces]
    model = build_tiny_model(root / "model", texts, "d1", 300, 0)
    return {"root": str(root), "data": str(root / "data"), "model": model}


class WorldSampler:
    """A teacher stand-in: for each prompt, cycles through the world's correct and wrong traces
    (so duplicates occur when n exceeds them); the last sample of each prompt is cut (finish
    reason "length"). `wrong_only` writes only wrong traces."""

    def __init__(self, data: str, wrong_only: bool = False):
        self.by_prompt = {paper_prompt(p): p for p in load_problems(Path(data) / "train.jsonl")}
        self.wrong_only = wrong_only

    def generate(self, prompts, n, params):
        out = []
        for pr in prompts:
            p = self.by_prompt[pr]
            pool = list(p.wrong_traces or []) if self.wrong_only else [*p.traces, *p.wrong_traces]
            out.append(
                [
                    Completion(
                        text=pool[k % len(pool)], finish_reason="length" if k == n - 1 else "stop"
                    )
                    for k in range(n)
                ]
            )
        return out


@pytest.fixture
def fake_teachers(monkeypatch, world):
    monkeypatch.setattr(
        distill_candidates, "make_teacher_sampler", lambda cfg, t: WorldSampler(t["data"])
    )


def _cfg(world, out: str, **kw) -> distill.DistillConfig:
    teachers = [
        {"model": world["model"], "data": world["data"], "domain": d} for d in ("math", "stem")
    ]
    base = dict(
        teachers=teachers,
        student=world["model"],
        out=out,
        n_samples=N_SAMPLES,
        max_prompts=0,
        n_buckets=2,
        min_tokens=4,
        epochs=1,
        global_batch=8,
        max_steps=2,
        lr=1e-3,
        max_len=256,
        score_tokens=512,
        device="cpu",
    )
    base.update(kw)
    return distill.DistillConfig(**base)


def slp_reference(model, tok, prompt: str, response: str) -> float:
    """One trace at a time with a plain transformers forward: -(mean log p) over the response
    tokens (the assistant-mask of the student's chat template; prompt tokens excluded)."""
    ids, mask = packing.encode_chat(tok, prompt, response)
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([ids])).logits[0].double()
    logp = torch.log_softmax(logits[:-1], -1).gather(-1, torch.tensor(ids[1:])[:, None])[:, 0]
    m = torch.tensor(mask[1:], dtype=torch.bool)
    return -float(logp[m].mean())


def test_plan_score_batches_by_hand():
    # longest first: 4 (9), 0 (5), 1 (3), 2 (3), 3 (2). Forward 1 is 9 wide with 18 // 9 = 2 rows:
    # [4] is full; 0 opens row 2 (room 4), 1 joins it (room 1); 2 fits no row and no row is
    # left. Forward 2 is 3 wide (6 rows): [2], then 3 does not fit its room 0: a row of its own.
    assert lp_score.plan_score_batches([5, 3, 3, 2, 9], 18) == [[[4], [0, 1]], [[2], [3]]]
    # a sample longer than score_tokens still gets a forward of its own
    assert lp_score.plan_score_batches([50, 1], 10) == [[[0]], [[1]]]
    assert lp_score.plan_score_batches([], 10) == []


def test_batched_s_lp_equals_one_at_a_time(world):
    model, tok = load_model_and_tokenizer(world["model"], device="cpu", dtype="float32")
    problems = load_problems(Path(world["data"]) / "train.jsonl")[:12]
    pairs = [(paper_prompt(p), t) for p in problems for t in p.traces]
    samples = [packing.Sample(*packing.encode_chat(tok, q, y)) for q, y in pairs]
    # 300 tokens per row: several traces per row, several rows
    got = lp_score.score_samples(model, samples, tok.pad_token_id, "cpu", score_tokens=300)
    for (q, y), s, (v, n) in zip(pairs, samples, got):
        assert n == sum(s.mask)
        assert v == pytest.approx(slp_reference(model, tok, q, y), abs=1e-5)
    # score_tokens=1: one response per forward, no mask (plain causal): the same values
    alone = lp_score.score_samples(model, samples, tok.pad_token_id, "cpu", score_tokens=1)
    assert [v for v, _ in alone] == pytest.approx([v for v, _ in got], abs=1e-5)
    # traces of one prompt share its forward: fewer tokens than the samples hold
    units = lp_score.plan_units(
        [lp_score.split_sample(s)[0] for s in samples],
        [len(lp_score.split_sample(s)[1]) for s in samples],
        300,
    )
    assert len(units) == len(problems) < len(samples)
    # a random model: S_LP near log(vocab) (uniform prediction), well above 0
    assert 0.5 * math.log(len(tok)) < sum(v for v, _ in got) / len(got) < 2 * math.log(len(tok))


def test_prefix_tree_by_hand():
    # [1 2 3], [1 2 4], [5], [1 2 3] (a repeat): nodes in preorder 1, 2, 3, 4, 5
    tok, parent, depth, end, paths = lp_score.prefix_tree([[1, 2, 3], [1, 2, 4], [5], [1, 2, 3]])
    assert tok == [1, 2, 3, 4, 5]
    assert parent == [-1, 0, 1, 1, -1]
    assert depth == [1, 2, 3, 3, 1]
    assert end == [4, 4, 3, 4, 5]  # node 0's subtree is nodes 1..3
    assert paths == [[0, 1, 2], [0, 1, 3], [4], [0, 1, 2]]
    # nothing shared: each response in order, one after another (the plain layout)
    tok, parent, depth, end, paths = lp_score.prefix_tree([[7, 8], [9, 7]])
    assert (tok, parent, depth, end, paths) == (
        [7, 8, 9, 7],
        [-1, 0, -1, 2],
        [1, 2, 1, 2],
        [2, 2, 4, 4],
        [[0, 1], [2, 3]],
    )


def test_split_sample_needs_a_prompt():
    with pytest.raises(ValueError, match="without prompt tokens"):
        lp_score.split_sample(packing.Sample([5, 6, 7], [1, 1, 1]))
    assert lp_score.split_sample(packing.Sample([4, 5, 6, 7], [0, 1, 1, 0])) == ([4], [5, 6])


def test_shared_prefixes_score_exactly(world):
    # responses of one prompt that share their opening (and one that is a prefix of another):
    # the tree scores the shared tokens once, each S_LP still equals scoring it alone
    model, tok = load_model_and_tokenizer(world["model"], device="cpu", dtype="float32")
    problems = load_problems(Path(world["data"]) / "train.jsonl")[:3]
    pairs = []
    for p in problems:
        t = p.traces[0]
        pairs += [(paper_prompt(p), y) for y in (t, t + " Done.", t[: len(t) // 2], "So " + t)]
    samples = [packing.Sample(*packing.encode_chat(tok, q, y)) for q, y in pairs]
    got = lp_score.score_samples(model, samples, tok.pad_token_id, "cpu", score_tokens=400)
    for (q, y), s, (v, n) in zip(pairs, samples, got):
        assert n == sum(s.mask)
        assert v == pytest.approx(slp_reference(model, tok, q, y), abs=1e-5)
    split = [lp_score.split_sample(s) for s in samples]
    units = lp_score.plan_units([a for a, _ in split], [len(b) for _, b in split], 400)
    trees = lp_score.unit_trees(units, [b for _, b in split])
    assert sum(len(t[0]) for t in trees) < sum(len(b) for _, b in split)  # shared: fewer nodes


def test_distill_end_to_end(world, fake_teachers, tmp_path):
    # held-out eval on the first 2 train problems of each domain (the stand-in teachers know
    # only train prompts): each teacher's first sample is a correct world trace -> 1.0
    cfg = _cfg(
        world,
        str(tmp_path / "lp"),
        eval_data=str(Path(world["data"]) / "train.jsonl"),
        eval_limit=2,
        eval_n=1,
        eval_max_new_tokens=8,
        eval_baselines=True,
    )
    res = distill.run(cfg)
    out = Path(cfg.out)
    funnel = json.loads((out / "funnel.json").read_text())
    assert set(funnel) == {"math", "stem"}
    problems = load_problems(Path(world["data"]) / "train.jsonl")
    for d, row in funnel.items():
        # every prompt of the domain x 4 samples, the 4th cut; samples 1-3 cycle through the
        # world's correct then wrong traces: the correct ones count, repeats are duplicates
        mine = [p for p in problems if p.domain == d]
        correct = dup = 0
        for p in mine:
            pool = [*p.traces, *p.wrong_traces]
            ok = [t for t in (pool[k % len(pool)] for k in range(N_SAMPLES - 1)) if t in p.traces]
            correct, dup = correct + len(ok), dup + len(ok) - len(set(ok))
        assert row["prompts"] == len(mine) and row["sampled"] == N_SAMPLES * len(mine)
        assert row["truncated"] == len(mine)
        assert (row["correct"], row["deduplicated"]) == (correct, dup)
        assert row["kept"] > 0 and len(row["bucket_edges"]) == 1
        parts = ("over_max_len", "dropped_short", "dropped_outlier", "out_of_band", "over_quota")
        assert sum(row[k] for k in parts) + row["kept"] == correct - dup
        # the band keeps the upper half of each bucket: the kept traces' S_LP is higher
        assert row["s_lp_mean_kept"] > row["s_lp_mean"]
    selected = load_problems(res["selected"])
    assert len(selected) == sum(r["kept"] for r in funnel.values())
    for p in selected:
        assert len(p.traces) == 1 and p.meta["teacher"] == world["model"]
        assert p.meta["tokens"] >= 4 and p.meta["s_lp"] > 0 and p.meta["bucket"] in (0, 1)
    assert Path(res["model"], "config.json").exists() and Path(res["plot"]).stat().st_size > 0
    summary = Path(res["summary"]).read_text()
    assert "| math |" in summary and "Student SFT" in summary
    evals = json.loads(Path(res["eval"]).read_text())
    teacher_rows = {f"teacher {d}: {world['model']}": d for d in ("math", "stem")}
    assert list(evals) == ["start", *teacher_rows, "student"]
    for row, d in teacher_rows.items():
        assert evals[row] == {"all": 1.0, d: 1.0}
    for row in ("start", "student"):  # every domain of the eval set, avg@1 of 2 problems each
        assert set(evals[row]) == {"all", "math", "stem"}
        assert all(v in (0.0, 0.5, 1.0) for v in evals[row].values())
    assert "| model | math | stem | all |" in summary
    assert f"| teacher stem: {world['model']} | - | 1.000 | - |" in summary

    # random baseline: same candidates (the cache is reused), the same count per domain/bucket
    rnd = distill.run(_cfg(world, str(tmp_path / "lp"), select="random"))
    sel_r = load_problems(rnd["selected"])

    def per_bucket(ps):
        return sorted((p.domain, p.meta["bucket"]) for p in ps)

    assert per_bucket(sel_r) == per_bucket(selected)
    assert {p.meta["s_lp"] for p in sel_r} != {p.meta["s_lp"] for p in selected}


def test_sample_seed_shares_the_candidates_across_seeds(
    world, fake_teachers, tmp_path, monkeypatch
):
    out = tmp_path / "s"
    cands, _ = distill_candidates.load_or_build_candidates(
        _cfg(world, str(out), max_prompts=3), out
    )
    # seed 1 with sample_seed 0: the same pool, read from the cache (the teachers stay idle)
    monkeypatch.setattr(distill_candidates, "make_teacher_sampler", lambda cfg, t: 1 / 0)
    again, _ = distill_candidates.load_or_build_candidates(
        _cfg(world, str(out), max_prompts=3, seed=1, sample_seed=0), out
    )
    assert again == cands  # the same records, S_LP and lengths included
    # seed 1 alone: another prompt sample, so the teachers are asked again
    with pytest.raises(ZeroDivisionError):
        distill_candidates.load_or_build_candidates(
            _cfg(world, str(out), max_prompts=3, seed=1), out
        )


def test_mix_by_counts_and_max_len(world, fake_teachers, tmp_path):
    cfg = _cfg(world, str(tmp_path / "c"), counts={"math": 3, "stem": 2}, max_steps=1, max_len=150)
    res = distill.run(cfg)
    doms = [p.domain for p in load_problems(res["selected"])]
    assert doms.count("math") == 3 and doms.count("stem") == 2
    # traces whose prompt + trace exceed max_len are counted, not scored, never selected
    funnel = json.loads(Path(res["funnel"]).read_text())
    rows = [json.loads(x) for x in Path(cfg.out, "candidates.jsonl").read_text().splitlines()]
    over = [r for r in rows if r["length"] > 150]
    assert over and all(r["s_lp"] is None for r in over)
    assert sum(f["over_max_len"] for f in funnel.values()) == len(over)


def test_3b_recipe_distills_the_three_specialists():
    from vibethinker.recipe import load_recipe, plan

    root = Path(__file__).resolve().parents[2]
    stages = {st.name: st for st, _ in plan(load_recipe(str(root / "recipes/vibethinker-3b.yaml")))}
    cfg = stages["distill"].config
    teachers = {t["domain"]: t["model"] for t in cfg.teachers}
    assert teachers == {
        d: f"{stages[n].config.out}/final"
        for d, n in (("math", "rl_l2s"), ("code", "rl_code"), ("stem", "rl_stem"))
    }
    assert cfg.student == f"{stages['probe2'].config.out}/merged"


def test_missing_teacher_folder_names_teacher_and_domain(world, tmp_path):
    cfg = _cfg(world, str(tmp_path / "x"))
    cfg.teachers[1]["model"] = str(tmp_path / "runs" / "rl_stem" / "final")
    with pytest.raises(FileNotFoundError, match=r"rl_stem/final \(domain stem\).*not found"):
        distill.run(cfg)
    cfg = _cfg(world, str(tmp_path / "x"))
    cfg.teachers[0]["data"] = str(tmp_path / "nowhere.jsonl")
    with pytest.raises(FileNotFoundError, match=r"\(domain math\): data .*nowhere.jsonl not found"):
        distill.run(cfg)
    assert not (tmp_path / "x").exists()  # refused before anything was written


def test_data_without_the_teachers_domain(world, tmp_path, monkeypatch):
    called = []
    monkeypatch.setattr(distill_candidates, "make_teacher_sampler", lambda cfg, t: called.append(t))
    cfg = _cfg(world, str(tmp_path / "x"))
    cfg.teachers[1]["domain"] = "code"  # the second teacher: checked before the first samples
    with pytest.raises(ValueError, match=r"domain code\).*no prompt of domain 'code'"):
        distill.run(cfg)
    assert called == []


def test_selection_that_keeps_nothing(world, monkeypatch, tmp_path):
    # the stem teacher writes only wrong answers: nothing of stem survives verification
    monkeypatch.setattr(
        distill_candidates,
        "make_teacher_sampler",
        lambda cfg, t: WorldSampler(t["data"], wrong_only=t["domain"] == "stem"),
    )
    cfg = _cfg(world, str(tmp_path / "x"))
    with pytest.raises(ValueError, match=r"domain stem \(teacher .*\) keeps no trace.*correct 0"):
        distill.run(cfg)
    kept = {"math": [{"x": 1}], "stem": []}
    msgs = distill_select.check_nonempty(_cfg(world, cfg.out, on_empty_domain="warn"), kept)
    assert len(msgs) == 1 and "domain stem" in msgs[0]
    with pytest.raises(ValueError, match="nothing to train on"):
        distill_select.check_nonempty(_cfg(world, cfg.out, on_empty_domain="warn"), {"math": []})


def test_cli_with_the_hf_engine_reports_an_empty_domain(world, tmp_path, capsys):
    """The real path from the command line: the hf engine samples the (random) teacher, which
    solves nothing, so the stage stops before SFT with the teacher, domain and funnel."""
    from vibethinker.cli import main

    teachers = f"[{{model: {world['model']}, data: {world['data']}, domain: math}}]"
    rc = main(
        [
            "distill",
            f"teachers={teachers}",
            f"student={world['model']}",
            f"out={tmp_path / 'd'}",
            "n_samples=2",
            "max_prompts=3",
            "max_new_tokens=8",
            "device=cpu",
        ]
    )
    err = capsys.readouterr().err
    assert rc == 2 and "domain math (teacher" in err and "sampled 6" in err
    assert not (tmp_path / "d" / "sft").exists()


def test_openai_engine_teachers_each_on_their_server(world, tmp_path):
    """engine=openai: each teacher's own base_url; the stub servers answer with the world's
    correct traces (math) and wrong ones (stem is then empty, on_empty_domain=warn)."""
    from tests.helpers.stub_openai import StubOpenAI

    by_prompt = {paper_prompt(p): p for p in load_problems(Path(world["data"]) / "train.jsonl")}

    def hook(good: bool):
        def answer(body, path, i):
            p = by_prompt[body["messages"][-1]["content"]]
            pool = p.traces if good else p.wrong_traces
            return {"text": pool[i % len(pool)], "finish_reason": "stop"}

        return answer

    with StubOpenAI(hook=hook(True)) as math_srv, StubOpenAI(hook=hook(False)) as stem_srv:
        teachers = [
            {
                "model": "math-rl",
                "data": world["data"],
                "domain": "math",
                "base_url": math_srv.base_url,
            },
            {
                "model": "stem-rl",
                "data": world["data"],
                "domain": "stem",
                "base_url": stem_srv.base_url,
            },
        ]
        cfg = _cfg(
            world,
            str(tmp_path / "o"),
            engine="openai",
            teachers=teachers,
            max_prompts=4,
            n_samples=2,
            max_steps=1,
            on_empty_domain="warn",
        )
        res = distill.run(cfg)
        assert math_srv.requests and stem_srv.requests
    selected = load_problems(res["selected"])
    assert selected and {p.meta["teacher"] for p in selected} == {"math-rl"}
    assert "domain stem (teacher stem-rl) keeps no trace" in Path(res["summary"]).read_text()


def test_selection_filters_that_keep_nothing(world, fake_teachers, tmp_path):
    """Correct traces exist, but the selection keeps none for a domain: the error names the
    domain, its teacher and where its traces went; no SFT starts."""
    # a count of 0 for stem: stem's verified traces all go over quota
    cfg = _cfg(world, str(tmp_path / "q"), counts={"math": 3, "stem": 0})
    with pytest.raises(
        ValueError,
        match=r"domain stem \(teacher .*\) keeps no trace.*"
        r"correct [1-9]\d*.*over quota [1-9]\d*, kept 0",
    ):
        distill.run(cfg)
    assert not (tmp_path / "q" / "sft").exists()
    # every trace shorter than min_tokens: warn cannot rescue an empty mix
    cfg = _cfg(world, str(tmp_path / "q"), min_tokens=10**6, on_empty_domain="warn")
    with pytest.raises(
        ValueError,
        match=r"domain math .*dropped short [1-9]\d*.*domain stem "
        r".*nothing to train on",
    ):
        distill.run(cfg)
    assert (
        not (tmp_path / "q" / "sft").exists() and not (tmp_path / "q" / "selected.jsonl").exists()
    )
