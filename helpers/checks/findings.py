"""What a check of a job is made of: the error kinds a rule refuses with, :class:`Where` the job runs, and what a
rule yields, a :class:`Finding` made by :func:`fail` or :func:`note`; :func:`each_finding` runs rules in order. The
rules are :mod:`helpers.checks.common_rules` and :mod:`helpers.checks.target_rules`."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from helpers.errors import JobCheckError, TargetError
from helpers.job_spec import Job
from helpers.planning import instances
from helpers.targets import Target


class UnsupportedFeature(JobCheckError):
    """SMDDP, SMP or a precision asked of an instance type or image that does not have it."""


class SpotConfigError(JobCheckError):
    """Managed spot without checkpoints, or stopping conditions the service would reject."""


class ProcessCountError(JobCheckError):
    """More processes per host than GPUs, or SMP degrees that do not divide the processes."""


class ChannelError(JobCheckError):
    """A channel that is missing, empty, malformed, or in a mode that does not exist."""


class FSxConfigError(ChannelError):
    """An FSx for Lustre channel without what the service needs to mount it."""


class GuardrailError(JobCheckError):
    """A job the event account's guardrails (helpers.guardrails) would refuse: its instance type or its runtime."""


@dataclass(frozen=True)
class Where:
    """Where a job is checked for: the target, its catalogue entry (SageMaker; None here), the processes per host
    and the launcher that starts them (``script``, ``torchrun``, ``smddp`` or ``smp``)."""

    target: Target
    instance: instances.InstanceType | None
    processes: int
    launcher: str

    @classmethod
    def local(cls, job: Job, target: Target) -> Where:
        procs = target.default_processes() if job.processes_per_host is None else job.processes_per_host
        return cls(target, None, procs, "torchrun" if procs * job.instance_count > 1 else "script")

    @classmethod
    def sagemaker(cls, job: Job, target: Target) -> Where:
        instance = target.instance
        if instance is None:
            raise TargetError(f"{target.name!r} has no catalogue entry: make its Target with helpers.targets.resolve")
        procs = (instance.gpus or 1) if job.processes_per_host is None else job.processes_per_host  # one per GPU
        launcher = job.distribution
        if launcher in ("auto", "torchrun") and procs * job.instance_count == 1:
            launcher = "script"
        elif launcher == "auto":
            launcher = "torchrun"
        return cls(target, instance, procs, launcher)

    @property
    def gpus(self) -> int:
        return self.target.gpus


@dataclass(frozen=True)
class Finding:
    rule: str
    message: str
    error: type[JobCheckError] | None  # None: a note, not a refusal


Rule = Callable[[Job, Where], Iterable[Finding]]


def fail(message: str, error: type[JobCheckError] = JobCheckError) -> Finding:
    return Finding("", message, error)


def note(message: str) -> Finding:
    return Finding("", message, None)


def each_finding(job: Job, where: Where, rules: Iterable[Rule]) -> Iterator[Finding]:
    """Every finding of ``rules``, in order, each named for its rule. A rule stops at its first refusal."""
    for rule in rules:
        for found in rule(job, where):
            yield Finding(rule.__name__, found.message, found.error)
            if found.error is not None:
                break
