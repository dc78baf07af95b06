"""The whole room's clean-up at the end of an event (docs/facilitator.md, Cleaning up): every attendee's running job
stopped, every warm pool released, every Studio app of the domain deleted whatever its type, and the Studio and
training log groups deleted. It lists first; it acts only when told::

    python -m course.event.room --domain d-xxxxxxxx          # what it would stop, release and delete
    python -m course.event.room --domain d-xxxxxxxx --done   # then do it

An attendee's own clean-up is :mod:`helpers.aws.leftovers` (their running jobs, warm pools and objects).
"""

from __future__ import annotations

from dataclasses import dataclass

from helpers.aws.account import ATTENDEE_TAG
from helpers.aws.leftovers import release_warm_pools
from helpers.aws.setup_errors import client_error_code

STUDIO_LOG_GROUP = "/aws/sagemaker/studio"  # the spaces' lifecycle-script logs
JOBS_LOG_GROUP = "/aws/sagemaker/TrainingJobs"


@dataclass(frozen=True)
class RoomCleanup:
    """What the facilitator's clean-up found (``done=False``) or did: the jobs stopped, the warm pools released, the
    Studio apps deleted (every type, in every space and under every profile), the log groups deleted."""

    jobs: tuple[str, ...]
    warm_pools: tuple[str, ...]
    apps: tuple[str, ...]
    log_groups: tuple[str, ...]
    done: bool

    def __repr__(self) -> str:
        verb = "stopped/released/deleted" if self.done else "found (room_cleanup(done=True) acts)"
        return (
            f"{verb}: {len(self.jobs)} running job(s), {len(self.warm_pools)} warm pool(s), {len(self.apps)} Studio "
            f"app(s), log groups {', '.join(self.log_groups) or 'none'}"
        )


def room_cleanup(
    domain_id: str | None = None, boto_session=None, region: str | None = None, done: bool = False
) -> RoomCleanup:
    """The whole room at the end of the event: every attendee's running job stopped (those tagged
    ``workshop-attendee``), every warm pool released, every Studio app of the domain deleted whatever its type (in
    spaces and under user profiles), and the Studio and training log groups deleted. Lists only, unless
    ``done=True``. Then delete the spaces, empty the bucket and delete the stack (docs/facilitator.md)."""
    import boto3
    from botocore.exceptions import ClientError

    session = boto_session or boto3.Session(region_name=region)
    sm = session.client("sagemaker", region_name=region or session.region_name)
    logs = session.client("logs", region_name=region or session.region_name)
    running = [
        j
        for page in sm.get_paginator("list_training_jobs").paginate(StatusEquals="InProgress")
        for j in page["TrainingJobSummaries"]
    ]
    jobs = [
        j["TrainingJobName"]
        for j in running
        if any(t["Key"] == ATTENDEE_TAG for t in sm.list_tags(ResourceArn=j["TrainingJobArn"]).get("Tags", []))
    ]
    pools = release_warm_pools(boto_session=session, region=region, release=False)
    apps = []
    if domain_id:
        for page in sm.get_paginator("list_apps").paginate(DomainIdEquals=domain_id):
            apps += [a for a in page["Apps"] if a.get("Status") not in ("Deleted", "Deleting")]
    groups = [
        g["logGroupName"]
        for name in (STUDIO_LOG_GROUP, JOBS_LOG_GROUP)
        for page in logs.get_paginator("describe_log_groups").paginate(logGroupNamePrefix=name)
        for g in page["logGroups"]
        if g["logGroupName"] == name
    ]
    if done:
        for name in jobs:
            sm.stop_training_job(TrainingJobName=name)
        for name in pools:
            sm.update_training_job(TrainingJobName=name, ResourceConfig={"KeepAlivePeriodInSeconds": 0})
        for app in apps:
            owner = (
                {"SpaceName": app["SpaceName"]} if app.get("SpaceName") else {"UserProfileName": app["UserProfileName"]}
            )
            sm.delete_app(DomainId=domain_id, AppType=app["AppType"], AppName=app["AppName"], **owner)
        for name in groups:
            try:
                logs.delete_log_group(logGroupName=name)
            except ClientError as err:
                if client_error_code(err) != "ResourceNotFoundException":
                    raise
    names = tuple(f"{a.get('SpaceName') or a.get('UserProfileName')}/{a['AppType']}/{a['AppName']}" for a in apps)
    return RoomCleanup(tuple(jobs), tuple(pools), names, tuple(groups), done)


if __name__ == "__main__":
    import argparse

    parser = argparse.ArgumentParser(prog="python -m course.event.room", description=__doc__.split("\n\n")[0])
    parser.add_argument("--domain", default=None, help="the Studio domain id (the stack's StudioDomainId output)")
    parser.add_argument("--done", action="store_true", help="stop, release and delete, not only list")
    parser.add_argument("--region", default=None)
    chosen = parser.parse_args()
    print(room_cleanup(chosen.domain, region=chosen.region, done=chosen.done))
