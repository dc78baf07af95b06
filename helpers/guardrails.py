"""The event account's server-side guardrails, in one place: the training instance types an attendee may launch, the
longest runtime a job may ask for, and the longest warm pool. ``infra/workshop_account.py`` writes them into the
template's IAM conditions (``sagemaker:InstanceTypes``, ``sagemaker:MaxRuntimeInSeconds``,
``sagemaker:KeepAlivePeriod``), where AWS enforces them; the preflight rule
``event_guardrails`` (:mod:`helpers.checks.target_rules`) refuses a job outside them before launch, in an account
whose settings say it has them (``WORKSHOP_GUARDRAILS``, set by the event stack's settings)."""

from __future__ import annotations

from dataclasses import fields

from helpers.job_spec import Job

GUARDRAILS_ENV = "WORKSHOP_GUARDRAILS"
# The types the event's real targets launch (the labs' targets in course/manifest.py with launch=True; a test holds
# the two equal). Labs 03 and 04's p4d jobs stay dry runs in an event account: add the type here and redeploy to run
# them for real.
TRAINING_INSTANCE_TYPES = ("ml.g6.xlarge", "ml.g6.12xlarge")
# The jobs' default stopping condition (helpers.job_spec.Job.max_runtime_s): every lab's job fits in it.
EVENT_MAX_RUNTIME_S: int = next(f.default for f in fields(Job) if f.name == "max_runtime_s")  # type: ignore[assignment]
# The longest warm pool an attendee may keep (sagemaker:KeepAlivePeriod): lab 08's (warm_pool_s=1800). A warm pool
# bills after its job, outside MaxRuntime, until it expires or is released (helpers.aws.leftovers.release_warm_pools).
EVENT_MAX_WARM_POOL_S = 1800


def stack_value() -> str:
    """What the event stack's ``Guardrails`` output says (and ``WORKSHOP_GUARDRAILS`` carries): types; runtime."""
    return f"{','.join(TRAINING_INSTANCE_TYPES)};{EVENT_MAX_RUNTIME_S}"


def refusal(instance_type: str, max_runtime_s: int, warm_pool_s: int | None = None) -> str | None:
    """Which guardrail a job on ``instance_type`` for up to ``max_runtime_s`` (and a warm pool of ``warm_pool_s``)
    breaks, and the fix; None if none."""
    if instance_type not in TRAINING_INSTANCE_TYPES:
        return (
            f"{instance_type} is not one of the event account's training types ({', '.join(TRAINING_INSTANCE_TYPES)}:"
            f" the attendee role's sagemaker:InstanceTypes condition), so AWS would answer AccessDenied: pick one "
            f"of them, or run this job as a dry run"
        )
    if max_runtime_s > EVENT_MAX_RUNTIME_S:
        return (
            f"max_runtime_s={max_runtime_s} is over the event account's limit of {EVENT_MAX_RUNTIME_S} s (the attendee "
            f"role's sagemaker:MaxRuntimeInSeconds condition), so AWS would answer AccessDenied: ask for at most "
            f"{EVENT_MAX_RUNTIME_S}"
        )
    if warm_pool_s is not None and warm_pool_s > EVENT_MAX_WARM_POOL_S:
        return (
            f"warm_pool_s={warm_pool_s} is over the event account's limit of {EVENT_MAX_WARM_POOL_S} s (the attendee "
            f"role's sagemaker:KeepAlivePeriod condition: a warm pool bills after its job), so AWS would answer "
            f"AccessDenied: keep it at most {EVENT_MAX_WARM_POOL_S}"
        )
    return None
