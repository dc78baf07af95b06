"""The room's Studio spaces, started before the session: one private JupyterLab space per attendee profile of the
domain, with the domain's defaults, so nobody waits minutes at the start. With the facilitator's credentials:

    python -m course.spaces --domain d-abc123            # what it would do: nothing is created
    python -m course.spaces --domain d-abc123 --start    # create the missing spaces, start the stopped ones

Safe to rerun. The spaces stop after the domain's idle timeout.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

PROFILE_PREFIX = "attendee-"  # the event template's profiles: attendee-01 ...
APP_NAME = "default"  # the name Studio gives a space's JupyterLab app
RUNNING = ("InService", "Pending")


@dataclass(frozen=True)
class Space:
    profile: str
    space: str
    exists: bool
    app: str  # the JupyterLab app's status ("InService", "Pending", "Deleted", "Failed", ...) or "" when none

    @property
    def action(self) -> str:
        if not self.exists:
            return "create the space and start it"
        return "running: nothing to do" if self.app in RUNNING else "start it"


def space_name(profile: str) -> str:
    return f"{profile}-labs"


def _pages(client, operation: str, key: str, **params) -> list[dict]:
    return [item for page in client.get_paginator(operation).paginate(**params) for item in page[key]]


def room(client, domain: str) -> list[Space]:
    """Each attendee profile of ``domain`` with its space's state (from ListUserProfiles, ListSpaces, ListApps)."""
    profiles = sorted(
        p["UserProfileName"]
        for p in _pages(client, "list_user_profiles", "UserProfiles", DomainIdEquals=domain)
        if p["UserProfileName"].startswith(PROFILE_PREFIX)
    )
    spaces = {s["SpaceName"] for s in _pages(client, "list_spaces", "Spaces", DomainIdEquals=domain)}
    apps = {
        a["SpaceName"]: a["Status"]
        for a in _pages(client, "list_apps", "Apps", DomainIdEquals=domain)
        if a.get("AppType") == "JupyterLab" and a.get("AppName") == APP_NAME and "SpaceName" in a
    }
    return [Space(p, space_name(p), space_name(p) in spaces, apps.get(space_name(p), "")) for p in profiles]


def defaults(client, domain: str) -> tuple[dict, int | None]:
    """The domain's JupyterLab resource spec (instance type, image) and its spaces' default storage in GB."""
    settings = client.describe_domain(DomainId=domain).get("DefaultUserSettings", {})
    spec = settings.get("JupyterLabAppSettings", {}).get("DefaultResourceSpec", {})
    storage = settings.get("SpaceStorageSettings", {}).get("DefaultEbsStorageSettings", {})
    kept = {k: v for k, v in spec.items() if k in ("InstanceType", "SageMakerImageArn", "SageMakerImageVersionArn")}
    return kept, storage.get("DefaultEbsVolumeSizeInGb")


def start(client, domain: str, spaces: list[Space]) -> list[str]:
    """Create the missing spaces (private, owned by their profile) and start the ones not running; the names of the
    spaces started."""
    spec, storage = defaults(client, domain)
    if "InstanceType" not in spec:
        raise ValueError(
            f"domain {domain} sets no default JupyterLab instance type (DefaultUserSettings.JupyterLabAppSettings."
            "DefaultResourceSpec): deploy it from infra/workshop-account.yaml with WithStudio=true, or set one"
        )
    started = []
    for s in spaces:
        if s.app in RUNNING:
            continue
        if not s.exists:
            settings: dict = {"AppType": "JupyterLab"}
            if storage:
                settings["SpaceStorageSettings"] = {"EbsStorageSettings": {"EbsVolumeSizeInGb": storage}}
            client.create_space(
                DomainId=domain,
                SpaceName=s.space,
                OwnershipSettings={"OwnerUserProfileName": s.profile},
                SpaceSharingSettings={"SharingType": "Private"},
                SpaceSettings=settings,
            )
        client.create_app(
            DomainId=domain, SpaceName=s.space, AppType="JupyterLab", AppName=APP_NAME, ResourceSpec=dict(spec)
        )
        started.append(s.space)
    return started


def main(argv: list[str] | None = None, boto_session=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--domain", required=True, help="the Studio domain's id (python -m course.event.stack env --stack ...)"
    )
    p.add_argument("--start", action="store_true", help="create and start; without it, only say what it would do")
    a = p.parse_args(argv)
    import boto3

    client = (boto_session or boto3.Session()).client("sagemaker")
    spaces = room(client, a.domain)
    if not spaces:
        print(f"domain {a.domain} has no {PROFILE_PREFIX}NN profiles: deploy the template with WithStudio=true")
        return 1
    for s in spaces:
        print(f"{s.profile:<14} {s.space:<20} {s.app or 'no app':<10} {s.action}")
    if not a.start:
        print(f"{sum(s.app not in RUNNING for s in spaces)} to start; nothing done (add --start)")
        return 0
    started = start(client, a.domain, spaces)
    print(
        f"started {len(started)} of {len(spaces)} spaces; each takes a few minutes, then runs the domain's set-up. "
        f"Follow them: aws sagemaker list-apps --domain-id-equals {a.domain} --query \"Apps[?AppType=='JupyterLab']"
        '.[SpaceName,Status]" --output table'
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
