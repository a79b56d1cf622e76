"""The one way every benchmark here compares us with a peer.

- Each side runs in its own fresh process (`python <script> --side NAME ...`): no thread pool,
  allocator, import or cache of one side colours the other.
- At least 3 repeats; the order of the sides rotates every repeat (ours, peer / peer, ours / ...),
  so a drift of the machine's load hits both sides alike.
- Shared inputs (a tiny model, a dataset) are built once by the parent in a scratch folder and
  read by every side (`prepare`), so no side times their construction.
- Each side returns {"metrics": {...}, "config": {...}}; the harness adds the process's peak
  resident memory (`peak_rss_mb`) and its start-up-excluded wall time. The report gives, per side
  and metric, the median and the range (min-max) over repeats, the ratio of the medians and the
  range of the per-repeat ratios, and prints each side's exact configuration.

A benchmark script is a few functions:

    def add_args(ap): ...                       # its own options
    def prepare(args, work: Path) -> dict: ...  # shared inputs, JSON-able (paths)
    def side_ours(args, shared) -> dict: ...    # {"metrics": ..., "config": ...}
    def side_peer(args, shared) -> dict: ...
    if __name__ == "__main__":
        harness.main(__doc__, add_args, prepare, {"ours": side_ours, "peer": side_peer},
                     headline=("tokens_per_s", "higher"))

and `python script.py --repeats 5 --json out.json` runs it. Other engineers' benchmarks may use
`compare()` directly with any command lines.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

Side = Callable[[argparse.Namespace, dict], dict]


def say(msg: str) -> None:
    print(msg, flush=True)


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), MiB; 0 where /proc is missing."""
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def machine() -> dict:
    """Where the figures were taken: cores, load average, date (UTC)."""
    load = os.getloadavg() if hasattr(os, "getloadavg") else (0.0, 0.0, 0.0)
    return {
        "cpus": os.cpu_count(),
        "load_avg_1m": round(load[0], 2),
        "date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
        "nice": os.nice(0) if hasattr(os, "nice") else 0,
    }


def summarize(values: Sequence[float]) -> dict:
    """Median and range of one metric over repeats."""
    v = [float(x) for x in values]
    return {"median": statistics.median(v), "min": min(v), "max": max(v), "n": len(v)}


def fmt(s: dict, digits: int = 3) -> str:
    """'median (min-max)'."""
    return f"{s['median']:.{digits}g} ({s['min']:.{digits}g}-{s['max']:.{digits}g})"


def run_side(cmd: list[str], timeout: float | None = None) -> dict:
    """Run one side's command line; it writes its result JSON to the path given as --result."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        path = f.name
    try:
        t0 = time.perf_counter()
        proc = subprocess.run([*cmd, "--result", path], timeout=timeout)
        wall = time.perf_counter() - t0
        if proc.returncode:
            raise RuntimeError(f"side failed (exit {proc.returncode}): {' '.join(cmd)}")
        res = json.loads(Path(path).read_text())
    finally:
        Path(path).unlink(missing_ok=True)
    res.setdefault("metrics", {})["process_wall_s"] = wall
    return res


def compare(
    commands: dict[str, list[str]],
    repeats: int = 3,
    headline: tuple[str, str] | None = None,
    timeout: float | None = None,
    log: Callable[[str], None] = say,
) -> dict:
    """Run every side's command `repeats` times, rotating the order each repeat; aggregate.

    `commands`: side name -> command line (each run gets `--result PATH` appended and must write
    {"metrics": {name: number}, "config": {...}} there). `headline`: (metric, "higher"|"lower"),
    the figure whose ratio (first side / each other side) is the benchmark's claim.
    """
    names = list(commands)
    runs: dict[str, list[dict]] = {n: [] for n in names}
    for r in range(repeats):
        order = names[r % len(names) :] + names[: r % len(names)]
        for n in order:
            log(f"  repeat {r + 1}/{repeats}: {n} ...")
            res = run_side(commands[n], timeout)
            runs[n].append(res)
            if headline:
                log(f"    {n}: {headline[0]} = {res['metrics'].get(headline[0])}")
    out: dict[str, Any] = {"repeats": repeats, "machine": machine(), "sides": {}}
    for n in names:
        keys = [k for k, v in runs[n][0]["metrics"].items() if isinstance(v, (int, float))]
        out["sides"][n] = {
            "config": runs[n][0].get("config", {}),
            "metrics": {k: summarize([x["metrics"][k] for x in runs[n]]) for k in keys},
            "raw": [x["metrics"] for x in runs[n]],
        }
    if headline:
        key, better = headline
        first = names[0]
        out["headline"] = {"metric": key, "better": better, "ratios": {}}
        for n in names[1:]:
            a = [x["metrics"][key] for x in runs[first]]
            b = [x["metrics"][key] for x in runs[n]]
            paired = [x / y for x, y in zip(a, b) if y]
            out["headline"]["ratios"][f"{first}/{n}"] = {
                "of_medians": statistics.median(a) / statistics.median(b),
                "paired": summarize(paired) if paired else None,
            }
    return out


def report(name: str, res: dict, log: Callable[[str], None] = say) -> None:
    """Print a result: each side's configuration, then median (range) of every metric."""
    m = res["machine"]
    log(
        f"\n== {name}: {res['repeats']} repeats, each side in its own process, order rotating; "
        f"{m['cpus']} cpus, load {m['load_avg_1m']}, {m['date_utc']} UTC =="
    )
    for n, s in res["sides"].items():
        log(f"-- {n} config: {json.dumps(s['config'], sort_keys=True, default=str)}")
    for n, s in res["sides"].items():
        log(f"-- {n}: " + "; ".join(f"{k} {fmt(v)}" for k, v in s["metrics"].items()))
    h = res.get("headline")
    if h:
        for pair, r in h["ratios"].items():
            p = r["paired"]
            rng = f", per-repeat {fmt(p)}" if p else ""
            log(
                f"== {name} {h['metric']} ratio {pair}: {r['of_medians']:.3g} of medians{rng} "
                f"({h['better']} is better)"
            )


def main(
    doc: str | None,
    add_args: Callable[[argparse.ArgumentParser], None],
    prepare: Callable[[argparse.Namespace, Path], dict] | None,
    sides: dict[str, Side],
    headline: tuple[str, str] | None = None,
    argv: list[str] | None = None,
    script: str | None = None,
) -> dict:
    """Command line of a benchmark script: the parent (no --side) prepares the shared inputs and
    runs `compare`; a child (--side NAME --shared JSON --result PATH) runs one side once."""
    ap = argparse.ArgumentParser(description=(doc or "").splitlines()[0] if doc else None)
    add_args(ap)
    ap.add_argument("--repeats", type=int, default=3, help="runs of each side (>= 3 for claims)")
    ap.add_argument("--sides", default=",".join(sides), help="comma list of sides to run")
    ap.add_argument("--json", default="", help="write the aggregated result here")
    ap.add_argument("--side", default="", help=argparse.SUPPRESS)
    ap.add_argument("--shared", default="", help=argparse.SUPPRESS)
    ap.add_argument("--result", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.side:  # a child: one side, once
        shared = json.loads(Path(args.shared).read_text()) if args.shared else {}
        t0 = time.perf_counter()
        res = sides[args.side](args, shared)
        res.setdefault("metrics", {})["side_wall_s"] = time.perf_counter() - t0
        res["metrics"]["peak_rss_mb"] = peak_rss_mb()
        if args.result:
            Path(args.result).write_text(json.dumps(res, default=str))
        else:
            print(json.dumps(res, indent=1, default=str))
        return res
    script = str(Path(script or sys.argv[0]).resolve())
    base = [a for a in (argv if argv is not None else sys.argv[1:])]
    work = Path(tempfile.mkdtemp(prefix="bench_", dir=os.environ.get("BENCH_TMP")))
    try:
        shared = prepare(args, work) if prepare else {}
        spath = work / "shared.json"
        spath.write_text(json.dumps(shared, default=str))
        chosen = [s for s in args.sides.split(",") if s]
        cmds = {
            n: [sys.executable, script, *base, "--side", n, "--shared", str(spath)] for n in chosen
        }
        res = compare(cmds, args.repeats, headline if len(chosen) > 1 else None)
        res["shared"] = {k: v for k, v in shared.items() if not str(v).startswith(str(work))}
        res["command"] = " ".join([Path(script).name, *base])
        report(Path(script).stem, res)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(res, indent=1, default=str))
        return res
    finally:
        import shutil

        shutil.rmtree(work, ignore_errors=True)


def tiny_world_model(work: Path, n_problems: int, size: str = "1m", domains=None) -> dict:
    """Shared input of the training benchmarks: the embedded world's problems and a random-weight
    Qwen2 of `size` ("1m" default; e.g. "30m", "100m") with a tokenizer trained on them."""
    from vibethinker.data.world import generate
    from vibethinker.evaluate import paper_prompt
    from vibethinker.models.tiny import build_tiny_model

    doms = list(domains or ["math", "code", "stem", "instruct"])
    splits = generate(0, n_problems, 1, 1, doms, 0.55)
    pairs = [(paper_prompt(p), t) for p in splits["train"] for t in p.traces or []]
    model = build_tiny_model(
        work / "model", [p + " " + t for p, t in pairs], size, 512, 0, max_position_embeddings=8192
    )
    (work / "pairs.json").write_text(json.dumps(pairs))
    return {"model": str(model), "pairs": str(work / "pairs.json"), "size": size}


def set_threads(n: int) -> int:
    import torch

    if n:
        torch.set_num_threads(n)
    return torch.get_num_threads()
