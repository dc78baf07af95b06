"""Run a lab's training job on any target with one call: :func:`run_job`.

The notebook builds a :class:`~helpers.job.Job` and calls :func:`run_job` with its ``target`` parameter; nothing
else in the notebook changes between this laptop and an ``ml.p4d.24xlarge``. The job's own names are here too, so a
notebook needs one import: ``jobs.Job``, ``jobs.catalog_channels``, ``jobs.DATA_DIR``.
"""

from __future__ import annotations

from helpers import targets
from helpers.aws import sagemaker_jobs
from helpers.aws.local_container import run_local_container
from helpers.job import DATA_DIR, REPO, RUNS_DIR, SOURCE_DIR, Job, catalog_channels, parse_metric_line
from helpers.local.runner import LocalRunner

__all__ = [
    "DATA_DIR",
    "REPO",
    "RUNS_DIR",
    "SOURCE_DIR",
    "Job",
    "catalog_channels",
    "on_sagemaker",
    "parse_metric_line",
    "run_job",
]


def run_job(job: Job, target: str = "local", *, launch: bool = False, budget_usd: float | None = None, **options):
    """Run ``job`` on ``target``: ``local``/``local_cpu``/``local_gpu`` here, or a SageMaker instance type.

    ``launch`` and ``budget_usd`` guard real instances (a dry run by default); local runs are free and start at once.
    Other ``options`` go to the local runner or, as :class:`~helpers.aws.launch.LaunchOptions`, to SageMaker.
    """
    t = targets.resolve(target)
    if t.kind == "local":
        return LocalRunner(**options).run(job, t)
    if t.kind == targets.LOCAL_CONTAINER:  # the SDK's own Docker local mode: runs, or says precisely why it cannot
        return run_local_container(job, t, **options)
    return sagemaker_jobs.run(job, t, launch=launch, budget_usd=budget_usd, **options)


def on_sagemaker(job: Job, instance_type: str, **options):
    """The CreateTrainingJob request ``job`` would send on ``instance_type``: a dry run, offline (placeholder account,
    nothing sent), priced; the notebook displays it (the request collapsed). Shown beside a local run, it is the same
    job: only the target differs."""
    return sagemaker_jobs.dry_run_offline(job, instance_type, **{"echo": False, **options})
