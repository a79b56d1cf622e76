"""Merging Hugging Face checkpoints on disk: `merge_checkpoints` writes the weighted average
(algo/merge.py) of N folders as one HF folder.

It streams tensor by tensor through safetensors: each input is opened with `safe_open`
(memory-mapped, nothing loaded up front), one tensor name at a time is read from every input,
averaged in fp32 and written to the output shard being built; a shard is flushed to disk when it
reaches `shard_bytes`. Peak memory is therefore about one output shard plus one tensor per input,
not N models. Inputs must share the architecture (same tensor names and shapes).
benchmarks/merge_memory.py measures it (BENCHMARKS.md: 4 inputs of 64 MB add 1.14x one model
with a single output shard, 0.47x with 16 MB shards).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch

from vibethinker.algo.merge import average, normalise_weights

WEIGHTS_INDEX = "model.safetensors.index.json"
# Files copied from the first input: config, tokenizer, chat template, generation config.
_COPY_SKIP = (".safetensors", WEIGHTS_INDEX, "trainer_state.pt", ".bin", ".pt", ".pth")


def weight_files(folder: str | os.PathLike) -> dict[str, Path]:
    """Tensor name -> the safetensors file of `folder` that holds it."""
    folder = Path(folder)
    index = folder / WEIGHTS_INDEX
    if index.exists():
        mapping = json.loads(index.read_text())["weight_map"]
        return {k: folder / v for k, v in mapping.items()}
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"{folder}: no safetensors weights to merge")
    from safetensors import safe_open

    out: dict[str, Path] = {}
    for f in files:
        with safe_open(str(f), framework="pt") as h:
            out.update({k: f for k in h.keys()})
    return out


def merge_checkpoints(
    folders: Sequence[str | os.PathLike],
    out_dir: str | os.PathLike,
    weights: Sequence[float] | None = None,
    shard_bytes: int = 2 * 1024**3,
    dtype: torch.dtype | None = None,
) -> str:
    """Write sum_i w_i * theta_i of `folders` to `out_dir` as a HF folder; returns its path.

    Averaging runs in fp32 and the result is stored in each tensor's input dtype (or `dtype`).
    Config, tokenizer and generation config are copied from the first folder.
    """
    from safetensors import safe_open
    from safetensors.torch import save_file

    w = normalise_weights(weights, len(folders))
    maps = [weight_files(f) for f in folders]
    names = list(maps[0])
    for f, m in zip(folders[1:], maps[1:]):
        if set(m) != set(names):
            diff = sorted(set(m) ^ set(names))[:5]
            raise ValueError(f"{f}: tensor names differ from {folders[0]} (e.g. {diff})")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for old in list(out.glob("*.safetensors")) + [out / WEIGHTS_INDEX]:
        old.unlink(missing_ok=True)
    if any(out.resolve() == Path(f).resolve() for f in folders):
        raise ValueError(f"merge: the output {out} is one of the inputs")

    def tensor(path: Path, name: str) -> torch.Tensor:
        # Opened per read: a file stays mapped only while one tensor is copied out of it, so the
        # resident set never holds the N inputs (mapped pages count in RSS while mapped).
        with safe_open(str(path), framework="pt") as h:
            return h.get_tensor(name)

    shards: list[dict[str, torch.Tensor]] = [{}]
    size = 0
    shard_names: list[str] = []
    weight_map: dict[str, str] = {}

    def flush() -> None:
        nonlocal size
        name = f"model-{len(shard_names) + 1:05d}.safetensors"
        save_file(shards[-1], str(out / name), metadata={"format": "pt"})
        shard_names.append(name)
        weight_map.update({k: name for k in shards[-1]})
        shards[-1] = {}
        size = 0

    for name in names:
        merged = average((tensor(m[name], name) for m in maps), w, dtype)  # one input at a time
        nbytes = merged.numel() * merged.element_size()
        if shards[-1] and size + nbytes > shard_bytes:
            flush()
        shards[-1][name] = merged
        size += nbytes
    if shards[-1]:
        flush()
    if len(shard_names) == 1:
        os.replace(out / shard_names[0], out / "model.safetensors")
    else:
        total = sum((out / s).stat().st_size for s in shard_names)
        index = {"metadata": {"total_size": total}, "weight_map": weight_map}
        (out / WEIGHTS_INDEX).write_text(json.dumps(index, indent=2) + "\n")
    first = Path(folders[0])
    for f in first.iterdir():
        if f.is_file() and not f.name.endswith(_COPY_SKIP) and f.name != WEIGHTS_INDEX:
            shutil.copy2(f, out / f.name)
    return str(out)
