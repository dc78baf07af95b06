"""A lab's Job as a SageMaker training job, built by SDK v3's ModelTrainer and checked offline.

Every request below is the one the SDK really produced: botocore validated it against the SageMaker service model and
``sagemaker_standin.offline_account`` answered it instead of sending it. Each test runs inside a block that fails the
test if anything tried the network (even where a library swallowed the error), with SDK telemetry off.
"""

from __future__ import annotations

import datetime
import io
import json
import os
import re
import tarfile
import urllib.parse
from dataclasses import replace

import pytest

from helpers import errors, jobs
from helpers.aws import account as aws
from helpers.aws import (
    images,
    launch,
    leftovers,
    local_container,
    preflight,
    settings,
    setup_errors,
)
from helpers.aws.build import source_tarball
from helpers.aws.dry_run import REQUESTS_ENV, DryRun, dry_run
from helpers.aws.launch import LaunchedJob
from helpers.checks import findings
from helpers.checks.findings import UnsupportedFeature
from helpers.errors import JobCheckError
from helpers.job_spec import METRIC_NAMES, SOURCE_DIR, Job
from helpers.planning import cost, instances
from helpers.targets import resolve
from sagemaker_standin import offline_account as aws_offline
from sagemaker_standin import sandbox
from sagemaker_standin.api_answers import ClientErrorAnswer, ScriptedJob

ROLE = sandbox.ROLE_ARN
BUCKET = sandbox.BUCKET


@pytest.fixture
def data(tmp_path):
    """Two small channel directories."""
    for name, rows in (("train", 30), ("validation", 5)):
        d = tmp_path / name
        d.mkdir()
        (d / "part-00000.csv").write_text("id,title,category\n" + "".join(f"{i},t{i},c\n" for i in range(rows)))
    return {"train": tmp_path / "train", "validation": tmp_path / "validation"}


@pytest.fixture
def no_studio(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "STUDIO_METADATA", tmp_path / "no-such-metadata.json")
    for name in (
        settings.ATTENDEE_ENV,
        settings.BUCKET_ENV,
        *settings.ROLE_ENV,
        cost.BUDGET_ENV,
        REQUESTS_ENV,
        aws_offline.OFFLINE_ENV_FLAG,
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def offline(no_studio):
    """The dry-run path: helpers.jobs.run_job picks this session up; strict, so a network attempt fails."""
    with aws_offline.offline() as off:
        yield off


@pytest.fixture
def fake_aws(no_studio, monkeypatch):
    """The launch path: a boto3 session with (fake) credentials that the dry run and launch treat as real AWS."""
    monkeypatch.setattr(aws, "_quota_codes", {})  # quota codes a test scripted stay in that test
    with (
        sandbox.offline_environment(),
        sandbox.network_guard() as attempts,
        sandbox.config_validated_once(),
    ):
        yield aws_offline.OfflineAWS()
    assert not attempts, f"something tried the network: {attempts}"


def dry(job: Job, target: str, **options) -> DryRun:
    return dry_run(job, resolve(target), preflight.LaunchOptions.of(echo=False, attendee="alice", **options))


def channel(request: dict, name: str) -> dict:
    return next(c for c in request["InputDataConfig"] if c["ChannelName"] == name)


def uploaded_json(off: aws_offline.OfflineAWS, request: dict, name: str) -> dict:
    """A JSON file the SDK staged in its ``sm_drivers`` channel (distributed.json, sourcecode.json)."""
    prefix = channel(request, "sm_drivers")["DataSource"]["S3DataSource"]["S3Uri"]
    return json.loads(off.read(f"{prefix}/{name}"))


# -------------------------------------------------------------------------------------------- one request per kind
def test_single_process_script(offline, data):
    job = Job("lab01-single", {"epochs": 1, "lr": 5e-5, "model_size": "base"}, data)
    d = dry(job, "ml.g5.2xlarge")
    r = d.request
    assert d.plan.launcher == "script" and d.plan.world_size == 1
    assert (
        r["AlgorithmSpecification"]["TrainingImage"]
        == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
    )
    assert r["ResourceConfig"] == {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30}
    assert r["RoleArn"] == ROLE and r["TrainingJobName"].startswith("alice-lab01-single-")
    # every hyperparameter reaches the script as --key value: strings in the request
    assert r["HyperParameters"] == {"epochs": "1", "lr": "5e-05", "model_size": "base"}
    # the SDK's own driver runs the script; the image's entrypoint is not used
    assert r["AlgorithmSpecification"]["ContainerEntrypoint"] == ["/bin/bash"]
    assert "sm_train.sh" in " ".join(r["AlgorithmSpecification"]["ContainerArguments"])
    assert [c["ChannelName"] for c in r["InputDataConfig"]] == ["train", "validation", "code", "sm_drivers"]
    train = channel(r, "train")
    assert train["InputMode"] == "File" and train["DataSource"]["S3DataSource"]["S3Uri"].startswith(
        f"s3://{BUCKET}/alice/inputs/"
    )
    assert train["DataSource"]["S3DataSource"]["S3Uri"].endswith("/")  # a prefix that cannot match "train-big/"
    assert offline.read(train["DataSource"]["S3DataSource"]["S3Uri"] + "part-00000.csv").startswith(b"id,title")
    assert r["OutputDataConfig"]["S3OutputPath"] == f"s3://{BUCKET}/alice/output"
    assert r["StoppingCondition"] == {"MaxRuntimeInSeconds": 7200}
    assert not {"EnableManagedSpotTraining", "CheckpointConfig", "VpcConfig", "TensorBoardOutputConfig"} & set(r)
    assert [m["Name"] for m in r["AlgorithmSpecification"]["MetricDefinitions"]] == list(METRIC_NAMES)
    assert {"Key": "workshop-attendee", "Value": "alice"} in r["Tags"]
    assert uploaded_json(offline, r, "distributed.json") == {}
    assert uploaded_json(offline, r, "sourcecode.json")["entry_script"] == "train.py"
    code = channel(r, "code")["DataSource"]["S3DataSource"]["S3Uri"]
    assert b"def main" in offline.read(f"{code}/train.py")  # the container-side source, as it is on disk
    assert d.calls["sagemaker.CreateTrainingJob"] == 1 and "sagemaker.StartTrainingJob" not in d.calls


@pytest.mark.slow
def test_torchrun_on_two_multi_gpu_instances(offline, data):
    job = Job("lab02-ddp", {"epochs": 1}, data, instance_count=2)
    d = dry(job, "ml.g5.12xlarge")
    r = d.request
    assert d.plan.launcher == "torchrun" and d.plan.processes_per_host == 4 and d.plan.world_size == 8
    assert r["ResourceConfig"]["InstanceCount"] == 2 and r["ResourceConfig"]["InstanceType"] == "ml.g5.12xlarge"
    # process_count_per_node unset: the SDK's torchrun driver starts one process per GPU it finds
    assert uploaded_json(offline, r, "distributed.json") == {"process_count_per_node": None, "smp": None}
    drivers = channel(r, "sm_drivers")["DataSource"]["S3DataSource"]["S3Uri"][len(f"s3://{BUCKET}/") :]
    assert f"{drivers}/distributed_drivers/torchrun_driver.py" in offline.objects[BUCKET]

    two = dry(Job("lab02-ddp", {}, data, processes_per_host=2), "ml.g5.12xlarge")
    assert uploaded_json(offline, two.request, "distributed.json")["process_count_per_node"] == 2


def test_smddp_through_the_images_training_toolkit(offline, data):
    job = Job("lab03-smddp", {"epochs": 2, "precision": "bf16"}, data, distribution="smddp", instance_count=2)
    d = dry(job, "ml.p4d.24xlarge")
    r, hps = d.request, d.request["HyperParameters"]
    assert d.plan.launcher == "smddp" and d.plan.world_size == 16
    assert (
        r["AlgorithmSpecification"]["TrainingImage"]
        == "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311"
    )
    assert images.image_has_smddp(r["AlgorithmSpecification"]["TrainingImage"])
    # no SDK driver: the image's own entrypoint (the training toolkit) runs mpirun ... smddprun
    assert "ContainerEntrypoint" not in r["AlgorithmSpecification"]
    assert [c["ChannelName"] for c in r["InputDataConfig"]] == ["train", "validation"]
    assert hps["sagemaker_distributed_dataparallel_enabled"] == "true"
    assert json.loads(hps["sagemaker_program"]) == "train.py"
    assert json.loads(hps["sagemaker_instance_type"]) == "ml.p4d.24xlarge"
    assert json.loads(hps["sagemaker_region"]) == "us-east-1"
    # the toolkit JSON-decodes every value, as SDK v2 encoded them
    assert json.loads(hps["epochs"]) == 2 and json.loads(hps["precision"]) == "bf16"
    assert json.loads(hps["backend"]) == "smddp"  # distribution='smddp' implies the script's SMDDP backend
    submit = json.loads(hps["sagemaker_submit_directory"])
    assert submit.startswith(f"s3://{BUCKET}/alice/source/") and submit.endswith("/sourcedir.tar.gz")
    with tarfile.open(fileobj=io.BytesIO(offline.read(submit))) as tar:
        names = tar.getnames()
        assert tar.extractfile("train.py").read() == (SOURCE_DIR / "train.py").read_bytes()
    assert "catalog_data.py" in names and not any("__pycache__" in n for n in names)


def test_the_source_tarball_is_reproducible(tmp_path):
    a = source_tarball(SOURCE_DIR, (tmp_path / "a").mkdir() or tmp_path / "a").read_bytes()
    b = source_tarball(SOURCE_DIR, (tmp_path / "b").mkdir() or tmp_path / "b").read_bytes()
    assert a == b  # same content, same name in S3: an unchanged source is not uploaded twice


def test_smp_v2_on_the_smp_image(offline, data):
    job = Job(
        "lab07-smp",
        {"epochs": 1},
        data,
        distribution="smp",
        instance_count=2,
        smp={"hybrid_shard_degree": 8, "tensor_parallel_degree": 2},
    )
    d = dry(job, "ml.p4d.24xlarge")
    r = d.request
    assert (
        r["AlgorithmSpecification"]["TrainingImage"]
        == "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124"
    )
    assert json.loads(r["HyperParameters"]["mp_parameters"]) == {"hybrid_shard_degree": 8, "tensor_parallel_degree": 2}
    assert uploaded_json(offline, r, "distributed.json")["smp"]["tensor_parallel_degree"] == 2
    assert images.image_has_smddp(r["AlgorithmSpecification"]["TrainingImage"])  # SMP images bundle SMDDP


def test_the_image_comes_from_the_job_s_own_region(no_studio, data):
    # the session knows the region; nobody passed region=: the image must still be that region's
    with aws_offline.offline(region="eu-west-1") as off:
        d = dry(Job("lab01-single", {}, data), "ml.g5.2xlarge", session=off)
    assert d.request["AlgorithmSpecification"]["TrainingImage"].startswith(
        "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch:"
    )


def test_bf16_on_a_gpu_without_it_is_a_note_the_script_runs_fp16(offline, data):
    d = dry(Job("lab01-fast", {"precision": "bf16"}, data), "ml.g4dn.xlarge")  # lab 01's GPU switches, on a T4
    assert any("no bf16 tensor cores" in n and "fp16" in n for n in d.plan.notes)


def test_a_count_of_tokens_is_not_a_secret(offline, data):  # a token's text is: see above
    job = Job("lab04-lm", {"generate_tokens": 20}, data, entry_point="train_lm.py")
    assert dry(job, "ml.g5.2xlarge").request["HyperParameters"]["generate_tokens"] == "20"


@pytest.mark.slow
def test_a_job_without_a_price_keeps_its_note_through_the_region_s_plan(offline, data, monkeypatch):
    monkeypatch.setattr(
        cost, "estimate_for", lambda *a, **k: (_ for _ in ()).throw(cost.UnknownPrice("no price for x"))
    )
    d = dry(Job("lab01-single", {}, data), "ml.g5.2xlarge")
    assert d.estimate is None and "no price for x" in d.plan.notes


def test_a_v100_gets_an_image_built_for_it(offline, data):
    image = dry(Job("lab02-ddp", {}, data), "ml.p3.16xlarge").request["AlgorithmSpecification"]["TrainingImage"]
    # CUDA 12: Volta still runs
    assert image.endswith(f"pytorch-training:{images.SMDDP_DLC[0]}-gpu-{images.SMDDP_DLC[1]}")


def test_spot_with_max_wait_and_checkpoints(offline, data):
    job = Job("lab04-spot", {"epochs": 3}, data, spot=True, checkpoints=True, max_runtime_s=3600)
    d = dry(job, "ml.g5.2xlarge")
    r = d.request
    assert r["EnableManagedSpotTraining"] is True
    assert r["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    # one prefix per launch: a relaunch does not pick up the last run's (finished) checkpoints
    assert re.fullmatch(rf"s3://{BUCKET}/alice/checkpoints/lab04-spot/\d{{8}}-\d{{6}}/", r["CheckpointConfig"]["S3Uri"])
    assert r["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert any("max_wait_s not set" in n for n in d.plan.notes)
    assert d.estimate.spot and d.estimate.max_usd == pytest.approx(1.52)  # AWS guarantees no spot saving

    given = dry(
        Job("lab04-spot", {}, data, spot=True, checkpoints=True, max_runtime_s=3600, max_wait_s=5400),
        "ml.g5.2xlarge",
        checkpoint_s3_uri="s3://team-bucket/ckpt/run-7/",
    )
    assert given.request["StoppingCondition"]["MaxWaitTimeInSeconds"] == 5400
    assert given.request["CheckpointConfig"]["S3Uri"] == "s3://team-bucket/ckpt/run-7/"


def test_checkpoints_without_spot(offline, data):
    r = dry(Job("lab04-ckpt", {}, data, checkpoints=True), "ml.g5.2xlarge").request
    assert "EnableManagedSpotTraining" not in r and r["CheckpointConfig"]["LocalPath"] == "/opt/ml/checkpoints"
    assert "MaxWaitTimeInSeconds" not in r["StoppingCondition"]


def test_fastfile_channels_are_fastfile_in_the_request(offline, data):
    job = Job(
        "lab05-fastfile",
        {},
        {**data, "extra": "s3://shared-data/catalog/big/"},
        input_mode="FastFile",
        channel_modes={"validation": "File"},
    )
    d = dry(job, "ml.g5.2xlarge")
    r = d.request
    assert channel(r, "train")["InputMode"] == "FastFile"
    assert channel(r, "extra")["InputMode"] == "FastFile"
    assert channel(r, "extra")["DataSource"]["S3DataSource"]["S3Uri"] == "s3://shared-data/catalog/big/"
    assert channel(r, "validation")["InputMode"] == "File"
    assert not any(k.startswith("catalog/big") for k in offline.objects.get("shared-data", {}))  # not re-uploaded


def test_the_sdk_pitfall_a_plain_string_source_is_file_mode(offline):
    """Why the helpers always build an explicit S3DataSource: the SDK turns a plain string into File mode."""
    from sagemaker.core.training.configs import Compute, InputData
    from sagemaker.train import ModelTrainer

    trainer = ModelTrainer(
        sagemaker_session=offline.sagemaker_session(),
        role=ROLE,
        training_image="img:1",
        training_input_mode="FastFile",
        compute=Compute(instance_type="ml.g5.2xlarge"),
        input_data_config=[InputData(channel_name="train", data_source="s3://b/train/")],
    )
    with sandbox.config_validated_once():
        trainer.train(wait=False, logs=False)
    assert channel(offline.request("CreateTrainingJob"), "train")["InputMode"] == "File"


@pytest.mark.parametrize(
    "module", ["sagemaker.pytorch", "sagemaker.estimator", "sagemaker.inputs", "sagemaker.debugger"]
)
def test_the_v2_api_is_gone_from_the_installed_sdk(module):
    import importlib

    with pytest.raises(ModuleNotFoundError):  # the README's v2 -> v3 table exists because of this
        importlib.import_module(module)


def test_model_trainer_takes_no_v2_distribution_argument():
    from pydantic import ValidationError
    from sagemaker.train import ModelTrainer

    with pytest.raises(ValidationError, match="distribution"):
        ModelTrainer(training_image="img:1", distribution={"torch_distributed": {"enabled": True}})


def test_fsx_channel_with_its_vpc(offline, data):
    fsx = {
        "file_system_id": "fs-0123456789abcdef0",
        "directory_path": "/abcdef12/catalog",
        "subnets": ["subnet-0aa"],
        "security_group_ids": ["sg-0bb"],
    }
    job = Job(
        "lab05-fsx", {}, {"train": "train", "validation": data["validation"]}, fsx=fsx, channel_modes={"train": "FSx"}
    )
    d = dry(job, "ml.p4d.24xlarge")
    r = d.request
    assert channel(r, "train")["DataSource"] == {
        "FileSystemDataSource": {
            "FileSystemId": "fs-0123456789abcdef0",
            "FileSystemType": "FSxLustre",
            "DirectoryPath": "/abcdef12/catalog/train",
            "FileSystemAccessMode": "ro",
        }
    }
    assert channel(r, "validation")["DataSource"]["S3DataSource"]
    assert r["VpcConfig"] == {"SecurityGroupIds": ["sg-0bb"], "Subnets": ["subnet-0aa"]}
    # in the VPC, S3 is reached only through an endpoint or NAT: the code channels too, not only pip's PyPI
    assert {"code", "sm_drivers"} <= {c["ChannelName"] for c in r["InputDataConfig"]}
    s3 = next(n for n in d.plan.notes if "S3 VPC endpoint or a NAT gateway" in n)
    assert "code channels" in s3 and "sm_drivers" in s3
    assert any("NAT gateway" in n and "requirements.txt" in n for n in d.plan.notes)
    smddp = jobs.preflight(replace(job, distribution="smddp", instance_count=2), resolve("ml.p4d.24xlarge"))
    assert any("sourcedir.tar.gz" in n and "S3 VPC endpoint" in n for n in smddp.notes)


def test_tensorboard_output_when_the_script_writes_there(offline, data):
    r = dry(
        Job("lab07-tb", {"profile": True, "profile_dir": "/opt/ml/output/tensorboard/profile"}, data), "ml.g5.2xlarge"
    ).request
    assert r["TensorBoardOutputConfig"] == {
        "LocalPath": "/opt/ml/output/tensorboard",
        "S3OutputPath": f"s3://{BUCKET}/alice/tensorboard/lab07-tb/",
    }


@pytest.mark.slow
def test_telemetry_is_off(offline, data, monkeypatch):
    from sagemaker.core.telemetry import telemetry_logging

    sent = []
    monkeypatch.setattr(telemetry_logging, "_send_telemetry_request", lambda *a, **k: sent.append(a))
    dry(Job("lab01-single", {}, data), "ml.g5.2xlarge")
    assert sent == []


# ---------------------------------------------------------------------------------------------------- the dry run shown
def test_secret_looking_hyperparameters_are_refused_before_any_call(offline, data, tmp_path):
    src = tmp_path / "src"  # a script that takes a secret-looking option
    src.mkdir()
    (src / "train.py").write_text("import argparse\np = argparse.ArgumentParser()\np.add_argument('--hf_token')\n")
    with pytest.raises(JobCheckError, match="hf_token look like secrets.*DescribeTrainingJob.*Secrets Manager"):
        dry(Job("lab01-single", {"hf_token": "hf_abc123"}, data, source_dir=src), "ml.g5.2xlarge")
    assert offline.calls == []


def test_secret_looking_environment_variables_are_refused_before_any_call(offline, data):
    with pytest.raises(JobCheckError, match="environment variable.*HF_TOKEN look like secrets"):
        dry(Job("lab01-single", {}, data, environment={"HF_TOKEN": "hf_abc123"}), "ml.g5.2xlarge")
    assert offline.calls == []


def test_traffic_encryption_between_instances_is_in_the_request_and_its_cost_is_said(offline, data):
    job = Job("lab02-ddp", {"epochs": 1}, data, instance_count=2, distribution="torchrun", encrypt_traffic=True)
    shown = dry(job, "ml.g5.12xlarge")
    assert shown.request["EnableInterContainerTrafficEncryption"] is True
    assert any("IPsec" in n and "increase training time" in n for n in shown.plan.notes)
    plain = dry(replace(job, encrypt_traffic=False), "ml.g5.12xlarge")
    assert not plain.request.get("EnableInterContainerTrafficEncryption")


def test_the_dry_run_shows_request_cost_and_uploads(offline, data, capsys):
    job = Job(
        "lab01-single",
        {"epochs": 1, "tokenize": "on_the_fly"},
        data,
        environment={"NCCL_DEBUG": "INFO"},
    )
    d = jobs.run_job(job, resolve("ml.g5.2xlarge"), attendee="alice", budget_usd=1.0)
    printed = capsys.readouterr().out
    assert printed.startswith("DRY RUN - nothing launched")
    for text in (
        "1 x ml.g5.2xlarge",
        "CreateTrainingJob request:",
        '"TrainingJobName": "alice-lab01-single-',
        "on-demand, at most  $3.04",
        "OVER BUDGET",
        "upload     1 file(s)",
        "launch=True",
    ):
        assert text in printed, text
    assert '"tokenize": "on_the_fly"' in printed  # a name that only contains "token" is shown
    assert d.request["Environment"]["NCCL_DEBUG"] == "INFO"
    assert d.over_budget and d.history == [] and d.metrics == {}
    assert "<details>" in d._repr_html_() and "k-1" not in d._repr_html_()
    with pytest.raises(preflight.LaunchRefused, match="placeholder"):
        d.launch()


def test_a_dry_run_asked_for_in_full_shows_whole_and_every_other_in_a_line_with_the_rest_folded(
    offline, data, monkeypatch
):
    shown = []
    monkeypatch.setattr("IPython.display.display", lambda bundle, raw=False: shown.append(bundle))
    first = dry(Job("lab01-single", {"epochs": 1}, data), "ml.g5.2xlarge")
    second = dry(Job("lab02-ddp", {"epochs": 1}, data, instance_count=2, distribution="torchrun"), "ml.g5.12xlarge")
    assert first.in_full() is first  # lab 01's, which the lab reads field by field
    first._display_now()
    second._display_now()
    assert shown[0]["text/plain"] == str(first) and "CreateTrainingJob request" in shown[0]["text/plain"]
    line = shown[1]["text/plain"]
    assert "\n" not in line and line == second.one_line()
    assert (
        line.startswith("DRY RUN ")
        and "lab02-ddp" in line
        and "2 x ml.g5.12xlarge" in line
        and "world size 8" in line
        and "up to $" in line
    )
    folded = shown[1]["text/html"]
    assert folded.startswith("<details><summary>") and second._repr_html_() in folded  # nothing lost, only folded


def test_each_dry_run_request_is_saved_for_the_lab_runner(offline, data, tmp_path, monkeypatch):
    monkeypatch.setenv(REQUESTS_ENV, str(tmp_path / "requests"))
    dry(Job("lab02-ddp", {}, data, instance_count=2), "ml.g5.12xlarge")
    dry(Job("lab02-ddp-fsdp", {}, data), "ml.g5.12xlarge")
    saved = sorted((tmp_path / "requests").glob("*.json"))
    assert [p.name for p in saved] == ["01-lab02-ddp.json", "02-lab02-ddp-fsdp.json"]
    first = json.loads(saved[0].read_text())
    assert first["launcher"] == "torchrun" and first["world_size"] == 8 and first["target"] == "ml.g5.12xlarge"
    assert first["request"]["ResourceConfig"]["InstanceCount"] == 2


def test_a_dry_run_with_an_account_not_ready_to_launch_still_shows_the_request(fake_aws, data):
    """SSO admin credentials: no role SageMaker can assume. The dry run says so and shows the request anyway."""
    caller = "arn:aws:sts::111122223333:assumed-role/AWSReservedSSO_Admin_1/alice"
    fake_aws.respond("GetCallerIdentity", {"Account": "111122223333", "UserId": "AROA:alice", "Arn": caller})
    fake_aws.respond(
        "GetRole",
        {
            "Role": {
                "RoleName": "AWSReservedSSO_Admin_1",
                "Path": "/",
                "RoleId": "AROAEXAMPLE",
                "Arn": "arn:aws:iam::111122223333:role/AWSReservedSSO_Admin_1",
                "CreateDate": "2026-01-01T00:00:00Z",
                "AssumeRolePolicyDocument": urllib.parse.quote(
                    json.dumps(
                        {
                            "Version": "2012-10-17",
                            "Statement": [
                                {
                                    "Effect": "Allow",
                                    "Action": "sts:AssumeRoleWithSAML",
                                    "Principal": {"Federated": "arn:aws:iam::111122223333:saml"},
                                }
                            ],
                        }
                    )
                ),
            }
        },
    )
    d = dry(Job("lab01-single", {}, data), "ml.g5.2xlarge", session=fake_aws.boto_session)
    assert d.request["RoleArn"] == ROLE and "not ready to launch (RoleError)" in d.where
    assert any("SageMaker cannot assume" in n and "Placeholders are shown" in n for n in d.notes)


def test_headless_without_credentials_the_dry_run_uses_placeholders(no_studio, data, capsys):
    """No offline block, no credentials: the learner still sees the request, and what a launch will need."""
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        for key in sandbox.FAKE_CREDENTIALS:  # offline_environment puts them back afterwards
            os.environ.pop(key)
        d = jobs.run_job(Job("lab01-single", {}, data), resolve("ml.g5.2xlarge"), attendee="alice")
    assert not attempts
    assert d.request["RoleArn"] == ROLE and "no AWS credentials" in d.where
    assert any("aws configure" in n for n in d.notes)
    assert "Placeholders are shown" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------- preflight errors
ERRORS = [
    ("unknown type", dict(), "ml.p4d.24xlarg", {}, instances.UnknownInstanceType, "'ml.p4d.24xlarge'"),
    ("no ml prefix", dict(), "p4d.24xlarge", {}, instances.UnknownInstanceType, "start with 'ml.'"),
    (
        "smddp on p5",
        dict(distribution="smddp"),
        "ml.p5.48xlarge",
        {},
        findings.UnsupportedFeature,
        "supports only ml.p4d.24xlarge, ml.p4de.24xlarge, ml.p3dn.24xlarge",
    ),
    (
        "smddp on g5",
        dict(distribution="smddp"),
        "ml.g5.48xlarge",
        {},
        findings.UnsupportedFeature,
        "distribution='torchrun'",
    ),
    (
        "smddp, image without it",
        dict(
            distribution="smddp",
            image_uri=("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313"),
        ),
        "ml.p4d.24xlarge",
        {},
        findings.UnsupportedFeature,
        "does not ship SMDDP",
    ),
    (
        "smp, image without it",
        dict(distribution="smp", image_uri="123.dkr.ecr.us-east-1.amazonaws.com/mine:1"),
        "ml.p4d.24xlarge",
        {},
        findings.UnsupportedFeature,
        "SMP image",
    ),
    ("smp on g5", dict(distribution="smp"), "ml.g5.48xlarge", {}, findings.UnsupportedFeature, "ml.p4d.24xlarge"),
    (
        "smp degrees",
        dict(distribution="smp", smp={"tensor_parallel_degree": 3}),
        "ml.p4d.24xlarge",
        {},
        findings.ProcessCountError,
        "must divide the 8 GPUs of the cluster",
    ),
    (
        "fsx without subnets",
        dict(
            channel_modes={"train": "FSx"},
            fsx={"file_system_id": "fs-0123456789abcdef0", "directory_path": "/mnt/x", "security_group_ids": ["sg-1"]},
        ),
        "ml.p4d.24xlarge",
        {},
        findings.FSxConfigError,
        "needs subnets.*ports 988 and 1018-1023.*S3 VPC endpoint or NAT for everything.*code channels.*sm_drivers",
    ),
    (
        "fsx without security groups",
        dict(
            channel_modes={"train": "FSx"},
            fsx={"file_system_id": "fs-0123456789abcdef0", "directory_path": "/mnt/x", "subnets": ["subnet-1"]},
        ),
        "ml.p4d.24xlarge",
        {},
        findings.FSxConfigError,
        "needs security_group_ids",
    ),
    (
        "max wait below max runtime",
        dict(spot=True, checkpoints=True, max_runtime_s=3600, max_wait_s=1800),
        "ml.g5.2xlarge",
        {},
        findings.SpotConfigError,
        "max_wait_s >= 3600",
    ),
    ("spot without checkpoints", dict(spot=True), "ml.g5.2xlarge", {}, findings.SpotConfigError, "checkpoints=True"),
    ("max wait without spot", dict(max_wait_s=9000), "ml.g5.2xlarge", {}, findings.SpotConfigError, "spot=True"),
    (
        "more processes than gpus",
        dict(processes_per_host=8),
        "ml.g5.12xlarge",
        {},
        findings.ProcessCountError,
        "has 4 GPU.*at most 4",
    ),
    ("pipe mode", dict(input_mode="Pipe"), "ml.g5.2xlarge", {}, findings.ChannelError, "FastFile"),
    ("reserved channel", dict(channels={"code": "s3://b/c/"}), "ml.g5.2xlarge", {}, findings.ChannelError, "reserved"),
    (
        "bare role name",
        dict(),
        "ml.g5.2xlarge",
        {"role": "MySageMakerRole"},
        setup_errors.RoleError,
        "arn:aws:iam::<account-id>:role/MySageMakerRole",
    ),
    ("malformed bucket", dict(), "ml.g5.2xlarge", {"bucket": "My_Bucket"}, setup_errors.BucketError, "bucket name"),
    ("a local target", dict(), "local_cpu", {}, errors.TargetError, "run_job"),
    (
        "smddp with another backend",
        dict(distribution="smddp", hyperparameters={"backend": "nccl"}),
        "ml.p4d.24xlarge",
        {},
        JobCheckError,
        "set it to 'smddp'",
    ),
    (
        "misspelt hyperparameter",
        dict(hyperparameters={"bucket_by_lenght": True}),
        "ml.g5.2xlarge",
        {},
        JobCheckError,
        "no option 'bucket_by_lenght' \\(did you mean 'bucket_by_length'\\?\\): it would be ignored",
    ),
    (
        "fp16 on a CPU instance",
        dict(hyperparameters={"precision": "fp16"}),
        "ml.c5.2xlarge",
        {},
        findings.UnsupportedFeature,
        "needs a GPU",
    ),
    (
        "bad hyperparameter value",
        dict(hyperparameters={"batch_size": "lots"}),
        "ml.g5.2xlarge",
        {},
        JobCheckError,
        "batch_size='lots' is not an int",
    ),
]


@pytest.mark.parametrize("case, fields, target, options, error, says", ERRORS, ids=[e[0] for e in ERRORS])
def test_preflight_errors_name_the_fix_before_any_aws_call(offline, data, case, fields, target, options, error, says):
    job = Job("lab-x", fields.pop("hyperparameters", {}), fields.pop("channels", data), **fields)
    with pytest.raises(error, match=says):
        dry(job, target, **options)
    assert offline.calls == [], f"{case}: AWS was called before the error"


def test_a_malformed_data_file_is_refused_before_any_upload(offline, data):
    (data["train"] / "part-00000.csv").write_text("id,name\n1,t1\n")  # no title or category column
    with pytest.raises(findings.ChannelError, match="channel 'train': .*part-00000.csv.*category"):
        dry(Job("lab-x", {}, data), "ml.g5.2xlarge")
    assert offline.calls == []


def test_missing_channel_directory(offline, tmp_path):
    with pytest.raises(findings.ChannelError, match="catalog_generator.catalog build"):
        dry(Job("lab-x", {}, {"train": tmp_path / "nowhere"}), "ml.g5.2xlarge")
    assert offline.calls == []


# ---------------------------------------------------------------------------------------------------- launch: refusals
def test_launch_inside_an_offline_block_is_refused(offline, data):
    with pytest.raises(preflight.LaunchRefused, match="offline"):
        jobs.run_job(Job("lab-x", {}, data), resolve("ml.g5.2xlarge"), launch=True, budget_usd=100, echo=False)
    assert offline.calls == []


def test_budget_exceeded_refuses_before_any_call(fake_aws, data):
    job = Job("lab03-smddp", {}, data, distribution="smddp", instance_count=2)
    with pytest.raises(cost.BudgetExceeded, match=r"up to \$101.01 on-demand.*budget of \$20.00"):
        jobs.run_job(
            job, resolve("ml.p4d.24xlarge"), launch=True, budget_usd=20, session=fake_aws.boto_session, attendee="alice"
        )
    assert fake_aws.calls == []


def test_budget_from_the_environment(fake_aws, data, monkeypatch):
    monkeypatch.setenv(cost.BUDGET_ENV, "1")
    with pytest.raises(cost.BudgetExceeded, match=r"\$3.04"):
        jobs.run_job(
            Job("lab-x", {}, data),
            resolve("ml.g5.2xlarge"),
            launch=True,
            session=fake_aws.boto_session,
            attendee="alice",
        )
    assert fake_aws.calls == []


def test_no_credentials_refuses_before_any_call(no_studio, data):
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        for key in sandbox.FAKE_CREDENTIALS:
            os.environ.pop(key)  # offline_environment puts them back afterwards
        off = aws_offline.OfflineAWS(credentials=False)
        with pytest.raises(setup_errors.NoCredentials, match="aws configure"):
            jobs.run_job(
                Job("lab-x", {}, data),
                resolve("ml.g5.2xlarge"),
                launch=True,
                budget_usd=10,
                session=off.boto_session,
                attendee="alice",
            )
        assert off.calls == []
    assert not attempts


def test_bare_role_name_refuses_a_launch_before_any_call(fake_aws, data):
    with pytest.raises(setup_errors.RoleError, match="full ARN"):
        jobs.run_job(
            Job("lab-x", {}, data),
            resolve("ml.g5.2xlarge"),
            launch=True,
            budget_usd=10,
            role="SageMakerRole",
            session=fake_aws.boto_session,
            attendee="alice",
        )
    assert fake_aws.calls == []


def test_a_missing_bucket_refuses_before_anything_is_written(fake_aws, data):
    fake_aws.respond("HeadBucket", ClientErrorAnswer("404", "Not Found", 404))
    with pytest.raises(setup_errors.BucketError, match="aws s3 mb s3://no-such-bucket"):
        jobs.run_job(
            Job("lab-x", {}, data),
            resolve("ml.g5.2xlarge"),
            launch=True,
            budget_usd=10,
            bucket="no-such-bucket",
            session=fake_aws.boto_session,
            attendee="alice",
        )
    assert set(fake_aws.summary()) == {"sts.GetCallerIdentity", "iam.GetRole", "s3.HeadBucket"}  # reads only


def test_a_quota_too_low_refuses_before_anything_is_written(fake_aws, data):
    quota = {
        "QuotaName": "ml.p4d.24xlarge for training job usage",
        "QuotaCode": "L-P4DTRAIN",
        "ServiceCode": "sagemaker",
    }
    fake_aws.respond("ListAWSDefaultServiceQuotas", {"Quotas": [{**quota, "Value": 0.0}]})
    fake_aws.respond("GetServiceQuota", {"Quota": {**quota, "Value": 1.0}})  # raised from the default 0 to 1
    job = Job("lab03-smddp", {}, data, distribution="smddp", instance_count=2)
    with pytest.raises(setup_errors.QuotaError, match="is 1 and this job asks for 2"):
        jobs.run_job(
            job,
            resolve("ml.p4d.24xlarge"),
            launch=True,
            budget_usd=500,
            session=fake_aws.boto_session,
            attendee="alice",
        )
    assert not fake_aws.calls_to("PutObject") and not fake_aws.calls_to("CreateTrainingJob")


def test_a_shared_login_name_cannot_launch(fake_aws, data, monkeypatch):
    monkeypatch.setattr(settings.getpass, "getuser", lambda: "sagemaker-user")
    with pytest.raises(setup_errors.AwsSetupError, match="WORKSHOP_ATTENDEE"):
        jobs.run_job(
            Job("lab-x", {}, data), resolve("ml.g5.2xlarge"), launch=True, budget_usd=10, session=fake_aws.boto_session
        )
    assert not fake_aws.calls_to("CreateTrainingJob")


# ---------------------------------------------------------------------------------------------------- launch and follow
LOG = [
    "Invoking script with the following command:",
    "[setup] steps=100 world_size=2 precision=bf16",
    "[train] step=50 epoch=0 train_loss=1.2500 samples_per_sec=900.0",
    "[1,0]<stdout>:[train] step=100 epoch=0 train_loss=0.8000 samples_per_sec=950.0",
    "[eval] step=100 val_loss=0.7000 val_accuracy=0.8100 val_macro_f1=0.7000",
    "[final] val_accuracy=0.8100 val_macro_f1=0.7000 samples_per_sec=940.0",
]


def test_launch_follows_status_and_logs_to_the_bill(fake_aws, data, capsys):
    fake_aws.script_job(
        ScriptedJob(
            statuses=[
                ("InProgress", "Starting"),
                ("InProgress", "Downloading"),
                ("InProgress", "Training"),
                ("Completed", "Completed"),
            ],
            log_lines=LOG,
            training_seconds=1000,
            billable_seconds=300,
            final_metrics={"val_accuracy": 0.81},
        )
    )
    job = Job("lab04-spot", {"epochs": 1}, data, spot=True, checkpoints=True, max_runtime_s=3600)
    result = jobs.run_job(
        job,
        resolve("ml.g5.2xlarge"),
        launch=True,
        budget_usd=5,
        session=fake_aws.boto_session,
        attendee="alice",
        poll_s=0,
    )
    out = capsys.readouterr().out
    assert result.status == "Completed" and result.name.startswith("alice-lab04-spot-")
    assert result.metrics == {"val_accuracy": 0.81, "val_macro_f1": 0.7, "samples_per_sec": 940.0}
    assert result.curve("train", "train_loss") == ([50, 100], [1.25, 0.8])  # the mpirun-tagged line parsed too
    assert (result.training_seconds, result.billable_seconds) == (1000, 300)
    assert result.cost.savings == pytest.approx(0.7) and "spot saved 70%" in out
    assert result.model_artifacts.endswith(f"/{result.name}/output/model.tar.gz")
    assert result.console_url == aws.console_url("us-east-1", result.name) and result.console_url in out
    for text in (
        "launched alice-lab04-spot-",
        "--- InProgress / Downloading",
        "<- step 50/100 (50%)",
        "--- Completed / Completed",
    ):
        assert text in out, text
    created = fake_aws.request("CreateTrainingJob")
    assert created["EnableManagedSpotTraining"] and created["CheckpointConfig"]["S3Uri"].startswith(
        f"s3://{BUCKET}/alice/checkpoints/"
    )
    made = list(fake_aws.summary())
    assert (
        made.index("sts.GetCallerIdentity")
        < made.index("service-quotas.ListAWSDefaultServiceQuotas")
        < made.index("sagemaker.CreateTrainingJob")
    )
    assert "cloudwatch-logs.GetLogEvents" in made


@pytest.mark.slow
def test_a_failed_job_raises_with_its_reason_and_log_tail(fake_aws, data):
    fake_aws.script_job(
        ScriptedJob(
            statuses=[("InProgress", "Training"), ("Failed", "Failed")],
            log_lines=["[setup] steps=10", "RuntimeError: CUDA out of memory"],
            training_seconds=60,
            failure_reason="AlgorithmError: ExitCode 1",
        )
    )
    with pytest.raises(launch.TrainingJobFailed) as err:
        jobs.run_job(
            Job("lab-x", {}, data),
            resolve("ml.g5.2xlarge"),
            launch=True,
            budget_usd=5,
            session=fake_aws.boto_session,
            attendee="alice",
            poll_s=0,
            echo=False,
        )
    msg = str(err.value)
    assert "failed: AlgorithmError: ExitCode 1" in msg and "CUDA out of memory" in msg and "console" in msg
    assert err.value.result.billable_seconds == 60


@pytest.mark.slow
def test_launch_without_waiting_then_stop(fake_aws, data):
    fake_aws.script_job(ScriptedJob(statuses=[("InProgress", "Training")]))
    launched = jobs.run_job(
        Job("lab-x", {}, data),
        resolve("ml.g5.2xlarge"),
        launch=True,
        budget_usd=5,
        session=fake_aws.boto_session,
        attendee="alice",
        wait=False,
        echo=False,
        poll_s=0,
    )
    assert isinstance(launched, LaunchedJob) and launched.describe()["TrainingJobStatus"] == "InProgress"
    launched.stop()
    assert fake_aws.request("StopTrainingJob") == {"TrainingJobName": launched.name}
    result = launched.wait(check=False)
    assert result.status == "Stopped"
    assert leftovers.cleanup("alice", boto_session=fake_aws.boto_session) == []


@pytest.mark.slow
def test_a_dry_run_launches_with_its_own_options_and_refuses_unknown_ones(fake_aws, data):
    fake_aws.script_job(ScriptedJob(statuses=[("InProgress", "Training")]))
    d = jobs.run_job(
        Job("lab-x", {}, data),
        resolve("ml.g5.2xlarge"),
        budget_usd=5,
        session=fake_aws.boto_session,
        attendee="alice",
        echo=False,
        poll_s=0,
    )
    assert d.launch_options == preflight.LaunchOptions(
        budget_usd=5, attendee="alice", session=fake_aws.boto_session, echo=False, poll_s=0
    )
    with pytest.raises(errors.UnknownOption, match="'wiat' for a SageMaker job; the options are budget_usd, attendee"):
        d.launch(wiat=False)
    launched = d.launch(wait=False)  # the dry run's options, plus this one
    assert isinstance(launched, LaunchedJob) and launched.name.startswith("alice-lab-x-")
    assert len(fake_aws.calls_to("CreateTrainingJob")) == 1


def test_run_job_refuses_an_unknown_sagemaker_option_naming_the_valid_ones(offline, data):

    with pytest.raises(
        TypeError,
        match="'budget_usdd', 'echoo' for a SageMaker job; the options are budget_usd, "
        "attendee, session, role, bucket, region, wait, check, echo, ",
    ):
        jobs.run_job(Job("lab-x", {}, data), resolve("ml.g5.2xlarge"), budget_usdd=5, echoo=False)
    assert offline.calls == []


@pytest.mark.slow
def test_cleanup_after_launches_stops_only_running_jobs_of_this_attendee(fake_aws, data):
    fake_aws.script_job(ScriptedJob(statuses=[("InProgress", "Training")]))
    names = [
        jobs.run_job(
            Job(f"lab0{i}-x", {}, data),
            resolve("ml.g5.2xlarge"),
            launch=True,
            budget_usd=5,
            wait=False,
            session=fake_aws.boto_session,
            attendee=who,
            echo=False,
        ).name
        for i, who in ((1, "alice"), (2, "alice"), (3, "bob"))
    ]
    assert leftovers.cleanup("alice", boto_session=fake_aws.boto_session) == names[:2]
    assert [c.params["TrainingJobName"] for c in fake_aws.calls_to("StopTrainingJob")] == names[:2]


# ------------------------------------------------------------------------------------------- images and local mode
def test_default_images_are_the_newest_patched_dlc_named_as_the_dlc_repository_publishes_it():
    """torchrun and single-process jobs: the PyTorch 2.13 DLC, the torch of make's .venv, which the SDK's catalogue
    lacks (it stops at 2.10); SMDDP keeps its frozen image, built by the SDK's image_uris."""
    import torch

    p4d = instances.lookup("ml.p4d.24xlarge")
    uri, why = images.default_image("torchrun", p4d, "eu-west-1")
    assert uri == "763104351884.dkr.ecr.eu-west-1.amazonaws.com/pytorch:2.13-cu133-amzn2023-sagemaker"
    assert "aws/deep-learning-containers" in why and "Python 3.12" in why
    assert torch.__version__.startswith(images.PYTORCH_DLC + ".")  # the same torch here as in the job
    assert images.default_image("torchrun", p4d, "af-south-1")[0].startswith("626614931356.dkr.ecr.af-south-1.")
    cpu = images.default_image("script", instances.lookup("ml.m5.xlarge"))[0]
    assert cpu.endswith("/pytorch:2.13-cpu-amzn2023-sagemaker")
    assert images.default_image("script", p4d, "cn-north-1")[0].startswith(
        "727897471807.dkr.ecr.cn-north-1.amazonaws.com.cn/"
    )
    with pytest.raises(UnsupportedFeature, match="not published in xx-nowhere-1.*image_uri"):
        images.default_image("script", p4d, "xx-nowhere-1")
    assert images.support(uri).eop == datetime.date(2027, 7, 20)
    uri, why = images.default_image("smddp", p4d)
    assert uri.endswith("pytorch-training:2.3.0-gpu-py311") and "SMDDP" in why
    assert images.default_image("torchrun", instances.lookup("ml.p3.16xlarge"))[0].endswith("2.3.0-gpu-py311")


@pytest.mark.parametrize(
    "uri, has",
    [
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-gpu-py311-cu121-ubuntu20.04-sagemaker",
            True,
        ),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.2.0-gpu-py310", True),
        # AWS's support table stops at 2.3.0, but the 2.4 and 2.5 images' Dockerfiles install SMDDP 2.5.0 and 2.6.0
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.4.0-gpu-py311", True),
        (
            "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.4.0-gpu-py311-cu124-ubuntu22.04-sagemaker",
            True,
        ),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.5.1-gpu-py311", True),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312", False),  # the 2.6 image: none
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.10.0-gpu-py313", False),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.4.0-gpu-py311-cu124-ubuntu22.04-ec2", False),
        ("763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.3.0-cpu-py311", False),
        ("658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.4.1-gpu-py311-cu121", True),
        ("123456789012.dkr.ecr.us-east-1.amazonaws.com/my-own:latest", False),
    ],
)
def test_which_images_ship_smddp(uri, has):
    assert images.image_has_smddp(uri) is has


@pytest.mark.parametrize("version", ["2.4.0", "2.5.1"])
def test_preflight_takes_the_images_whose_dockerfile_installs_smddp_and_says_the_sources_disagree(data, version):
    image = f"763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:{version}-gpu-py311"
    plan = jobs.preflight(
        Job("lab03-smddp", {}, data, distribution="smddp", image_uri=image), resolve("ml.p4d.24xlarge")
    )
    assert plan.image_uri == image
    note = next(n for n in plan.notes if "support table does not list it" in n)
    assert f"installs SMDDP {images.SMDDP_IN_DLC[version[:3]]}" in note
    assert "Dockerfile is what goes into the image" in note
    default = jobs.preflight(Job("lab03-smddp", {}, data, distribution="smddp"), resolve("ml.p4d.24xlarge"))
    assert not any("support table" in n for n in default.notes)  # 2.3.0: both sources list it


def test_the_refusal_names_every_image_that_ships_smddp(data):
    job = Job(
        "lab03-smddp",
        {},
        data,
        distribution="smddp",
        image_uri="763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.6.0-gpu-py312",
    )
    with pytest.raises(findings.UnsupportedFeature) as err:
        jobs.preflight(job, resolve("ml.p4d.24xlarge"))
    assert "PyTorch 2.3.0 DLC" in str(err.value) and "PyTorch 2.4 or 2.5" in str(err.value)


def test_the_smddp_image_table_shows_both_sources():
    rows = {r["image"]: r for r in images.smddp_images()}
    assert rows["pytorch-training:2.3.0-gpu-py311"]["AWS support table"] == "SMDDP 2.3.0"
    assert rows["pytorch-training:2.4.0-gpu-py311"] == {
        "image": "pytorch-training:2.4.0-gpu-py311",
        "AWS support table": "not listed",
        "DLC Dockerfile installs": "SMDDP 2.5.0",
        "preflight": "accepted",
    }
    assert rows["pytorch-training:2.5.1-gpu-py311"]["DLC Dockerfile installs"] == "SMDDP 2.6.0"
    assert rows["pytorch-training:2.6.0-gpu-py312"]["preflight"] == "refused"
    assert rows["pytorch:2.13-cu133-amzn2023-sagemaker"]["preflight"] == "refused"
    assert rows["smdistributed-modelparallel:2.5.1 (SMP)"]["DLC Dockerfile installs"] == "SMDDP 2.6.0"


def test_tensor_parallel_across_instances_is_advice_not_a_refusal(data):
    """SMP's rule: the degree divides the cluster's GPUs; keeping a group inside one instance is advice."""
    job = Job(
        "lab04-smp",
        {"strategy": "fsdp"},
        data,
        entry_point="train_lm.py",
        distribution="smp",
        instance_count=2,
        smp={"tensor_parallel_degree": 16},
    )
    plan = jobs.preflight(job, resolve("ml.p4d.24xlarge"))
    assert any("tensor_parallel_degree=16" in n and "span instances" in n for n in plan.notes)
    inside = jobs.preflight(replace(job, smp={"tensor_parallel_degree": 8}), resolve("ml.p4d.24xlarge"))
    assert not any("span instances" in n for n in inside.notes)
    with pytest.raises(findings.ProcessCountError, match="must divide the 16 GPUs of the cluster"):
        jobs.preflight(replace(job, smp={"tensor_parallel_degree": 6}), resolve("ml.p4d.24xlarge"))


def test_a_custom_smddp_image_can_be_vouched_for(offline, data):
    job = Job(
        "lab03-smddp",
        {},
        data,
        distribution="smddp",
        image_uri="123456789012.dkr.ecr.us-east-1.amazonaws.com/mine:smddp",
    )
    d = dry(job, "ml.p4d.24xlarge", image_has_smddp=True)
    assert d.request["AlgorithmSpecification"]["TrainingImage"].endswith("mine:smddp")


def test_local_container_says_why_it_cannot_run(data, monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))  # no docker on the PATH
    with pytest.raises(
        local_container.LocalContainerUnavailable, match="`docker` command is not installed.*target='local'"
    ):
        jobs.run_job(Job("lab-x", {}, data), resolve("local_container"))


def test_run_job_routes_local_container_to_the_sdk_local_mode(data, monkeypatch, tmp_path):

    monkeypatch.setenv("PATH", str(tmp_path))  # no docker on the PATH
    with pytest.raises(local_container.LocalContainerUnavailable, match="Docker"):
        jobs.run_job(Job("lab-x", {}, data), resolve("local_container"))


@pytest.mark.slow
def test_the_launch_button_launches_the_reviewed_job_once(fake_aws, data):
    fake_aws.script_job(ScriptedJob(statuses=[("InProgress", "Training")]))
    d = jobs.run_job(
        Job("lab-x", {}, data),
        resolve("ml.g5.2xlarge"),
        budget_usd=5,
        session=fake_aws.boto_session,
        attendee="alice",
        echo=False,
        poll_s=0,
    )
    assert not fake_aws.calls_to("CreateTrainingJob")  # the dry run sent nothing
    box = d.launch_button()
    button = box.children[0]
    assert not button.disabled and button.description == "Launch this job"
    button.click()
    assert len(fake_aws.calls_to("CreateTrainingJob")) == 1 and button.disabled
    assert button.job.describe()["TrainingJobStatus"] == "InProgress"


@pytest.mark.slow
def test_the_launch_button_is_disabled_over_budget_and_absent_offline(fake_aws, offline, data):
    d = jobs.run_job(
        Job("lab-x", {}, data),
        resolve("ml.g5.2xlarge"),
        budget_usd=0.01,
        session=fake_aws.boto_session,
        attendee="alice",
        echo=False,
    )
    assert d.launch_button().children[0].disabled
    with pytest.raises(preflight.LaunchRefused, match="offline"):
        dry(Job("lab-x", {}, data), "ml.g5.2xlarge").launch_button()


def test_train_py_on_an_smp_image_is_told_its_transformers_has_no_distilbert_sdpa(data):
    """requirements.txt keeps an image's own transformers (4.44.2 in the SMP image), whose DistilBERT has no SDPA."""
    smp_image = "658645717510.dkr.ecr.us-east-1.amazonaws.com/smdistributed-modelparallel:2.5.1-gpu-py311-cu124"
    job = Job("lab03-smddp", {}, data, distribution="smddp", instance_count=2, image_uri=smp_image)
    assert any("attn_implementation='eager'" in n for n in jobs.preflight(job, resolve("ml.p4d.24xlarge")).notes)
    eager = replace(job, hyperparameters={"attn_implementation": "eager"})
    assert not any("attn_implementation" in n for n in jobs.preflight(eager, resolve("ml.p4d.24xlarge")).notes)
