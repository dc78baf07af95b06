"""A lab's :class:`~helpers.job_spec.Job` as a SageMaker training job, for a target ``helpers.jobs.run_job`` resolved.

``run(job, target)`` is a dry run: checked (:func:`preflight`, no AWS call), priced, and built into the
``CreateTrainingJob`` request the SDK would send, recorded instead; the returned :class:`~helpers.aws.dry_run.DryRun`
shows it. ``run(..., launch=True)`` sends it and follows the job (status, logs, metrics, billable seconds). The
concerns live in ``preflight``, ``images``, ``build``, ``dry_run``, ``launch`` and ``local_container``.
"""

from __future__ import annotations

from helpers.aws.dry_run import DryRun, dry_run
from helpers.aws.launch import launch as launch_job
from helpers.aws.preflight import LaunchOptions
from helpers.job_spec import Job
from helpers.targets import Target
from sagemaker_standin import offline_account as aws_offline


def run(job: Job, target: Target, launch: bool = False, budget_usd: float | None = None, **options):
    """Dry-run (default) or launch ``job`` on a SageMaker instance type; ``options`` are :class:`LaunchOptions`.

    Returns a :class:`~helpers.aws.dry_run.DryRun`; with ``launch=True`` a
    :class:`~helpers.aws.launch.SageMakerJobResult` (``wait=False``: a :class:`~helpers.aws.launch.LaunchedJob`).
    """
    chosen = LaunchOptions.of(budget_usd=budget_usd, **options)
    return launch_job(job, target, chosen) if launch else dry_run(job, target, chosen)


def dry_run_offline(job: Job, target: Target, **options) -> DryRun:
    """The dry run CI uses: no credentials, no network, placeholders for account, role and bucket."""
    with aws_offline.offline():
        return run(job, target, launch=False, **options)
