"""CLR evidence on the embedded world (docs/EVIDENCE.md, "CLR (test-time)").

CLR vs maj@k vs avg@n at K = 8 and 16 (and 32 with --ks 8,16,32), Pass@1 over R repeats with its
spread, the tokens each spends, for the three claim verifiers (model, symbolic, both), on a
model that has learned the CLR skills, plus that model's held-out claim-verification accuracy
and extraction parse rate.

    # 1. the CLR-skilled model: a short SFT continuation of a finished demo's final model on the
    #    world's CLR examples (+ a small replay of math/STEM traces against forgetting)
    .venv/bin/python scripts/clr_evidence.py train --start /tmp/demo1/rl_stem/final --out /tmp/13
    # 2. the comparison (one sampling / extraction / verification pass; variants derived)
    .venv/bin/python scripts/clr_evidence.py compare --model /tmp/13/sft_clr/final --out /tmp/13
    # or straight on a recipe's final model, whose sft1 trained on the CLR examples (tiny.yaml)
    .venv/bin/python scripts/clr_evidence.py compare --model /tmp/demo4/rl_instruct/final \
        --data /tmp/demo4/data/eval.jsonl --out /tmp/13/demo4 --plot docs/clr_demo4.png

The three variants share the samples, the claims and the model's verdicts (one `both` run asks
the model about every claim and computes every symbolic verdict); `model` and `symbolic` are
derived from it (stages/clr_phases.py `as_variant`), so their differences are paired, and `symbolic`
is charged only the verification tokens it would have spent.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

VARIANTS = ("model", "symbolic", "both")


def world_data(out: Path, seed: int = 0) -> Path:
    """The world's splits with the CLR examples (train) and labelled stem claims (all splits)."""
    from vibethinker.data.io import save_problems
    from vibethinker.data.world import generate
    from vibethinker.types import DOMAINS

    data = out / "data"
    if not (data / "eval.jsonl").exists():
        splits = generate(seed, domains=(*DOMAINS, "clr"))
        data.mkdir(parents=True, exist_ok=True)
        for name, probs in splits.items():
            save_problems(data / f"{name}.jsonl", probs)
    return data


def train(args: argparse.Namespace) -> None:
    """SFT continuation on the world's CLR examples + a replay of `replay` math/STEM problems
    (their first trace each) so that solving is not forgotten."""
    from vibethinker.data.io import load_problems, save_problems
    from vibethinker.stages import get
    from vibethinker.train.sft_config import SFTConfig

    out = Path(args.out)
    data = world_data(out)
    train_set = load_problems(data / "train.jsonl")
    clr = [p for p in train_set if p.domain == "clr"]
    solve = [p for p in train_set if p.domain in ("math", "stem")]
    replay = random.Random(0).sample(solve, args.replay)
    for p in replay:
        p.traces = p.traces[:1]
    save_problems(out / "sft_clr_data.jsonl", clr + replay)
    print(f"{len(clr)} CLR examples + {len(replay)} replay problems", flush=True)
    cfg = SFTConfig(
        model=args.start,
        data=str(out / "sft_clr_data.jsonl"),
        out=str(out / "sft_clr"),
        epochs=args.epochs,
        global_batch=16,
        micro_batch=8,
        max_len=256,
        lr=1e-3,
        final_lr=1e-5,
        save_every=20,
        device="cpu",
    )
    print(get("sft").fn(cfg))


def compare(args: argparse.Namespace) -> None:
    from vibethinker.reports.clr import write_clr_outputs
    from vibethinker.stages.clr import ClrConfig, run_phases
    from vibethinker.stages.clr_phases import as_variant

    out = Path(args.out) / "clr_evidence"
    data = Path(args.data) if args.data else world_data(Path(args.out)) / "eval.jsonl"
    ks = sorted(int(k) for k in args.ks.split(","))
    cfg = ClrConfig(
        model=args.model,
        data=str(data),
        out=str(out / "both"),
        k=ks[-1],
        repeats=args.repeats,
        maj_pool=args.maj_pool,
        claim_verifier="both",
        domains=["math", "stem"],
        limit=args.limit,
        max_new_tokens=args.max_new_tokens,
        judge_max_new_tokens=args.judge_max_new_tokens,
        claim_eval=args.claim_eval,
        seed=args.seed,
        device="cpu",
        workers=1,
    )
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.verify_in_threads:  # a loaded host: see the option's help
        from vibethinker.verifiers import batch

        batch.MODES["math"] = "thread"
        batch.STARTUP_TIMEOUT_S = max(batch.STARTUP_TIMEOUT_S, 600.0)
    t0, c0 = time.time(), cpu_seconds()
    problems, trajs, counters, meta = run_phases(cfg)
    wall, cpu = time.time() - t0, cpu_seconds() - c0
    summaries = {}
    for name in VARIANTS:
        tv, cv = (trajs, counters) if name == "both" else as_variant(trajs, counters, name, cfg.m)
        paths = write_clr_outputs(
            out / name, problems, tv, cfg.k, cfg.repeats, cv, {**meta, "claim_verifier": name}
        )
        summaries[name] = json.loads(Path(paths["summary"]).read_text())
    text = report(summaries, ks, cfg, wall, cpu, meta.get("seconds", {}))
    (out / "evidence.md").write_text(text)
    if args.plot:
        print("plot:", plot_variants(summaries, args.plot, cfg))
    print(text)


def cpu_seconds() -> float:
    """CPU seconds of this process and its finished children (verifier workers)."""
    import resource

    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def plot_variants(summaries: dict, path: str, cfg) -> str:
    """Accuracy against tokens per problem: CLR@k of each claim verifier, maj@k, avg@n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2), dpi=100)
    for name, mark in zip(VARIANTS, "oDv"):
        rows = summaries[name]["comparison"]["rows"]
        ax.plot(
            [r["clr_tokens"] for r in rows],
            [r["clr"] for r in rows],
            f"{mark}-",
            label=f"CLR@k, {name} verifier",
        )
    comp = summaries["both"]["comparison"]
    curve = comp["maj_curve"]
    ax.plot([c["tokens"] for c in curve], [c["accuracy"] for c in curve], "s--", label="maj@k")
    ax.plot([comp["avg"]["tokens"]], [comp["avg"]["accuracy"]], "^", label="avg@n (one sample)")
    for r in comp["rows"]:
        ax.annotate(f"k={r['k']}", (r["clr_tokens"], r["clr"]), fontsize=7)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("tokens per problem (CLR: sampling + extraction + verification)")
    ax.set_ylabel("Pass@1 of the selected answer")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    n = summaries["both"]["problems"]
    ax.set_title(f"CLR vs maj@k, K={cfg.k}, R={cfg.repeats}, {n} held-out problems", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
    return path


def report(summaries: dict, ks: list[int], cfg, wall: float, cpu: float, phases: dict) -> str:
    base = summaries["both"]
    c = base["counters"]
    judge = base["judge"]
    ce = base.get("claim_eval") or {}
    doms = {d: v["problems"] for d, v in base["domains"].items()}
    lines = [
        f"Model `{cfg.model}`; {base['problems']} held-out problems ({doms}); K up to {cfg.k}, "
        f"R = {cfg.repeats} repeats on disjoint samples, M = {cfg.m}; sampling T = 1.0, top-p "
        f"0.95, {cfg.max_new_tokens} new tokens; judge replies up to "
        f"{cfg.judge_max_new_tokens}; maj pool {base['pool']} samples per problem. "
        f"Wall {wall:.0f} s, {cpu:.0f} CPU-seconds (CPU only, shared host), by phase (wall s): "
        f"{ {k: round(v) for k, v in phases.items()} }.",
        "",
        "Accuracy: Pass@1 of the selected answer, mean over the R repeats +- std over repeats. "
        "Tokens per problem: CLR = sampled + extraction + verification (replies and prompts); "
        "generated = without the judge prompts; maj@k' = majority vote over the largest k' "
        "samples whose tokens fit CLR@k's (all tokens).",
        "",
        "| verifier | k | CLR@k | tokens | generated | maj@k (same samples) | tokens | k' "
        "| maj@k' (equal tokens) | avg@n | tokens |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in VARIANTS:
        for r in summaries[name]["comparison"]["rows"]:
            if r["k"] not in ks:
                continue
            cap = " (cap)" if r["maj_budget_capped"] else ""
            lines.append(
                f"| {name} | {r['k']} | {r['clr']:.3f} +- {r['clr_spread']:.3f} | "
                f"{r['clr_tokens']:.0f} | {r['clr_generated_tokens']:.0f} | {r['maj']:.3f} +- "
                f"{r['maj_spread']:.3f} | {r['maj_tokens']:.0f} | {r['maj_budget_k']}{cap} | "
                f"{r['maj_at_budget']:.3f} +- {r['maj_at_budget_spread']:.3f} | {r['avg']:.3f} | "
                f"{summaries[name]['comparison']['avg']['tokens']:.0f} |"
            )
    lines += ["", "Per domain at k = K:", "", "| verifier | domain | CLR | maj | avg |"]
    lines.append("|---|---|---|---|---|")
    for name in VARIANTS:
        for d, v in summaries[name]["domains"].items():
            lines.append(
                f"| {name} | {d} | {v[f'clr@{cfg.k}']:.3f} | {v[f'maj@{cfg.k}']:.3f} "
                f"| {v['avg']:.3f} |"
            )
    decided = {
        n: {k[len("decided_by_") :]: v for k, v in s["counters"].items() if "decided_by" in k}
        for n, s in summaries.items()
    }
    lines += [
        "",
        f"The model as its judge: extraction parse rate {judge.get('extraction_parse_rate', 0):.3f}"
        f" ({c.get('extractions', 0)} extractions), extracted answer = the trajectory's own in "
        f"{judge.get('extracted_answer_agreement', 0):.3f}; held-out claim-verification accuracy "
        f"{ce.get('accuracy', {}).get('all', float('nan')):.3f} on {ce.get('claims', 0)} labelled "
        f"claims ({', '.join(f'{k} {v:.3f}' for k, v in ce.get('accuracy', {}).items())}; "
        f"{ce.get('unparseable', 0)} unparseable).",
        f"Claims decided by path: {decided}; checkable claims {c.get('claims_checkable', 0)} of "
        f"{c.get('claims', 0)}; model and symbolic verdicts disagree on "
        f"{c.get('model_symbolic_disagree', 0)}.",
        f"Counters (both): {json.dumps({k: v for k, v in sorted(c.items())})}",
        "",
        "Command: `.venv/bin/python scripts/clr_evidence.py compare "
        + " ".join(sys.argv[2:])
        + "`",
    ]
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="the CLR-skilled model (SFT continuation)")
    t.add_argument("--start", default="/tmp/demo1/rl_stem/final")
    t.add_argument("--out", default="/tmp/13")
    t.add_argument("--replay", type=int, default=60)
    t.add_argument("--epochs", type=int, default=3)
    c = sub.add_parser("compare", help="CLR vs maj@k vs avg@n, three claim verifiers")
    c.add_argument("--model", default="/tmp/13/sft_clr/final")
    c.add_argument("--out", default="/tmp/13")
    c.add_argument("--data", default="", help="eval JSONL (default: the world's, seed 0)")
    c.add_argument("--ks", default="8,16")
    c.add_argument("--repeats", type=int, default=2)
    c.add_argument("--maj-pool", type=int, default=32)
    c.add_argument("--limit", type=int, default=20)
    c.add_argument("--max-new-tokens", type=int, default=64)
    c.add_argument("--judge-max-new-tokens", type=int, default=40)
    c.add_argument("--claim-eval", type=int, default=200)
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--plot", default="", help="also write the accuracy-vs-tokens PNG here")
    c.add_argument("--threads", type=int, default=0, help="torch CPU threads (0: torch's default)")
    c.add_argument(
        "--verify-in-threads",
        action="store_true",
        help="grade math samples in threads of this process, not in worker processes (the same "
        "verifier; a non-numeric answer still gets a guarded worker, whose start-up limit is "
        "raised to 600 s): on a heavily loaded host a fresh worker can miss its 60 s start-up "
        "limit again and again, every miss grading a sample as a timeout",
    )
    args = ap.parse_args()
    (train if args.cmd == "train" else compare)(args)


if __name__ == "__main__":
    main()
