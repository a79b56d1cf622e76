"""The worker of one arm x seed: `python -m vibethinker.ablate --one STUDY ARM SEED [key=value ...]`
(what `run_study` starts per arm x seed)."""

from __future__ import annotations

import sys

from vibethinker.ablate import run_one
from vibethinker.config import parse_overrides
from vibethinker.log import setup_logging

if __name__ == "__main__":
    if sys.argv[1:2] != ["--one"] or len(sys.argv) < 5:
        sys.exit("usage: python -m vibethinker.ablate --one STUDY ARM SEED [key=value ...]")
    setup_logging(quiet=True)
    run_one(sys.argv[2], parse_overrides(sys.argv[5:]), sys.argv[3], int(sys.argv[4]))
