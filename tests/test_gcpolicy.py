"""The garbage collector's policy during a run (ci_evals._util.gcpolicy): a higher young-generation
threshold while the suite runs, put back afterwards."""

from __future__ import annotations

import gc

import pytest

from ci_evals._util.gcpolicy import YOUNG_THRESHOLD as YOUNG
from ci_evals._util.gcpolicy import streaming as run_gc
from tests.conftest import custom_grade_suite


@pytest.fixture(autouse=True)
def default_threshold():
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


def test_a_run_raises_the_young_threshold_and_puts_it_back(sd):
    custom_grade_suite(
        sd, "GradeResult(score=1.0, metadata={'young': __import__('gc').get_threshold()[0]})"
    )
    assert sd.run() == 0
    [rec] = sd.results()
    assert rec["grades"]["g"]["metadata"]["young"] == YOUNG
    assert gc.get_threshold() == (700, 10, 10)


def test_the_policy_never_lowers_a_threshold_nor_turns_collection_back_on():
    gc.set_threshold(90_000, 20, 30)
    with run_gc():
        assert gc.get_threshold() == (90_000, 20, 30)
    gc.set_threshold(0, 10, 10)
    with run_gc():
        assert gc.get_threshold() == (0, 10, 10)
    gc.set_threshold(700, 10, 10)
    with pytest.raises(RuntimeError), run_gc():
        assert gc.get_threshold() == (YOUNG, 10, 10)
        raise RuntimeError("the run failed")
    assert gc.get_threshold() == (700, 10, 10)


def test_a_nested_block_leaves_the_outer_block_frozen(monkeypatch):
    """Only the outermost block unfreezes. Watched through gc.unfreeze's calls: comparing freeze
    counts raced with other threads (a test's server) freeing frozen objects meanwhile."""
    unfrozen: list[int] = []
    real = gc.unfreeze

    def unfreeze() -> None:
        unfrozen.append(gc.get_freeze_count())
        real()

    monkeypatch.setattr(gc, "unfreeze", unfreeze)
    with run_gc():
        assert gc.get_freeze_count() > 0
        with run_gc():  # the reports inside a run
            pass
        assert unfrozen == [] and gc.get_freeze_count() > 0
    assert len(unfrozen) == 1 and unfrozen[0] > 0
    assert gc.get_freeze_count() == 0
