"""The account's Service Quotas for training instances, and the instances its running training jobs already hold:
what :func:`helpers.aws.account.check_quota` compares with what a job asks for. The cache of quota codes and the
number of running jobs to describe belong to :mod:`helpers.aws.account` (``_quota_codes``, ``USAGE_SCAN_LIMIT``),
which passes them in."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from helpers.aws.setup_errors import client_error_code

QUOTA_SERVICE = "sagemaker"


@dataclass(frozen=True)
class QuotaCheck:
    quota_name: str
    limit: float
    requested: int
    quota_code: str = ""
    default: bool = False  # the limit is AWS's default: no increase was ever applied to this account
    in_use: int = 0  # instances of the type held by this account's running training jobs (same purchase option)
    unscanned_jobs: int = 0  # running jobs past the scan limit whose instances are not in ``in_use``

    @property
    def ok(self) -> bool:
        return self.in_use + self.requested <= self.limit


def quota_name(instance_type: str, spot: bool = False) -> str:
    """The Service Quotas name SageMaker uses: ``ml.p4d.24xlarge for spot training job usage``."""
    return f"{instance_type} for {'spot ' if spot else ''}training job usage"


# Besides each type's quota, an account-wide one caps the instances of all training jobs together (on-demand:
# L-00C91CB5; spot has its own). At an event, many attendees' small jobs reach it before any type's quota.
ACCOUNT_WIDE = {
    False: "Number of instances across all training jobs",
    True: "Number of instances across all spot training jobs",
}


def quota_value(client, wanted: str, codes: dict[str, str]) -> tuple[float, str, bool] | None:
    """(value, code, is AWS's default) of the SageMaker quota named ``wanted``; None when there is no such quota.

    ListServiceQuotas leaves out quotas still at their default, so the code comes from the defaults list (once per
    process: ``codes`` keeps it, by quota name) and the value from GetServiceQuota, or the default when no value
    was ever applied.
    """
    from botocore.exceptions import ClientError

    code, default = codes.get(wanted), None
    if code is None:
        pages = client.get_paginator("list_aws_default_service_quotas").paginate(
            ServiceCode=QUOTA_SERVICE, PaginationConfig={"PageSize": 100}
        )
        for page in pages:
            hit = next((q for q in page.get("Quotas", []) if q.get("QuotaName") == wanted), None)
            if hit:
                code, default = hit["QuotaCode"], float(hit.get("Value", 0))
                break
        codes[wanted] = code or ""  # a name Service Quotas does not list is not looked for again
    if not code:
        return None
    try:
        return float(client.get_service_quota(ServiceCode=QUOTA_SERVICE, QuotaCode=code)["Quota"]["Value"]), code, False
    except ClientError as err:
        if client_error_code(err) != "NoSuchResourceException":  # the answer when no value was ever applied
            raise
    if default is None:
        default = float(
            client.get_aws_default_service_quota(ServiceCode=QUOTA_SERVICE, QuotaCode=code)["Quota"]["Value"]
        )
    return default, code, True


def quota_check(client, wanted: str, requested: int, codes: dict[str, str]) -> QuotaCheck | None:
    """``requested`` more against the SageMaker quota named ``wanted`` (``codes``: :func:`quota_value`'s cache);
    None when there is no such quota."""
    found = quota_value(client, wanted, codes)
    if found is None:
        return None
    limit, code, default = found
    return QuotaCheck(wanted, limit, requested, quota_code=code, default=default)


def instances_in_use(client, spot: bool, scan_limit: int) -> tuple[Counter, int]:
    """Instances held by this account's running training jobs of one purchase option (spot and on-demand have separate
    quotas), by type, and how many running jobs were past the first ``scan_limit`` and not counted."""
    from botocore.exceptions import ClientError

    pages = client.get_paginator("list_training_jobs").paginate(
        StatusEquals="InProgress", PaginationConfig={"PageSize": 100, "MaxItems": 10 * scan_limit}
    )
    running = [s["TrainingJobName"] for page in pages for s in page["TrainingJobSummaries"]]

    def held(name: str) -> Counter | None:
        try:
            desc = client.describe_training_job(TrainingJobName=name)
        except ClientError:
            return None
        if desc.get("TrainingJobStatus") != "InProgress" or bool(desc.get("EnableManagedSpotTraining")) != spot:
            return Counter()
        config = desc.get("ResourceConfig") or {}
        groups = config.get("InstanceGroups") or [
            {
                "InstanceType": config.get("SelectedInstanceType") or config.get("InstanceType"),
                "InstanceCount": config.get("SelectedInstanceCount") or config.get("InstanceCount"),
            }
        ]
        return Counter({g.get("InstanceType"): int(g.get("InstanceCount") or 0) for g in groups})

    with ThreadPoolExecutor(max_workers=8) as pool:  # boto3 clients are thread-safe; describes are independent
        counts = list(pool.map(held, running[:scan_limit]))
    return sum((c for c in counts if c), Counter()), len(running) - len(counts) + counts.count(None)


def quota_message(check: QuotaCheck) -> str:
    held = f", {check.in_use} of them held by running training jobs in this account," if check.in_use else ""
    default = " (AWS's default: no increase was ever applied here)" if check.default else ""
    unscanned = (
        f" {check.unscanned_jobs} more running job(s) were not inspected, so even more may be in use."
        if check.unscanned_jobs
        else ""
    )
    code = f", code {check.quota_code}" if check.quota_code else ""
    wait = (
        " wait for running jobs to finish (helpers.aws.leftovers.cleanup() stops yours; ask the others about theirs),"
        if check.in_use
        else ""
    )
    return (
        f"the account's quota '{check.quota_name}' is {check.limit:g}{held} and this job asks for "
        f"{check.requested}{default}.{unscanned} Request an increase to at least {check.in_use + check.requested} "
        f"(Service Quotas console > AWS services > Amazon SageMaker > '{check.quota_name}'{code}),{wait} or use "
        f"fewer instances or another type."
    )
