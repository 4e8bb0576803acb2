"""Signal handling hands over without gaps (issue 15 item 11)."""

from __future__ import annotations

import os
import signal

import pytest

from ci_evals.run.exits import INTERRUPTED, ExitCode
from ci_evals.run.signals import SIGNALS, held_signals, on_signals


@pytest.fixture(autouse=True)
def restore_handlers():
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def test_a_signal_held_before_the_run_handler_is_handed_to_it():
    got: list[int] = []
    with held_signals() as held:
        os.kill(os.getpid(), signal.SIGINT)
        assert held.received == [signal.SIGINT]
        with on_signals(got.append):
            assert got == [signal.SIGINT]
            os.kill(os.getpid(), signal.SIGTERM)
            assert got == [signal.SIGINT, signal.SIGTERM]
        os.kill(os.getpid(), signal.SIGTERM)  # after the run handler: held again, never fatal
        assert held.received == [signal.SIGINT, signal.SIGTERM]
    assert (
        signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    )  # a signal came: the rest of the exit ignores more


def test_without_signals_the_previous_handlers_come_back():
    before = signal.getsignal(signal.SIGTERM)
    with held_signals(), on_signals(lambda signum: None):
        assert signal.getsignal(signal.SIGTERM) is not before
    assert signal.getsignal(signal.SIGTERM) is before


def test_each_signal_a_run_handles_has_its_exit_code_and_no_other_code_is_an_interruption():
    assert {ExitCode.of_signal(sig) for sig in SIGNALS} == INTERRUPTED
    assert [int(code) for code in sorted(INTERRUPTED)] == [129, 130, 143]


@pytest.mark.parametrize(
    ("verdict", "interrupted_by", "code"),
    [
        ("passed", None, 0),
        ("failed", None, 1),
        ("errored", None, 1),
        ("partial", None, 1),
        ("interrupted", "SIGHUP", 129),
        ("interrupted", "SIGTERM", 143),
        ("interrupted", None, 130),
        ("interrupted", "SIGKILL", 130),  # not one a run handles
        ("interrupted", "CONFIG", 130),  # a member's name, but no signal's
    ],
)
def test_a_verdicts_exit_code(verdict, interrupted_by, code):
    assert ExitCode.of_verdict(verdict, interrupted_by) == code
