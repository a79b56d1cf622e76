"""The reward layer: `verify(problem, response) -> Score`, one plain function per domain.

`VERIFIERS` maps a Problem's domain to its verifier. `verify` dispatches and never raises on model
output (a verifier bug scores 0 with reason "verifier_error:<Type>"); `verify_batch` runs many
pairs in parallel worker processes under hard per-item timeouts (batch.py).

The code and instruct verifiers are imported on first use: they pull in the sandbox and the judge,
which math-only users (and the batch workers' forkserver) do not need.
"""

from vibethinker.verifiers.batch import verify_batch
from vibethinker.verifiers.registry import VERIFIERS, VerifierUnavailable, check_available, verify

__all__ = ["VERIFIERS", "VerifierUnavailable", "check_available", "verify", "verify_batch"]
