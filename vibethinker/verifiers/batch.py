"""Parallel verification with hard per-item timeouts: nothing a response does can hang the caller.

Two execution modes, chosen per domain in `MODES` (a dict, not branches in the loop):
- "process": a pool of worker processes (fresh interpreters, see _BOOT). An item that overruns its deadline gets its worker killed and
  replaced, and scores Score(0, False, "timeout"). For CPU-bound checks in Python (sympy), which
  no thread can interrupt.
- "thread": `workers` daemon threads. For verifiers that already isolate their work in
  subprocesses with their own time limits (the code sandbox) or wait on I/O (a judge endpoint).
  Each item runs in a sandbox CancelScope: an overrun item scores "timeout" and its sandbox is
  killed at once (vibethinker/sandbox/base.py), so its thread comes back and takes the next
  item: never more sandboxes than `workers`. Only a thread that ignores the cancel (e.g. stuck
  in an HTTP call) is replaced after CANCEL_GRACE_S, and left to finish detached.

Verifier errors (the verifier raised, or its worker died mid-item: an OOM kill, a signal, a
segfault) say nothing about the response, so they are never silently a 0: each such item is
run once more, and what still fails keeps its `verifier_error:<Type>` reason, is logged as a
warning and counted (`error_counts()`, cumulative; the RL loop's `verifier_errors` per step).
Timeouts are verdicts (the response is too slow) and are not retried.

Per-item limits: TIMEOUTS per domain, or BACKSTOPS, a function of the problem (the code
verifier's is derived from its case count and per-case limit, code.backstop).
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace

from vibethinker import ledger
from vibethinker.types import Problem, Score
from vibethinker.verifiers.code import backstop
from vibethinker.verifiers.pool import (  # noqa: F401 (re-exported: the pool's names, by their old home)
    _STATE,
    SETUP_ERRORS,
    WorkerPool,
    get_pool,
    guarded_call,
    in_guarded_worker,
    run_threads,
    to_score,
)
from vibethinker.verifiers.registry import VerifierUnavailable, check_available, verify

log = logging.getLogger(__name__)

MODES: dict[str, str] = {
    "math": "process",
    "stem": "thread",
    "code": "thread",
    "instruct": "thread",
}
# Per-item wall-clock limits (s). Code and judge calls carry their own inner limits; these are
# the backstop. The paper is silent on verifier timeouts.
TIMEOUTS: dict[str, float] = {"math": 10.0, "stem": 5.0, "code": 120.0, "instruct": 120.0}


def _code_backstop(problem: Problem) -> float:
    return backstop(problem)


# Per-item limits that depend on the problem (they replace TIMEOUTS for that domain).
BACKSTOPS: dict[str, Callable[[Problem], float]] = {"code": _code_backstop}


def item_limit(problem: Problem, timeout: float | None) -> float:
    """One item's wall-clock limit (s): `timeout`, else its domain's backstop or TIMEOUTS."""
    if timeout is not None:
        return timeout
    d = problem.domain
    return BACKSTOPS[d](problem) if d in BACKSTOPS else TIMEOUTS.get(d, 60.0)


VERIFIER_ERROR = "verifier_error"  # Score.reason prefix of a verdict the verifier failed to give
RETRIED = "retried after "  # Score.detail prefix of an item run twice (then the first reason)
_COUNTS = {"retried": 0, "recovered": 0, "failed": 0}
_COUNTS_LOCK = threading.Lock()


def error_counts() -> dict[str, int]:
    """Verifier errors in this process so far: items `retried` once, `recovered` by the retry,
    `failed` again (scored 0 with their verifier_error reason)."""
    with _COUNTS_LOCK:
        return dict(_COUNTS)


def _is_error(score: Score) -> bool:
    return score.reason.startswith(VERIFIER_ERROR)


def _scores(problems: Sequence[Problem], idx: list[int], out: list) -> list[Score]:
    res = []
    for i, (status, value) in zip(idx, out):
        if status == "error" and value[0] in SETUP_ERRORS:
            raise VerifierUnavailable(f"{problems[i].domain}: {value[0]}: {value[1]}")
        res.append(to_score(status, value))
    return res


def verify_batch(
    problems: Sequence[Problem],
    responses: Sequence[str],
    workers: int = 2,
    timeout: float | None = None,
    fn: Callable[[Problem, str], Score] | None = None,
    on_done: Callable[[int], None] | None = None,
) -> list[Score]:
    """Verify pairs in parallel, in input order; never raises on model output, never hangs.

    timeout: per-item wall-clock limit (s); None uses TIMEOUTS per domain. fn replaces the domain
    dispatch (must be a picklable module-level function for process-mode domains); on_done(i) is
    called as each item finishes (progress bars).
    """
    if len(problems) != len(responses):
        raise ValueError(f"{len(problems)} problems but {len(responses)} responses")
    fn = fn or verify
    t0 = time.perf_counter()
    check_available({p.domain for p in problems})
    groups: dict[str, list[int]] = {"process": [], "thread": []}
    for i, p in enumerate(problems):
        groups[MODES.get(p.domain, "thread")].append(i)
    results: list[Score | None] = [None] * len(problems)

    def run_group(mode: str) -> None:
        idx = groups[mode]
        if idx:
            for i, s in zip(
                idx, _verify_group(mode, problems, responses, idx, fn, workers, timeout, on_done)
            ):
                results[i] = s

    # Thread-mode items run beside the process pool, so a mixed batch uses both at once.
    errors: list[BaseException] = []

    def run_side() -> None:
        try:
            run_group("thread")
        except BaseException as e:  # noqa: BLE001 -- re-raised in the caller's thread
            errors.append(e)

    side = threading.Thread(target=run_side, daemon=True)
    side.start()
    run_group("process")
    side.join()
    if errors:
        raise errors[0]
    done = [r for r in results if r is not None]
    ledger.verified([r.reason for r in done], [r.correct for r in done], time.perf_counter() - t0)
    return results  # type: ignore[return-value]


def _verify_group(
    mode: str,
    problems: Sequence[Problem],
    responses: Sequence[str],
    idx: list[int],
    fn: Callable[[Problem, str], Score],
    workers: int,
    timeout: float | None,
    on_done: Callable[[int], None] | None,
) -> list[Score]:
    """Items `idx` in one execution mode; those the verifier failed on run once more."""
    args = [(problems[i], responses[i] if isinstance(responses[i], str) else "") for i in idx]
    limits = [item_limit(problems[i], timeout) for i in idx]

    def run(js: list[int], done: Callable[[int], None] | None) -> list[Score]:
        a, lim = [args[j] for j in js], [limits[j] for j in js]
        if mode == "process":
            out = get_pool(workers).map(fn, a, lim, done)
        else:
            out = run_threads(fn, a, workers, lim, done)
        return _scores(problems, [idx[j] for j in js], out)

    first = run(list(range(len(idx))), (lambda j: on_done(idx[j])) if on_done else None)
    again = [j for j, s in enumerate(first) if _is_error(s)]
    second = run(again, None) if again else []  # progress counted each item once already
    for j, s in zip(again, second):  # the detail says so (eval samples; the RL step counts it)
        note = RETRIED + first[j].reason
        first[j] = replace(s, detail=f"{note}; {s.detail}" if s.detail else note)
    _count(problems, idx, again, first)
    return first


def _count(problems: Sequence[Problem], idx: list[int], again: list[int], final: list[Score]):
    if not again:
        return
    failed = [j for j in again if _is_error(final[j])]
    with _COUNTS_LOCK:
        _COUNTS["retried"] += len(again)
        _COUNTS["recovered"] += len(again) - len(failed)
        _COUNTS["failed"] += len(failed)
    if failed:
        log.warning(
            "%d verifier error(s) still failing after a retry, scored 0 (not the responses' "
            "fault): %s",
            len(failed),
            ", ".join(f"{problems[idx[j]].id}: {final[j].reason}" for j in failed[:10]),
        )
    else:
        log.warning("%d verifier error(s) retried once; all recovered", len(again))


def default_workers() -> int:
    return max(1, min(2, os.cpu_count() or 1))
