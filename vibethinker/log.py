"""Logging, progress bars and experiment tracking, shared by every stage.

`--quiet` (or VIBETHINKER_QUIET=1) turns progress bars off and logs only warnings to the console;
the run's log file (set by the recipe runner) always gets INFO.

`make_tracker(report_to, out, name, config)`: the training stages' `report_to` option, as in TRL
and verl: "none" (the default), "tensorboard" (event files in out/tensorboard), "wandb" (offline
unless WANDB_API_KEY is set or WANDB_MODE says otherwise; files in out/wandb), "trackio" (its
local store), or a comma list. Each per-step metrics row (the same row as metrics.jsonl) goes to
every tracker; a named tracker whose package is missing fails at the start of the stage.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

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


# ----------------------------------------------------------------------------- tracking

LogFn = Callable[[dict[str, float], int], None]


def _tensorboard(out: Path, name: str, config: dict[str, Any]) -> tuple[LogFn, Callable]:
    try:
        from torch.utils.tensorboard import SummaryWriter
    except ImportError as e:
        raise ImportError("report_to=tensorboard needs `pip install tensorboard`") from e
    writer = SummaryWriter(log_dir=str(out / "tensorboard"))
    writer.add_text("config", "\n".join(f"    {k}: {v}" for k, v in config.items()))

    def log(row: dict[str, float], step: int) -> None:
        for k, v in row.items():
            writer.add_scalar(k, v, step)
        writer.flush()

    return log, writer.close


def _wandb(out: Path, name: str, config: dict[str, Any]) -> tuple[LogFn, Callable]:
    try:
        import wandb
    except ImportError as e:
        raise ImportError("report_to=wandb needs `pip install wandb`") from e
    mode = os.environ.get("WANDB_MODE") or (
        "online" if os.environ.get("WANDB_API_KEY") else "offline"
    )
    (out / "wandb").mkdir(parents=True, exist_ok=True)
    run = wandb.init(
        project=os.environ.get("WANDB_PROJECT", "vibethinker"),
        name=name,
        dir=str(out),
        config=config,
        mode=mode,
        reinit="finish_previous",
    )
    return (lambda row, step: run.log(row, step=step)), run.finish


def _trackio(out: Path, name: str, config: dict[str, Any]) -> tuple[LogFn, Callable]:
    try:
        import trackio
    except ImportError as e:
        raise ImportError("report_to=trackio needs `pip install trackio`") from e
    run = trackio.init(
        project=os.environ.get("TRACKIO_PROJECT", "vibethinker"), name=name, config=config
    )
    return (lambda row, step: run.log(row, step=step)), run.finish


TRACKERS: dict[str, Callable[[Path, str, dict[str, Any]], tuple[LogFn, Callable]]] = {
    "tensorboard": _tensorboard,
    "wandb": _wandb,
    "trackio": _trackio,
}


class Tracker:
    """The trackers of one stage run: `log(row, step)` sends a metrics row's numbers to each,
    `close()` ends them. With report_to "none" both do nothing."""

    def __init__(self, backends: list[tuple[str, LogFn, Callable]]):
        self.backends = backends

    @property
    def names(self) -> list[str]:
        return [b[0] for b in self.backends]

    def log(self, row: dict[str, Any], step: int) -> None:
        nums = {
            k: float(v)
            for k, v in row.items()
            if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"
        }
        for _, fn, _ in self.backends:
            fn(nums, step)

    def close(self) -> None:
        for _, _, close in self.backends:
            close()
        self.backends = []


def parse_report_to(report_to: str | list[str] | None) -> list[str]:
    """Names in `report_to`: "none", "" or None -> []; "tensorboard,wandb" or a list -> both."""
    names = report_to if isinstance(report_to, list) else str(report_to or "").split(",")
    names = [n.strip().lower() for n in names if n.strip() and n.strip().lower() != "none"]
    unknown = [n for n in names if n not in TRACKERS]
    if unknown:
        raise ValueError(f"report_to: unknown {unknown}; known: none, {', '.join(TRACKERS)}")
    return names


def make_tracker(
    report_to: str | list[str] | None,
    out: str | os.PathLike,
    name: str,
    config: dict[str, Any] | None = None,
) -> Tracker:
    """Open the trackers named in `report_to` for a stage writing to `out` (run `name`)."""
    backends = []
    for n in parse_report_to(report_to):
        log_fn, close = TRACKERS[n](Path(out), name, dict(config or {}))
        backends.append((n, log_fn, close))
    return Tracker(backends)


def progress(it: Iterable[T], desc: str = "", total: int | None = None, **kw) -> Iterator[T]:
    """A tqdm bar on stderr that respects --quiet; use it on every loop a user waits for."""
    return iter(tqdm(it, desc=desc, total=total, disable=_state["quiet"], leave=False, **kw))


def progress_bar(total: int, initial: int = 0, desc: str = "") -> tqdm:
    """A manual tqdm bar (`update`, `set_postfix`, `close`) that respects --quiet (then every call
    on it does nothing): for loops that resume part-way, like the training loops."""
    return tqdm(total=total, initial=initial, desc=desc, disable=_state["quiet"], leave=False)
