"""Every image a job runs on carries its support window, from the DLC repository's dated data."""

from __future__ import annotations

import datetime as dt

import pytest

from helpers.aws import images
from helpers.job_spec import Job, catalog_channels
from helpers.jobs import on_sagemaker
from helpers.targets import resolve

DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:{}-gpu-py311"


def test_the_shipped_table_is_dated_and_sourced():
    table = images.support_table()
    assert table["snapshot_date"] and "aws/deep-learning-containers" in table["source"]
    assert table["pytorch"]["2.5"]["eop"] == "2025-10-29"  # the last PyTorch with SMDDP and SMP v2: frozen
    assert table["pytorch"]["2.10"] == {"ga": "2026-01-21", "eop": "2027-01-21"}


def test_status_reads_the_version_from_the_tag_and_compares_with_a_date():
    old, new = images.support(DLC.format("2.3.0")), images.support(DLC.format("2.10.0"))
    assert (old.pytorch, old.eop) == ("2.3", dt.date(2025, 4, 24)) and old.past(dt.date(2026, 11, 25))
    assert not new.past(dt.date(2026, 11, 25)) and new.past(dt.date(2027, 1, 22))
    assert "patched until 2027-01-21" in new.describe(dt.date(2026, 11, 25))
    unknown = images.support("123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:latest")
    assert unknown.eop is None and "no support dates" in unknown.describe()
    smp = images.support("658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu")
    assert smp.eop == dt.date(2025, 10, 29) and "its PyTorch's dates" in smp.source


@pytest.mark.slow
def test_every_dry_run_shows_its_image_s_support_and_warns_past_it():
    data = catalog_channels()
    current = on_sagemaker(Job("lab-x", {}, data), resolve("ml.g5.2xlarge"))
    past = images.support(current.plan.image_uri).past(dt.date.today())  # the default image ages too
    assert ("past its end of patch" if past else "patched until") in current.plan.image_note
    assert past == any("end of patch" in n for n in current.plan.notes)
    frozen = on_sagemaker(Job("lab-x", {}, data, distribution="smddp"), resolve("ml.p4d.24xlarge"))
    assert "past its end of patch" in frozen.plan.image_note
    assert any("past its end of patch" in n and "frozen" in n for n in frozen.plan.notes)
    assert images.SMDDP_DLC[0].startswith("2.3")
