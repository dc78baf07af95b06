"""A checked :class:`~helpers.aws.preflight.Plan` as SDK v3's ``ModelTrainer``: channels, compute, stopping
conditions, tags, checkpoints, TensorBoard, metric definitions, and the launcher.

One process runs under the SDK's basic script driver, several under ``Torchrun()`` (``Torchrun(smp=SMP(...))`` for
SMP v2); SMDDP AllReduce is launched by the image's own training toolkit (:func:`_toolkit_hyperparameters` says why).
Channels are local directories (uploaded under the attendee prefix at launch), ``s3://`` URIs or FSx for Lustre
directories, each with its input mode.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from helpers import input_mode
from helpers.aws import account as aws
from helpers.aws import sdk_compat
from helpers.aws.channels import fsx_directory_of
from helpers.aws.preflight import TENSORBOARD_DIR, Plan
from helpers.job_spec import METRIC_DEFINITIONS, REPO, Job

CHECKPOINT_DIR = "/opt/ml/checkpoints"  # synced with CheckpointConfig.s3_uri; restored into a restarted spot job
TOOLKIT_HYPERPARAMETERS = (
    "sagemaker_program",
    "sagemaker_submit_directory",
    "sagemaker_region",
    "sagemaker_container_log_level",
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_instance_type",
    "sagemaker_distributed_dataparallel_custom_mpi_options",
)


@dataclass
class Locations:
    """Where a job's things live in S3, all under the attendee's prefix."""

    bucket: str
    attendee: str
    job: Job

    def _uri(self, *parts: str) -> str:
        return "s3://" + "/".join([self.bucket, self.attendee, *parts]).replace("//", "/")

    @property
    def output(self) -> str:
        return self._uri("output")

    @property
    def checkpoints(self) -> str:
        # one prefix per launch: a relaunch of the lab starts afresh instead of finding the last run's final (or
        # differently configured) checkpoint; spot restarts of one job keep its prefix. To continue an earlier run,
        # pass its prefix as checkpoint_s3_uri.
        return self._uri("checkpoints", self.job.name, time.strftime("%Y%m%d-%H%M%S")) + "/"

    @property
    def tensorboard(self) -> str:
        return self._uri("tensorboard", self.job.name) + "/"

    def channel_prefix(self, local_dir: str) -> str:
        """S3 key prefix for a local channel directory: mirrors its path in the repository, so relaunches reuse it."""
        path = Path(local_dir)
        try:
            rel = path.resolve().relative_to(REPO).as_posix()
        except ValueError:
            rel = f"{path.name}-{hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:8]}"
        return f"{self.attendee}/inputs/{rel}"  # S3Prefix takes it with a "/" (see build_trainer)

    def uri_of(self, local_dir: str) -> str:
        """Where a local channel directory is uploaded at launch: the File and FastFile jobs read it there, and an
        FSx file system linked to the bucket shows it."""
        return f"s3://{self.bucket}/{self.channel_prefix(local_dir)}/"


def build_trainer(
    plan: Plan, sagemaker_session, role_arn: str, bucket: str, attendee: str, checkpoint_s3_uri: str | None = None
):
    """The ``ModelTrainer`` for a checked plan, and its channels. Uploads local channels (and, for SMDDP, the
    source tarball) through ``sagemaker_session``: a recording session in a dry run, AWS at launch."""
    from sagemaker.core.training.configs import MetricDefinition, TensorBoardOutputConfig

    # the SDK's ModelTrainer, or its stand-in on an older SDK; with the request fields it has no argument for
    model_trainer = sdk_compat.with_request_fields(sdk_compat.model_trainer_class(), _request_fields(plan.job))
    where = Locations(bucket, attendee, plan.job)
    channels = _channels(plan, sagemaker_session, bucket, where)
    common = _common_arguments(plan, sagemaker_session, role_arn, attendee, where, channels, checkpoint_s3_uri)
    if plan.launcher == "smddp":
        trainer = model_trainer(
            hyperparameters=_toolkit_hyperparameters(plan, sagemaker_session, bucket, attendee), **common
        )
    else:
        trainer = model_trainer(**_script_arguments(plan), **common)
    trainer.with_metric_definitions([MetricDefinition(name=m["Name"], regex=m["Regex"]) for m in METRIC_DEFINITIONS])
    if plan.tensorboard:
        trainer.with_tensorboard_output_config(
            TensorBoardOutputConfig(s3_output_path=where.tensorboard, local_path=TENSORBOARD_DIR)
        )
    return trainer


def _request_fields(job: Job) -> dict:
    """CreateTrainingJob fields ``ModelTrainer`` takes no argument for (lab 08's), as the SDK's request shapes."""
    from sagemaker.core.shapes import InfraCheckConfig, RetryStrategy

    fields: dict = {}
    if job.retry_attempts is not None:
        fields["retry_strategy"] = RetryStrategy(maximum_retry_attempts=job.retry_attempts)
    if job.infra_check:
        fields["infra_check_config"] = InfraCheckConfig(enable_infra_check=True)
    return fields


def _channels(plan: Plan, sagemaker_session, bucket: str, where: Locations) -> list:
    """The SDK's ``Channel`` for each planned channel: an FSx for Lustre directory, or an S3 prefix (a local
    directory is uploaded to it first)."""
    from sagemaker.core.training.configs import Channel, DataSource, FileSystemDataSource, S3DataSource

    job = plan.job
    # each FSx channel's directory first: one the file system would never show is refused before any upload
    directories = {
        c.name: fsx_directory_of(c, c.source if c.source.startswith("s3://") else where.uri_of(c.source), bucket, job)
        for c in plan.channels
        if c.kind == "fsx"
    }
    channels = []
    for c in plan.channels:
        uri = (
            sagemaker_session.upload_data(c.source, bucket=bucket, key_prefix=where.channel_prefix(c.source))
            if c.uploaded
            else c.source
        )
        if c.kind == "fsx":  # a local directory goes where the File and FastFile jobs put it: the file system shows it
            source = DataSource(
                file_system_data_source=FileSystemDataSource(
                    file_system_id=job.fsx["file_system_id"],
                    file_system_type="FSxLustre",
                    directory_path=directories[c.name],
                    file_system_access_mode=job.fsx.get("access_mode", "ro"),
                )
            )
        else:
            # S3Prefix matches keys by prefix: without the "/", ".../train" would also take ".../train-big/..."
            uri = uri if uri.endswith("/") else uri + "/"
            # an explicit S3DataSource: a plain-string source would silently become File mode
            source = DataSource(
                s3_data_source=S3DataSource(
                    s3_data_type="S3Prefix", s3_uri=uri, s3_data_distribution_type="FullyReplicated"
                )
            )
        # the mode as the request names it (a file system is mounted: the service takes it as File)
        mode = input_mode.MODES[c.mode].request_mode
        channels.append(Channel(channel_name=c.name, input_mode=mode, data_source=source))
    return channels


def _common_arguments(
    plan: Plan,
    sagemaker_session,
    role_arn: str,
    attendee: str,
    where: Locations,
    channels: list,
    checkpoint_s3_uri: str | None,
) -> dict:
    """The ``ModelTrainer`` arguments of every launcher: image, compute, stopping conditions, networking, output,
    channels, environment, tags and checkpoints."""
    from sagemaker.core.training.configs import (
        CheckpointConfig,
        Compute,
        Networking,
        OutputDataConfig,
        StoppingCondition,
        Tag,
    )

    job = plan.job
    compute = Compute(
        instance_type=plan.instance.name,
        instance_count=job.instance_count,
        enable_managed_spot_training=True if job.spot else None,
        keep_alive_period_in_seconds=job.warm_pool_s,  # a warm pool: the instances wait this long for the next job
    )
    stopping = StoppingCondition(
        max_runtime_in_seconds=job.max_runtime_s, max_wait_time_in_seconds=plan.max_wait_s if job.spot else None
    )
    tags = [
        Tag(key=aws.ATTENDEE_TAG, value=attendee),
        Tag(key="workshop-lab", value=job.name),
        *(Tag(key=str(k), value=str(v)) for k, v in job.tags.items()),
    ]
    networking: dict[str, object] = {}
    if any(c.kind == "fsx" for c in plan.channels):
        networking = {"subnets": list(job.fsx["subnets"]), "security_group_ids": list(job.fsx["security_group_ids"])}
    if job.encrypt_traffic:
        networking["enable_inter_container_traffic_encryption"] = True
    return dict(
        sagemaker_session=sagemaker_session,
        role=role_arn,
        training_image=plan.image_uri,
        base_job_name=f"{attendee}-{plan.base_job_name_suffix}",
        input_s3_key_prefix=attendee,
        compute=compute,
        stopping_condition=stopping,
        networking=Networking(**networking) if networking else None,
        output_data_config=OutputDataConfig(s3_output_path=where.output),
        input_data_config=channels or None,
        environment=dict(job.environment),
        tags=tags,
        checkpoint_config=(
            CheckpointConfig(s3_uri=checkpoint_s3_uri or where.checkpoints, local_path=CHECKPOINT_DIR)
            if job.checkpoints
            else None
        ),
    )


def _script_arguments(plan: Plan) -> dict:
    """The ``ModelTrainer`` arguments of a job the SDK's drivers launch (every launcher but SMDDP): the source code,
    torchrun (with SMP v2's settings for ``"smp"``) for several processes, and the hyperparameters as given."""
    from sagemaker.core.training.configs import SourceCode
    from sagemaker.train.distributed import SMP, Torchrun

    job = plan.job
    requirements = "requirements.txt" if (Path(job.source_dir) / "requirements.txt").is_file() else None
    source_code = SourceCode(
        source_dir=str(job.source_dir),
        entry_script=job.entry_point,
        requirements=requirements,
        ignore_patterns=[".git", "__pycache__", "*.pyc", ".ipynb_checkpoints", ".DS_Store"],
    )
    distributed = None
    if plan.launcher in ("torchrun", "smp"):
        distributed = Torchrun(
            process_count_per_node=job.processes_per_host, smp=SMP(**job.smp) if plan.launcher == "smp" else None
        )
    return dict(source_code=source_code, distributed=distributed, hyperparameters=dict(job.hyperparameters))


def source_tarball(source_dir: Path, out_dir: Path) -> Path:
    """``sourcedir.tar.gz`` of the training code, byte-for-byte reproducible (sorted, zero mtimes), so its content
    hash can name it in S3 and an unchanged source is not uploaded twice under new names."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for path in sorted(Path(source_dir).rglob("*")):
            if path.is_dir() or "__pycache__" in path.parts or path.suffix == ".pyc":
                continue
            info = tar.gettarinfo(str(path), arcname=path.relative_to(source_dir).as_posix())
            info.mtime, info.uid, info.gid, info.uname, info.gname = 0, 0, 0, "", ""
            with open(path, "rb") as f:
                tar.addfile(info, f)
    out = Path(out_dir) / "sourcedir.tar.gz"
    with open(out, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
        gz.write(buf.getvalue())
    return out


def _toolkit_hyperparameters(plan: Plan, sagemaker_session, bucket: str, attendee: str) -> dict[str, str]:
    """Hyperparameters for a job the image's training toolkit launches (SMDDP AllReduce through mpirun).

    SDK v3's ``MPI()`` driver cannot launch SMDDP: it passes the per-host process count as ``-np`` and runs no
    ``smddprun``. So, as SDK v2's ``smdistributed`` distribution did, the job keeps the image's entrypoint, uploads
    ``sourcedir.tar.gz`` and sets the ``sagemaker_*`` hyperparameters the toolkit reads; it then runs
    ``mpirun ... smddprun python train.py``. Values are JSON-encoded, as SDK v2 sent them (strings arrive as
    '"train.py"').
    """
    job = plan.job
    with tempfile.TemporaryDirectory(prefix="sourcedir-") as tmp:
        tarball = source_tarball(Path(job.source_dir), Path(tmp))
        digest = hashlib.sha256(tarball.read_bytes()).hexdigest()[:16]
        submit = sagemaker_session.upload_data(str(tarball), bucket=bucket, key_prefix=f"{attendee}/source/{digest}")
    # distribution='smddp' means the script's SMDDP backend too (its default, 'auto', would be NCCL under mpirun)
    hps = {k: json.dumps(v) for k, v in {"backend": "smddp", **job.hyperparameters}.items()}
    hps.update(
        {
            "sagemaker_program": json.dumps(job.entry_point),
            "sagemaker_submit_directory": json.dumps(submit),
            "sagemaker_region": json.dumps(sagemaker_session.boto_region_name),
            "sagemaker_container_log_level": "20",
            "sagemaker_distributed_dataparallel_enabled": "true",
            "sagemaker_instance_type": json.dumps(plan.instance.name),
            "sagemaker_distributed_dataparallel_custom_mpi_options": json.dumps(""),
        }
    )
    if job.processes_per_host:
        hps["sagemaker_mpi_num_of_processes_per_host"] = str(job.processes_per_host)
    return hps
