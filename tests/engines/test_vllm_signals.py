"""A Ctrl-C while vLLM starts an engine is not lost (engines/vllm.py `_signals_held`): vLLM's
start-up swallows a KeyboardInterrupt raised inside it, so the signal is held and raised after.
Pure Python: runs without vLLM."""

from __future__ import annotations

import signal

import pytest

from vibethinker.engines.vllm import _raise_held, _signals_held


def _swallowing_start_up() -> None:
    """What vLLM's start-up does with a KeyboardInterrupt raised inside it."""
    try:
        signal.raise_signal(signal.SIGINT)
    except KeyboardInterrupt:
        pass


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_start_up_is_held_then_raised_through_its_handler(signum):
    seen = []

    def runner_handler(n, frame):  # as the recipe runner's: a KeyboardInterrupt
        seen.append(n)
        raise KeyboardInterrupt(f"signal {n}")

    old = signal.signal(signum, runner_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            with _signals_held() as got:
                signal.raise_signal(signum)
                if signum == signal.SIGINT:
                    _swallowing_start_up()  # held as well: nothing to swallow
            assert got[0] == signum and signal.getsignal(signum) is runner_handler
            _raise_held(got)
        assert seen == [signum]
    finally:
        signal.signal(signum, old)


def test_nothing_held_nothing_raised():
    with _signals_held() as got:
        pass
    _raise_held(got)
    assert got == []
