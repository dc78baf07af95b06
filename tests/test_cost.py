"""Cost: the estimate before launch, the budget guard, and the bill with spot savings after."""

from __future__ import annotations

import pytest

from helpers.planning import cost, instances


def test_estimate_is_hours_times_count_times_price():
    est = cost.estimate("ml.g5.2xlarge", 1, max_runtime_s=2 * 3600)
    assert est.price_per_hour == instances.lookup("ml.g5.2xlarge").price_per_hour == 1.52
    assert est.instance_hours == 2 and est.on_demand_usd == pytest.approx(3.04)
    two = cost.estimate("ml.p4d.24xlarge", 2, max_runtime_s=1800)
    assert two.instance_hours == 1 and two.on_demand_usd == pytest.approx(25.2513)


def test_spot_is_shown_as_a_range_but_the_guard_counts_on_demand():
    est = cost.estimate("ml.g5.2xlarge", 1, max_runtime_s=2 * 3600, spot=True)
    low, high = est.spot_range_usd
    assert (low, high) == (pytest.approx(3.04 * 0.1), pytest.approx(3.04 * 0.7))
    # AWS guarantees no spot saving: the true worst case is the on-demand price of the whole cap
    assert est.max_usd == pytest.approx(3.04) == est.on_demand_usd
    assert cost.estimate("ml.g5.2xlarge", 1, max_runtime_s=7200).max_usd == pytest.approx(3.04)
    assert "not guaranteed" in str(est) and "$0.30 - $2.13" in str(est)


def test_expected_duration_is_priced_separately_from_the_cap():
    est = cost.estimate("ml.g5.2xlarge", 1, max_runtime_s=7200, expected_s=600)
    assert est.expected_usd == pytest.approx(1.52 / 6) and est.on_demand_usd == pytest.approx(3.04)
    assert "expected" in str(est) and "$0.25" in str(est)
    assert cost.estimate("ml.g5.2xlarge", max_runtime_s=60).expected_usd is None


def test_the_estimate_shows_its_numbers_and_source():
    est = cost.estimate("ml.p4d.24xlarge", 2, max_runtime_s=3600, spot=True)
    text = str(est)
    assert "2 x ml.p4d.24xlarge" in text and "$50.50" in text and "2026-09-27" in text and "managed spot" in text
    html = est._repr_html_()
    assert "<table>" in html and "Price List" in html


def test_budget_guard_refuses_with_the_numbers():
    est = cost.estimate("ml.p4d.24xlarge", 2, max_runtime_s=2 * 3600)
    cost.check_budget(est, None)
    cost.check_budget(est, 101.01)
    with pytest.raises(cost.BudgetExceeded) as err:
        cost.check_budget(est, 5)
    msg = str(err.value)
    assert "$101.01" in msg and "$5.00" in msg and "2 x ml.p4d.24xlarge" in msg and "max_runtime_s" in msg


def test_spot_budget_compares_the_on_demand_worst_case():
    est = cost.estimate("ml.g5.2xlarge", 1, max_runtime_s=7200, spot=True)  # $0.30 - $2.13 typically, $3.04 at most
    cost.check_budget(est, 3.04)
    with pytest.raises(cost.BudgetExceeded, match=r"up to \$3.04 on spot .*no saving.*budget of \$2.20"):
        cost.check_budget(est, 2.2)  # above the typical worst case, below what AWS may bill


def test_unknown_price_and_price_override():
    with pytest.raises(cost.UnknownPrice, match="price_per_hour"):
        cost.estimate("ml.p5e.48xlarge", 1, max_runtime_s=3600)
    est = cost.estimate("ml.p5e.48xlarge", 1, max_runtime_s=3600, price_per_hour=80)
    assert est.on_demand_usd == 80 and est.price_as_of == "given"
    with pytest.raises(instances.UnknownInstanceType):
        cost.estimate("ml.nope.large", 1, max_runtime_s=60)
    with pytest.raises(ValueError):
        cost.estimate("ml.g5.2xlarge", 0, max_runtime_s=60)


def test_budget_from_environment(monkeypatch):
    monkeypatch.delenv(cost.BUDGET_ENV, raising=False)
    assert cost.budget_from_environment() is None
    monkeypatch.setenv(cost.BUDGET_ENV, " 12.5 ")
    assert cost.budget_from_environment() == 12.5
    monkeypatch.setenv(cost.BUDGET_ENV, "ten dollars")
    with pytest.raises(ValueError, match=cost.BUDGET_ENV):
        cost.budget_from_environment()


def test_spot_savings_from_billable_and_training_seconds():
    bill = cost.job_cost("ml.g5.2xlarge", 2, training_seconds=1000, billable_seconds=300)
    assert bill.savings == pytest.approx(0.7)
    assert bill.billed_usd == pytest.approx(300 * 2 * 1.52 / 3600)
    assert bill.on_demand_usd == pytest.approx(1000 * 2 * 1.52 / 3600)
    assert "spot saved 70%" in str(bill) and "300 s billable" in str(bill)


def test_on_demand_bill_has_no_savings_and_unknown_prices_stay_unknown():
    bill = cost.job_cost("ml.g5.2xlarge", 1, 600, 600)
    assert bill.savings == 0 and "saved" not in str(bill) and bill.billed_usd == pytest.approx(1.52 / 6)
    nothing = cost.job_cost("ml.g5.2xlarge", 1, 0, 0)
    assert nothing.savings == 0 and nothing.billed_usd == 0
    unknown = cost.job_cost("ml.custom.large", 1, 100, 100)
    assert unknown.billed_usd is None and "$" not in str(unknown)
