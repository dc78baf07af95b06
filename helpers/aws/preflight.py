"""Preflight: a lab's :class:`~helpers.job.Job` checked for a SageMaker instance type before any AWS call, and the
:class:`Plan` (launcher, processes, image, channels, stopping conditions) the request is built from."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from helpers import checks
from helpers.aws import images
from helpers.aws.channels import ChannelPlan, plan_channels
from helpers.checks import common_rules, findings
from helpers.errors import TargetError
from helpers.job import Job
from helpers.planning import instances
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
