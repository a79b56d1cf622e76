"""A run folder that is self-contained and movable: paths in its manifest relative to the folder.

The manifest records, per stage, `dir` (the stage's output folder relative to the run folder, or
absolute when it lies outside) and `outputs` written the same way, plus the run folder as it was
named at the time (`run_dir`, `run_dir_abs`). Readers (`vibethinker status`, the report, the
runner deciding what to skip) resolve a stage's folder from the run folder they are given, so the
same answers come from any working directory and after the folder was moved or copied.

Stage configs are kept as the recipe resolved them (other tools read them); when the runner
compares a recorded config with the recipe's, both have their run folder prefix replaced by
`${run_dir}` (`portable`), so a moved run folder does not look like a changed config.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from vibethinker.config import ConfigError

RUN_DIR_TOKEN = "${run_dir}"
LOCK_FILE = ".lock"


def inside(child: str | Path, parent: str | Path) -> bool:
    """Whether `child` is `parent` or lies under it (both resolved)."""
    try:
        Path(child).resolve().relative_to(Path(parent).resolve())
        return True
    except ValueError:
        return False


def relative(path: str, run_dir: str | Path) -> str:
    """`path` relative to the run folder when it lies inside it, else absolute ("" stays "")."""
    if not path:
        return path
    p = Path(path).resolve()
    if inside(p, run_dir):
        return os.path.relpath(p, Path(run_dir).resolve())
    return str(p)


def _prefixes(run_dir: str, run_dir_abs: str | None) -> list[str]:
    forms = {str(run_dir).rstrip("/"), str(run_dir_abs or Path(run_dir).resolve()).rstrip("/")}
    return sorted((f for f in forms if f), key=len, reverse=True)


def portable(value: Any, run_dir: str, run_dir_abs: str | None = None) -> Any:
    """`value` (a config dict, list or string) with the run folder prefix of every string
    replaced by `${run_dir}`: the form in which two records of one run compare equal wherever
    the folder lives."""
    if isinstance(value, dict):
        return {k: portable(v, run_dir, run_dir_abs) for k, v in value.items()}
    if isinstance(value, list):
        return [portable(v, run_dir, run_dir_abs) for v in value]
    if not isinstance(value, str):
        return value
    for prefix in _prefixes(run_dir, run_dir_abs):
        if value == prefix or value.startswith(prefix + "/"):
            return RUN_DIR_TOKEN + value[len(prefix) :]
    return value


def relocate(value: Any, old: str, old_abs: str | None, new: str) -> Any:
    """`value` with the old run folder prefix replaced by the new run folder: the recorded
    configs of a moved or copied run, rewritten when a run adopts it, so that its next run
    still compares them as unchanged."""
    if isinstance(value, dict):
        return {k: relocate(v, old, old_abs, new) for k, v in value.items()}
    if isinstance(value, list):
        return [relocate(v, old, old_abs, new) for v in value]
    moved = portable(value, old, old_abs)
    if isinstance(moved, str) and moved.startswith(RUN_DIR_TOKEN):
        return str(new).rstrip("/") + moved[len(RUN_DIR_TOKEN) :]
    return value


def read_manifest(run_dir: str | Path) -> dict[str, Any]:
    """The run's manifest.json; one that is not valid JSON, or holds no `stages` mapping, is an
    error naming the file with what to do (never read as an empty run: `run` would then start
    every stage over, and `status` would replace the report with an empty one)."""
    path = Path(run_dir) / "manifest.json"
    advice = (
        "restore it from a copy if you have one, or move it aside to start the run over "
        "(the stage folders are re-made as their stages run)"
    )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        msg = f"{path}: the run's manifest is damaged (not valid JSON: {e}); {advice}"
        raise ConfigError(msg) from None
    if not isinstance(data, dict) or not isinstance(data.get("stages"), dict):
        raise ConfigError(f"{path}: the run's manifest is damaged (no `stages` mapping); {advice}")
    return data


def stage_dir(run_dir: str | Path, rec: dict[str, Any]) -> Path | None:
    """A stage's output folder, found from the run folder: its recorded `dir` (relative to the
    run folder), or for a manifest written before `dir` existed its config's `out` (absolute as
    is; relative: the longest tail of it that exists under the run folder, then as given)."""
    run = Path(run_dir)
    if rec.get("dir"):
        return run / rec["dir"]
    out = (rec.get("config") or {}).get("out")
    if not out:
        return None
    p = Path(out)
    if p.is_absolute():
        return p
    for i in range(len(p.parts)):
        cand = run.joinpath(*p.parts[i:])
        if cand.exists():
            return cand
    return p if p.exists() else run / p.name


def output_path(run_dir: str | Path, value: str) -> str:
    """A recorded output (relative to the run folder or absolute) as a path to open."""
    if not value or Path(value).is_absolute():
        return value
    return str(Path(run_dir) / value)


# ----------------------------------------------------------------------------- locks


def hold_lock(path: str | Path, busy: str) -> Any:
    """An exclusive lock on the file `path` (created), held until the returned file is closed
    (or the process ends, however it ends: the kernel drops a flock with its holder). A lock
    held elsewhere is refused at once with `busy` (ConfigError), never waited for."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    f = open(path, "a")  # noqa: SIM115 - held by the caller
    try:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.close()
        raise ConfigError(busy) from None
    return f


def lock_path(out: str | Path) -> Path:
    """Where the lock of a stage's output lives: `.<name>.lock` beside it (beside, not inside:
    a stage that fails early leaves no folder behind, and clearing the folder keeps the lock;
    the file stays after the run, since removing a lock file races with its next user)."""
    p = Path(out)
    return p.with_name(f".{p.name}.lock")


@contextlib.contextmanager
def output_lock(out: str | Path, what: str) -> Iterator[None]:
    """Hold the lock of a stage's output (`lock_path`) while it runs: a second process writing
    there (two `vibethinker sft ... out=S`, two single recipe-stage runs) is refused, rather
    than both writing one folder or one deleting the other's."""
    lock = hold_lock(
        lock_path(out),
        f"{out} is in use by another vibethinker process ({what} writing there); wait for it "
        "to finish or choose another out=",
    )
    try:
        yield
    finally:
        lock.close()
