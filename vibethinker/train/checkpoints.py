"""Saving and resuming training: a checkpoint is a plain Hugging Face folder plus
`trainer_state.pt` (optimizer, scheduler, RNG states, step and data position), so a run resumes
exactly where it stopped and every checkpoint also loads with plain transformers; under N
processes the model and optimizer are saved sharded as well (torch.distributed.checkpoint, which
reshards on load). A LoRA model is saved merged, with the adapter alone in `adapter/`.

`start_or_resume` / `rows_upto`: what the SFT and RL loops share to start a run or resume it
(refusing a checkpoint written with other run-shaping options), and their JSONL logs cut back to
the resumed step.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors import safe_open
from safetensors.torch import load_file

from vibethinker import statefile
from vibethinker.log import get_logger
from vibethinker.models import save_model_and_tokenizer
from vibethinker.train import dist
from vibethinker.train.policy import (
    is_lora,
    make_optimizer,
    make_scheduler,
    rng_state,
    seed_everything,
    set_rng_state,
)

log = get_logger("train.policy")  # the records keep their name

STATE_FILE = "trainer_state.pt"


class CheckpointError(ValueError):
    """A checkpoint that cannot be resumed from (unreadable, incomplete, non-finite weights)."""


_STEP_DIR = re.compile(r"^step-(\d+)$")


def save_hf(model: Any, tokenizer: Any, folder: str | os.PathLike) -> str:
    """Save a plain HF folder. A LoRA model is saved merged (base + adapters: loadable by
    transformers and vLLM like any checkpoint) with the adapter alone in `folder`/adapter
    (PeftModel.from_pretrained(base, folder/adapter))."""
    if dist.active():  # N processes: gather the weights (FSDP2), rank 0 writes them
        return _save_hf_gathered(model, tokenizer, folder)
    return _save_hf_local(model, tokenizer, folder)


def _save_hf_local(model: Any, tokenizer: Any, folder: str | os.PathLike) -> str:
    if not is_lora(model):
        return save_model_and_tokenizer(model, tokenizer, folder)
    model.save_pretrained(Path(folder) / ADAPTER_DIR)
    merged = copy.deepcopy(model).merge_and_unload()
    merged.config.use_cache = True
    return save_model_and_tokenizer(merged, tokenizer, folder)


ADAPTER_DIR = "adapter"


def _save_hf_gathered(model: Any, tokenizer: Any, folder: str | os.PathLike) -> str:
    """The consolidated HF folder of an FSDP2 / DDP model: every process takes part in the
    all-gather, rank 0 writes (a plain folder transformers and vLLM load)."""
    hf = dist.inner(model)
    if not dist.is_fsdp(hf):  # a replica (DDP, or not wrapped) on every process
        if dist.is_main():
            _save_hf_local(hf, tokenizer, folder)
        dist.barrier()
        return str(folder)
    sd = dist.full_state_dict(model)
    # a tied weight (lm_head = embed_tokens) is ONE parameter: save it once, as save_pretrained does
    keep = {n for n, _ in hf.named_parameters()} | {n for n, _ in hf.named_buffers()}
    sd = {k: v for k, v in sd.items() if k in keep}
    if dist.is_main():
        hf.save_pretrained = functools.partial(type(hf).save_pretrained, hf, state_dict=sd)
        try:
            save_model_and_tokenizer(hf, tokenizer, folder)
        finally:
            del hf.save_pretrained
    dist.barrier()
    return str(folder)


def step_dir(checkpoints: str | os.PathLike, step: int) -> Path:
    return Path(checkpoints) / f"step-{step:06d}"


def list_checkpoints(checkpoints: str | os.PathLike) -> list[tuple[int, Path]]:
    """(step, folder) of every complete checkpoint under `checkpoints`, by step."""
    root = Path(checkpoints)
    if not root.is_dir():
        return []
    found = []
    for d in root.iterdir():
        m = _STEP_DIR.match(d.name)
        if m and d.is_dir() and (d / "config.json").exists() and (d / STATE_FILE).exists():
            found.append((int(m.group(1)), d))
    return sorted(found)


def latest_checkpoint(checkpoints: str | os.PathLike) -> Path | None:
    found = list_checkpoints(checkpoints)
    return found[-1][1] if found else None


def save_checkpoint(
    folder: str | os.PathLike,
    model: Any,
    tokenizer: Any,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    step: int = 0,
    extra: dict[str, Any] | None = None,
) -> Path:
    """A HF folder (weights, config, tokenizer) + trainer_state.pt; written to a temporary name
    and renamed, so a crash mid-save never leaves a checkpoint that looks complete. Under N
    processes the model and optimizer are also saved sharded (`_save_sharded`)."""
    if dist.active():
        return _save_sharded(folder, model, tokenizer, optimizer, scheduler, step, extra)
    final = Path(folder)
    tmp = final.with_name(final.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    save_hf(model, tokenizer, tmp)
    state = {
        "step": step,
        "optimizer": optimizer.state_dict() if optimizer is not None else None,
        "scheduler": scheduler.state_dict() if scheduler is not None else None,
        "rng": rng_state(),
        "extra": extra or {},
    }
    torch.save(state, tmp / STATE_FILE)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    return final


SHARDED_DIR = "dcp"


def prune_checkpoints(
    checkpoints: str | os.PathLike, keep_last: int, keep_weights: bool = False
) -> list[Path]:
    """After a save, the checkpoints older than the last `keep_last` (0: none): deleted, or
    with `keep_weights` reduced to their HF weights (the optimizer state and sharded state
    removed; a trainer_state without optimizer stays, so they still list as checkpoints for
    probing). The newest `keep_last` keep everything a resume needs. Main process only.
    Returns the folders that were pruned."""
    if keep_last <= 0 or not dist.is_main():
        return []
    old = [d for _, d in list_checkpoints(checkpoints)[:-keep_last]]
    for d in old:
        if not keep_weights:
            shutil.rmtree(d)
            continue
        shutil.rmtree(d / SHARDED_DIR, ignore_errors=True)
        state = torch.load(d / STATE_FILE, map_location="cpu", weights_only=False, mmap=True)
        if state.get("optimizer") is not None:
            state = {**state, "optimizer": None, "pruned": True}
            tmp = d / (STATE_FILE + ".tmp")
            torch.save(state, tmp)
            os.replace(tmp, d / STATE_FILE)
    return old


def _save_sharded(folder, model, tokenizer, optimizer, scheduler, step, extra) -> Path:
    """N processes: model + optimizer state as a torch.distributed.checkpoint (DCP) folder,
    each process writing its own shards (`dcp/`), each process's RNG state (`rng-RANK.pt`),
    and the consolidated HF folder + trainer_state.pt (step, schedule, options) from rank 0.
    DCP reshards on load, so a checkpoint resumes under any number of processes (or one)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    final = Path(folder)
    tmp = final.with_name(final.name + ".tmp")
    if dist.is_main():
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    dist.barrier()
    msd, osd = get_state_dict(dist.inner(model), optimizer if optimizer is not None else [])
    dcp.save({"model": msd, "optim": osd}, checkpoint_id=str(tmp / SHARDED_DIR))
    torch.save(rng_state(), tmp / f"rng-{dist.rank()}.pt")
    save_hf(model, tokenizer, tmp)  # collective; rank 0 writes
    if dist.is_main():
        state = {
            "step": step,
            "optimizer": None,
            "sharded": dist.world(),
            "scheduler": scheduler.state_dict() if scheduler is not None else None,
            "rng": rng_state(),
            "extra": extra or {},
        }
        torch.save(state, tmp / STATE_FILE)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    dist.barrier()
    return final


def _load_sharded(folder: Path, model: Any, optimizer: Any) -> None:
    """Model and optimizer from a checkpoint's DCP folder, resharded to this run's processes."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    m = dist.inner(model)
    opt = optimizer if optimizer is not None else []
    msd, osd = get_state_dict(m, opt)
    target = {"model": msd, "optim": osd} if optimizer is not None else {"model": msd}
    dcp.load(target, checkpoint_id=str(folder / SHARDED_DIR))
    set_state_dict(
        m, opt, model_state_dict=target["model"], optim_state_dict=target.get("optim", {})
    )


def load_checkpoint(
    folder: str | os.PathLike,
    model: Any,
    optimizer: torch.optim.Optimizer | None = None,
    scheduler: Any | None = None,
    restore_rng: bool = True,
) -> dict[str, Any]:
    """Load weights into `model` (in place) and the trainer state; returns the state dict
    (`step`, `extra`, ...)."""
    folder = Path(folder)
    if (folder / SHARDED_DIR).is_dir():  # written by N processes: reshard to this run
        _load_sharded(folder, model, optimizer)
        optimizer = None  # loaded with the model
    elif dist.is_wrapped(model):
        raise ValueError(
            f"{folder}: a one-process checkpoint cannot resume under torchrun "
            "(it holds no sharded state); resume it in one process, or use a new `out`"
        )
    elif is_lora(model):  # only the adapters trained: resume them (the base is the start model)
        from peft import set_peft_model_state_dict

        adapter = folder / ADAPTER_DIR / "adapter_model.safetensors"
        set_peft_model_state_dict(model, read_weights(adapter))
    else:
        _load_full_weights(folder, model)
    state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=False)
    if optimizer is not None and state.get("optimizer") is not None:
        optimizer.load_state_dict(state["optimizer"])
    if scheduler is not None and state.get("scheduler") is not None:
        scheduler.load_state_dict(state["scheduler"])
    own_rng = folder / f"rng-{dist.rank()}.pt"
    if restore_rng and own_rng.exists():
        set_rng_state(torch.load(own_rng, map_location="cpu", weights_only=False))
    elif restore_rng and state.get("rng"):
        set_rng_state(state["rng"])
    return state


def _load_full_weights(folder: Path, model: Any) -> None:
    shards = sorted(folder.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"{folder}: no safetensors weights")
    weights: dict[str, torch.Tensor] = {}
    for s in shards:
        weights.update(read_weights(s))
    missing, unexpected = model.load_state_dict(weights, strict=False)
    if getattr(model.config, "tie_word_embeddings", False):  # saved once, shared in memory
        missing = [k for k in missing if not k.startswith("lm_head.")]
    if missing or unexpected:
        raise RuntimeError(f"{folder}: missing {missing[:5]}, unexpected {unexpected[:5]}")


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of one safetensors file; a file that is cut short, or holds NaN or infinite
    values (bit rot, or a run that diverged before the check existed), is an error naming it."""
    try:
        weights = load_file(str(path))
    except Exception as e:
        raise CheckpointError(f"{path}: unreadable weights ({e})") from e
    bad = [k for k, t in weights.items() if t.is_floating_point() and not torch.isfinite(t).all()]
    if bad:
        raise CheckpointError(
            f"{path}: non-finite (NaN or infinite) values in {len(bad)} tensor(s), e.g. "
            f"{bad[0]}; the file is damaged or the run diverged: resume from an earlier "
            "checkpoint (delete this one) or start over"
        )
    return weights


def start_or_resume(
    model: Any,
    out: Path,
    *,
    seed: int,
    lr: float,
    final_lr: float,
    warmup_frac: float,
    weight_decay: float,
    total: int,
    options: dict[str, Any],
    resume: bool = True,
) -> tuple[torch.optim.Optimizer, Any, int]:
    """(optimizer, LR schedule over `total` optimizer steps, the step to start at): seeded, then
    the latest checkpoint under out/checkpoints loaded when `resume` (weights, optimizer,
    schedule, RNG). `options` are the run-shaping options the caller saves in each checkpoint
    (extra["options"]); a checkpoint written with other ones is refused (`check_same_run`)."""
    out.mkdir(parents=True, exist_ok=True)
    seed_everything(seed)
    optimizer = make_optimizer(model, lr, weight_decay)
    scheduler = make_scheduler(optimizer, total, lr, final_lr, warmup_frac)
    found = list_checkpoints(out / "checkpoints") if resume else []
    if not found:
        return optimizer, scheduler, 0
    last = resumable_checkpoint(found, options, total)
    state = load_checkpoint(last, model, optimizer, scheduler)
    log.info("resumed from %s at step %d/%d", last, int(state["step"]), total)
    return optimizer, scheduler, int(state["step"])


def resumable_checkpoint(
    found: list[tuple[int, Path]], options: dict[str, Any], total: int
) -> Path:
    """The newest checkpoint of `found` that resumes exactly: its trainer state readable and
    holding the optimizer and schedule, its weight files whole. A newer one that is not is
    skipped with a warning naming it and why (a truncated file, a pruned or hand-made
    trainer_state), so the run resumes from the previous complete one; when none is complete
    the resume is refused (a fresh optimizer or a restarted schedule would silently change the
    run). A checkpoint written with other run-shaping options is refused (`check_same_run`)."""
    problems = []
    for _, folder in reversed(found):
        why = _incomplete(folder)
        if why is None:
            # options first (mmap: no copy of the optimizer state), so a checkpoint of another
            # shape (a changed LoRA rank) is refused with its reason, not a size mismatch
            saved = _read_state(folder)
            check_same_run(folder, saved.get("extra") or {}, options, total)
            if problems:
                log.warning(
                    "not resuming from %s; resuming from the previous complete checkpoint %s",
                    "; ".join(problems),
                    folder,
                )
            return folder
        problems.append(f"{folder} ({why})")
    more = f" (and {len(problems) - 3} older ones)" if len(problems) > 3 else ""
    raise CheckpointError(
        f"no checkpoint under {found[-1][1].parent} resumes exactly: "
        f"{'; '.join(problems[:3])}{more}. "
        "Resuming would restart the optimizer or the LR schedule; delete the checkpoints folder "
        "(or use a new out=) to start over"
    )


def _read_state(folder: Path) -> dict[str, Any]:
    return torch.load(folder / STATE_FILE, map_location="cpu", weights_only=False, mmap=True)


def _incomplete(folder: Path) -> str | None:
    """Why `folder` cannot resume a run exactly, or None when it can."""
    try:
        state = _read_state(folder)
    except Exception as e:  # truncated or damaged: any unpickling error
        return f"{STATE_FILE} is unreadable: {type(e).__name__}: {str(e)[:120]}"
    sharded = bool(state.get("sharded")) and (folder / SHARDED_DIR).is_dir()
    missing = [k for k in ("optimizer", "scheduler") if state.get(k) is None]
    missing = [k for k in missing if not (k == "optimizer" and sharded)]
    if missing:
        pruned = " (pruned by keep_last)" if state.get("pruned") else ""
        return f"its {STATE_FILE} has no {' or '.join(missing)} state{pruned}"
    for f in sorted(folder.glob("*.safetensors")) + sorted(
        folder.glob(ADAPTER_DIR + "/*.safetensors")
    ):
        try:
            with safe_open(str(f), "pt"):
                pass
        except Exception as e:  # a file cut short (disk full, a copy interrupted)
            return f"{f.name} is unreadable: {str(e)[:120]}"
    return None


def rows_upto(path: Path, step: int) -> list[dict[str, Any]]:
    """The rows of a JSONL log (metrics, evals) with "step" <= `step`; the file is rewritten to
    hold only those, so a resumed run appends after them (no rows of the lost steps)."""
    rows = []
    if dist.is_main():  # N processes: rank 0 owns the files and sends the rows to the others
        # a torn last line (a crash or a full disk mid-append) is dropped with a warning
        rows = [r for r in statefile.read_jsonl(path) if r.get("step", 0) <= step]
        statefile.write_text(path, "".join(json.dumps(r) + "\n" for r in rows))
    return dist.broadcast_object(rows)


def check_same_run(
    folder: Path, extra: dict[str, Any], options: dict[str, Any], total: int
) -> None:
    """Resuming a checkpoint written with other options would silently mix two runs: refuse when
    a saved option differs from `options` (keys the checkpoint lacks are not compared) or the
    run's total optimizer steps changed."""
    saved = {k: v for k, v in (extra.get("options") or {}).items() if k in options}
    diff = {k: (saved[k], options[k]) for k in saved if saved[k] != options[k]}
    steps = extra.get("total_steps")
    if diff or (steps is not None and steps != total):
        raise ValueError(
            f"{folder} was written by a run with other options {diff or ''} (total steps "
            f"{steps} vs {total}); use a new `out` or delete its checkpoints"
        )
