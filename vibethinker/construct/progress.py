"""The construct stage's progress record (progress.json): where a resumed run picks up, and the
counters it had reached, written after every finished chunk."""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Progress:
    seeds_done: int = 0  # seeds before this index are finished (their records are written)
    bytes: int = 0  # size of train.jsonl after the last finished chunk (a half chunk is cut)
    bad_seeds: int = 0  # seeds dropped without supervision or unreadable
    funnel: dict[str, Any] | None = None  # Funnel.state()
    eval_hits: dict[str, int] = field(default_factory=dict)  # eval item id -> queries dropped
    planted: dict[str, int] = field(default_factory=dict)  # the world teacher's planted copies
    lengths: dict[str, dict[str, int]] = field(default_factory=dict)  # domain -> chars bin -> n
    difficulty: dict[str, dict[str, int]] = field(default_factory=dict)  # domain -> p bin -> n

    @classmethod
    def load(cls, path: Path) -> Progress:
        """The saved record, or a fresh one when `path` does not exist; unknown keys of an
        older file are ignored."""
        if not path.exists():
            return cls()
        data = json.loads(path.read_text())
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in names})

    def save(self, path: Path) -> None:
        """Written to a temporary file and renamed: a crash leaves the old record or the new."""
        tmp = path.with_name(path.name + ".tmp")
        tmp.write_text(json.dumps(dataclasses.asdict(self), indent=1, sort_keys=True))
        os.replace(tmp, path)
