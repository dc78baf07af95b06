"""The room's Studio spaces against the account's quota: each attendee's space runs one JupyterLab app, and the
facilitator's check before the event (docs/facilitator.md, T-1) compares the quota with the head count."""

from __future__ import annotations

from dataclasses import replace

from helpers.aws.quotas import QuotaCheck, quota_check
from helpers.aws.setup_errors import QuotaError

_codes: dict[str, str] = {}  # quota name -> Service Quotas code: the same in every account and region


APP_QUOTA_PREFIX = "Studio JupyterLab Apps running on "


def app_quota_name(instance_type: str) -> str:
    """The Service Quotas name of Studio's JupyterLab apps on a type: ``Studio JupyterLab Apps running on ml.m5.xlarge
    instance`` (the pattern of Studio's app quotas, as in ResourceLimitExceeded's 'Studio KernelGateway Apps running on
    ml.g5.48xlarge instance'); each attendee's space runs one such app."""
    return f"{APP_QUOTA_PREFIX}{instance_type} instance"


def apps_in_use(client, instance_type: str) -> int:
    """JupyterLab apps of this account on ``instance_type`` that are running or starting (ListApps names each app's
    type, so nothing is described)."""
    pages = client.get_paginator("list_apps").paginate(PaginationConfig={"PageSize": 100})
    return sum(
        1
        for page in pages
        for app in page.get("Apps", [])
        if app.get("AppType") == "JupyterLab"
        and app.get("Status") in ("InService", "Pending")
        and (app.get("ResourceSpec") or {}).get("InstanceType") == instance_type
    )


def app_quota_message(check: QuotaCheck) -> str:
    held = f", {check.in_use} of them running in this account's spaces," if check.in_use else ""
    default = " (AWS's default: no increase was ever applied here)" if check.default else ""
    code = f", code {check.quota_code}" if check.quota_code else ""
    return (
        f"the account's quota '{check.quota_name}' is {check.limit:g}{held} and the event needs {check.requested} "
        f"more (one per attendee's space){default}. Request an increase to at least "
        f"{check.in_use + check.requested} (Service Quotas console > AWS services > Amazon SageMaker > "
        f"'{check.quota_name}'{code}), or give the spaces another type (StudioInstanceType)."
    )


def check_app_quota(boto_session, instance_type: str, apps: int, region: str | None = None) -> QuotaCheck | None:
    """Compare the account's quota of Studio JupyterLab apps on ``instance_type`` with ``apps`` more (one per
    attendee's space) plus those already running. :class:`QuotaError` when too low; None when it cannot be read."""
    from botocore.exceptions import BotoCoreError, ClientError

    region = region or boto_session.region_name
    try:
        check = quota_check(
            boto_session.client("service-quotas", region_name=region), app_quota_name(instance_type), apps, _codes
        )
    except (ClientError, BotoCoreError):
        return None
    if check is None:
        return None
    try:
        check = replace(check, in_use=apps_in_use(boto_session.client("sagemaker", region_name=region), instance_type))
    except (ClientError, BotoCoreError):
        pass  # cannot list apps: the quota alone is still a useful check
    if not check.ok:
        raise QuotaError(app_quota_message(check))
    return check
