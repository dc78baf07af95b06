"""The facilitator's kit stays true: the guide's generated tables are what the helpers compute, each lab's real
target is the table's, the event template passes cfn-lint and its outputs are what the helpers accept, and cleanup
finds (and only on request deletes) exactly one attendee's objects."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys

import pytest
from cfnlint.decode import cfn_yaml
from conftest import REPO

from course.event import stack
from course.facilitator import lab_targets, studio_sizing, workshop
from course.facilitator.tables import money
from course.manifest import registered
from helpers.aws import leftovers, settings, setup_errors
from helpers.planning import instances
from sagemaker_standin import offline_account as aws_offline
from sagemaker_standin import sandbox

GUIDE = REPO / "docs" / "facilitator.md"
TEMPLATE = REPO / "infra" / "workshop-account.yaml"


@pytest.fixture
def no_studio(monkeypatch, tmp_path):
    monkeypatch.setattr(settings, "STUDIO_METADATA", tmp_path / "no-such-metadata.json")
    for name in (settings.ATTENDEE_ENV, settings.BUCKET_ENV, *settings.ROLE_ENV):
        monkeypatch.delenv(name, raising=False)


def _parameters(notebook) -> dict:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)}


def test_the_guide_s_generated_blocks_are_what_the_helpers_compute():
    text = GUIDE.read_text(encoding="utf-8")
    assert text == workshop.render(text), "run: python -m course.facilitator.workshop --write docs/facilitator.md"


def test_the_agenda_s_quotas_hold_what_the_agendas_launch(monkeypatch):
    """As written, no lab launches (each is local and dry): the facilitator's demo job is the agendas' only job, and
    each attendee's space needs a JupyterLab app; a lab whose parameters launched would add every attendee's job."""
    demo = workshop.demo_target()
    rows = workshop.agenda_needs(30)
    assert [(name, n) for name, _, n, _, _, _ in rows] == [
        (f"{demo.instance_type} for training job usage", demo.count),
        ("Number of instances across all training jobs", demo.count),
    ]
    app = f"Studio JupyterLab Apps running on {workshop.space_type()} instance"
    for table in (workshop.agenda_quota_rows(30), workshop.quota_rows(30)):
        assert table[-1]["Service Quotas name (SageMaker)"] == app and table[-1]["value for 30 attendees"] == 30
    assert f'studio_apps.check_app_quota(session, "{workshop.space_type()}", attendees)' in workshop.quota_check_code()
    monkeypatch.setattr(workshop, "attendee_launches", lambda lab: lab == "02")  # lab 02 is in every agenda
    lab02 = next(t for t in lab_targets.TARGETS if t.lab == "02")
    launched = {name: n for name, _, n, _, _, _ in workshop.agenda_needs(30)}
    assert launched[f"{lab02.instance_type} for training job usage"] == lab02.count * 30
    assert launched["Number of instances across all training jobs"] == demo.count + lab02.count * 30


def test_the_quota_ceiling_fills_the_dearest_types_up_to_the_account_wide_quota():
    g1, g12 = (lab_targets.hourly(instances.lookup(n)) for n in ("ml.g6.xlarge", "ml.g6.12xlarge"))
    # 30 attendees, every one launching: 90 + 60 type quotas, 90 account-wide; the 60 dearest first, then 30 of 90
    assert workshop.ceiling_usd_per_h({"ml.g6.xlarge": 90, "ml.g6.12xlarge": 60}, 90) == pytest.approx(
        60 * g12 + 30 * g1
    )
    assert workshop.ceiling_usd_per_h({"ml.g6.xlarge": 1}, 1) == pytest.approx(g1)
    text = workshop.agenda_quotas_markdown(30)
    assert f"On-demand ceiling: {money(g1)}/h of training instances" in text


@pytest.mark.parametrize("target", lab_targets.TARGETS, ids=lambda t: f"{t.lab}-{t.parameter}")
def test_each_lab_defaults_to_the_guide_s_real_target(target):
    notebook = registered(target.lab).notebook
    params = _parameters(notebook)
    assert params[target.parameter] == target.instance_type
    if "instance_count" in params and target.parameter == "real_target":
        assert params["instance_count"] == target.count


@pytest.mark.slow
def test_the_event_template_passes_cfn_lint():
    done = subprocess.run(
        [sys.executable, "-c", "import sys, cfnlint.runner; sys.exit(cfnlint.runner.main())", str(TEMPLATE)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_template_makes_what_the_labs_need():
    t = cfn_yaml.loads(TEMPLATE.read_text(encoding="utf-8"))
    r = t["Resources"]
    trust = r["ExecutionRole"]["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert settings.trusts_sagemaker({"Statement": trust})
    rules = r["WorkshopBucket"]["Properties"]["LifecycleConfiguration"]["Rules"]
    assert rules[0]["Status"] == "Enabled" and "ExpirationInDays" in rules[0]
    ports = {
        (v["Properties"].get("FromPort"), v["Properties"].get("ToPort"))
        for v in r.values()
        if v["Type"] == "AWS::EC2::SecurityGroupIngress"
    }
    assert {(988, 988), (1018, 1023)} <= ports  # Lustre
    assert r["S3Endpoint"]["Properties"]["VpcEndpointType"] == "Gateway"
    always = ("WorkshopBucket", "WorkshopBucketPolicy", "ExecutionRole", "AttendeeRole", "AttendeeJobPolicy")
    # the room's limits: the enforcer, its sweep, its failures' queue and alarms; the budget and its alerts
    limits = tuple(
        "JobLimits JobLimitsRole JobStarts JobStartsInvokeJobLimits JobSweep JobSweepInvokesJobLimits JobLimitsFailed"
        " JobLimitsDeadLetters JobLimitsDeadLettersWriters JobLimitsSilent EventBudget BudgetSpentDeny BudgetActionRole"
        " BudgetStopsNewWork Alerts AlertsPublishers".split()
    )
    first_attendees = tuple(f"JobRole{n:02d}" for n in range(1, 6))  # Attendees takes at least 5
    assert all("Condition" in v for k, v in r.items() if k not in always + limits + first_attendees)  # options
    assert set(t["Outputs"]) == set(stack.STACK_OUTPUTS)


TWIN = {
    "image": "SageMaker Distribution 4.4.1",
    "stand_ins": "torch 2.13 CPU for the image's 2.8",
    "make_studio_s": 12.3,
    "added_mb": 45.6,
    "labs": {"01": {"seconds": 30.1, "peak_mb": 900}, "02": {"seconds": 41.0, "peak_mb": 1250}},
}


def test_the_studio_section_shows_the_twin_s_figures(tmp_path):
    report = tmp_path / "studio-twin.json"
    report.write_text(json.dumps(TWIN))
    text = studio_sizing.studio_twin_markdown(report)
    assert "SageMaker Distribution 4.4.1 (stand-ins: torch 2.13 CPU for the image's 2.8)" in text
    assert "`make studio` took 12.3 s and added 45.6 MB" in text
    assert "| 01 | 30.1 s | 900 MB |" in text and "| 02 | 41.0 s | 1,250 MB |" in text
    assert "set STUDIO_INSTALL_MB = 46" in text  # the template's storage default still assumes the provisional size


def test_the_studio_section_takes_a_partial_report_or_the_twin_s_own_form(tmp_path):
    report = tmp_path / "studio-twin.json"
    report.write_text(json.dumps({"labs": {"03": {"seconds": 9.5}}}))
    text = studio_sizing.studio_twin_markdown(report)
    assert "an unnamed image" in text and "took not measured" in text and "| 03 | 9.5 s | not measured |" in text
    own = {
        "image": "SageMaker Distribution 4.4.1",
        "stand_ins": {"python": "3.11 here for the image's 3.12"},
        "make_studio": [{"wall_seconds": 20.5, "total_mb": 12.0}, {"wall_seconds": 3.0, "total_mb": 0.0}],
        "labs": [{"lab": "05_input_modes", "status": "ok", "seconds": 70.2, "error": ""}],
    }
    report.write_text(json.dumps(own))
    text = studio_sizing.studio_twin_markdown(report)
    assert "(stand-ins: python: 3.11 here for the image's 3.12)" in text and "took 20.5 s and added 12.0 MB" in text
    assert "| 05 | 70.2 s | not measured |" in text


def test_without_a_twin_report_the_studio_section_says_where_the_figures_come_from(tmp_path):
    text = studio_sizing.studio_twin_markdown(tmp_path / "no-report.json")
    assert text.startswith("No measured figures yet") and "`make studio-twin`" in text


def test_the_studio_section_is_steps_a_facilitator_follows():
    studio = GUIDE.read_text(encoding="utf-8").split("### SageMaker Studio, step by step")[1].split("\n## ")[0]
    steps = re.findall(r"^\d\. \*\*(.+?)\*\*", studio, re.M)
    assert len(steps) == 5, steps
    for needed in (
        "WithStudio=true",  # deploy with the option
        "create-presigned-domain-url",  # hand out profiles
        "Create JupyterLab space",  # what attendees do
        "LifecycleConfigOnStart",  # check a space came up
        "~/workshop-setup.log",  # where the install log is
        "5 minutes",  # the lifecycle script's limit
    ):
        assert needed in studio, needed


def test_the_helpers_accept_the_stack_s_outputs():
    outputs = [
        {"OutputKey": "RoleArn", "OutputValue": "arn:aws:iam::111122223333:role/workshop-ExecutionRole-AbC"},
        {"OutputKey": "BucketName", "OutputValue": "workshop-111122223333-us-east-1"},
        {"OutputKey": "FileSystemId", "OutputValue": "fs-0123456789abcdef0"},
    ]
    found = stack.settings_from_stack(outputs)
    assert found["WORKSHOP_ROLE_ARN"].endswith("workshop-ExecutionRole-AbC")
    assert found["WORKSHOP_BUCKET"] == "workshop-111122223333-us-east-1"
    assert found["lab 05: fsx_id"] == "fs-0123456789abcdef0"
    with pytest.raises(setup_errors.AwsSetupError, match="no RoleArn output"):
        stack.settings_from_stack(outputs[1:])


def test_stack_exports_reads_the_stack_offline():
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        fake = aws_offline.OfflineAWS()
        fake.respond(
            "DescribeStacks",
            {
                "Stacks": [
                    {
                        "StackName": "event",
                        "CreationTime": "2026-11-23T00:00:00Z",
                        "StackStatus": "CREATE_COMPLETE",
                        "Outputs": [
                            {"OutputKey": "RoleArn", "OutputValue": "arn:aws:iam::111122223333:role/w"},
                            {"OutputKey": "BucketName", "OutputValue": "event-bucket"},
                        ],
                    }
                ]
            },
        )
        text = stack.stack_exports("event", boto_session=fake.boto_session)
    assert not attempts
    assert "export WORKSHOP_ROLE_ARN=arn:aws:iam::111122223333:role/w" in text
    assert "export WORKSHOP_BUCKET=event-bucket" in text


def test_stored_objects_lists_then_deletes_only_this_attendee_s(no_studio, monkeypatch):
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        fake = aws_offline.OfflineAWS()
        for key in ("alice/source/a.tar.gz", "alice/lab02/output/model.tar.gz", "alice-smith/x", "bob/y"):
            fake._put("event-bucket", key, 1000)
        listed = leftovers.stored_objects("alice", bucket="event-bucket", boto_session=fake.boto_session)
        assert listed.keys == ("alice/lab02/output/model.tar.gz", "alice/source/a.tar.gz") and listed.bytes == 2000
        assert not fake.calls_to("DeleteObjects") and "delete=True" in repr(listed)
        gone = leftovers.stored_objects("alice", bucket="event-bucket", boto_session=fake.boto_session, delete=True)
        assert gone.deleted and sorted(fake.objects["event-bucket"]) == ["alice-smith/x", "bob/y"]
        monkeypatch.setattr(settings.getpass, "getuser", lambda: "sagemaker-user")  # Studio's login, no attendee
        with pytest.raises(setup_errors.AwsSetupError, match="shared login"):
            leftovers.stored_objects(bucket="event-bucket", boto_session=fake.boto_session)
    assert not attempts
