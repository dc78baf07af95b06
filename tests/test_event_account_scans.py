"""The event template scanned like production IaC, at every combination of its options (WithFsx, WithNat, WithStudio,
a budget): checkov finds nothing it has not been told why (each skip is in the template, with its reason), and
cfripper's and parliament's findings on the policies are only those IAM cannot avoid, each with its reason here.
checkov evaluates a template's Conditions with the parameters' defaults, so each combination is scanned as a copy
whose defaults are that combination. The scanners run from their own venv (tools/scanners/, made by `make setup`):
checkov pins a botocore older than the workshop's."""

from __future__ import annotations

import itertools
import json
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
from cfnlint.decode import cfn_yaml
from conftest import REPO

TEMPLATE = REPO / "infra" / "workshop-account.yaml"
SCANNERS = REPO / "tools" / "scanners" / ".venv" / "bin"

# cfripper has no inline suppression: what it reports, and why it stays. (rule, resource) -> (the actions, why)
NO_RESOURCE_TYPE = "the action takes no resource type: '*' is the only grant that matches"
ENIS = (
    "a job's network interfaces do not exist before the job: '*', held to the template's VPC by the ec2:Vpc condition"
)
INTERFACES = {
    "ec2:CreateNetworkInterface",
    "ec2:CreateNetworkInterfacePermission",
    "ec2:DeleteNetworkInterface",
    "ec2:DeleteNetworkInterfacePermission",
}
ACCEPTED = {
    ("S3ObjectVersioningRule", "WorkshopBucket"): (
        set(),
        "no versioning, on purpose: the template's checkov skip says why",
    ),
    ("WildcardResourceRule", "AttendeeRole"): (
        {
            "sagemaker:ListTrainingJobs",
            "cloudwatch:GetMetricData",
            "cloudwatch:ListMetrics",
            "servicequotas:GetServiceQuota",
            "servicequotas:GetAWSDefaultServiceQuota",
            "servicequotas:ListAWSDefaultServiceQuotas",
            "servicequotas:ListServiceQuotas",
        },
        "ListTrainingJobs, CloudWatch and Service Quotas reads: " + NO_RESOURCE_TYPE,
    ),
    ("WildcardResourceRule", "StudioAttendeePolicy"): (
        {"sagemaker:ListApps", "sagemaker:ListDomains", "sagemaker:ListSpaces", "sagemaker:ListUserProfiles"},
        "Studio's pages list the domain's profiles, spaces and apps: " + NO_RESOURCE_TYPE,
    ),
    ("WildcardResourceRule", "JobLimitsRole"): ({"sagemaker:ListTrainingJobs"}, NO_RESOURCE_TYPE),
    ("WildcardResourceRule", "ExecutionRole"): (
        INTERFACES | {"fsx:DescribeFileSystems"},
        ENIS + "; " + NO_RESOURCE_TYPE,
    ),
    ("WildcardResourceRule", "AttendeeJobPolicy"): (
        INTERFACES | {"fsx:DescribeFileSystems"},
        ENIS + "; " + NO_RESOURCE_TYPE,
    ),
    ("PrivilegeEscalationRule", "BudgetActionRole"): (
        {"iam:AttachRolePolicy"},
        "what AWS Budgets needs to apply the budget action: only to AttendeeRole, and only the BudgetSpentDeny "
        "policy (the iam:PolicyARN condition)",
    ),
}
# parliament: (policy, issue) -> (the actions, why)
PARLIAMENT_ACCEPTED = {
    ("job", "RESOURCE_MISMATCH"): (
        {"s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"},
        "parliament reads the '/' inside ${aws:PrincipalTag/workshop-attendee} as the bucket's end; the resource is "
        "an object ARN (arn:aws:s3:::<bucket>/<attendee>/*), and the IAM engine's tests exercise it",
    ),
    ("job", "RESOURCE_STAR"): (INTERFACES, ENIS),
    ("facilitator-job", "RESOURCE_STAR"): (INTERFACES, ENIS),
}


def combinations() -> dict[str, dict[str, str]]:
    out = {}
    for fsx, nat, studio, budget in itertools.product(("false", "true"), repeat=4):
        if nat == "true" and fsx == "false":  # the template's rule refuses it
            continue
        name = f"fsx-{fsx}-nat-{nat}-studio-{studio}-budget-{budget}"
        out[name] = {
            "WithFsx": fsx,
            "WithNat": nat,
            "WithStudio": studio,
            "BudgetEmail": "facilitator@example.com" if budget == "true" else "",
        }
    return out


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    """The template once per combination, with that combination as its parameters' defaults (JSON: both read it)."""
    folder = tmp_path_factory.mktemp("combinations")
    template = json.loads(json.dumps(cfn_yaml.loads(TEMPLATE.read_text(encoding="utf-8"))))
    for name, parameters in combinations().items():
        copy = json.loads(json.dumps(template))
        for key, value in parameters.items():
            copy["Parameters"][key]["Default"] = value
        (folder / f"{name}.json").write_text(json.dumps(copy), encoding="utf-8")
    return folder


def _scanner(name: str):
    path = SCANNERS / name
    if not path.exists():
        pytest.skip(f"no {name} here: `make setup` installs it into tools/scanners/.venv (its own venv)")
    return path


def test_every_combination_is_scanned():
    assert len(combinations()) == 12


@pytest.mark.slow
@pytest.mark.long  # 12 combinations, about 45 s: make long-check, so that make test stays within 8 minutes
def test_checkov_fails_nothing_at_any_combination_and_each_skip_says_why(copies):
    done = subprocess.run(
        [_scanner("checkov"), "-d", copies, "--framework", "cloudformation", "--skip-download", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=600,
    )
    report = json.loads(done.stdout)
    results = report["results"]
    failed = sorted(
        {(c["file_path"].rsplit("/", 1)[-1], c["check_id"], c["resource"]) for c in results["failed_checks"]}
    )
    assert not failed, failed
    assert report["summary"]["passed"] > 0 and report["summary"]["parsing_errors"] == 0
    assert len({c["file_path"] for c in results["passed_checks"]}) == len(combinations())
    for skipped in results["skipped_checks"]:
        assert len(skipped["check_result"].get("suppress_comment", "")) > 40, skipped["check_id"]


@pytest.mark.slow
@pytest.mark.long  # 12 combinations, about 20 s: make long-check
def test_cfripper_finds_only_what_iam_cannot_scope_at_any_combination(copies):
    cfripper = _scanner("cfripper")

    def scan(path):
        done = subprocess.run(
            [cfripper, path, "--resolve", "--format", "json"], capture_output=True, text=True, timeout=300
        )
        return path.stem, json.loads(done.stdout)["failures"]

    with ThreadPoolExecutor(2) as pool:
        found = dict(pool.map(scan, sorted(copies.glob("*.json"))))
    assert len(found) == len(combinations())
    unexplained = set()
    for name, failures in found.items():
        for f in failures:
            for resource in f["resource_ids"]:
                accepted = ACCEPTED.get((f["rule"], resource))
                if accepted is None or not set(f["actions"] or []) <= accepted[0]:
                    unexplained.add((name, f["rule"], resource, tuple(f["actions"] or ())))
    assert not unexplained, sorted(unexplained)


def _policies() -> dict[str, dict]:
    """Every policy document of the template, as deployed with every option on (the others are subsets)."""
    from test_event_account_policies import (
        ATTENDEE_POLICIES,
        BUCKET_POLICY,
        FACILITATOR_JOB_POLICIES,
        JOB_POLICIES,
        R,
        resolve,
    )

    def inline(name):
        return resolve(R[name]["Properties"]["Policies"][0]["PolicyDocument"])

    return {
        "attendee": ATTENDEE_POLICIES[0],
        "studio": ATTENDEE_POLICIES[1],
        "job": JOB_POLICIES[0],
        "facilitator-job": FACILITATOR_JOB_POLICIES[0],
        "bucket": BUCKET_POLICY,
        "job-limits": inline("JobLimitsRole"),
        "budget-action": inline("BudgetActionRole"),
        "budget-deny": resolve(R["BudgetSpentDeny"]["Properties"]["PolicyDocument"]),
        "participant": json.loads((REPO / "static" / "iam_policy.json").read_text(encoding="utf-8")),
    }


@pytest.mark.slow
def test_parliament_finds_only_what_iam_cannot_scope():
    parliament = _scanner("parliament")

    def lint(item):
        name, document = item
        done = subprocess.run(
            [parliament, "--json", "--string", json.dumps(document)], capture_output=True, text=True, timeout=120
        )
        return name, [json.loads(line) for line in done.stdout.splitlines() if line.strip()]

    with ThreadPoolExecutor(2) as pool:
        found = dict(pool.map(lint, _policies().items()))
    unexplained = []
    for name, findings in found.items():
        for f in findings:
            actions = f.get("location", {}).get("actions") if isinstance(f.get("location"), dict) else None
            actions = {a["action"] if isinstance(a, dict) else a for a in (actions or f.get("detail") or [])}
            accepted = PARLIAMENT_ACCEPTED.get((name, f["issue"]))
            if accepted is None or not actions <= accepted[0]:
                unexplained.append((name, f["issue"], f.get("detail")))
    assert not unexplained, unexplained
