"""Every lab run headless with a SageMaker target: the real SDK path, offline, in dry-run mode.

The lab runner hands each kernel ``WORKSHOP_AWS_OFFLINE=1`` (placeholder account, nothing sent) and a directory where
``helpers.sagemaker_jobs`` saves each request it built. Every lab must finish, show its request, and build requests
that botocore accepts for the target instance type; the labs listed in ``EXPECTED`` are also checked for what
their real job is about (launcher, image, channels and input modes, distribution settings, spot, checkpoints, VPC).
No training happens in a dry run, so this stays fast.
"""
from __future__ import annotations

import json

import nbformat
import pytest

from helpers import run_labs

TARGET = "ml.p4d.24xlarge"
ATTENDEE = "ci"
LABS = run_labs.discover()
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313"


def _channels(request: dict) -> dict[str, str]:
    return {c["ChannelName"]: c.get("InputMode", "File") for c in request.get("InputDataConfig", [])}


def _lab01(requests: list[dict]) -> None:
    (one,) = requests
    r = one["request"]
    assert one["lab_job"] == "lab01-single"
    assert r["AlgorithmSpecification"]["TrainingImage"] == DLC
    # one process per GPU: the SDK's torchrun driver on the p4d's 8 A100s
    assert one["launcher"] == "torchrun" and one["world_size"] == 8
    assert _channels(r) == {"train": "File", "validation": "File", "code": "File", "sm_drivers": "File"}
    assert r["HyperParameters"]["model_size"] == "base"  # a GPU target gets the DistilBERT-base shape
    assert r["HyperParameters"]["subset"] == "12000"  # smoke size: the debug slice
    assert not {"EnableManagedSpotTraining", "CheckpointConfig", "VpcConfig"} & set(r)


# lab stem -> checks on its saved requests (each: the plan's summary plus the CreateTrainingJob request)
EXPECTED = {"01_single_gpu": _lab01}


@pytest.fixture(scope="module")
def create_training_job_shape():
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTrainingJob").input_shape


@pytest.mark.slow
@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_lab_dry_runs_its_sagemaker_jobs_offline(notebook, tmp_path, monkeypatch, create_training_job_shape):
    from botocore.validate import validate_parameters

    monkeypatch.setenv("WORKSHOP_AWS_OFFLINE", "1")
    monkeypatch.setenv("WORKSHOP_ATTENDEE", ATTENDEE)
    run = run_labs.run_lab(notebook, tmp_path, {"target": TARGET, "smoke": True})
    assert run.status == "ok", run.error
    assert run.requests, f"{notebook.stem} built no SageMaker request for target {TARGET}"
    requests = [json.loads(open(p, encoding="utf-8").read()) for p in run.requests]
    for saved in requests:
        r = saved["request"]
        validate_parameters(r, create_training_job_shape)  # raises ParamValidationError when invalid
        assert saved["target"] == TARGET and r["ResourceConfig"]["InstanceType"] == TARGET
        assert r["TrainingJobName"].startswith(f"{ATTENDEE}-")
        assert r["RoleArn"].startswith("arn:aws:iam::111122223333:role/")  # the offline placeholder
        assert set(_channels(r).values()) <= {"File", "FastFile"}
        assert saved["calls"].get("sagemaker.CreateTrainingJob") == 1
    if notebook.stem in EXPECTED:
        EXPECTED[notebook.stem](requests)
    executed = nbformat.read(run.notebook, as_version=4)
    shown = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", ""))
                    for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", []))
    assert "DRY RUN - nothing launched" in shown and "CreateTrainingJob request" in shown
