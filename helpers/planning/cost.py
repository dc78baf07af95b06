"""What a training job costs: an estimate before launch, a budget guard, and the bill (and spot savings) after.

SageMaker bills training per instance-second. On-demand: ``BillableTimeInSeconds x InstanceCount x price``. With
managed spot the service reports the saving as a shorter billable time, so the same formula holds and the saving is
``1 - BillableTimeInSeconds / TrainingTimeInSeconds`` (AWS's own formula). Prices come from
``helpers.planning.instances`` (dated, us-east-1).
"""

from __future__ import annotations

import html
import os
from dataclasses import dataclass

from helpers.errors import WorkshopError
from helpers.planning import instances

# Managed spot saves "up to 90%" (AWS). The floor is an assumption, not a published figure: GPU spot capacity is often
# discounted far less, so estimates show a range rather than a single spot price. AWS guarantees no saving at all, so
# the budget guard prices spot at the on-demand rate.
SPOT_SAVINGS_RANGE = (0.30, 0.90)
SPOT_SAVING_MIDRANGE = sum(SPOT_SAVINGS_RANGE) / 2  # the saving an expected spot cost assumes
BUDGET_ENV = "WORKSHOP_BUDGET_USD"


class BudgetExceeded(WorkshopError, ValueError):
    """A launch whose worst-case cost is above the budget; nothing was launched."""


class UnknownPrice(WorkshopError, ValueError):
    """The instance type has no price on file and none was given."""


def _money(usd: float) -> str:
    return f"${usd:,.2f}" if usd >= 0.01 or usd == 0 else "<$0.01"


@dataclass(frozen=True)
class CostEstimate:
    """The cost of one job: ``hours`` of ``instance_count`` x ``instance_type``.

    ``hours`` is the cap the job can bill (its MaxRuntime) unless an expected duration was given; ``expected_usd``
    prices that expected duration when there is one.
    """

    instance_type: str
    instance_count: int
    hours: float  # the most the job can bill: MaxRuntime
    price_per_hour: float
    price_as_of: str
    price_source: str
    spot: bool = False
    expected_hours: float | None = None

    @property
    def instance_hours(self) -> float:
        return self.hours * self.instance_count

    @property
    def on_demand_usd(self) -> float:
        return self.instance_hours * self.price_per_hour

    @property
    def spot_range_usd(self) -> tuple[float, float]:
        """(best, typical worst) for the same hours on spot, from ``SPOT_SAVINGS_RANGE``: an assumption, for display."""
        low_saving, high_saving = SPOT_SAVINGS_RANGE
        return self.on_demand_usd * (1 - high_saving), self.on_demand_usd * (1 - low_saving)

    @property
    def max_usd(self) -> float:
        """What the budget guard compares: the true worst case, the on-demand price, for spot too (spot prices can
        rise to on-demand and AWS promises no discount)."""
        return self.on_demand_usd

    @property
    def expected_usd(self) -> float | None:
        if self.expected_hours is None:
            return None
        usd = self.expected_hours * self.instance_count * self.price_per_hour
        return usd * (1 - SPOT_SAVING_MIDRANGE) if self.spot else usd

    def rows(self) -> list[tuple[str, str]]:
        low, high = self.spot_range_usd
        rows = [
            ("instances", f"{self.instance_count} x {self.instance_type}"),
            ("price", f"${self.price_per_hour:,.4g}/h per instance (us-east-1, {self.price_as_of})"),
            ("billable cap", f"{self.hours:g} h x {self.instance_count} = {self.instance_hours:g} instance-hours"),
            ("on-demand, at most", _money(self.on_demand_usd)),
            (
                "spot, typically",
                f"{_money(low)} - {_money(high)} (saving "
                f"{SPOT_SAVINGS_RANGE[0]:.0%}-{SPOT_SAVINGS_RANGE[1]:.0%}, not guaranteed: "
                f"at most the on-demand price)",
            ),
        ]
        expected_usd = self.expected_usd  # None exactly when there are no expected hours
        if expected_usd is not None:
            rows.append(
                (
                    "expected",
                    f"{_money(expected_usd)} for {self.expected_hours:.2g} h"
                    + (" on spot (mid-range saving)" if self.spot else ""),
                )
            )
        rows.append(("this job uses", "managed spot" if self.spot else "on-demand"))
        return rows

    def __str__(self) -> str:
        width = max(len(k) for k, _ in self.rows())
        return "\n".join(f"{k:<{width}}  {v}" for k, v in self.rows())

    def _repr_html_(self) -> str:
        body = "".join(
            f"<tr><th style='text-align:left'>{html.escape(k)}</th><td style='text-align:left'>"
            f"{html.escape(v)}</td></tr>"
            for k, v in self.rows()
        )
        return f"<table>{body}</table><small>{html.escape(self.price_source)}</small>"


def estimate(
    instance_type: str,
    instance_count: int = 1,
    *,
    max_runtime_s: float,
    spot: bool = False,
    expected_s: float | None = None,
    price_per_hour: float | None = None,
) -> CostEstimate:
    """Price a job before launch. ``max_runtime_s`` caps what it can bill; ``expected_s`` is an optional guess
    (from a local measurement, say). ``price_per_hour`` overrides the catalogue (another region, a discount)."""
    return estimate_for(
        instances.lookup(instance_type),
        instance_count,
        max_runtime_s=max_runtime_s,
        spot=spot,
        expected_s=expected_s,
        price_per_hour=price_per_hour,
    )


def estimate_for(
    spec: instances.InstanceType,
    instance_count: int = 1,
    *,
    max_runtime_s: float,
    spot: bool = False,
    expected_s: float | None = None,
    price_per_hour: float | None = None,
) -> CostEstimate:
    """:func:`estimate` for a catalogue entry already at hand (a resolved target's)."""
    if instance_count < 1 or max_runtime_s <= 0:
        raise ValueError("instance_count must be at least 1 and max_runtime_s positive")
    price, as_of, source = spec.price_per_hour, spec.price_as_of, spec.price_source
    if price_per_hour is not None:
        price, as_of, source = float(price_per_hour), "given", "price_per_hour passed by the caller"
    if price is None:
        raise UnknownPrice(
            f"{spec.name} has no price on file (helpers.planning.instances); pass price_per_hour= "
            f"from https://aws.amazon.com/sagemaker/pricing/ to estimate it."
        )
    return CostEstimate(
        spec.name,
        instance_count,
        max_runtime_s / 3600,
        price,
        as_of,
        source,
        spot,
        None if expected_s is None else expected_s / 3600,
    )


def budget_from_environment() -> float | None:
    """``WORKSHOP_BUDGET_USD``: a facilitator can cap every attendee's launches without editing notebooks."""
    raw = os.environ.get(BUDGET_ENV, "").strip()
    if not raw:
        return None
    try:
        return float(raw)
    except ValueError:
        raise ValueError(f"{BUDGET_ENV}={raw!r} is not a number of US dollars") from None


def check_budget(est: CostEstimate, budget_usd: float | None) -> None:
    """Refuse (``BudgetExceeded``, with the numbers) when the job could cost more than ``budget_usd``."""
    if budget_usd is None:
        return
    if est.max_usd <= budget_usd:
        return
    spot_note = "; spot can cost as much as on-demand: AWS guarantees no saving" if est.spot else ""
    raise BudgetExceeded(
        f"refused: this job can cost up to {_money(est.max_usd)} {'on spot' if est.spot else 'on-demand'} "
        f"({est.instance_count} x {est.instance_type} at ${est.price_per_hour:,.4g}/h for up to {est.hours:g} h"
        f"{spot_note}), above the budget of "
        f"{_money(budget_usd)}. Lower max_runtime_s (it caps the bill), use fewer or smaller instances, "
        f"or raise budget_usd."
    )


@dataclass(frozen=True)
class JobCost:
    """What a finished job cost, from DescribeTrainingJob's billable and training seconds."""

    instance_type: str
    instance_count: int
    training_seconds: int
    billable_seconds: int
    price_per_hour: float | None

    @property
    def savings(self) -> float:
        """Managed-spot saving as a fraction (0 for on-demand): ``1 - billable / training``."""
        if not self.training_seconds:
            return 0.0
        return max(0.0, 1 - self.billable_seconds / self.training_seconds)

    @property
    def billed_usd(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return self.billable_seconds * self.instance_count * self.price_per_hour / 3600

    @property
    def on_demand_usd(self) -> float | None:
        """The same training time at the on-demand price: what spot saved against."""
        if self.price_per_hour is None:
            return None
        return self.training_seconds * self.instance_count * self.price_per_hour / 3600

    def __str__(self) -> str:
        text = (
            f"{self.training_seconds} s training, {self.billable_seconds} s billable x {self.instance_count} "
            f"instance(s)"
        )
        billed, on_demand = self.billed_usd, self.on_demand_usd  # both None where the type has no price
        if billed is not None:
            text += f": {_money(billed)}"
        if self.savings:
            text += f" (spot saved {self.savings:.0%}"
            text += f", {_money(on_demand - billed)})" if billed is not None and on_demand is not None else ")"
        return text


def job_cost(instance_type: str, instance_count: int, training_seconds: int, billable_seconds: int) -> JobCost:
    """The bill of a finished job; the price is the catalogue's (None for a type without one)."""
    try:
        price = instances.lookup(instance_type).price_per_hour
    except instances.UnknownInstanceType:
        price = None
    return JobCost(instance_type, instance_count, int(training_seconds or 0), int(billable_seconds or 0), price)
