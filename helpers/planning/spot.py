"""Spot or on-demand: what a training run costs on each, and what interruptions cost at a checkpoint interval.

With Poisson interruptions (mean time between them ``M``), a checkpoint every ``tau`` hours of work costing
``delta`` and a restart costing ``R``, ``W`` hours of work take Daly's (2006)::

    E[T] = (W / tau) * M * exp(R / M) * (exp((tau + delta) / M) - 1)

minimised near Young's ``tau* = sqrt(2 * delta * M)``. The ``SpotAssumptions`` defaults are assumptions: measure yours.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from helpers.planning import cost, instances

# the instance choices the labs offer, smallest first
LAB_INSTANCES = ("ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6e.12xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge")


@dataclass(frozen=True)
class SpotAssumptions:
    """What the calculator cannot know: change them to your region, instance type and measurements."""

    saving: float = cost.SPOT_SAVING_MIDRANGE  # spot discount against on-demand (mid-range)
    interruptions_per_hour: float = 0.05  # one reclaim per 20 hours of running: a guess, capacity-dependent
    restart_s: float = 240.0  # billed start-up of a restarted job: container, checkpoint download, set-up
    save_s: float = 20.0  # writing one checkpoint (benchmarks/checkpoint_overhead.py measures yours)
    saves_on_notice: bool = False  # True: the script checkpoints on SIGTERM in time, so no work is lost

    def __post_init__(self):
        if not 0 <= self.saving < 1:
            raise ValueError(f"saving is a fraction of the on-demand price in [0, 1), got {self.saving}")
        if self.interruptions_per_hour < 0 or self.restart_s < 0 or self.save_s < 0:
            raise ValueError("interruptions_per_hour, restart_s and save_s must not be negative")


def expected_hours(work_h: float, interval_h: float | None, a: SpotAssumptions) -> float:
    """Expected wall hours to finish ``work_h`` hours of training, checkpointing every ``interval_h`` hours of work
    (``None``: never, a restart starts over)."""
    if work_h <= 0:
        raise ValueError("work_h must be positive")
    tau = work_h if interval_h is None else min(interval_h, work_h)
    if tau <= 0:
        raise ValueError("interval_h must be positive (or None for no checkpoints)")
    delta = 0.0 if interval_h is None else a.save_s / 3600
    segments, restart, lam = work_h / tau, a.restart_s / 3600, a.interruptions_per_hour
    busy = work_h + segments * delta
    if lam == 0:
        return busy
    if a.saves_on_notice and interval_h is not None:  # only the restart is lost, each time
        if lam * restart >= 1:
            return math.inf
        return busy / (1 - lam * restart)
    m = 1 / lam
    return segments * m * math.exp(restart / m) * math.expm1((tau + delta) / m)


def no_checkpoint_break_even_h(a: SpotAssumptions = SpotAssumptions()) -> float:
    """The hours of work past which spot without checkpoints (a restart starts over) costs more than the same work
    on demand: where the expected hours, at the spot discount, reach the work itself. inf without interruptions."""
    if a.interruptions_per_hour == 0:
        return math.inf

    def over(work_h: float) -> float:
        return expected_hours(work_h, None, a) * (1 - a.saving) - work_h

    low, high = 1e-3, 1.0
    while over(high) < 0:
        low, high = high, 2 * high
    for _ in range(60):  # bisection: the cost's excess grows with the work once past the point
        middle = (low + high) / 2
        low, high = (middle, high) if over(middle) < 0 else (low, middle)
    return high


def best_interval_h(a: SpotAssumptions) -> float:
    """Young's interval: the checkpoint period that balances saving time against expected lost work."""
    if a.interruptions_per_hour == 0:
        return math.inf
    return math.sqrt(2 * (a.save_s / 3600) / a.interruptions_per_hour)


def _price(instance_type: str) -> float:
    spec = instances.lookup(instance_type)
    if spec.price_per_hour is None:
        raise cost.UnknownPrice(f"{instance_type} has no price on file (helpers.planning.instances): pick another type")
    return spec.price_per_hour


def rework(
    instance_type: str,
    work_h: float,
    intervals_min: tuple = (5, 15, 30, 60, 120, None),
    a: SpotAssumptions = SpotAssumptions(),
    instance_count: int = 1,
) -> list[dict]:
    """One row per checkpoint interval (minutes of work; ``None``: no checkpoints): expected hours, lost hours and
    cost on spot, against the same work on demand."""
    price = _price(instance_type) * instance_count
    on_demand = work_h * price
    rows = []
    for minutes in intervals_min:
        hours = expected_hours(work_h, None if minutes is None else minutes / 60, a)
        spot_usd = hours * price * (1 - a.saving)
        rows.append(
            {
                "checkpoint every": "never" if minutes is None else f"{minutes:g} min",
                "expected hours": round(hours, 2),
                "rework hours": round(hours - work_h, 2),
                "spot $": round(spot_usd, 2),
                "on-demand $": round(on_demand, 2),
                "spot saves": f"{1 - spot_usd / on_demand:.0%}" if math.isfinite(spot_usd) else "never ends",
            }
        )
    return rows


def compare_instances(
    work_h: float | dict[str, float],
    interval_min: float | None = 30,
    a: SpotAssumptions = SpotAssumptions(),
    instance_types: tuple[str, ...] = LAB_INSTANCES,
) -> list[dict]:
    """On-demand against spot for each instance choice. ``work_h``: hours of training, one figure for all or one
    per type (a faster type needs fewer). Spot shows the discount range and the expected cost with rework."""
    low, high = cost.SPOT_SAVINGS_RANGE
    rows = []
    for name in instance_types:
        hours = work_h[name] if isinstance(work_h, dict) else work_h
        spec = instances.lookup(name)
        price = _price(name)
        expected = expected_hours(hours, None if interval_min is None else interval_min / 60, a)
        rows.append(
            {
                "instance": name,
                "hardware": spec.describe().split(": ", 1)[1].split(", $")[0],
                "$/h on-demand": price,
                "work hours": hours,
                "on-demand $": round(hours * price, 2),
                "spot $ (no interruptions)": f"{hours * price * (1 - high):,.2f}-{hours * price * (1 - low):,.2f}",
                "spot $ expected": round(expected * price * (1 - a.saving), 2),
                "price as of": spec.price_as_of,
            }
        )
    return rows


def interval_curve(
    work_h: float, a: SpotAssumptions = SpotAssumptions(), points: int = 60
) -> tuple[list[float], list[float]]:
    """(interval minutes, expected hours) on a log grid from 1 minute to the whole run, for plotting."""
    lo, hi = math.log(1 / 60), math.log(work_h)
    xs = [math.exp(lo + (hi - lo) * i / (points - 1)) for i in range(points)]
    return [x * 60 for x in xs], [expected_hours(work_h, x, a) for x in xs]


def interval_curves(work_h: float, a: SpotAssumptions = SpotAssumptions()) -> dict:
    """Expected wall time against checkpoint interval at the assumed interruption rate and, for contrast, at a quarter
    of it and four times it: ``{"work_h", "curves"}``, each curve its ``rate``, ``minutes`` and ``hours``
    (:func:`interval_curve`) and Young's interval on it (``best``: (minutes, hours), None past the run's end).
    :func:`helpers.plots.checkpoint_intervals` draws them."""
    curves = []
    for rate in sorted({a.interruptions_per_hour, a.interruptions_per_hour * 4, a.interruptions_per_hour / 4}):
        b = replace(a, interruptions_per_hour=rate)
        x, y = interval_curve(work_h, b)
        best = best_interval_h(b) * 60
        point = (best, expected_hours(work_h, best / 60, b)) if best < x[-1] else None
        curves.append({"rate": rate, "minutes": x, "hours": y, "best": point})
    return {"work_h": work_h, "curves": curves}


def bill_rows(job_cost: cost.JobCost) -> list[dict]:
    """A finished job's bill: training against billable seconds (DescribeTrainingJob) and what spot saved."""
    rows: list[dict] = [
        {"figure": "training seconds", "value": job_cost.training_seconds},
        {"figure": "billable seconds", "value": job_cost.billable_seconds},
        {"figure": "spot saving (1 - billable / training)", "value": f"{job_cost.savings:.0%}"},
    ]
    billed, on_demand = job_cost.billed_usd, job_cost.on_demand_usd  # both None where the type has no price
    if billed is not None and on_demand is not None:
        rows += [
            {"figure": "billed $", "value": round(billed, 2)},
            {"figure": "same time on demand $", "value": round(on_demand, 2)},
        ]
    return rows
