"""State files a rerun reads (filter caches, run records, metrics logs): written atomically, read
forgivingly.

A write goes to a temporary file in the same folder, is flushed to disk (fsync) and renamed over
the old one: a crash, a kill or a full disk leaves the old file or the new one, never half of
one. A read of a JSON state file that is empty or corrupt anyway (written by an older version,
or by hand) warns, naming the file, and returns None: the caller recomputes what it held, as if
it were absent. A JSONL log (one row per step, appended as training goes) loses at most its last
line to a crash: a torn last line is dropped with a warning; a bad line before it is an error
naming the file and the line, since rows in the middle are not lost by a crash.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from pathlib import Path
from typing import Any

# the package's logger by name: `log` is a sibling of this layer, not importable from here
log = logging.getLogger("vibethinker.statefile")


def write_text(path: str | os.PathLike, text: str) -> None:
    """Replace `path` with `text` atomically (temporary file, fsync, rename). A failed write
    (a full disk) leaves the old file as it was and names `path` in its error."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise OSError(
            e.errno, f"{path}: could not write it ({e.strerror or e}); the old file is unchanged"
        ) from e
    _sync_dir(path.parent)


def _sync_dir(folder: Path) -> None:
    """The rename itself on disk (best effort: some filesystems refuse a directory fsync)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_json(path: str | os.PathLike, obj: Any) -> None:
    """`obj` as indented JSON, atomically (`write_text`)."""
    write_text(path, json.dumps(obj, indent=2, default=str) + "\n")


def read_json(path: str | os.PathLike) -> Any | None:
    """The JSON in `path`; None when it is absent, or (with a warning naming it) empty or not
    valid JSON: the caller then recomputes it as if it were absent."""
    path = Path(path)
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as e:
        size = path.stat().st_size
        what = "empty" if size == 0 else f"not valid JSON ({e})"
        log.warning("%s is %s; treating it as absent (it is recomputed)", path, what)
        return None


def read_jsonl(path: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows of a JSONL log ([] when absent). A torn last line (a crash or a full disk in
    the middle of an append) is dropped with a warning; a bad line before it is an error that
    names the file and the line."""
    path = Path(path)
    if not path.exists():
        return []
    lines = path.read_bytes().split(b"\n")
    rows = []
    for i, raw in enumerate(lines, 1):
        if not raw.strip():
            continue
        try:
            rows.append(json.loads(raw.decode("utf-8")))
        except (ValueError, UnicodeDecodeError) as e:
            if all(not x.strip() for x in lines[i:]):
                log.warning("%s: line %d is torn (%s); dropping it", path, i, e)
                break
            raise ValueError(
                f"{path}:{i}: not a JSON row ({e}); fix or delete that line to resume"
            ) from None
    return rows
