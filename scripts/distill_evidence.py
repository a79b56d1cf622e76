"""Evidence for stage 4: learning-potential vs random selection, and the distilled
student against the specialists and SFT stage 1, held-out, over several seeds.

    .venv/bin/python scripts/distill_evidence.py [--run /tmp/demo4] [--out /tmp/11/evidence] \
        [--seeds 0 1 2] [--pool-from /tmp/demo4/distill]

`--run` is a finished run dir of recipes/tiny.yaml (data/, sft1/final, probe_merge/merged,
rl_l2s/final, rl_code/final, rl_stem/final). The distill settings are the tiny recipe's
(`distill` stage), read from the recipe with this run dir, so the evidence is about what the
demo runs.

1. One candidate pool (sample_seed 0): every teacher samples its domain's prompts, the verifier
   keeps correct answers, S_LP is scored under the student (`distill` stage, cached in
   <out>/pool). `--pool-from` starts from the pool the run's own distill stage built (its
   candidates.jsonl; refused unless it was made with these very settings and sample seed 0).
2. Per seed and arm (select=lp, select=random): the same pool, the arm's selection, the same SFT
   settings (the random arm keeps as many traces per domain and length bucket as LP, so both
   train on the same count for the same steps), then the student's held-out Pass@1 per domain.
   The seed moves the random draw, SFT data order and evaluation sampling.
3. Per seed: SFT stage 1's model and the student's start on every domain, each specialist on its
   own domain, and the last teacher (in the recipe rl_stem, the last RL stage before distill:
   the model the pipeline would hold without stage 4) on every domain, on the same held-out
   problems with the same sampling.

Prints a markdown table (mean, sample standard deviation and range over the seeds per cell) and
writes it with the raw numbers to <out>/evidence.md and <out>/evidence.json. Runs resume: a
finished arm (its eval.json) is read back, not retrained.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def recipe_config(run: Path, recipe: Path):
    """The tiny recipe's `distill` config with this run dir."""
    from vibethinker.recipe import load_recipe, plan

    stages = {st.name: st for st, _ in plan(load_recipe(str(recipe), {"run_dir": str(run)}))}
    if "distill" not in stages:
        raise SystemExit(f"{recipe} has no `distill` stage")
    return stages["distill"].config


def cell(xs: list[float]) -> str:
    """mean +- sample sd [min-max] over seeds."""
    if not xs:
        return "-"
    sd = statistics.stdev(xs) if len(xs) > 1 else 0.0
    return f"{statistics.mean(xs):.3f} +- {sd:.3f} [{min(xs):.3f}-{max(xs):.3f}]"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--run", default="/tmp/demo4", help="a finished tiny-recipe run dir")
    ap.add_argument("--recipe", default=str(ROOT / "recipes" / "tiny.yaml"))
    ap.add_argument("--out", default="/tmp/11/evidence")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--eval-n", type=int, help="samples per eval problem (default: the recipe's)")
    ap.add_argument("--eval-limit", type=int, help="eval problems per domain (default: recipe's)")
    ap.add_argument(
        "--part",
        choices=["all", "arms", "baselines"],
        default="all",
        help="run only the student arms or only the baselines (parallel processes "
        "on the same --out; a final run with --part all collects them)",
    )
    ap.add_argument("--pool-from", help="a distill out dir whose candidates.jsonl to start from")
    args = ap.parse_args()

    from vibethinker.engines import make_sampler
    from vibethinker.log import setup_logging
    from vibethinker.stages import distill, distill_candidates

    setup_logging(quiet=True)
    run, out = Path(args.run), Path(args.out)
    base = recipe_config(run, Path(args.recipe))
    base = dataclasses.replace(
        base, sample_seed=0, eval_baselines=False, device="cpu", on_empty_domain="warn"
    )
    if args.eval_n:
        base.eval_n = args.eval_n
    if args.eval_limit:
        base.eval_limit = args.eval_limit
    sft1 = str(run / "sft1" / "final")
    print(
        f"run {run}; student {base.student}; teachers "
        + ", ".join(f"{t['domain']}: {t['model']}" for t in base.teachers)
        + f"; n_samples {base.n_samples}, max_prompts {base.max_prompts}; eval: first "
        f"{base.eval_limit} per domain, avg@{base.eval_n}; seeds {args.seeds}",
        flush=True,
    )
    t0 = time.time()
    pool = out / "pool"
    distill.check_config(base)
    settings = json.loads(json.dumps(dataclasses.asdict(base), default=str))
    mark = out / "settings.json"
    if mark.exists() and (was := json.loads(mark.read_text())) != settings:
        diff = {k: (was.get(k), v) for k, v in settings.items() if was.get(k) != v}
        raise SystemExit(
            f"{out} was started with other settings (was, now): {diff}; use another "
            "--out, or pin the recipe it was started with (--recipe)"
        )
    out.mkdir(parents=True, exist_ok=True)
    mark.write_text(json.dumps(settings, indent=1) + "\n")
    if args.pool_from and not (pool / "candidates.jsonl").exists():
        src = Path(args.pool_from)
        key = json.loads((src / "candidates.json").read_text())["key"]
        want = json.loads(json.dumps(distill_candidates.candidates_key(base)))
        if key != want:
            raise SystemExit(
                f"--pool-from {src}: its pool was made with other settings ({key} vs {want})"
            )
        pool.mkdir(parents=True, exist_ok=True)
        for f in ("candidates.jsonl", "candidates.json"):
            shutil.copy(src / f, pool / f)
        print(f"candidate pool copied from {src}", flush=True)
    have = pool / "candidates.json"
    if have.exists() and json.loads(have.read_text())["key"] != json.loads(
        json.dumps(distill_candidates.candidates_key(base))
    ):  # the recipe changed under a half-done --out: never mix two pools in one table
        raise SystemExit(
            f"{pool} was built with other distill settings than {args.recipe} "
            "has now; use another --out (or pin the recipe with --recipe)"
        )
    distill_candidates.load_or_build_candidates(dataclasses.replace(base, out=str(pool)), pool)
    print(f"candidate pool ready ({time.time() - t0:.0f} s)", flush=True)

    results: dict[str, dict[str, list[float]]] = {}
    selection: dict[str, dict] = {}

    def add(row: str, metrics: dict[str, float]) -> None:
        for k, v in metrics.items():
            results.setdefault(row, {}).setdefault(k, []).append(v)

    probs = None
    for seed in args.seeds:
        for arm in ("lp", "random") if args.part != "baselines" else ():
            d = out / f"{arm}_s{seed}"
            cfg = dataclasses.replace(base, out=str(d), seed=seed, select=arm)
            if not (d / "eval.json").exists():
                d.mkdir(parents=True, exist_ok=True)
                for f in ("candidates.jsonl", "candidates.json"):
                    shutil.copy(pool / f, d / f)
                distill.run(cfg)
            add(f"student ({arm})", json.loads((d / "eval.json").read_text())["student"])
            funnel = json.loads((d / "funnel.json").read_text())
            selection.setdefault(arm, {})[seed] = {
                dom: {"kept": r["kept"], "s_lp_kept": r.get("s_lp_mean_kept")}
                for dom, r in funnel.items()
            }
            print(
                f"seed {seed} {arm}: {results[f'student ({arm})']['all'][-1]:.3f} all "
                f"({time.time() - t0:.0f} s)",
                flush=True,
            )
        cfg = dataclasses.replace(base, seed=seed)
        probs = distill.eval_problems(cfg)
        if args.part == "arms":
            continue
        every = [p for ps in probs.values() for p in ps]
        base_file = out / f"baselines_s{seed}.json"
        if base_file.exists():
            rows = json.loads(base_file.read_text())
        else:
            rows = {"sft1": distill.pass1(cfg, make_sampler("hf", model=sft1, device="cpu"), every)}
            rows["start"] = (
                rows["sft1"]
                if Path(cfg.student) == Path(sft1)
                else distill.pass1(cfg, make_sampler("hf", model=cfg.student, device="cpu"), every)
            )
            last = cfg.teachers[-1]
            rows["last"] = distill.pass1(
                cfg, distill_candidates.make_teacher_sampler(cfg, last), every
            )
            for t in cfg.teachers[:-1]:
                rows[f"specialist {t['domain']}"] = distill.pass1(
                    cfg, distill_candidates.make_teacher_sampler(cfg, t), probs[t["domain"]]
                )
            rows[f"specialist {last['domain']}"] = {last["domain"]: rows["last"][last["domain"]]}
            base_file.write_text(json.dumps(rows, indent=1) + "\n")
        for k, v in rows.items():
            add(
                k,
                v if not k.startswith("specialist") else {d: x for d, x in v.items() if d != "all"},
            )
        print(f"seed {seed} baselines done ({time.time() - t0:.0f} s)", flush=True)

    doms = sorted(probs or [])
    order = [
        "sft1",
        "start",
        "last",
        *[f"specialist {t['domain']}" for t in base.teachers],
        "student (lp)",
        "student (random)",
    ]
    names = {
        "sft1": f"SFT stage 1 (`{sft1}`)",
        "start": f"student start (`{base.student}`)",
        "last": f"last teacher, every domain (`{base.teachers[-1]['model']}`)",
    }
    lines = ["| model | " + " | ".join(doms) + " | all |", "|---|" + "---:|" * (len(doms) + 1)]
    for row in order:
        r = results.get(row, {})
        lines.append(
            f"| {names.get(row, row)} | "
            + " | ".join(cell(r.get(d, [])) for d in [*doms, "all"])
            + " |"
        )
    lp, rnd = results.get("student (lp)", {}), results.get("student (random)", {})
    if lp and rnd:  # paired by seed: the two arms of one seed share the pool and the SFT budget
        diff = {d: [a - b for a, b in zip(lp.get(d, []), rnd.get(d, []))] for d in [*doms, "all"]}
        lines.append(
            "| LP - random, paired by seed | "
            + " | ".join(cell(diff[d]) for d in [*doms, "all"])
            + " |"
        )
    sel = [
        "",
        "Traces kept per domain (same count for both arms by construction) and mean S_LP "
        "of the kept traces (nats/token), seed 0:",
        "",
    ]
    for arm in ("lp", "random"):
        s0 = selection.get(arm, {}).get(args.seeds[0], {})
        sel.append(
            f"- {arm}: "
            + "; ".join(f"{d} {v['kept']} (S_LP {v['s_lp_kept']})" for d, v in s0.items())
        )
    text = "\n".join(lines + sel) + "\n"
    print(text)
    out.mkdir(parents=True, exist_ok=True)
    (out / "evidence.md").write_text(text)
    (out / "evidence.json").write_text(
        json.dumps(
            {"results": results, "selection": selection, "run": str(run), "seeds": args.seeds},
            indent=1,
        )
        + "\n"
    )
    print(f"wall {time.time() - t0:.0f} s; {out / 'evidence.md'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
