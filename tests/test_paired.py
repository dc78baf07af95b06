"""A/B comparisons on a shared machine: the two sides run in turn, and the ratio is read within each pair."""

from __future__ import annotations

import pytest

from helpers.local import monitor
from helpers.results import paired_ratio
from helpers.targets import resolve


def test_jobs_run_in_turn_with_the_order_reversed_every_other_trial(monkeypatch):
    ran = []
    monkeypatch.setattr(monitor, "run_monitored", lambda job, target, **options: ran.append(job) or (job, options))
    runs = monitor.run_in_turn({"a": "A", "b": "B"}, resolve("local_cpu"), trials=3, interval=0.25)
    assert ran == ["A", "B", "B", "A", "A", "B"]
    assert runs == {"a": [("A", {"interval": 0.25})] * 3, "b": [("B", {"interval": 0.25})] * 3}
    ran.clear()
    monitor.run_in_turn({"a": "A", "b": "B"}, resolve("local_cpu"), trials=2, reverse_first=True)
    assert ran == ["B", "A", "A", "B"]
    assert monitor.run_in_turn({"a": "A"}, resolve("local_cpu"), trials=0) == {"a": []}
    with pytest.raises(ValueError, match="trials"):
        monitor.run_in_turn({"a": "A"}, resolve("local_cpu"), trials=-1)


def test_the_ratio_is_read_within_each_pair_not_from_the_two_sides_averages():
    """A machine that slowed down for the second pair slowed both of its runs: the pairs agree (2x each), while
    the ratio of the sides' means would read 1.67x."""
    r = paired_ratio([100.0, 50.0], [200.0, 100.0])
    assert r.each == (2.0, 2.0) and r.middle == r.low == r.high == 2.0 and r.settled
    assert str(r) == "2.00x (pairs: 2.00x, 2.00x)"


def test_the_middle_is_a_ratio_a_pair_really_gave_and_a_range_across_1_leaves_the_sign_open():
    r = paired_ratio([100.0, 100.0], [90.0, 130.0])
    assert r.middle == pytest.approx(0.9) and (r.low, r.high) == pytest.approx((0.9, 1.3)) and not r.settled
    assert paired_ratio([1.0, 1.0, 1.0], [3.0, 1.5, 2.0]).middle == 2.0


@pytest.mark.parametrize("a, b", [([], []), ([1.0], [1.0, 2.0]), ([0.0], [1.0])])
def test_unpaired_or_empty_runs_are_refused(a, b):
    with pytest.raises(ValueError, match="paired_ratio"):
        paired_ratio(a, b)
