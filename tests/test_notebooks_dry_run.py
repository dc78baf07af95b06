"""Every lab run headless with a SageMaker target: the real SDK path, offline, in dry-run mode.

For an ml.* target the lab runner hands each kernel ``WORKSHOP_AWS_OFFLINE=1`` (placeholder account, nothing sent;
set here too) and a directory where ``helpers.aws.dry_run`` saves each request it built. Every lab must finish,
show its request, and build requests that botocore accepts for the target instance type; each lab's ``requests`` in
``course.manifest`` checks what its real job is about (launcher, image, channels and input modes, distribution
settings, spot, checkpoints, VPC).
No training happens in a dry run, so this stays fast.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from course import manifest, run_labs

TARGET = "ml.p4d.24xlarge"
ATTENDEE = manifest.DRY_RUN_ATTENDEE  # the checkpoint prefix lab 06's check expects is under it


@pytest.fixture(scope="module")
def create_training_job_shape():
    import botocore.session

    model = botocore.session.get_session().get_service_model("sagemaker")
    return model.operation_model("CreateTrainingJob").input_shape


@pytest.mark.slow
@pytest.mark.parametrize("one", manifest.LABS, ids=lambda one: one.stem)
def test_lab_dry_runs_its_sagemaker_jobs_offline(one, tmp_path, monkeypatch, create_training_job_shape):
    from botocore.validate import validate_parameters

    monkeypatch.setenv("WORKSHOP_AWS_OFFLINE", "1")
    monkeypatch.setenv("WORKSHOP_ATTENDEE", ATTENDEE)
    notebook = one.notebook
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
        assert set(manifest.channel_modes(r).values()) <= {"File", "FastFile"}
        assert saved["calls"].get("sagemaker.CreateTrainingJob") == 1
    if one.requests:
        one.requests(requests)
    executed = nbformat.read(run.notebook, as_version=4)
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    shown = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    # shown as it was built (a line, or lab 01's in full), and once only even where the lab also displays what
    # run_job returned; the whole request one click away
    dry_runs = re.findall(r"DRY RUN\b[^\n]*nothing launched", shown)
    assert 1 <= len(dry_runs) <= len(requests), dry_runs
    assert "CreateTrainingJob request" in shown + html
