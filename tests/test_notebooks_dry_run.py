"""Every lab run headless with a SageMaker target: the real SDK path, offline, in dry-run mode.

For an ml.* target the lab runner hands each kernel ``WORKSHOP_AWS_OFFLINE=1`` (placeholder account, nothing sent;
set here too) and a directory where ``helpers.aws.sagemaker_jobs`` saves each request it built. Every lab must finish,
show its request, and build requests that botocore accepts for the target instance type; the labs listed in
``EXPECTED`` are also checked for what their real job is about (launcher, image, channels and input modes,
distribution settings, spot, checkpoints, VPC).
No training happens in a dry run, so this stays fast.
"""

from __future__ import annotations

import json
import re

import nbformat
import pytest

from course import lab, run_labs

TARGET = "ml.p4d.24xlarge"
ATTENDEE = "ci"
LABS = [one.notebook for one in lab.LABS]  # every registered lab (tests/test_registries.py)
DLC = "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"  # the newest patched DLC
BUCKET = "sagemaker-us-east-1-111122223333"  # the offline placeholder account's default bucket


def _channels(request: dict) -> dict[str, str]:
    return {c["ChannelName"]: c.get("InputMode", "File") for c in request.get("InputDataConfig", [])}


def _lab01(requests: list[dict]) -> None:
    jobs = {saved["lab_job"]: saved for saved in requests}
    assert set(jobs) == {"lab01-single", "lab01-fast"}
    one, fast = jobs["lab01-single"], jobs["lab01-fast"]
    # the fast path: every switch on, on one GPU (single-device speed, not scaling)
    assert fast["world_size"] == 1 and {
        k: fast["request"]["HyperParameters"].get(k)
        for k in ("precision", "fused_adamw", "compile", "bucket_by_length")
    } == {"precision": "bf16", "fused_adamw": "true", "compile": "true", "bucket_by_length": "true"}
    r = one["request"]
    assert one["lab_job"] == "lab01-single"
    assert r["AlgorithmSpecification"]["TrainingImage"] == DLC
    # one device, however many the instance has: scaling out is lab 02's subject
    assert one["launcher"] == "script" and one["world_size"] == 1
    assert _channels(r) == {"train": "File", "validation": "File", "code": "File", "sm_drivers": "File"}
    assert r["HyperParameters"]["model_size"] == "base"  # a GPU target gets the DistilBERT-base shape
    assert r["HyperParameters"]["subset"] == "9000"  # smoke size: the debug slice
    assert not {"EnableManagedSpotTraining", "CheckpointConfig", "VpcConfig"} & set(r)


def _lab02(requests: list[dict]) -> None:
    (one,) = requests
    r = one["request"]
    assert one["lab_job"] == "lab02-ddp" and one["launcher"] == "torchrun"
    assert r["ResourceConfig"]["InstanceCount"] == 2 and one["world_size"] == 16  # 2 x 8 A100s, one process each
    assert r["AlgorithmSpecification"]["TrainingImage"] == DLC
    assert int(r["HyperParameters"]["batch_size"]) == 64 * one["world_size"]  # the global batch: 64 per GPU
    assert r["StoppingCondition"]["MaxRuntimeInSeconds"] == 3600 and one["max_usd"] <= 60  # the lab's budget
    assert _channels(r) == {"train": "File", "validation": "File", "code": "File", "sm_drivers": "File"}


def _by_launcher(requests: list[dict], launcher: str) -> dict:
    found = [one for one in requests if one["launcher"] == launcher]
    assert found, f"no {launcher} job among {[one['lab_job'] for one in requests]}"
    return found[0]


def _lab03(requests: list[dict]) -> None:
    smddp = _by_launcher(requests, "smddp")
    r, hps = smddp["request"], smddp["request"]["HyperParameters"]
    # SMDDP AllReduce: the image's training toolkit launches mpirun, so no SDK driver and no code channel
    assert r["AlgorithmSpecification"]["TrainingImage"].endswith("/pytorch-training:2.3.0-gpu-py311")
    assert "ContainerEntrypoint" not in r["AlgorithmSpecification"]
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert json.loads(hps["sagemaker_program"]) == "train.py"
    assert json.loads(hps["sagemaker_submit_directory"]).endswith("/sourcedir.tar.gz")
    assert json.loads(hps["backend"]) == "smddp"
    assert set(_channels(r)) == {"train", "validation"}


def _lab04(requests: list[dict]) -> None:
    smp = _by_launcher(requests, "smp")
    r = smp["request"]
    assert "/smdistributed-modelparallel:" in r["AlgorithmSpecification"]["TrainingImage"]
    degrees = json.loads(r["HyperParameters"]["mp_parameters"])
    tp, shard = degrees.get("tensor_parallel_degree") or 1, degrees["hybrid_shard_degree"]
    assert smp["world_size"] % tp == 0 and (smp["world_size"] // tp) % shard == 0


def _lab05(requests: list[dict]) -> None:
    data = {"train", "validation"}
    modes = [{n: m for n, m in _channels(one["request"]).items() if n in data} for one in requests]
    assert {"train": "File", "validation": "File"} in modes
    assert {"train": "FastFile", "validation": "FastFile"} in modes  # FastFile in the request, not silently File
    fsx = [one["request"] for one in requests if "VpcConfig" in one["request"]]
    assert fsx, "the FSx job runs in the file system's VPC"
    r = fsx[0]
    assert r["VpcConfig"]["Subnets"] and r["VpcConfig"]["SecurityGroupIds"]
    file_job = next(one["request"] for one in requests if _channels(one["request"]).get("train") == "File")
    uploaded = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in file_job["InputDataConfig"]}
    for c in r["InputDataConfig"]:
        if c["ChannelName"] in data:
            source = c["DataSource"]["FileSystemDataSource"]
            assert source["FileSystemType"] == "FSxLustre"
            # the file system is linked to the bucket's root: it shows s3://<bucket>/<key> as /<mount name>/<key>
            mount, key = source["DirectoryPath"].strip("/").split("/", 1)
            assert uploaded[c["ChannelName"]] == f"s3://{BUCKET}/{key}/", "FSx mounts what the File job reads"


def _lab06(requests: list[dict]) -> None:
    spot = [one["request"] for one in requests if one["request"].get("EnableManagedSpotTraining")]
    assert spot, "the spot lab's job uses managed spot"
    r = spot[0]
    sc = r["StoppingCondition"]
    assert sc["MaxWaitTimeInSeconds"] >= sc["MaxRuntimeInSeconds"]  # the service rejects anything else
    # the checkpoint prefix outlives the job, one per launch, under the attendee's prefix
    assert (
        re.fullmatch(
            rf"s3://{BUCKET}/{ATTENDEE}/checkpoints/lab06-spot/\d{{8}}-\d{{6}}/", r["CheckpointConfig"]["S3Uri"]
        )
        and r["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    )


def _lab07(requests: list[dict]) -> None:
    profiled = [one for one in requests if one["request"]["HyperParameters"].get("profile") == "true"]
    assert profiled, "the profiling lab's job turns the profiler on"
    r = profiled[0]["request"]
    # the trace goes where SageMaker collects TensorBoard files, and the job says where they land in S3
    assert r["HyperParameters"]["profile_dir"].startswith("/opt/ml/output/tensorboard")
    assert r["TensorBoardOutputConfig"]["LocalPath"] == "/opt/ml/output/tensorboard"
    assert r["TensorBoardOutputConfig"]["S3OutputPath"].startswith("s3://")


def _lab08(requests: list[dict]) -> None:
    (one,) = requests
    r = one["request"]
    assert one["lab_job"] == "lab08-elastic" and one["launcher"] == "torchrun"
    assert r["ResourceConfig"]["InstanceCount"] == 2 and one["world_size"] == 2 * one["processes_per_host"]
    assert r["HyperParameters"]["global_batch"] == "256" and r["AlgorithmSpecification"]["TrainingImage"] == DLC
    # SageMaker's job-level answers to a failure, in the request (ModelTrainer has no argument for the first two)
    assert r["RetryStrategy"] == {"MaximumRetryAttempts": 2}
    assert r["InfraCheckConfig"] == {"EnableInfraCheck": True}
    assert r["ResourceConfig"]["KeepAlivePeriodInSeconds"] == 1800
    assert "fault" not in r["HyperParameters"]  # the fault switch stays off on a real job


# lab stem -> checks on its saved requests (each: the plan's summary plus the CreateTrainingJob request)
EXPECTED = {
    "01_single_gpu": _lab01,
    "02_ddp": _lab02,
    "03_smddp": _lab03,
    "04_model_parallel": _lab04,
    "05_input_modes": _lab05,
    "06_spot_checkpoints": _lab06,
    "07_profiling": _lab07,
    "08_failures_at_scale": _lab08,
}


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
    outputs = [o for c in executed.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    shown = "".join(str(o.get("text", "")) + str(o.get("data", {}).get("text/plain", "")) for o in outputs)
    html = "".join(str(o.get("data", {}).get("text/html", "")) for o in outputs)
    # shown as it was built (a line, or lab 01's in full), and once only even where the lab also displays what
    # run_job returned; the whole request one click away
    dry_runs = re.findall(r"DRY RUN\b[^\n]*nothing launched", shown)
    assert 1 <= len(dry_runs) <= len(requests), dry_runs
    assert "CreateTrainingJob request" in shown + html
