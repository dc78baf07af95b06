"""Every lesson a lab checks on measured figures is held by a bound outside those figures' run-to-run spread.

The spread is what real headless runs measured (``course/margins.json``, per budget of cores: ``python -m
course.margins add``); a plain claim may not compare timings at all, only a :class:`course.lab.Margin` may.
"""

from __future__ import annotations

import pytest

from course import margins
from course.lab import Lab, Margin, exact


def test_no_plain_claim_compares_measured_figures():
    assert margins.timed_plain_claims() == []


def test_a_plain_claim_that_compares_timings_is_named_and_bookkeeping_is_not():
    lab = Lab(
        "99_example",
        claims={
            "the fix is faster": lambda f: f["fixed_step_ms"] < f["starved_step_ms"],
            "the parts make up the step": exact(lambda f: f["a_ms"] + f["b_ms"] == f["step_ms"]),
            "it fetched less": lambda f: f["fastfile_mb"] < f["file_mb"] / 2,
            "nested": lambda f: all(f[k] > 1 for k in ("pipeline_speedup_low",)),
        },
    )
    found = margins.timed_plain_claims([lab])
    assert len(found) == 2 and "fixed_step_ms" in found[0] and "pipeline_speedup_low" in found[1]


def test_every_bound_sits_outside_its_runs_spread():
    problems = margins.too_close(margins.load())
    assert not problems, "bounds within their runs' spread, or without runs:\n" + "\n".join(problems)


@pytest.mark.parametrize(
    "values, bound, close",
    [
        ([1.7, 1.8, 1.9], Margin("x", at_least=1.3), False),  # 0.4 of room, 0.2 of spread
        ([1.5, 1.9, 1.95], Margin("x", at_least=1.3), True),  # 0.2 of room, 0.45 of spread
        ([1.25, 1.6, 1.9], Margin("x", at_least=1.3), True),  # a run below the bound
        ([0.6, 0.65, 0.7], Margin("x", at_most=1.0), False),
        ([0.6, 0.9, 0.95], Margin("x", at_most=1.0), True),
        ([1.8, 1.9], Margin("x", at_least=1.3), True),  # too few runs of any budget
    ],
)
def test_a_bound_is_too_close_when_the_runs_spread_reaches_it(values, bound, close):
    lab = Lab("99_example", claims={"a lesson": bound})
    record = {"figures": {"99_example": {"x": {"make, 2 cores": values}}}}
    assert bool(margins.too_close(record, [lab])) == close
