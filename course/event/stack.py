"""The event stack's outputs as the settings the helpers read, and each attendee's own job role: what a facilitator
(and a laptop attendee) exports before the labs::

    python -m course.event.stack env --stack workshop                        # the role, the bucket, the domain id
    python -m course.event.stack env --stack workshop --attendee attendee-07 # and that attendee's own job role
"""

from __future__ import annotations

import argparse

from helpers.aws.settings import (
    ATTENDEE_ENV,
    BUCKET_ENV,
    ROLE_ENV,
    require_bucket_name,
    require_role_arn,
    sanitize_attendee,
)
from helpers.aws.setup_errors import AwsSetupError, RoleError
from helpers.guardrails import GUARDRAILS_ENV

# The event stack's outputs (infra/workshop-account.yaml) and what each one sets for the helpers and the labs
STACK_OUTPUTS = {
    "RoleArn": ROLE_ENV[0],  # the jobs' role: what every training job runs as
    "BucketName": BUCKET_ENV,
    "Guardrails": GUARDRAILS_ENV,  # turns on the preflight's check of the guardrails (helpers.guardrails)
    "AttendeeRoleArn": "attendees: the role Studio spaces and laptop sessions run as (not passed to jobs)",
    "SubnetIds": "lab 05: subnets",
    "SecurityGroupIds": "lab 05: security_groups",
    "FileSystemId": "lab 05: fsx_id",
    "FileSystemMountName": "lab 05: fsx_mount_name",
    "StudioDomainId": "Studio: domain id",
}


def settings_from_stack(outputs: list[dict]) -> dict[str, str]:
    """The settings an event stack's outputs (DescribeStacks' ``Outputs``) give: checked as the helpers check them."""
    given = {o["OutputKey"]: o["OutputValue"] for o in outputs}
    missing = [k for k in ("RoleArn", "BucketName") if k not in given]
    if missing:
        raise AwsSetupError(
            f"the stack has no {', '.join(missing)} output: deploy infra/workshop-account.yaml, not another template."
        )
    require_role_arn(given["RoleArn"])
    require_bucket_name(given["BucketName"])
    return {STACK_OUTPUTS[k]: v for k, v in given.items() if k in STACK_OUTPUTS}


def stack_exports(stack: str, boto_session=None, region: str | None = None) -> str:
    """``export`` lines for a shell (or Studio's terminal) from a deployed event stack, plus lab 05's values."""
    import boto3

    session = boto_session or boto3.Session(region_name=region)
    cfn = session.client("cloudformation", region_name=region or session.region_name)
    outputs = cfn.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    lines = []
    for name, value in settings_from_stack(outputs).items():
        lines.append(f"export {name}={value}" if name.startswith("WORKSHOP_") else f"# {name} = {value!r}")
    return "\n".join(lines)


JOB_ROLE_PATH = "/workshop-jobs/{stack}/{attendee}/"  # infra/workshop_account.py's JOB_ROLE_PATH: the attendee's role


def attendee_role_arn(stack: str, attendee: str, boto_session=None, region: str | None = None) -> str:
    """The ARN of ``attendee``'s own job role in the event ``stack``: the only role their jobs may run as (its path
    holds their name, so nobody types it; a space's set-up finds it the same way)."""
    import boto3

    session = boto_session or boto3.Session(region_name=region)
    path = JOB_ROLE_PATH.format(stack=stack, attendee=sanitize_attendee(attendee))
    iam = session.client("iam")
    roles = [r["Arn"] for page in iam.get_paginator("list_roles").paginate(PathPrefix=path) for r in page["Roles"]]
    if not roles:
        raise RoleError(
            f"no job role under {path}: is {attendee} within the stack's Attendees count (attendee-01 ... its "
            f"value)? Update the stack with a larger Attendees, or use another attendee name."
        )
    return roles[0]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m course.event.stack", description="The event account's settings.")
    ap.add_argument("command", choices=["env"], help="env: print export lines from the event stack's outputs")
    ap.add_argument("--stack", required=True, help="the CloudFormation stack made from infra/workshop-account.yaml")
    ap.add_argument("--attendee", default=None, help="a laptop attendee (attendee-07): their own job role too")
    ap.add_argument("--region", default=None)
    a = ap.parse_args(argv)
    print(stack_exports(a.stack, region=a.region))
    if a.attendee:  # after the stack's line: the attendee's own job role replaces the facilitator's
        print(f"export {ROLE_ENV[0]}={attendee_role_arn(a.stack, a.attendee, region=a.region)}")
        print(f"export {ATTENDEE_ENV}={sanitize_attendee(a.attendee)}")


if __name__ == "__main__":
    main()
