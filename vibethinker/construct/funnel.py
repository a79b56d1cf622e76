"""The construction funnel: how many queries (or traces) enter and leave each step, per domain,
and why each drop happened. Plain counters, saved in the stage's progress file so that a resumed
run continues the counts."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

# (step, unit) in pipeline order; a step's "in" is what reached it, its "out" what passed it.
STEPS: tuple[tuple[str, str], ...] = (
    ("seeds", "queries"),
    ("expand", "queries"),
    ("judge", "queries"),
    ("decontam_query", "queries"),
    ("sample", "queries"),
    ("vote", "queries"),
    ("code_tests", "queries"),
    ("correct", "traces"),
    ("multipath", "traces"),
    ("repetition", "traces"),
    ("decontam_trace", "queries"),
    ("kept", "queries"),
    ("passed", "records"),  # pass_domains, on_bad_seed=pass: copied unchanged
    ("decontam_file", "records"),  # mode=decontaminate and `files`: finished records, no teacher
)


class Funnel:
    def __init__(self, state: dict[str, Any] | None = None):
        state = state or {}
        self.io: dict[str, dict[str, list[int]]] = defaultdict(dict)  # domain -> step -> [in, out]
        for d, steps in state.get("io", {}).items():
            self.io[d] = {s: list(v) for s, v in steps.items()}
        self.drops: dict[str, dict[str, int]] = defaultdict(dict)  # "domain/step" -> reason -> n
        for k, v in state.get("drops", {}).items():
            self.drops[k] = dict(v)

    def step(self, domain: str, step: str, n_in: int, n_out: int) -> None:
        io = self.io[domain].setdefault(step, [0, 0])
        io[0] += n_in
        io[1] += n_out

    def drop(self, domain: str, step: str, reason: str, n: int = 1) -> None:
        d = self.drops[f"{domain}/{step}"]
        d[reason] = d.get(reason, 0) + n

    def state(self) -> dict[str, Any]:
        return {"io": {d: dict(s) for d, s in self.io.items()}, "drops": dict(self.drops)}

    def table(self) -> str:
        """Markdown: one row per step, `in -> out` per domain and in total."""
        domains = sorted(self.io)
        head = "| step | unit | " + " | ".join(domains) + " | all |"
        rows = [head, "|" + "---|" * (len(domains) + 3)]
        for step, unit in STEPS:
            cells, tin, tout, seen = [], 0, 0, False
            for d in domains:
                if step in self.io[d]:
                    i, o = self.io[d][step]
                    cells.append(f"{i} -> {o}")
                    tin, tout, seen = tin + i, tout + o, True
                else:
                    cells.append("")
            if seen:
                rows.append(f"| {step} | {unit} | " + " | ".join(cells) + f" | {tin} -> {tout} |")
        return "\n".join(rows)

    def drop_lines(self) -> list[str]:
        return [
            f"- {k}: " + ", ".join(f"{r} {n}" for r, n in sorted(v.items()))
            for k, v in sorted(self.drops.items())
            if v
        ]
