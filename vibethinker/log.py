"""Logging and progress bars, shared by every stage.

`--quiet` (or VIBETHINKER_QUIET=1) turns progress bars off and logs only warnings to the console;
the run's log file (set by the recipe runner) always gets INFO.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterable, Iterator
from typing import TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")
LOGGER_NAME = "vibethinker"
_state = {"quiet": os.environ.get("VIBETHINKER_QUIET", "") not in ("", "0")}


def get_logger(name: str = "") -> logging.Logger:
    return logging.getLogger(f"{LOGGER_NAME}.{name}" if name else LOGGER_NAME)


def setup_logging(quiet: bool = False, log_file: str | None = None) -> None:
    """Console handler (INFO, or WARNING when quiet) and an optional INFO log file.

    Calling it again replaces the handlers it installed before (one run dir at a time)."""
    _state["quiet"] = quiet or _state["quiet"]
    if _state["quiet"]:  # libraries' own bars too (transformers' save/load, hub, tqdm users)
        os.environ["TQDM_DISABLE"] = "1"
        os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    root = logging.getLogger(LOGGER_NAME)
    root.setLevel(logging.INFO)
    root.propagate = False
    for h in [h for h in root.handlers if getattr(h, "_vibethinker", False)]:
        root.removeHandler(h)
        h.close()
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s", "%H:%M:%S")
    console = logging.StreamHandler(sys.stderr)
    console.setLevel(logging.WARNING if _state["quiet"] else logging.INFO)
    handlers: list[logging.Handler] = [console]
    if log_file:
        os.makedirs(os.path.dirname(os.path.abspath(log_file)), exist_ok=True)
        handlers.append(logging.FileHandler(log_file))
    for h in handlers:
        h.setFormatter(fmt)
        h._vibethinker = True  # type: ignore[attr-defined]
        root.addHandler(h)


def is_quiet() -> bool:
    return _state["quiet"]


def progress(it: Iterable[T], desc: str = "", total: int | None = None, **kw) -> Iterator[T]:
    """A tqdm bar on stderr that respects --quiet; use it on every loop a user waits for."""
    return iter(tqdm(it, desc=desc, total=total, disable=_state["quiet"], leave=False, **kw))
