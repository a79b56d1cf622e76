"""The verifier registry: a Problem's domain -> its verifier, and `verify`, which dispatches and
never raises on model output. The code and instruct verifiers are imported on first use: they
pull in the sandbox and the judge, which math-only users (and the batch workers) do not need."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable

from vibethinker.sandbox import check_mode
from vibethinker.types import Problem, Score
from vibethinker.verifiers.choice import verify_choice
from vibethinker.verifiers.math import verify_math
from vibethinker.verifiers.pool import SETUP_ERRORS

_log = logging.getLogger("vibethinker.verifiers")


class VerifierUnavailable(RuntimeError):
    """A domain has no usable verifier (its module is missing or failed to import)."""


def _lazy(domain: str, module: str, name: str) -> Callable[[Problem, str], Score]:
    def load() -> Callable[[Problem, str], Score]:
        try:
            return getattr(importlib.import_module(f"vibethinker.verifiers.{module}"), name)
        except (ImportError, AttributeError) as e:
            raise VerifierUnavailable(
                f"no verifier for domain {domain!r}: vibethinker.verifiers.{module}.{name} "
                f"could not be loaded ({type(e).__name__}: {e})"
            ) from e

    def call(problem: Problem, response: str) -> Score:
        return load()(problem, response)

    call.load = load  # type: ignore[attr-defined]
    call.__name__ = f"{name} (lazy)"
    return call


VERIFIERS: dict[str, Callable[[Problem, str], Score]] = {
    "math": verify_math,
    "stem": verify_choice,
    "code": _lazy("code", "code", "verify_code"),
    "instruct": _lazy("instruct", "instruct", "verify_instruct"),
}


def check_available(domains: Iterable[str]) -> None:
    """Raise VerifierUnavailable (before any work starts) for a domain we cannot verify."""
    for d in sorted(set(domains)):
        fn = VERIFIERS.get(d)
        if fn is None:
            raise VerifierUnavailable(f"unknown domain {d!r}; known: {', '.join(VERIFIERS)}")
        if hasattr(fn, "load"):
            fn.load()
        if d == "code":  # a missing sandbox is a setup error: say so before any work starts
            check_mode("bwrap", warn=False)


def verify(problem: Problem, response: str) -> Score:
    """Score one response. Never raises on model output; raises VerifierUnavailable for a domain
    with no verifier (a setup error, not a model failure)."""
    fn = VERIFIERS.get(problem.domain)
    if fn is None:
        raise VerifierUnavailable(
            f"unknown domain {problem.domain!r}; known: {', '.join(VERIFIERS)}"
        )
    if not isinstance(response, str):
        response = ""
    try:
        return fn(problem, response)
    except VerifierUnavailable:
        raise
    except Exception as e:  # a verifier bug must not crash training: score 0 and say why
        if type(e).__name__ in SETUP_ERRORS:
            raise  # e.g. no sandbox: the verifier refuses, with how to install one
        _log.warning("verifier error on %s (%s): %s", problem.id, problem.domain, e)
        return Score(0.0, False, f"verifier_error:{type(e).__name__}")
