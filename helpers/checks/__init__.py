"""Every check of a job, in one table: small named rules, each a function of the job and where it runs.

A rule yields what it finds: :func:`fail` (what is wrong and what to do, as one of the :class:`JobCheckError` kinds)
or :func:`note` (advice the dry run prints). :data:`COMMON` rules apply wherever the job runs; :data:`ONLY` adds
what one kind of target needs besides: this machine (``local``), the SDK's Docker local mode (``local_container``)
or an instance type (``sagemaker``). The local runner runs ``check(job, Where.local(...))``, preflight
``check(job, Where.sagemaker(...))``: a rule added to :data:`COMMON` applies to both. Choosing the image for a
region is a step of its own, after these (``helpers.aws.images.choose_image``).

The rules are :mod:`helpers.checks.common_rules` (those of :data:`COMMON`) and
:mod:`helpers.checks.target_rules` (those of :data:`ONLY`), made of the pieces in :mod:`helpers.checks.findings`:
every public name of theirs is importable from here too.
"""

from __future__ import annotations

from collections.abc import Iterable

from helpers.checks.common_rules import (
    INPUT_MODES,
    MAX_RUNTIME_S,
    RESERVED_TAGS,
    channel_data,
    channel_modes,
    channel_sources,
    counts,
    entry_point,
    hyperparameter_names,
    hyperparameter_values,
    job_name,
    max_wait_s,
    precision_fits_the_device,
    processes_fit_the_gpus,
    secret,
    secrets,
    stopping,
    tags,
)
from helpers.checks.findings import (
    ChannelError,
    Finding,
    FSxConfigError,
    ProcessCountError,
    Rule,
    SpotConfigError,
    UnsupportedFeature,
    Where,
    fail,
    findings,
    note,
)
from helpers.checks.target_rules import (
    LAUNCHERS,
    fsx,
    fsx_directory,
    instance_runs_the_script,
    launcher,
    local_channel_modes,
    local_mode_limits,
    multi_node_network,
    no_hub_downloads,
    smddp,
    smp,
)
from helpers.job import Job

__all__ = [
    "COMMON",
    "INPUT_MODES",
    "LAUNCHERS",
    "MAX_RUNTIME_S",
    "ONLY",
    "RESERVED_TAGS",
    "ChannelError",
    "FSxConfigError",
    "Finding",
    "ProcessCountError",
    "Rule",
    "SpotConfigError",
    "UnsupportedFeature",
    "Where",
    "channel_data",
    "channel_modes",
    "channel_sources",
    "check",
    "counts",
    "entry_point",
    "fail",
    "findings",
    "fsx",
    "fsx_directory",
    "hyperparameter_names",
    "hyperparameter_values",
    "instance_runs_the_script",
    "job_name",
    "launcher",
    "local_channel_modes",
    "local_mode_limits",
    "max_wait_s",
    "multi_node_network",
    "no_hub_downloads",
    "note",
    "precision_fits_the_device",
    "processes_fit_the_gpus",
    "rules_for",
    "secret",
    "secrets",
    "smddp",
    "smp",
    "stopping",
    "tags",
]


def check(job: Job, where: Where, rules: Iterable[Rule] | None = None) -> list[str]:
    """Raise the first refusal of ``rules`` (by default, those of the target's kind: :func:`rules_for`) with its own
    error kind and a message naming the fix; else return the notes."""
    notes = []
    for found in findings(job, where, rules_for(where.target.kind) if rules is None else rules):
        if found.error is not None:
            raise found.error(found.message)
        notes.append(found.message)
    return notes


COMMON: tuple[Rule, ...] = (
    job_name,
    counts,
    entry_point,
    hyperparameter_names,
    hyperparameter_values,
    secrets,
    tags,
    stopping,
    processes_fit_the_gpus,
    precision_fits_the_device,
    channel_modes,
    channel_sources,
    channel_data,
)
# what only one kind of target needs, after COMMON (Target.kind: local, local_container or sagemaker)
ONLY: dict[str, tuple[Rule, ...]] = {
    "local": (no_hub_downloads, local_channel_modes),
    "local_container": (local_mode_limits,),
    "sagemaker": (instance_runs_the_script, launcher, smddp, smp, fsx, multi_node_network),
}


def rules_for(kind: str) -> tuple[Rule, ...]:
    """The rules a job meets on a target of ``kind``: :data:`COMMON`, then that kind's own."""
    return (*COMMON, *ONLY[kind])
