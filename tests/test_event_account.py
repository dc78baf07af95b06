"""The event account's template (infra/workshop-account.yaml) creates what a real deploy needs, evaluated here as
CloudFormation would for given parameters and region: FSx sees what lab 05 uploads later, the file system waits for
its security group's rules, the stack deploys outside us-east-1, jobs in the VPC can reach the internet when asked,
and the Studio option makes a domain whose spaces set themselves up within the lifecycle script's time limit."""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import time

import botocore.session
import pytest
from cfnlint.decode import cfn_yaml
from conftest import REPO

TEMPLATE = REPO / "infra" / "workshop-account.yaml"
GUIDE = REPO / "docs" / "facilitator.md"
REPOSITORY = "https://example.com/workshop.git"


def _generator():
    spec = importlib.util.spec_from_file_location("workshop_account", REPO / "infra" / "workshop_account.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


account_template = _generator()
TEMPLATE_DOC = cfn_yaml.loads(TEMPLATE.read_text(encoding="utf-8"))


LOGIC = {  # the condition functions, as CloudFormation evaluates them
    "Fn::Equals": lambda st, arg: str(st.value(arg[0])) == str(st.value(arg[1])),
    "Fn::Contains": lambda st, arg: st.value(arg[1]) in st.value(arg[0]),
    "Fn::Not": lambda st, arg: not st.value(arg[0]),
    "Fn::And": lambda st, arg: all(st.value(a) for a in arg),
    "Fn::Or": lambda st, arg: any(st.value(a) for a in arg),
}


class Stack:
    """The template as CloudFormation evaluates it for ``parameters`` in ``region``: parameter checks, conditions,
    rules, the resources it creates, and the value of a property (Ref, Fn::If, Fn::Select, Fn::GetAZs...)."""

    ZONES = {r: [f"{r}{z}" for z in "abc"] for r in ("us-east-1", "eu-west-1", "ap-northeast-2")}

    def __init__(self, region: str = "us-east-1", template: dict = TEMPLATE_DOC, **parameters: str):
        self.t, self.region = template, region
        declared = template["Parameters"]
        unknown = sorted(set(parameters) - set(declared))
        assert not unknown, f"the template has no parameter {', '.join(unknown)}"
        self.params = {k: str(v.get("Default", "")) for k, v in declared.items()} | parameters
        for name, value in self.params.items():
            spec = declared[name]
            assert "AllowedValues" not in spec or value in map(str, spec["AllowedValues"]), f"{name}={value!r}"
            assert re.fullmatch(spec.get("AllowedPattern", ".*"), value), f"{name}={value!r} fails its pattern"

    def value(self, node):
        if isinstance(node, dict) and len(node) == 1:
            ((fn, arg),) = node.items()
            if fn == "Ref":
                pseudo = {"AWS::Region": self.region, "AWS::StackName": "event", "AWS::AccountId": "111122223333"}
                return self.params[arg] if arg in self.params else pseudo.get(arg, ("Ref", arg))
            if fn == "Fn::GetAtt":
                return ("GetAtt", *(arg.split(".", 1) if isinstance(arg, str) else arg))
            if fn == "Fn::If":
                return self.value(arg[1] if self.condition(arg[0]) else arg[2])
            if fn == "Fn::Select":
                return self.value(arg[1])[int(arg[0])]
            if fn == "Fn::GetAZs":
                return self.ZONES[self.value(arg) or self.region]
            if fn in LOGIC:
                return LOGIC[fn](self, arg)
            if fn == "Condition":
                return self.condition(arg)
        if isinstance(node, list):
            return [self.value(n) for n in node]
        return node

    def condition(self, name: str) -> bool:
        return bool(self.value(self.t["Conditions"][name]))

    @property
    def resources(self) -> dict:
        return {k: v for k, v in self.t["Resources"].items() if "Condition" not in v or self.condition(v["Condition"])}

    def of_type(self, kind: str) -> dict:
        return {k: v for k, v in self.resources.items() if v["Type"] == kind}

    def prop(self, resource: str, *path: str):
        node = self.resources[resource]["Properties"]
        for key in path:
            node = node[key]
        return self.value(node)

    def refused(self) -> list[str]:
        """The AssertDescriptions of the rules these parameters break (CloudFormation refuses the deploy)."""
        out = []
        for rule in self.t.get("Rules", {}).values():
            if "RuleCondition" not in rule or self.value(rule["RuleCondition"]):
                out += [a["AssertDescription"] for a in rule["Assertions"] if not self.value(a["Assert"])]
        return out


def _depends_on(resource: dict) -> set[str]:
    d = resource.get("DependsOn", [])
    return {d} if isinstance(d, str) else set(d)


# ---- FSx


def test_fsx_imports_objects_uploaded_after_it_exists():
    lustre = Stack(WithFsx="true").prop("FileSystem", "LustreConfiguration")
    assert lustre["ImportPath"] == {"Fn::Sub": "s3://${WorkshopBucket}"}
    valid = botocore.session.get_session().get_service_model("fsx").shape_for("AutoImportPolicyType").enum
    policy = lustre.get("AutoImportPolicy", "NONE")
    assert policy in valid, f"AutoImportPolicy {policy!r} is not one of {valid}"
    # NEW: lab 05's shards, uploaded once the file system exists; CHANGED: a re-run's shards; DELETED: cleanup
    assert policy == "NEW_CHANGED_DELETED", f"with {policy} FSx lists the bucket only as it was at creation"
    # the legacy link (ImportPath + AutoImportPolicy); PERSISTENT_2 links through data repository associations
    assert lustre["DeploymentType"] in ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1")
    guide = GUIDE.read_text(encoding="utf-8")
    assert "NEW_CHANGED_DELETED" in guide and "seconds to minutes after its upload" in guide


def test_the_file_system_waits_for_every_rule_of_its_security_group():
    stack = Stack(WithFsx="true")
    fs = stack.resources["FileSystem"]
    groups = {stack.value(g) for g in fs["Properties"]["SecurityGroupIds"]}
    rules = {
        name: r["Properties"]
        for name, r in stack.of_type("AWS::EC2::SecurityGroupIngress").items()
        if stack.value(r["Properties"]["GroupId"]) in groups
    }
    missing = sorted(set(rules) - _depends_on(fs))
    assert not missing, f"FileSystem must DependsOn {missing}: FSx refuses a group that does not yet allow Lustre"
    opened = {(p.get("IpProtocol"), p.get("FromPort"), p.get("ToPort")) for p in rules.values()}
    assert {("tcp", 988, 988), ("tcp", 1018, 1023)} <= opened  # what Lustre needs, among the rules waited for


def test_no_job_in_the_vpc_reaches_another_job_s_hosts():
    """The jobs' group admits Lustre from the file servers and nothing else: no rule from itself (one attendee's job
    would reach another's), none from an address range, none on other ports; and a job reaches the file servers only
    on Lustre's ports. Inline rules and stand-alone ingress resources are read alike, a group named by Ref or by
    GetAtt's GroupId alike."""
    stack = Stack(WithFsx="true")

    def group(node):  # the security group's resource name, however the template names it
        value = stack.value(node)
        return value[1] if isinstance(value, tuple) and value[0] in ("Ref", "GetAtt") else value

    lustre_ports = {("tcp", 988, 988), ("tcp", 1018, 1023)}
    jobs = stack.resources["JobsSecurityGroup"]["Properties"]
    rules = [("JobsSecurityGroup", r) for r in jobs.get("SecurityGroupIngress", [])]
    rules += [
        (group(r["Properties"]["GroupId"]), r["Properties"])
        for r in stack.of_type("AWS::EC2::SecurityGroupIngress").values()
    ]
    into_jobs = [r for into, r in rules if into == "JobsSecurityGroup"]
    assert into_jobs, "no rule lets Lustre reach the jobs"
    for r in into_jobs:
        assert "CidrIp" not in r and "CidrIpv6" not in r and "SourcePrefixListId" not in r, r
        assert group(r.get("SourceSecurityGroupId")) == "LustreSecurityGroup", r
        assert (r["IpProtocol"], r["FromPort"], r["ToPort"]) in lustre_ports, r
    from_jobs = [(into, r) for into, r in rules if group(r.get("SourceSecurityGroupId")) == "JobsSecurityGroup"]
    assert {into for into, _ in from_jobs} == {"LustreSecurityGroup"}
    assert {(r["IpProtocol"], r["FromPort"], r["ToPort"]) for _, r in from_jobs} == lustre_ports


# ---- regions


@pytest.mark.parametrize("region", ["eu-west-1", "ap-northeast-2"])
def test_the_stack_deploys_outside_us_east_1(region):
    # CloudFormation checks a parameter of an AWS-specific type against the deploying region, FSx or not
    typed = [k for k, v in TEMPLATE_DOC["Parameters"].items() if v["Type"].startswith("AWS::") and "Default" in v]
    assert not typed, f"{typed}: a default of an AWS-specific type fails in every other region"
    stack = Stack(region, WithFsx="true", WithNat="true")
    zones = Stack.ZONES[region]
    assert stack.prop("Subnet", "AvailabilityZone") == zones[0]
    assert stack.prop("PublicSubnet", "AvailabilityZone") == zones[0]
    chosen = Stack(region, WithFsx="true", AvailabilityZone=zones[2])
    assert chosen.prop("Subnet", "AvailabilityZone") == zones[2]


# ---- the way out of the VPC


def _route_table_of(stack: Stack, subnet: str) -> str:
    links = stack.of_type("AWS::EC2::SubnetRouteTableAssociation").values()
    return next(
        stack.value(a["Properties"]["RouteTableId"]) for a in links if a["Properties"]["SubnetId"] == {"Ref": subnet}
    )


def _default_route(stack: Stack, table) -> dict:
    routes = stack.of_type("AWS::EC2::Route").values()
    found = [r["Properties"] for r in routes if stack.value(r["Properties"]["RouteTableId"]) == table]
    return next((r for r in found if r.get("DestinationCidrBlock") == "0.0.0.0/0"), {})


def test_with_nat_the_training_subnet_reaches_the_internet():
    stack = Stack(WithFsx="true", WithNat="true")
    via = _default_route(stack, _route_table_of(stack, "Subnet"))
    assert "NatGatewayId" in via, "the training subnet needs a default route through a NAT gateway"
    nat = stack.resources[via["NatGatewayId"]["Ref"]]["Properties"]
    assert nat["AllocationId"]["Fn::GetAtt"][0] in stack.of_type("AWS::EC2::EIP")
    public = nat["SubnetId"]["Ref"]
    out = _default_route(stack, _route_table_of(stack, public))
    gateway = out.get("GatewayId", {}).get("Ref")
    assert gateway in stack.of_type("AWS::EC2::InternetGateway"), "the NAT gateway's subnet needs a route out"
    attached = [a["Properties"] for a in stack.of_type("AWS::EC2::VPCGatewayAttachment").values()]
    vpc = stack.prop(public, "VpcId")
    assert {"VpcId": vpc, "InternetGatewayId": ("Ref", gateway)} in [
        {k: stack.value(v) for k, v in a.items()} for a in attached
    ]
    assert stack.prop("Subnet", "VpcId") == vpc
    assert stack.resources["S3Endpoint"]  # S3 keeps its free endpoint


def test_the_nat_path_is_off_by_default_and_says_what_it_costs():
    kinds = ("AWS::EC2::NatGateway", "AWS::EC2::InternetGateway", "AWS::EC2::EIP")
    assert not [k for k, v in Stack(WithFsx="true").resources.items() if v["Type"] in kinds]
    assert "WithNat" in TEMPLATE_DOC["Parameters"], "no WithNat parameter: jobs in the VPC cannot reach PyPI"
    said = re.search(r"\$(\d+\.\d+) an hour", TEMPLATE_DOC["Parameters"]["WithNat"]["Description"])
    assert said, "WithNat's description must state its hourly cost"
    assert f"about ${said.group(1)} an hour" in GUIDE.read_text(encoding="utf-8")
    assert any("WithFsx" in r for r in Stack(WithNat="true").refused())  # no training VPC to route


# ---- Studio


def test_the_defaults_create_only_the_roles_the_bucket_the_limits_and_the_budget():
    jobs = {f"JobRole{n:02d}" for n in range(1, 11)}  # Attendees defaults to 10: a job role each
    limits = {
        "JobLimits",
        "JobLimitsRole",
        "JobStarts",
        "JobStartsInvokeJobLimits",
        "JobSweep",
        "JobSweepInvokesJobLimits",
        "JobLimitsDeadLetters",
        "JobLimitsDeadLettersWriters",
        "JobLimitsFailed",
        "JobLimitsSilent",
    }
    budget = {"EventBudget", "BudgetSpentDeny", "BudgetActionRole", "BudgetStopsNewWork", "Alerts", "AlertsPublishers"}
    assert set(Stack().resources) == {
        "WorkshopBucket",
        "WorkshopBucketPolicy",
        "ExecutionRole",
        "AttendeeRole",
        "AttendeeJobPolicy",
        *jobs,
        *limits,
        *budget,
    }


@pytest.mark.parametrize("users", [5, 10, 40])
def test_attendees_makes_that_many_job_roles_studio_profiles_and_private_spaces(users):
    stack = Stack(WithStudio="true", Attendees=str(users), RepositoryUrl=REPOSITORY)
    names = sorted(stack.prop(k, "UserProfileName") for k in stack.of_type("AWS::SageMaker::UserProfile"))
    assert names == [f"attendee-{n:02d}" for n in range(1, users + 1)]
    # one private JupyterLab space each, owned by their profile (the attendee policy lets them create none)
    spaces = {stack.prop(k, "SpaceName"): stack.resources[k] for k in stack.of_type("AWS::SageMaker::Space")}
    assert sorted(spaces) == [f"{n}-labs" for n in names]
    for name, space in spaces.items():
        p = space["Properties"]
        assert p["OwnershipSettings"] == {"OwnerUserProfileName": name.removesuffix("-labs")}
        assert p["SpaceSharingSettings"] == {"SharingType": "Private"} and p["SpaceSettings"]["AppType"] == "JupyterLab"
        assert f"StudioAttendee{name[9:11]}" in _depends_on(space)  # the profile exists first
        spec = p["SpaceSettings"]["JupyterLabAppSettings"]["DefaultResourceSpec"]
        assert spec["InstanceType"] == {"Ref": "StudioInstanceType"}
    roles = {k: v for k, v in stack.of_type("AWS::IAM::Role").items() if k.startswith("JobRole")}
    tags = sorted(
        t["Value"] for r in roles.values() for t in r["Properties"]["Tags"] if t["Key"] == "workshop-attendee"
    )
    assert tags == names  # one job role per attendee, tagged with their name, its path holding it
    for role in roles.values():
        who = next(t["Value"] for t in role["Properties"]["Tags"] if t["Key"] == "workshop-attendee")
        assert role["Properties"]["Path"] == {"Fn::Sub": f"/workshop-jobs/${{AWS::StackName}}/{who}/"}
    assert {"Vpc", "Subnet", "StudioDomain", "StudioSetup"} <= set(stack.resources)
    assert "FileSystem" not in stack.resources
    laptops = Stack(Attendees=str(users))  # without Studio: the job roles, no profile
    assert len([k for k in laptops.resources if k.startswith("JobRole")]) == users
    assert not laptops.of_type("AWS::SageMaker::UserProfile")


def test_studio_deploys_without_a_repository_and_the_set_up_says_how_to_clone():
    assert not Stack(WithStudio="true").refused()  # Workshop Studio passes none: the spaces clone nothing
    assert not Stack(WithStudio="true", RepositoryUrl=REPOSITORY).refused()


def test_the_domain_s_spaces_set_themselves_up_with_the_workshop_s_role():
    stack = Stack(WithStudio="true", RepositoryUrl=REPOSITORY)
    domain = stack.resources["StudioDomain"]["Properties"]
    user = domain["DefaultUserSettings"]
    assert stack.value(user["ExecutionRole"]) == ("GetAtt", "AttendeeRole", "Arn")
    lab = user["JupyterLabAppSettings"]
    setup = ("GetAtt", "StudioSetup", "StudioLifecycleConfigArn")
    # built in: every space runs it, and an attendee cannot deselect it (a default in LifecycleConfigArns they could)
    assert stack.value(lab["BuiltInLifecycleConfigArn"]) == setup
    assert (
        "BuiltInLifecycleConfigArn"
        in botocore.session.get_session().get_service_model("sagemaker").shape_for("JupyterLabAppSettings").members
    )
    image = lab["DefaultResourceSpec"]["SageMakerImageArn"]["Fn::Sub"]
    assert image[0].endswith(":image/sagemaker-distribution-cpu")  # pinned, not the day's default
    assert stack.prop("StudioSetup", "StudioLifecycleConfigAppType") == "JupyterLab"
    # `make studio` reaches PyPI: through SageMaker's network, or the VPC's NAT path
    assert domain["AppNetworkAccessType"] == "PublicInternetOnly" or stack.condition("CreateNat")
    assert stack.value(lab["DefaultResourceSpec"]["InstanceType"]) == account_template.jupyterlab_instance().name
    storage = user["SpaceStorageSettings"]["DefaultEbsStorageSettings"]
    assert int(stack.value(storage["DefaultEbsVolumeSizeInGb"])) == account_template.space_storage_gb()
    # the role the spaces run as launches and follows the labs' jobs, passes the jobs' role to them, and is no admin
    policy = stack.resources["StudioAttendeePolicy"]["Properties"]
    assert policy["Roles"] == [{"Ref": "AttendeeRole"}]
    own = stack.resources["AttendeeRole"]["Properties"]["Policies"][0]["PolicyDocument"]["Statement"]
    granted = {
        a
        for s in policy["PolicyDocument"]["Statement"] + own
        for a in ([s["Action"]] if isinstance(s["Action"], str) else s["Action"])
    }
    assert {
        "sagemaker:CreateTrainingJob",
        "sagemaker:StopTrainingJob",
        "iam:PassRole",
        "sagemaker:CreateApp",
    } <= granted
    # the template makes each attendee's one private space: they create none and delete none
    assert not {"sagemaker:CreatePresignedDomainUrl", "sagemaker:CreateSpace", "sagemaker:DeleteSpace"} & granted
    assert "StudioAttendeePolicy" in _depends_on(stack.resources["StudioDomain"])


def test_the_default_instance_runs_two_training_processes_side_by_side():
    chosen = account_template.jupyterlab_instance()
    assert chosen.cores >= max(account_template.LAB_PROCESSES.values()) and not chosen.burstable
    for two_vcpus in ("ml.t3.large", "ml.m5.large"):
        t = next(t for t in account_template.JUPYTERLAB_TYPES if t.name == two_vcpus)
        assert any("physical core" in why for why in account_template.shortfalls(t)), two_vcpus
    assert TEMPLATE_DOC["Parameters"]["StudioInstanceType"]["Default"] == chosen.name


def test_the_template_s_generated_blocks_are_what_the_generator_writes():
    text = TEMPLATE.read_text(encoding="utf-8")
    assert text == account_template.render(text), "run: python infra/workshop_account.py --write"
    for path, body in account_template.packaging().items():  # Workshop Studio's contentspec.yaml and static/
        assert path.read_text(encoding="utf-8") == body, f"{path.name}: run python infra/workshop_account.py --write"


def test_workshop_studio_runs_the_same_template_and_a_participant_policy_that_opens_studio():
    spec = cfn_yaml.loads((REPO / "contentspec.yaml").read_text(encoding="utf-8"))
    role = spec["awsAccountConfig"]["participantRole"]
    assert role["iamPolicies"] == ["static/iam_policy.json"] and "managedPolicies" not in role  # exactly, no more
    template = spec["infrastructure"]["cloudformationTemplates"][0]
    assert (REPO / template["templateLocation"]).read_text(encoding="utf-8") == TEMPLATE.read_text(encoding="utf-8")
    declared = TEMPLATE_DOC["Parameters"]
    given = {p["templateParameter"]: p["defaultValue"] for p in template["parameters"]}
    # exactly what Workshop Studio passes, nothing added: the template's rules hold, and every parameter without a
    # default is given
    assert set(given) <= set(declared) and not Stack(**given).refused(), Stack(**given).refused()
    assert all("Default" in spec or name in given for name, spec in declared.items())
    # Workshop Studio's content: a page per locale under content/, its front matter first
    language = spec["defaultLocaleCode"].split("-")[0]  # en-US: index.en.md
    page = (REPO / "content" / f"index.{language}.md").read_text(encoding="utf-8")
    front = page.split("---\n")[1]
    assert page.startswith("---\n") and "title:" in front and "weight:" in front
    assert "clone the workshop" in page and "attendee-01" in page  # no RepositoryUrl: the participant clones
    policy = json.loads((REPO / "static" / "iam_policy.json").read_text(encoding="utf-8"))
    # the participant's own account holds one event: its role opens Studio, where the attendee policy applies
    assert [s["Sid"] for s in policy["Statement"]] == [s["Sid"] for s in account_template.participant_statements()]


def test_a_stack_name_of_any_case_or_length_makes_valid_names():
    # nothing is named after the stack: S3 refuses upper case and >63 characters, Studio >63
    r = TEMPLATE_DOC["Resources"]
    assert Stack().prop("WorkshopBucket", "BucketName") == ("Ref", "AWS::NoValue")
    for name, key in (("StudioSetup", "StudioLifecycleConfigName"), ("StudioDomain", "DomainName")):
        assert "AWS::StackName" not in json.dumps(r[name]["Properties"][key]), name


def test_bad_input_is_refused_by_the_template_s_rules():
    assert any(
        "SageMaker Distribution" in r
        for r in Stack("af-south-1", WithStudio="true", RepositoryUrl=REPOSITORY).refused()
    )
    assert not Stack("eu-west-1", WithStudio="true", RepositoryUrl=REPOSITORY).refused()
    assert not re.fullmatch(TEMPLATE_DOC["Parameters"]["BudgetEmail"]["AllowedPattern"], "not an address")


def test_the_bucket_takes_only_tls_and_the_budget_alerts_by_email():
    tls = Stack().prop("WorkshopBucketPolicy", "PolicyDocument")["Statement"][0]
    assert tls["Effect"] == "Deny" and tls["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
    # every deploy has the budget (Workshop Studio's too); an address subscribes to its alerts
    assert "EventBudget" in Stack().resources and "AlertsByEmail" not in Stack().resources
    stack = Stack(BudgetEmail="facilitator@example.com")
    assert stack.prop("AlertsByEmail", "Endpoint") == "facilitator@example.com"
    assert stack.prop("AlertsByEmail", "TopicArn") == ("Ref", "Alerts")
    budget = stack.resources["EventBudget"]["Properties"]
    thresholds = sorted(n["Notification"]["Threshold"] for n in budget["NotificationsWithSubscribers"])
    assert thresholds == [50, 80, 100, 100]
    assert all(
        n["Subscribers"] == [{"SubscriptionType": "SNS", "Address": {"Ref": "Alerts"}}]
        for n in budget["NotificationsWithSubscribers"]
    )
    # the topic takes the budget's and the alarms' messages, from this account only
    publishers = stack.prop("AlertsPublishers", "PolicyDocument")["Statement"]
    assert publishers[0]["Principal"] == {"Service": ["budgets.amazonaws.com", "cloudwatch.amazonaws.com"]}
    assert publishers[0]["Condition"] == {"StringEquals": {"aws:SourceAccount": {"Ref": "AWS::AccountId"}}}
    # at 100% the budget stops new work: it attaches a deny of new jobs, spaces and apps to the attendees' role
    action = stack.prop("BudgetStopsNewWork", "Definition")["IamActionDefinition"]
    assert stack.prop("BudgetStopsNewWork", "ActionThreshold") == {"Type": "PERCENTAGE", "Value": 100}
    assert action["Roles"] == [{"Ref": "AttendeeRole"}] and action["PolicyArn"] == {"Ref": "BudgetSpentDeny"}
    denied = stack.prop("BudgetSpentDeny", "PolicyDocument")["Statement"]
    assert denied == [
        {
            "Sid": "BudgetSpent",
            "Effect": "Deny",
            "Action": [
                "sagemaker:CreateTrainingJob",
                "sagemaker:CreateApp",
                "sagemaker:CreateSpace",
                "sagemaker:UpdateSpace",
            ],
            "Resource": "*",
        }
    ]
    budgets = botocore.session.get_session().get_service_model("budgets")
    assert stack.prop("BudgetStopsNewWork", "ActionType") in budgets.shape_for("ActionType").enum
    assert {"SNS", "EMAIL"} <= set(budgets.shape_for("SubscriptionType").enum)


def test_the_template_fits_cloudformation_s_limit_through_s3():
    # a job role per attendee takes it over the 51,200 bytes a body sent inline may have: deployed through S3
    # (`aws cloudformation deploy --s3-bucket`, the console's upload, Workshop Studio), 1 MB at most
    assert 51_200 < len(TEMPLATE.read_bytes()) <= 1_000_000
    guide = GUIDE.read_text(encoding="utf-8")
    deploys = re.findall(r"aws cloudformation deploy [^`]*?--parameter-overrides", guide, re.S)
    assert deploys and all("--s3-bucket" in d for d in deploys), "every deploy command in the guide needs --s3-bucket"
    assert "StudioUsers" not in guide  # the parameter is Attendees


# ---- the lifecycle script, run here as a space runs it


def _lifecycle_script(home, repository: str, branch: str = "") -> str:
    """The template's lifecycle script as CloudFormation's Fn::Sub renders it, its home directory moved to ``home``."""
    sub = TEMPLATE_DOC["Resources"]["StudioSetup"]["Properties"]["StudioLifecycleConfigContent"]["Fn::Base64"][
        "Fn::Sub"
    ]
    values = {
        "AWS::StackName": "event",
        "AWS::Region": "eu-west-1",
        "RepositoryUrl": repository,
        "RepositoryBranch": branch,
        "ExecutionRole.Arn": "arn:aws:iam::111122223333:role/event-ExecutionRole-x",
        "AWS::Partition": "aws",
        "WorkshopBucket": "event-bucket",
    }

    def one(m):
        name = m.group(1)
        if name.startswith("!"):
            return "${" + name[1:] + "}"
        assert name in values, f"${{{name}}} in the script is neither a template value nor escaped as ${{!{name}}}"
        return values[name]

    script = re.sub(r"\$\{([^}]*)\}", one, sub)
    assert len(base64.b64encode(script.encode())) <= 16_384  # the API's limit on the encoded content
    return script.replace("/home/sagemaker-user", str(home))


@pytest.fixture
def workshop_repository(tmp_path):
    """A repository like the workshop's: its `make studio` takes 3 s and counts its runs."""
    src = tmp_path / "src"
    src.mkdir()
    (src / "Makefile").write_text("studio:\n\t@sleep 3\n\t@echo ran >> $(HOME)/studio-runs.txt\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "init", "-q", str(src)], check=True)
    subprocess.run([*git, "-C", str(src), "add", "Makefile"], check=True)
    subprocess.run([*git, "-C", str(src), "commit", "-qm", "workshop"], check=True)
    bare = tmp_path / "workshop.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(src), str(bare)], check=True)
    return bare


def _start_space(home, script: str, path: str | None = None) -> float:
    """Run the lifecycle script as SageMaker does when the space starts; the seconds it took to return."""
    home.mkdir(exist_ok=True)
    env = {"PATH": path or os.environ["PATH"], "HOME": str(home)}
    t0 = time.monotonic()
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.monotonic() - t0


def _wait_for(log, line: str, count: int = 1, timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        text = log.read_text() if log.exists() else ""
        if text.count(line) >= count:
            return text
        time.sleep(0.2)
    raise AssertionError(f"{line!r} x{count} never came in {log}:\n{text}")


@pytest.mark.slow
def test_a_space_s_set_up_runs_in_the_background_and_once_cloned_stays(tmp_path, workshop_repository):
    home = tmp_path / "home"
    script = _lifecycle_script(home, f"file://{workshop_repository}")
    log = home / "workshop-setup.log"
    returned = _start_space(home, script)
    assert "set-up done" not in (log.read_text() if log.exists() else ""), (
        "the script waited for the install: SageMaker stops it at 5 min"
    )
    assert returned < 3  # `make studio` takes 3 s here: the script must not wait for it
    text = _wait_for(log, "== set-up done in")
    assert "open " + str(home / "workshop" / "labs") in text
    assert "== python: " in text and "image: unknown" in text  # the Python it chose, said in the log
    settings = (home / ".workshop-env").read_text()
    assert "export WORKSHOP_BUCKET=event-bucket\n" in settings
    assert "WORKSHOP_ROLE_ARN" not in settings  # no profile known here: no role of anyone's
    startup = home / ".ipython" / "profile_default" / "startup" / "00-workshop-env.py"
    kernel_env = subprocess.run(
        [sys.executable, "-c", f"exec(open({str(startup)!r}).read()); import os; print(os.environ['WORKSHOP_BUCKET'])"],
        env={"HOME": str(home), "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
        check=True,
    )
    assert kernel_env.stdout.strip() == "event-bucket"  # every kernel of the space gets the settings
    (home / "workshop" / "notes.txt").write_text("an attendee's work")
    _start_space(home, script)  # the space restarts: no new clone, `make studio` again
    _wait_for(log, "== set-up done in", count=2)
    assert (home / "workshop" / "notes.txt").exists() and (home / "studio-runs.txt").read_text() == "ran\nran\n"
    assert (home / ".bashrc").read_text().count("\n") == 1  # sourced once, however many starts


def test_a_space_s_set_up_names_the_attendee_and_says_what_failed(tmp_path, workshop_repository):
    if not shutil.which("jq"):
        pytest.skip("no jq here (SageMaker Distribution ships it): apt-get install jq")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    role = "arn:aws:iam::111122223333:role/workshop-jobs/event/attendee-07/event-JobRole07-x"
    (bin_dir / "aws").write_text(
        '#!/bin/bash\necho "$@" >> "$HOME/aws-args"\n'
        f'case "$2" in describe-space) echo attendee-07;; list-roles) echo {role};; esac\n'
    )
    (bin_dir / "aws").chmod(0o755)
    home = tmp_path / "home"
    meta = tmp_path / "resource-metadata.json"
    meta.write_text('{"DomainId": "d-abc123", "SpaceName": "my-space"}')  # a private space: no UserProfileName
    script = _lifecycle_script(home, "file:///no/such/repository.git")
    script = script.replace("/opt/ml/metadata/resource-metadata.json", str(meta))
    _start_space(home, script, path=f"{bin_dir}:{os.environ['PATH']}")
    text = _wait_for(home / "workshop-setup.log", "== set-up FAILED")
    assert "git clone file:///no/such/repository.git did not work (check the stack's RepositoryUrl)" in text
    settings = (home / ".workshop-env").read_text()
    assert "export WORKSHOP_ATTENDEE=attendee-07" in settings
    assert f"export WORKSHOP_ROLE_ARN={role}\n" in settings  # the attendee's own jobs' role, found by its path
    calls = (home / "aws-args").read_text()
    assert "--domain-id d-abc123 --space-name my-space" in calls
    assert "iam list-roles --path-prefix /workshop-jobs/event/attendee-07/" in calls

    bare = tmp_path / "bare"  # Workshop Studio: no RepositoryUrl; the settings are written, the log says what to do
    _start_space(bare, _lifecycle_script(bare, ""))
    text = _wait_for(bare / "workshop-setup.log", "== no RepositoryUrl")
    assert "clone the workshop into" in text and (bare / ".workshop-env").exists()

    broken = tmp_path / "broken"
    subprocess.run(["git", "clone", "-q", str(workshop_repository), str(broken / "workshop")], check=True)
    (broken / "workshop" / "Makefile").write_text("studio:\n\t@false\n")
    _start_space(broken, _lifecycle_script(broken, f"file://{workshop_repository}"))
    text = _wait_for(broken / "workshop-setup.log", "== set-up FAILED")
    assert "make studio exited 2" in text and f"to retry: cd {broken / 'workshop'} && make studio" in text


def test_workshop_studio_deploys_with_a_budget_and_its_own_account_s_concurrency():
    spec = cfn_yaml.loads((REPO / "contentspec.yaml").read_text(encoding="utf-8"))
    template = spec["infrastructure"]["cloudformationTemplates"][0]
    given = {p["templateParameter"]: p["defaultValue"] for p in template["parameters"]}
    stack = Stack(**given)
    assert {"EventBudget", "BudgetStopsNewWork", "BudgetSpentDeny", "JobLimitsFailed"} <= set(stack.resources)
    amount = stack.value(stack.prop("EventBudget", "Budget")["BudgetLimit"]["Amount"])
    assert amount == str(account_template.WS_BUDGET_USD)
    assert stack.prop("JobLimits", "ReservedConcurrentExecutions") == ("Ref", "AWS::NoValue")  # a new account's 10
    page = (REPO / "content" / "index.en.md").read_text(encoding="utf-8")
    assert f"budget (${account_template.WS_BUDGET_USD})" in page and "release_warm_pools()" in page
