"""A lab's :class:`~helpers.job.Job` as a SageMaker training job, for a resolved target (``helpers.jobs.run_job``
resolves the lab's ``target`` parameter and hands it here).

``run(job, target)`` is a dry run: it checks the job (:func:`preflight`, no AWS call), prices it, builds
SDK v3's ``ModelTrainer`` and lets the SDK produce its ``CreateTrainingJob`` request against a session that records
the request instead of sending it. The returned :class:`~helpers.aws.dry_run.DryRun` shows the exact request and the
cost in the notebook. ``run(..., launch=True)`` does the same against AWS, then follows the job: status, logs with
progress, final metrics, billable vs training seconds, console link.

Each concern has its module: ``preflight`` (the checks and the plan), ``images``, ``build`` (the ``ModelTrainer``,
and how each launcher maps onto the SDK), ``dry_run``, ``launch`` (:class:`LaunchOptions`, following a job) and
``local_container`` (the SDK's Docker local mode).
"""

from __future__ import annotations

from helpers.aws.dry_run import DryRun, dry_run
from helpers.aws.launch import LaunchOptions
from helpers.aws.launch import launch as launch_job
from helpers.job import Job
from helpers.standin import offline as aws_offline
from helpers.targets import Target


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
