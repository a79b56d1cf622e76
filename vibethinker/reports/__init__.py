"""Presentation: the markdown summaries and plots the stages write, one module per kind.

A stage module holds the stage's logic; what it shows a reader (summary.md, the .png plots)
is drawn here from the numbers the stage computed. `reports` sits between `train` and
`stages` in the layer map (docs/README.md): it may read the lower layers' records and
statistics, and the stages, the run report, the recipe runner and the ablation runner call it.
"""

from __future__ import annotations

from typing import Any


def pyplot() -> Any:
    """matplotlib.pyplot on the file-only Agg back-end (no display needed). matplotlib is
    imported here, on the first plot, not at module import: it takes about a second."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fmt(x: Any, nd: int = 3) -> str:
    """A table cell: `-` for None, a float to `nd` decimals, anything else as str."""
    return "-" if x is None else (f"{x:.{nd}f}" if isinstance(x, float) else str(x))
