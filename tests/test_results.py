"""One result shape wherever a job ran: the local runner's JobResult, a SageMaker job's result and a dry run share
``curve()`` and a repr built from status and final metrics."""

from __future__ import annotations

import pytest

from helpers.aws.dry_run import DryRun
from helpers.aws.launch import SageMakerJobResult
from helpers.job_spec import Job
from helpers.jobs import on_sagemaker
from helpers.planning import cost
from helpers.results import JobResult, RunResult
from helpers.targets import resolve

HISTORY = [
    {"kind": "train", "step": 10, "loss": 2.0},
    {"kind": "val", "step": 10, "val_loss": 1.5},
    {"kind": "train", "step": 20, "loss": 1.0},
]


def test_local_and_sagemaker_results_share_curve_and_repr(tmp_path):
    local = JobResult(
        "lab01-x", "Completed", 0, tmp_path, {"val_accuracy": 0.91234, "steps": 20}, HISTORY, {"total": 12.34}
    )
    bill = cost.job_cost("ml.g5.2xlarge", 1, 100, 120)
    remote = SageMakerJobResult(
        "alice-lab01-x", "Completed", {"val_accuracy": 0.91234}, HISTORY, bill, "https://console/x", None
    )
    for result in (local, remote):
        assert isinstance(result, RunResult)
        assert result.curve("train", "loss") == ([10, 20], [2.0, 1.0])
        assert result.curve("val", "val_loss") == ([10], [1.5])
    assert repr(local) == "JobResult(lab01-x: Completed in 12.3s; val_accuracy=0.9123)"
    assert (
        repr(remote) == f"SageMakerJobResult(alice-lab01-x: Completed; {bill}; val_accuracy=0.9123; https://console/x)"
    )


@pytest.mark.slow
def test_a_dry_run_is_a_result_with_nothing_trained(tmp_path):
    for split in ("train", "validation"):
        (tmp_path / split).mkdir()
        (tmp_path / split / "part-00000.csv").write_text("id,title,category\n1,a title,c\n")
    dry = on_sagemaker(
        Job("lab01-single", {}, {s: tmp_path / s for s in ("train", "validation")}),
        resolve("ml.g5.2xlarge"),
        echo=False,
    )
    assert isinstance(dry, DryRun) and isinstance(dry, RunResult)
    assert (dry.name, dry.status, dry.metrics, dry.history) == (dry.job_name, "not launched", {}, [])
    assert dry.curve("train", "loss") == ([], [])
    assert repr(dry) == f"DryRun({dry.job_name}: not launched; up to ${dry.estimate.max_usd:,.2f})"
    assert str(dry).startswith("DRY RUN - nothing launched")  # print() and the notebook show the whole request
