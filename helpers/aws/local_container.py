"""Target ``local_container``: the job in the SageMaker training image on this machine's Docker, through the SDK's
own local mode (``Mode.LOCAL_CONTAINER``), or a precise reason why it cannot run here."""

from __future__ import annotations

import shutil
import subprocess
import time
from pathlib import Path

from helpers import checks
from helpers.aws.images import default_image
from helpers.checks import findings
from helpers.errors import WorkshopError
from helpers.job_spec import Job, runs_root
from helpers.planning import instances
from helpers.targets import Target


class LocalContainerUnavailable(WorkshopError, RuntimeError):
    """``local_container`` needs Docker with compose; the message says what is missing."""


def docker_problem() -> str | None:
    """Why SageMaker's Docker local mode cannot run here, or None when it can."""
    if not shutil.which("docker"):
        return "the `docker` command is not installed"
    try:
        info = subprocess.run(
            ["docker", "info", "--format", "{{.ServerVersion}}"], capture_output=True, text=True, timeout=20
        )
    except (OSError, subprocess.SubprocessError) as err:
        return f"`docker info` failed ({err})"
    if info.returncode != 0:
        reason = (info.stderr.strip().splitlines() or ["no reason given"])[-1]
        return f"the Docker daemon is not reachable ({reason})"
    compose = subprocess.run(["docker", "compose", "version"], capture_output=True, text=True, timeout=20)
    if compose.returncode != 0 and not shutil.which("docker-compose"):
        return "Docker Compose is not installed (`docker compose version` failed and there is no docker-compose)"
    return None


def local_container_trainer(job: Job, gpus: int, root: Path, session=None):
    """The ``ModelTrainer`` for SDK local mode: the SageMaker image on this machine's Docker (File mode only)."""
    from sagemaker.core.training.configs import Compute, InputData, SourceCode
    from sagemaker.train import ModelTrainer
    from sagemaker.train.distributed import Torchrun
    from sagemaker.train.model_trainer import Mode

    procs = job.processes_per_host or (gpus or 1)
    kind = "local_gpu" if gpus else "local_cpu"
    probe = instances.lookup("ml.g5.xlarge" if gpus else "ml.m5.xlarge")
    image, _ = default_image("torchrun", probe)
    root.mkdir(parents=True, exist_ok=True)
    return ModelTrainer(
        training_mode=Mode.LOCAL_CONTAINER,
        training_image=image,
        base_job_name=job.name.replace("_", "-"),
        source_code=SourceCode(source_dir=str(job.source_dir), entry_script=job.entry_point),
        distributed=Torchrun(process_count_per_node=job.processes_per_host) if procs * job.instance_count > 1 else None,
        compute=Compute(instance_type=kind, instance_count=job.instance_count),
        hyperparameters=dict(job.hyperparameters),
        environment=dict(job.environment),
        input_data_config=[InputData(channel_name=n, data_source=str(s)) for n, s in job.channels.items()] or None,
        local_container_root=str(root),
        sagemaker_session=session,
    )


def run_local_container(job: Job, target: Target, echo: bool = True, session=None):
    """Run ``job`` with the SDK's own ``Mode.LOCAL_CONTAINER`` (Docker), or say precisely why it cannot."""
    checks.run_rules(job, findings.Where.local(job, target))
    problem = docker_problem()
    if problem:
        raise LocalContainerUnavailable(
            f"target 'local_container' runs the job in the SageMaker training image on this machine (the SDK's "
            f"Mode.LOCAL_CONTAINER) and needs a Docker daemon with compose, but {problem}. SageMaker Studio has no "
            f"Docker unless the domain enables it. Use target='local' (the same container contract without Docker) "
            f"or an ml.* instance type."
        )

    root = runs_root() / "local_container" / f"{job.name}-{time.strftime('%Y%m%d-%H%M%S')}"
    trainer = local_container_trainer(job, target.gpus, root, session)
    trainer.train(wait=True, logs=echo)
    return root
