"""CPU threads that do not spin: OpenMP's wait policy for a laptop that is doing other things.

PyTorch's CPU kernels run on an OpenMP team (libgomp in the Linux wheels), one thread per core by
default. With the default wait policy a thread that reaches the end of a parallel region first
spins, burning its core, waiting for the others. On a 2-core machine with one other busy process
(a browser tab), one of the two threads is descheduled, and its partner spins through whole
scheduler slices waiting for it: every one of the thousands of small parallel regions of a step
pays that. `OMP_WAIT_POLICY=PASSIVE` makes waiting threads sleep instead (see
scripts/thread_cliff.py and docs/EVIDENCE.md, "CPU threads and a busy machine", for the
measured SFT step times with and without a competing process).

`configure()` runs at the start of the CLI, before torch is imported (libgomp reads the
variable once, when it loads). A value the user set (`OMP_WAIT_POLICY=ACTIVE`) is kept, and
`VIBETHINKER_WAIT_POLICY=default` leaves OpenMP's own default (fastest on a machine nothing else
uses).
"""

from __future__ import annotations

import os
import sys

WAIT_POLICY = "PASSIVE"


def configure(environ: dict[str, str] | None = None) -> str:
    """Set OMP_WAIT_POLICY (unless set) before OpenMP loads; returns the policy in effect."""
    env = os.environ if environ is None else environ
    if env.get("VIBETHINKER_WAIT_POLICY", "") == "default":
        return env.get("OMP_WAIT_POLICY", "default")
    if "torch" in sys.modules and environ is None and "OMP_WAIT_POLICY" not in env:
        return "default (torch was loaded first)"
    env.setdefault("OMP_WAIT_POLICY", WAIT_POLICY)
    return env["OMP_WAIT_POLICY"]
