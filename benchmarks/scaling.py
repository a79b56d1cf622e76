"""How our SFT and RL steps scale: time and peak memory vs sequence length, batch and group size G,
and the longest sequence that fits a memory budget with and without activation checkpointing.
Ours only (the peers' comparisons are sft.py and rl_step.py).

    .venv/bin/python benchmarks/scaling.py [--size 1m] [--lens 256,512,1024,2048,4096]
        [--batches 1,2,4,8] [--groups 4,8,16] [--rl-lens 256,1024] [--budget-gb 8] [--threads 2]
        [--repeats 3] [--quick] [--kinds sft,rl] [--json out.json]

Every point runs in its own process (so its peak resident memory, VmHWM, is its own), `--repeats`
times, points interleaved; we report the median and range of the step time and the peak memory.

- SFT step vs length: one optimizer step (forward + backward of the assistant-token loss, AdamW)
  on one row holding one sample of L tokens (`train.sft.train_step`: the loop's own step).
- SFT step vs batch: B rows of 512 tokens (packed rows of several samples, as the loop packs).
- RL update vs length and G: the loop's own update (`train.rl_update.update`) of one group, G rows of a
  64-token prompt plus an L-token response in one micro-batch: forward, per-token logprobs of
  the response (the LM head on response positions only), clipped surrogate with TIS weights,
  backward, AdamW. That is the whole learner side of a step with `mini_batches: 1` and no KL
  (the recipes' setting); generation is measured by sampling.py and rl_step.py, since a random
  model generating 4K tokens per row would take the whole budget on a CPU.
- Memory: the same SFT step with and without gradient checkpointing at each length; the longest
  length that fits `--budget-gb` is found by fitting peak = a + b L + c L^2 (least squares over
  the measured lengths) and solving; it is an extrapolation and printed as such.
`--batches=`, `--groups=` (empty), `--rl-g 0` and `--kinds` drop sweeps to fit a time budget.
`--size` takes the random-weight Qwen2 presets of vibethinker/models/tiny.py (1m, 5m, 30m) or a
parameter count ("100m").
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402


def _model(shared: dict, ckpt: bool):
    from vibethinker.train import policy

    return policy.load_policy(shared["model"], "cpu", ckpt)


def _time_steps(fn, steps: int) -> float:
    fn()  # warm-up
    ts = []
    for _ in range(steps):
        t0 = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts)


def point_sft(args, shared: dict, length: int, rows: int, ckpt: bool, per_row: int) -> dict:
    import torch

    from vibethinker.train import packing, policy, sft

    harness.set_threads(args.threads)
    model, tok = _model(shared, ckpt)
    V = model.config.vocab_size
    g = torch.Generator().manual_seed(0)
    k = length // per_row
    samples = []
    for _ in range(rows * per_row):
        ids = torch.randint(0, V - 1, (k,), generator=g).tolist()
        samples.append(packing.Sample(ids, [0] * (k // 4) + [1] * (k - k // 4)))
    plan = [list(range(r * per_row, (r + 1) * per_row)) for r in range(rows)]
    batch = packing.collate(samples, plan, tok.pad_token_id or 0, True)
    opt = policy.make_optimizer(model, 1e-5)  # the loops' AdamW (fused on CPU)
    model.train()

    def step():
        sft.train_step(model, [batch], "cpu")
        opt.step()
        opt.zero_grad(set_to_none=True)

    dt = _time_steps(step, args.steps)
    return {"step_s": dt, "tokens_per_s": rows * length / dt}


def point_rl(args, shared: dict, length: int, g_size: int, ckpt: bool) -> dict:
    import torch

    from vibethinker.train import policy, rl, rl_update, rollout
    from vibethinker.types import Completion

    harness.set_threads(args.threads)
    model, _ = _model(shared, ckpt)
    V = model.config.vocab_size
    gen = torch.Generator().manual_seed(0)
    prompt = 64
    p_ids = [torch.randint(0, V - 1, (prompt,), generator=gen).tolist()] * g_size  # one group
    comps = [
        Completion(
            "",
            torch.randint(0, V - 1, (length,), generator=gen).tolist(),
            [-3.0] * length,
            "length",
        )
        for _ in range(g_size)
    ]
    batch = rollout.build_batch(p_ids, comps, 0)
    adv = torch.randn(g_size, generator=gen)
    opts = rl.RLConfig(micro_batch=g_size, gradient_checkpointing=ckpt, advantage="grpo")
    opt = policy.make_optimizer(model, 1e-6)
    model.train()

    def step():  # the loop's update: one forward of the group, surrogate, backward, AdamW
        rl_update.update(model, opt, None, batch, adv, rl_update.trained_rows(adv, 0.0), opts)

    dt = _time_steps(step, args.steps)
    return {"step_s": dt, "tokens_per_s": g_size * (prompt + length) / dt}


POINTS = {"sft": point_sft, "rl": point_rl}


def add_args(ap: argparse.ArgumentParser) -> None:
    ap.add_argument("--size", default="1m")
    ap.add_argument("--lens", default="256,512,1024,2048,4096")
    ap.add_argument("--batches", default="1,2,4,8")
    ap.add_argument("--groups", default="4,8,16")
    ap.add_argument("--rl-len", type=int, default=512, help="response length of the G sweep")
    ap.add_argument("--rl-g", type=int, default=8, help="G of the length sweep (0: no RL sweep)")
    ap.add_argument("--rl-lens", default="", help="response lengths of the RL sweep (def. --lens)")
    ap.add_argument("--budget-gb", type=float, default=8.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=2, help="timed steps per point (after warm-up)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer points: lens 256,1024,4096")
    ap.add_argument("--kinds", default="sft,rl", help="which points: sft, rl or both")
    ap.add_argument(
        "--parallel",
        type=int,
        default=1,
        help="points run at once (1: one after another; more only to finish on a "
        "loaded machine: the points then share the cores)",
    )
    ap.add_argument("--json", default="")
    ap.add_argument("--point", default="", help=argparse.SUPPRESS)
    ap.add_argument("--shared", default="", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)


def fit_max_len(points: list[tuple[int, float]], budget_mb: float) -> float | None:
    """Largest L with a + bL + cL^2 <= budget (least-squares fit); None if not solvable."""
    import numpy as np

    if len(points) < 3:
        return None
    L = np.array([p[0] for p in points], float)
    y = np.array([p[1] for p in points], float)
    c, b, a = np.polyfit(L, y, 2)
    if c <= 0:
        return float((budget_mb - a) / b) if b > 0 else None
    disc = b * b - 4 * c * (a - budget_mb)
    return float((-b + disc**0.5) / (2 * c)) if disc >= 0 else None


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_args(ap)
    args = ap.parse_args(argv)
    if args.point:  # a child: one point
        kind, *vals = args.point.split(":", 1)
        shared = json.loads(Path(args.shared).read_text())
        kw = json.loads(vals[0])
        m = POINTS[kind](args, shared, **kw)
        m["peak_rss_mb"] = harness.peak_rss_mb()
        Path(args.result).write_text(json.dumps({"metrics": m, "config": kw}))
        return m
    import shutil
    import tempfile

    lens = [int(x) for x in ("256,1024,4096" if args.quick else args.lens).split(",")]
    batches = [int(x) for x in args.batches.split(",") if x]  # "" skips the batch sweep
    groups = [int(x) for x in args.groups.split(",") if x]  # "" skips the G sweep
    rl_lens = [int(x) for x in args.rl_lens.split(",") if x] or lens
    work = Path(tempfile.mkdtemp(prefix="bench_scaling_"))
    try:
        from vibethinker.data.world import generate
        from vibethinker.models.tiny import build_tiny_model

        texts = [p.prompt for p in generate(0, 100, 1, 1, ["math"], 0.55)["train"]]
        longest = max(8192, *lens, *rl_lens) + 128
        model = build_tiny_model(
            work / "model", texts, args.size, 512, 0, max_position_embeddings=longest
        )
        (work / "shared.json").write_text(json.dumps({"model": model}))
        pts: dict[str, dict] = {}
        for L in lens:
            for ck in (False, True):
                pts[f"sft len={L} ckpt={'on' if ck else 'off'}"] = (
                    "sft",
                    {"length": L, "rows": 1, "ckpt": ck, "per_row": 1},
                )
        for L in rl_lens if args.rl_g else ():  # --rl-g 0 skips the RL length sweep
            pts[f"rl len={L} G={args.rl_g}"] = (
                "rl",
                {"length": L, "g_size": args.rl_g, "ckpt": False},
            )
        for B in batches:
            pts[f"sft batch={B}x512"] = (
                "sft",
                {"length": 512, "rows": B, "ckpt": False, "per_row": 4},
            )
        for G in groups:
            pts[f"rl G={G} len={args.rl_len}"] = (
                "rl",
                {"length": args.rl_len, "g_size": G, "ckpt": False},
            )
        if args.kinds != "sft,rl":  # e.g. "rl": only the RL points
            keep = tuple(k + " " for k in args.kinds.split(","))
            pts = {k: v for k, v in pts.items() if k.startswith(keep)}
        base = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--threads",
            str(args.threads),
            "--steps",
            str(args.steps),
            "--shared",
            str(work / "shared.json"),
        ]
        raw: dict[str, list[dict]] = {k: [] for k in pts}
        t0 = time.time()
        from concurrent.futures import ThreadPoolExecutor

        def one(item):
            name, (kind, kw) = item
            res = harness.run_side([*base, "--point", f"{kind}:{json.dumps(kw)}"])
            print(
                f"  [{time.time() - t0:.0f} s] {name}: step {res['metrics']['step_s']:.3f} s, "
                f"peak {res['metrics']['peak_rss_mb']:.0f} MB",
                flush=True,
            )
            return name, res["metrics"]

        for r in range(args.repeats):
            print(f"  repeat {r + 1}/{args.repeats}", flush=True)
            with ThreadPoolExecutor(max(1, args.parallel)) as ex:
                for name, m in ex.map(one, list(pts.items())):
                    raw[name].append(m)
        table = {}
        for name, runs in raw.items():
            table[name] = {
                k: harness.summarize([x[k] for x in runs])
                for k in ("step_s", "tokens_per_s", "peak_rss_mb")
            }
        fits = {}
        for ck in ("off", "on") if "sft" in args.kinds else ():
            mem = [(L, table[f"sft len={L} ckpt={ck}"]["peak_rss_mb"]["median"]) for L in lens]
            fits[ck] = fit_max_len(mem, args.budget_gb * 1024)
        out = {
            "size": args.size,
            "threads": args.threads,
            "repeats": args.repeats,
            "machine": harness.machine(),
            "points": table,
            "max_len_fit_mb": {
                "budget_gb": args.budget_gb,
                "sft_ckpt_off": fits.get("off"),
                "sft_ckpt_on": fits.get("on"),
            },
        }
        print(
            f"\n== scaling, size {args.size}, {args.repeats} repeats, one process per point; "
            f"median (range) =="
        )
        for name, t in table.items():
            print(
                f"{name:>28}: step {harness.fmt(t['step_s'])} s, "
                f"{harness.fmt(t['tokens_per_s'])} tok/s, peak {harness.fmt(t['peak_rss_mb'])} MB"
            )
        for ck, v in fits.items():
            txt = f"{v:,.0f} tokens (fitted, extrapolated)" if v else "no fit"
            print(f"longest SFT sequence in {args.budget_gb} GB, checkpointing {ck}: {txt}")
        if args.json:
            Path(args.json).write_text(json.dumps(out, indent=1))
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
