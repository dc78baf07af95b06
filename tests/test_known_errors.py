"""The facilitator guide's known-errors table stays true: each row marked **tested** is a message the helpers
produce, triggered here offline, and the message says what the table says (its parts, in order)."""

from __future__ import annotations

import re

import pytest
from conftest import REPO

from helpers import jobs, targets
from helpers.aws import leftovers, settings
from helpers.planning import cost
from helpers.targets import resolve

GUIDE = REPO / "docs" / "facilitator.md"
CATALOG = jobs.catalog_channels(jobs.DATA_DIR / "catalog")


def _shared_login(monkeypatch):
    monkeypatch.setattr(settings, "STUDIO_METADATA", REPO / "no-such-metadata.json")
    monkeypatch.delenv(settings.ATTENDEE_ENV, raising=False)
    monkeypatch.setattr(settings.getpass, "getuser", lambda: "sagemaker-user")
    leftovers.stored_objects(bucket="event-bucket")


TRIGGERS = {  # a distinctive part of the row's message -> what produces it
    "unknown target": lambda mp: targets.resolve("local-gpu"),
    "needs an NVIDIA GPU": lambda mp: (
        mp.setenv("WORKSHOP_FORCE_CPU", "1"),
        targets.local_gpu_count.cache_clear(),
        targets.resolve("local_gpu"),
    ),
    "target 'sagemaker'": lambda mp: targets.resolve("sagemaker"),
    "bare role name": lambda mp: settings.require_role_arn("MyRole"),
    "shared login name": _shared_login,
    "SMDDP does not run": lambda mp: jobs.preflight(
        jobs.Job("x", {}, CATALOG, distribution="smddp"), resolve("ml.g5.12xlarge")
    ),
    "above the budget": lambda mp: cost.check_budget(cost.estimate("ml.p4d.24xlarge", 2, max_runtime_s=3600), 10),
    "no option": lambda mp: jobs.preflight(jobs.Job("x", {"epochz": 2}, CATALOG), resolve("ml.g5.xlarge")),
}


def rows_marked_tested() -> list[str]:
    rows = [line for line in GUIDE.read_text(encoding="utf-8").splitlines() if line.rstrip().endswith("**tested** |")]
    return [re.search(r"`([^`]+)`", row).group(1) for row in rows]


def test_every_tested_row_has_a_trigger_and_every_trigger_a_row():
    rows = rows_marked_tested()
    assert len(rows) == len(TRIGGERS)
    assert all(sum(key in row for key in TRIGGERS) == 1 for row in rows)


@pytest.mark.parametrize("message", rows_marked_tested())
def test_the_helpers_say_what_the_table_says(message, monkeypatch):
    trigger = next(f for key, f in TRIGGERS.items() if key in message)
    with pytest.raises(Exception) as err:
        trigger(monkeypatch)
    said = str(err.value)
    parts = [p.strip() for p in message.split("...") if p.strip()]
    at = 0
    for part in parts:
        at = said.find(part, at)
        assert at >= 0, f"the table says {message!r}; the helpers say {said!r}"
    targets.local_gpu_count.cache_clear()
