"""Peak memory of merging checkpoints (probe_merge): extra resident memory the merge adds, against
the size of one model, for 4 checkpoints of 64 MB, with one output shard and with 16 MB shards.
The merge runs in its own process (its VmHWM is the figure).

    .venv/bin/python benchmarks/merge_memory.py
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


_PEAK_SCRIPT = r"""
import json, sys, torch
from vibethinker.train.merge import merge_checkpoints
def rss(key):
    for line in open("/proc/self/status"):
        if line.startswith(key):
            return int(line.split()[1]) * 1024
torch.zeros(1)  # allocator warm
base = rss("VmRSS:")
merge_checkpoints(sys.argv[1:-2], sys.argv[-2], shard_bytes=int(sys.argv[-1]))
print(json.dumps({"base": base, "peak": rss("VmHWM:")}))
"""


def measure_merge_peak(folders: list[Path], out: Path, shard_bytes: int) -> int:
    """Peak resident memory the merge adds over the process baseline, in bytes (own process)."""
    import subprocess

    cmd = [sys.executable, "-c", _PEAK_SCRIPT, *map(str, folders), str(out), str(shard_bytes)]
    res = subprocess.run(cmd, capture_output=True, text=True, check=True)
    r = json.loads(res.stdout.strip().splitlines()[-1])
    return r["peak"] - r["base"]


def bench_merge(tmp: Path, n: int = 4, mb_per_model: int = 64) -> dict:
    import torch
    from safetensors.torch import save_file

    tensors = mb_per_model // 4
    folders = []
    for i in range(n):
        d = tmp / f"ckpt{i}"
        d.mkdir()
        g = torch.Generator().manual_seed(i)
        save_file(
            {f"w{j}": torch.randn(1024, 1024, generator=g) for j in range(tensors)},
            str(d / "model.safetensors"),
        )
        (d / "config.json").write_text("{}")
        folders.append(d)
    model_bytes = tensors * 4 * 1024 * 1024
    one = measure_merge_peak(folders, tmp / "merged1", 1 << 40)
    small = measure_merge_peak(folders, tmp / "merged2", 16 << 20)
    mb = 2**20
    return {
        "checkpoints": n,
        "model_mb": model_bytes / mb,
        "peak_mb_one_shard": round(one / mb, 1),
        "peak_mb_16mb_shards": round(small / mb, 1),
        "ratio_one_shard": round(one / model_bytes, 3),
        "ratio_16mb_shards": round(small / model_bytes, 3),
    }


if __name__ == "__main__":
    tmp = Path(tempfile.mkdtemp(prefix="bench_merge_"))
    try:
        m = bench_merge(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        f"merge of {m['checkpoints']} x {m['model_mb']:.0f} MB: peak +{m['peak_mb_one_shard']}"
        f" MB ({m['ratio_one_shard']:.2f} x one model) with one output shard, "
        f"+{m['peak_mb_16mb_shards']} MB ({m['ratio_16mb_shards']:.2f} x) with 16 MB shards"
    )
    print(json.dumps(m))
