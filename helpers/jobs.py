"""Run a lab's training job on any target with one call: :func:`run_job`.

The notebook builds a :class:`~helpers.job_spec.Job` and calls :func:`run_job` with the :class:`~helpers.targets.Target`
its set-up cell resolved; nothing else in the notebook changes between this laptop and an ``ml.p4d.24xlarge``.

This module is the notebooks' face: the one module of the helpers that hands on names defined elsewhere, so that a
notebook needs one import for its job (``jobs.Job``, ``jobs.catalog_channels``, ``jobs.DATA_DIR``, ``jobs.preflight``
and the errors a lab catches). ``__all__`` lists every name it hands on; everywhere else, a name is imported from the
module that defines it (tests/test_one_home.py).
"""

from __future__ import annotations

import sagemaker_standin
from helpers import targets
from helpers.aws import preflight as aws_preflight
from helpers.aws.dry_run import dry_run
from helpers.aws.launch import launch as launch_job
from helpers.aws.local_container import run_local_container
from helpers.aws.preflight import LaunchOptions, Plan
from helpers.checks.findings import FSxConfigError, UnsupportedFeature
from helpers.errors import JobCheckError
from helpers.job_spec import (
    DATA_DIR,
    REPO,
    RUNS_DIR,
    SOURCE_DIR,
    Job,
    catalog_channels,
    parse_metric_line,
    runs_root,
    write_runs_under,
)
from helpers.local.runner import LocalRunner
from helpers.targets import Target

__all__ = [
    "DATA_DIR",
    "REPO",
    "FSxConfigError",
    "JobCheckError",
    "UnsupportedFeature",
    "RUNS_DIR",
    "SOURCE_DIR",
    "Job",
    "catalog_channels",
    "on_sagemaker",
    "parse_metric_line",
    "run_job",
    "runs_root",
    "write_runs_under",
]


def run_job(job: Job, target: Target, *, launch: bool = False, budget_usd: float | None = None, **options):
    """Run ``job`` on ``target`` (``targets.resolve(...)``): this machine, or a SageMaker instance type.

    ``launch`` and ``budget_usd`` guard real instances: by default a dry run (checked, priced and built into the
    ``CreateTrainingJob`` request, nothing sent: a :class:`~helpers.aws.dry_run.DryRun`); local runs are free and
    start at once. Other ``options`` go to the local runner or, as :class:`~helpers.aws.preflight.LaunchOptions`, to
    SageMaker; either refuses one it does not take, naming those it does. ``wait=False`` returns the started job.
    """
    t = targets.given(target)
    if t.kind == "local":  # wait=False: the started LocalJob (its clock runs; .wait() follows it), as on SageMaker
        wait = options.pop("wait", True)
        runner = LocalRunner.with_options(**options)
        return runner.run(job, t) if wait else runner.start(job, t)
    if t.kind == targets.LOCAL_CONTAINER:  # the SDK's own Docker local mode: runs, or says precisely why it cannot
        return run_local_container(job, t, **options)
    chosen = LaunchOptions.of(budget_usd=budget_usd, **options)
    return launch_job(job, t, chosen) if launch else dry_run(job, t, chosen)


def on_sagemaker(job: Job, target: Target, **options):
    """The CreateTrainingJob request ``job`` would send on ``target``, an instance type: a dry run, offline
    (placeholder account, nothing sent), priced; the notebook displays it (the request collapsed). Shown beside a
    local run, it is the same job: only the target differs."""
    with sagemaker_standin.offline():  # no credentials, no network: placeholders for account, role and bucket
        return dry_run(job, targets.given(target), LaunchOptions.of(**{"echo": False, **options}))


def preflight(job: Job, target: Target, **options) -> Plan:
    """``job`` checked for ``target``, an instance type, before any AWS call
    (:func:`helpers.aws.preflight.preflight`): the :class:`~helpers.aws.preflight.Plan` its request would be built
    from, or the error that names the fix."""
    return aws_preflight.preflight(job, targets.given(target), **options)
