"""Preflight: everything a dry run and a launch do before any AWS call, in one home. A lab's
:class:`~helpers.job_spec.Job` checked for a SageMaker instance type (:func:`preflight`), the :class:`Plan` the
request is built from (launcher, processes, image, channels, stopping conditions), the options both take
(:class:`LaunchOptions`) and the job checked and priced (:class:`Checked`)."""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace
from typing import Any

import sagemaker_standin
from helpers import checks
from helpers.aws import images, settings
from helpers.aws.channels import ChannelPlan, plan_channels
from helpers.checks import common_rules, findings
from helpers.errors import TargetError, UnknownOption, WorkshopError
from helpers.job_spec import Job
from helpers.planning import cost, instances
from helpers.targets import Target

TENSORBOARD_DIR = "/opt/ml/output/tensorboard"  # where SageMaker collects TensorBoard files from


@dataclass
class Plan:
    """What :func:`preflight` decided: everything the request is built from, checked."""

    job: Job
    instance: instances.InstanceType
    processes_per_host: int
    launcher: str  # "script", "torchrun", "smp" or "smddp"
    image_uri: str
    image_note: str
    channels: list[ChannelPlan]
    max_wait_s: int | None
    tensorboard: bool
    notes: list[str] = field(default_factory=list)
    image_notes: list[str] = field(default_factory=list)
    has_smddp: bool | None = None  # what the caller vouched for a custom image

    @property
    def world_size(self) -> int:
        return self.processes_per_host * self.job.instance_count

    @property
    def base_job_name_suffix(self) -> str:
        return self.job.name.lower().replace("_", "-")

    @property
    def where(self) -> findings.Where:
        return findings.Where(Target.on(self.instance), self.instance, self.processes_per_host, self.launcher)

    def in_region(self, region: str | None) -> Plan:
        """This plan with the image of ``region`` (the job's checks are not run again)."""
        image, why, image_notes = images.choose_image(self.job, self.where, region, self.has_smddp)
        notes = [n for n in self.notes if n not in self.image_notes] + image_notes
        return replace(self, image_uri=image, image_note=why, notes=notes, image_notes=image_notes)


def preflight(
    job: Job,
    target: Target,
    *,
    region: str | None = None,
    tensorboard: bool | None = None,
    image_has_smddp_override: bool | None = None,
) -> Plan:
    """Check ``job`` for ``target`` (the rules of :mod:`helpers.checks`), then choose its image for ``region`` and
    plan its channels; never calls AWS.

    Raises a :class:`~helpers.errors.JobCheckError` kind (or a ``TargetError`` for a target of this machine) whose
    message names the fix.
    """
    if target.kind != "sagemaker":
        raise TargetError(
            f"preflight checks a job for a SageMaker instance type ('ml.g5.2xlarge'); {target.name!r} runs on this "
            f"machine: use helpers.jobs.run_job(job, {target.name!r})."
        )
    where = findings.Where.sagemaker(job, target)
    assert where.instance is not None  # the target's catalogue entry
    notes = checks.run_rules(job, where)
    if tensorboard is None:  # on when the job writes where SageMaker collects TensorBoard files
        tensorboard = any(str(v).startswith(TENSORBOARD_DIR) for v in job.hyperparameters.values())
    plan = Plan(
        job,
        where.instance,
        where.processes,
        where.launcher,
        "",
        "",
        plan_channels(job),
        common_rules.max_wait_s(job),
        bool(tensorboard),
        notes,
        has_smddp=image_has_smddp_override,
    )
    return plan.in_region(region)


class LaunchRefused(WorkshopError, ValueError):
    """A launch asked for where it cannot happen (offline)."""


@dataclass(frozen=True)
class LaunchOptions:
    """How a job is dry-run or launched on SageMaker; ``run_job(job, target, **options)`` fills it from keywords.

    ``session``: a ``boto3.Session`` (or an ``sagemaker_standin.OfflineAWS``); by default the ambient credentials, or
    the offline session of an ``sagemaker_standin.offline()`` block / ``WORKSHOP_AWS_OFFLINE=1``. ``budget_usd``
    (default ``WORKSHOP_BUDGET_USD``) refuses a launch that could cost more. ``tensorboard``: collect
    ``/opt/ml/output/tensorboard`` to S3 (default: when a hyperparameter points there). ``wait=False`` returns the
    running :class:`LaunchedJob`; ``check`` raises :class:`TrainingJobFailed` unless the job completed;
    ``image_has_smddp`` vouches for (or against) a custom image's SMDDP.
    """

    budget_usd: float | None = None
    attendee: str | None = None
    session: Any = None
    role: str | None = None
    bucket: str | None = None
    region: str | None = None
    wait: bool = True
    check: bool = True
    echo: bool = True
    tensorboard: bool | None = None
    expected_minutes: float | None = None
    checkpoint_s3_uri: str | None = None
    image_has_smddp: bool | None = None
    quota_check: bool = True
    poll_s: float = 15.0

    @classmethod
    def of(cls, **options) -> LaunchOptions:
        """From keywords; :class:`UnknownOption` names the valid ones."""
        return cls().updated(**options)

    def updated(self, **changes) -> LaunchOptions:
        """These options with ``changes``; :class:`UnknownOption` names the valid ones."""
        names = [f.name for f in fields(self)]
        unknown = sorted(set(changes) - set(names))
        if unknown:
            raise UnknownOption(
                f"unknown option(s) {', '.join(map(repr, unknown))} for a SageMaker job; the options "
                f"are {', '.join(names)} (and launch=True/False)."
            )
        return replace(self, **changes)

    def budget(self) -> float | None:
        """``budget_usd``, or ``WORKSHOP_BUDGET_USD`` where it is None."""
        return cost.budget_from_environment() if self.budget_usd is None else self.budget_usd


class Checked:
    """A job checked for a target and priced: what a dry run and a launch both do before any AWS call."""

    def __init__(self, job: Job, target: Target, options: LaunchOptions):
        self.job, self.target, self.options = job, target, options
        self.pricing_notes: list[str] = []  # kept when the plan is re-made for the job's region
        # every check before any AWS call, once; the image is chosen again for the job's region (plan_in)
        self.plan = preflight(
            job,
            target,
            region=options.region,
            tensorboard=options.tensorboard,
            image_has_smddp_override=options.image_has_smddp,
        )
        if options.role:
            options = replace(options, role=settings.require_role_arn(options.role))
        if options.bucket:
            options = replace(options, bucket=settings.require_bucket_name(options.bucket))
        self.options, self.budget_usd = options, options.budget()
        expected_s = None if options.expected_minutes is None else options.expected_minutes * 60
        try:
            self.estimate: cost.CostEstimate | None = cost.estimate_for(
                self.plan.instance,
                job.instance_count,
                max_runtime_s=job.max_runtime_s,
                spot=job.spot,
                expected_s=expected_s,
            )
        except cost.UnknownPrice as err:
            self.estimate = None
            self.pricing_notes.append(str(err))
            self.plan.notes.append(str(err))

    def plan_in(self, region: str | None) -> Plan:
        """The plan for ``region``: the image lives in the job's region (pulls across regions are refused), so it is
        chosen again once the region is known; the job's checks ran once, in :meth:`__init__`."""
        plan = self.plan.in_region(region)
        plan.notes.extend(n for n in self.pricing_notes if n not in plan.notes)
        return plan


def offline_session(session) -> sagemaker_standin.OfflineAWS | None:
    """The offline session a dry run records into: ``session`` itself, an ``sagemaker_standin.offline()`` block's, or
    one for ``WORKSHOP_AWS_OFFLINE=1``; None for real AWS."""
    if isinstance(session, sagemaker_standin.OfflineAWS):
        return session
    if session is None:
        return sagemaker_standin.active() or (
            sagemaker_standin.OfflineAWS() if sagemaker_standin.requested_by_environment() else None
        )
    return None
