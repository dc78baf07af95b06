"""The sessions a facilitator runs stay true: every agenda adds up and says where its minutes come from, "the
cheapest" is only ever what the catalogue computes, the quota tables count the account-wide quotas, and the
pre-launched demo's calls are ones the helpers take (run offline against the fake AWS)."""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import re
from dataclasses import fields

import boto3
import pytest
from conftest import REPO

from course import lab_time
from course.facilitator import agenda, lab_targets, workshop
from course.manifest import registered
from helpers.aws import account, quotas
from helpers.aws.preflight import LaunchOptions
from helpers.planning import instances
from sagemaker_standin import offline_account as aws_offline
from sagemaker_standin import sandbox
from sagemaker_standin.api_answers import ScriptedJob

GUIDE = REPO / "docs" / "facilitator.md"
GENERATED = re.compile(r"<!-- generated:([\w-]+) -->\n.*?<!-- /generated:\1 -->", re.S)


# ---------------------------------------------------------------------------------------------- agendas
@pytest.mark.parametrize("name", list(agenda.agendas()))
def test_each_agenda_adds_up_and_names_where_its_minutes_come_from(name):
    length, blocks = agenda.agendas()[name]
    assert sum(b.minutes for b in blocks) == length
    stated = agenda.lab_minutes()
    for b in blocks:
        assert b.minutes > 0 and b.source, b
        if not b.lab:
            assert b.source.startswith(("set here", "the rest of")) and not re.search(r"`\d\d_", b.what), b
            continue
        parts = agenda.sections(b.lab)
        kept = sum(m for h, m in parts if not any(h.startswith(s) for s in b.skip))
        if b.shown:  # read out from slides: the reading time of what is shown, nothing run
            assert b.what.startswith(f"`{registered(b.lab).stem}` on slides: ") and b.minutes == math.ceil(kept), b
            continue
        core = stated[b.lab][0]
        assert b.what.startswith(f"`{registered(b.lab).stem}`, core path"), b
        if not b.skip:
            assert b.minutes == core and b.source.endswith("stated core time"), b
            continue
        assert b.what.endswith("without: " + "; ".join(b.skip)), b
        assert b.minutes == math.ceil(core * kept / sum(m for _, m in parts)), b
        assert f"stated core {core} min" in b.source, b
    assert blocks[-1].source.startswith(f"the rest of the {length} minutes"), blocks[-1]


def test_the_90_minute_session_covers_the_arc_and_the_half_day_adds_model_parallelism_and_the_drill():
    length, blocks = agenda.agendas()["90-minute session"]
    whats = [b.what for b in blocks]
    lab01 = next(b for b in blocks if b.lab == "01")
    assert lab01.shown  # on slides from the room's run: the contract, and the run's margin over the baseline
    for kept in ("The training script", "What came out"):
        assert kept in [h for h, _ in agenda.sections("01")] and kept in lab01.what and kept not in lab01.skip
    lab02 = next(b for b in blocks if b.lab == "02")
    assert not lab02.shown  # run in the room, with every lesson it teaches
    lessons = ("The diff", "Global batch and learning rate", "Run it", "Loss parity", "Step time", "Where a step")
    for lesson in (*lessons, "Your turn"):  # and its exercise, 02.1, in the room
        assert any(h.startswith(lesson) for h, _ in agenda.sections("02"))
        assert not any(lesson.startswith(s) or s.startswith(lesson) for s in lab02.skip), lesson
    assert agenda.DEMO in whats and "the 2026 map" in whats[-1]  # the map, in brief, in the questions
    half = [b.what for b in next(v for k, v in agenda.agendas().items() if k.startswith("half day"))[1]]
    assert whats[:-1] == half[: len(whats) - 1]  # the arc first
    assert any(w.startswith("`04_model_parallel`, core path") for w in half)
    assert any(w.startswith("`06_spot_checkpoints`, core path") for w in half)
    assert "The drill" in [h for h, _ in agenda.sections("06")]
    day_blocks = agenda.agendas()["full day (8 h)"][1]
    day = [b.what for b in day_blocks]
    assert any(w.startswith("`08_failures_at_scale`, core path") for w in day)  # lab 08's drills in the room
    assert day_blocks[-1].what == agenda.BUFFER and day_blocks[-1].minutes >= 30  # a real buffer
    for kept in ("A hang, found", "A straggler, measured"):
        assert kept in [h for h, _ in agenda.sections("08")] and kept not in next(w for w in day if "08_" in w)


def test_a_session_that_no_longer_fits_is_refused():
    with pytest.raises(ValueError, match="leaving 2 for"):
        agenda._session(90, [agenda.Block("a lab that grew", 88, "its stated core time")], "questions", 5)


def test_a_trim_must_name_sections_the_lab_has():
    with pytest.raises(ValueError, match="no core section headed 'Warm-up'"):
        agenda.lab_block("01", ("Warm-up",))


@pytest.mark.parametrize("lab", sorted(agenda.lab_minutes()))
def test_a_lab_s_sections_add_up_to_its_core_estimate(lab):
    parts = agenda.sections(lab)
    assert parts[0][0] == "opening" and len(parts) > 3
    total = lab_time.estimate(registered(lab).notebook).core.minutes
    assert sum(m for _, m in parts) == pytest.approx(total)


# ---------------------------------------------------------------------------------------------- "the cheapest"
CLAIM = re.compile(r"the cheapest with at least (\d+) GPUs?((?:, (?:bf16|SMDDP|SMP v2))*)")
LIBRARY = {v: k for k, v in lab_targets.LIBRARIES.items()}


def false_cheapest_claims(text: str, instance_type: str) -> list[str]:
    """Each "cheapest" in ``text`` that is not a claim ``instances.cheapest`` makes about ``instance_type``."""
    wrong = []
    claims = list(CLAIM.finditer(text))
    if text.lower().count("cheapest") != len(claims):
        wrong.append(f"a 'cheapest' not in the computed form: {text!r}")
    for m in claims:
        extras = [e for e in m.group(2).split(", ") if e]
        library = next((LIBRARY[e] for e in extras if e in LIBRARY), None)
        answer = instances.cheapest(int(m.group(1)), bf16="bf16" in extras, feature=library).name
        if answer != instance_type:
            wrong.append(f"{instance_type} called {m.group(0)!r}, but instances.cheapest returns {answer}")
    return wrong


def test_no_typed_why_calls_an_instance_the_cheapest():
    assert not [t for t in lab_targets.TARGETS if "cheapest" in t.why.lower()]


@pytest.mark.parametrize("target", lab_targets.TARGETS, ids=lambda t: f"{t.lab}-{t.parameter}")
def test_a_why_calls_a_type_the_cheapest_only_when_instances_cheapest_returns_it(target):
    assert not false_cheapest_claims(workshop.why(target), target.instance_type)


def test_the_claim_checker_catches_a_wrong_claim():
    assert false_cheapest_claims("one A10G, the cheapest current GPU", "ml.g5.xlarge")
    assert false_cheapest_claims("x; the cheapest with at least 1 GPU, bf16", "ml.g5.xlarge")  # it is ml.g6.xlarge
    assert false_cheapest_claims("x; the cheapest with at least 4 GPUs, bf16", "ml.g5.12xlarge")
    assert not false_cheapest_claims("x; the cheapest with at least 8 GPUs, bf16, SMDDP", "ml.p4d.24xlarge")


def test_the_guide_says_what_the_cheapest_bf16_types_cost_beside_each_real_target():
    text = GUIDE.read_text(encoding="utf-8")
    block = text.split("<!-- generated:cheapest -->")[1].split("<!-- /generated:cheapest -->")[0]
    for gpus in (1, 4):
        best = instances.cheapest(gpus, bf16=True)
        assert f"| at least {gpus} GPU{'s' if gpus > 1 else ''}, bf16 | {best.name} " in block
        assert f"${best.price_per_hour:,.2f} |" in block
    for t in lab_targets.TARGETS:
        spec, best = instances.lookup(t.instance_type), workshop.cheapest_for(t)
        row = next(line for line in block.splitlines() if line.startswith(f"| {t.lab} | {t.part} |"))
        assert f"{t.instance_type} ({spec.gpus} × {spec.gpu.model}), ${spec.price_per_hour:,.2f}/h" in row
        assert f"{best.name} ({best.gpus} × {best.gpu.model}), ${best.price_per_hour:,.2f}/h" in row


def test_no_typed_line_of_the_guide_calls_an_instance_type_the_cheapest():
    typed = GENERATED.sub("", GUIDE.read_text(encoding="utf-8"))
    assert not [line for line in typed.splitlines() if "cheapest" in line.lower() and "ml." in line]


# ---------------------------------------------------------------------------------------------- quotas
def test_the_quota_tables_hold_the_account_wide_quotas_at_the_busiest_lab_s_instances():
    rows = {r["Service Quotas name (SageMaker)"]: r for r in workshop.quota_rows(30)}
    held: dict[tuple[str, bool], int] = {}
    for t in lab_targets.TARGETS:
        if t.launch:
            held[t.lab, t.spot] = held.get((t.lab, t.spot), 0) + t.count
    for spot in (False, True):
        most = max(n for (_, s), n in held.items() if s == spot)
        assert rows[quotas.ACCOUNT_WIDE[spot]]["value for 30 attendees"] == most * 30
    assert held["05", False] == 3 and rows[quotas.ACCOUNT_WIDE[False]]["per attendee"] == "3 (lab 05)"
    assert rows[quotas.ACCOUNT_WIDE[False]]["code"] == "L-00C91CB5"
    assert rows[quotas.quota_name("ml.g6.12xlarge")]["value for 30 attendees"] == 60  # lab 02: 2 instances each
    assert not any("p4d" in name for name in rows)  # SMDDP and SMP stay dry runs: no P4 quota to ask for


def test_the_day_before_checks_cover_every_quota(monkeypatch):
    needs = workshop.quota_needs()
    for spot in (False, True):
        wide = [n for name, _, n, _, t, s in needs if t is None and s == spot]
        per_type = [n for _, _, n, _, t, s in needs if t and s == spot]
        assert not wide or max(per_type) >= wide[0]  # check_quota checks the account-wide one with that count
    monkeypatch.setattr(account, "_quota_codes", {})
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        fake = aws_offline.OfflineAWS()
        monkeypatch.setattr(boto3, "Session", lambda *a, **k: fake.boto_session)
        exec(workshop.quota_check_code(), {})
    assert not attempts and len(fake.calls_to("ListAWSDefaultServiceQuotas")) >= 1


# ---------------------------------------------------------------------------------------------- the demo job
def test_the_demo_launch_is_a_call_the_lab_s_names_and_run_job_take():
    call = ast.parse(workshop.DEMO_LAUNCH).body[0].value
    assert ast.unparse(call.func) == "jobs.run_job" and [ast.unparse(a) for a in call.args] == ["job", "t"]
    keywords = {k.arg: ast.literal_eval(k.value) if k.arg != "budget_usd" else None for k in call.keywords}
    assert keywords["launch"] is True and keywords["wait"] is False
    assert set(keywords) <= {f.name for f in fields(LaunchOptions)} | {"launch"}
    params = workshop.lab_parameters(workshop.DEMO_LAB)
    assert {"target", "smoke", "budget_usd"} <= set(params)
    assert params["real_target"] == workshop.demo_target().instance_type
    nb = registered(workshop.DEMO_LAB).notebook.read_text(encoding="utf-8")
    assert "jobs.run_job(job, t, launch=launch, budget_usd=budget_usd)" in nb  # t: the set-up cell's Target
    assert workshop.DEMO_RUN_IT in [h for h, _ in agenda.sections(workshop.DEMO_LAB)]


def test_the_room_code_shows_the_demo_s_log_and_billable_seconds(monkeypatch):
    name = "facilitator-lab01-single-20261201090000"
    with sandbox.offline_environment(), sandbox.network_guard() as attempts:
        fake = aws_offline.OfflineAWS()
        fake.jobs[name] = {
            "OutputDataConfig": {"S3OutputPath": "s3://event-bucket/facilitator/lab01"},
            "ResourceConfig": {"InstanceType": workshop.demo_target().instance_type, "InstanceCount": 1},
        }
        fake.script_job(
            ScriptedJob(
                statuses=[("Completed", "Completed")],
                log_lines=["[setup] steps=10", "[train] step=10 loss=0.42", "[final] val_macro_f1=0.87"],
                training_seconds=700,
                billable_seconds=700,
            ),
            name,
        )
        monkeypatch.setattr(boto3, "Session", lambda *a, **k: fake.boto_session)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(workshop.demo_room_code().replace(workshop.JOB_NAME, name), {})
    assert not attempts
    printed = out.getvalue()
    assert "[train] step=10 loss=0.42" in printed  # the log, from its first line
    bill = 700 / 3600 * instances.lookup(workshop.demo_target().instance_type).price_per_hour
    assert f"700 s training, 700 s billable x 1 instance(s): ${bill:.2f}" in printed  # the bill
    last = printed.splitlines()[-1]  # training and billable seconds, seconds per status, the final metrics
    assert last.startswith("700 700 {") and last.endswith("{'val_macro_f1': 0.87}")


def _stored_and_read(source: str) -> tuple[set[str], set[str]]:
    tree = ast.parse(source)
    stored, read = set(), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else stored).add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            stored.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            stored |= {(a.asname or a.name).split(".")[0] for a in node.names}
    return stored, read


@pytest.mark.parametrize("name", sorted(agenda.agendas()))
def test_every_cell_an_agenda_skips_is_safe_to_skip(name):
    """A kept cell never reads a name that only a skipped cell sets (the NameError a room met when lab 01's "The
    data" was skipped): each agenda's selection of cells, read in order."""
    for block in agenda.agendas()[name][1]:
        if not block.skip or block.shown:  # a lab on slides runs nothing
            continue
        lab, skipped = block.lab, block.skip
        only_skipped: dict[str, str] = {}
        for heading, cell in agenda.core_cells(lab):
            if cell["cell_type"] != "code":
                continue
            stored, read = _stored_and_read("".join(cell["source"]))
            if any(heading.startswith(s) for s in skipped):
                only_skipped.update(dict.fromkeys(stored, heading))
                continue
            unset = sorted(n for n in read - stored if n in only_skipped)
            assert not unset, f"{name}: lab {lab}'s {heading!r} reads {unset}, set only in {only_skipped[unset[0]]!r}"
            for n in stored:
                only_skipped.pop(n, None)


# ---------------------------------------------------------------------------------------------- slides
def test_slides_follow_the_agenda_and_show_the_room_s_own_run(tmp_path):
    """The 90-minute session's slides: its two labs, lab 01 cut to what the agenda reads out from it, a slide per
    heading, and the outputs of the executed copy (``make``'s runs/labs/), not the committed notebook's none."""
    from course.facilitator import slides

    chosen = slides.plan("90", None)
    assert [lab for lab, _, _ in chosen] == ["01", "02"] and all(core for _, _, core in chosen)
    executed = tmp_path / "labs"
    executed.mkdir()
    nb = json.loads(registered("01").notebook.read_text(encoding="utf-8"))
    kept = next(
        i
        for i, c in enumerate(nb["cells"])
        if c["cell_type"] == "markdown" and "## What came out" in "".join(c["source"])
    )
    code = next(c for c in nb["cells"][kept:] if c["cell_type"] == "code")
    code["outputs"] = [
        {"output_type": "stream", "name": "stdout", "text": ["macro-F1 margin: +5.9 points (the run's own)\n"]}
    ]
    (executed / registered("01").notebook.name).write_text(json.dumps(nb), encoding="utf-8")
    assert (
        slides.main(["--agenda", "90", "--labs", "01", "--executed", str(executed), "--out", str(tmp_path / "out")])
        == 0
    )
    page = (tmp_path / "out" / "01_single_gpu.slides.html").read_text(encoding="utf-8")
    assert (
        "macro-F1 margin: +5.9 points (the run&#39;s own)" in page
        or "macro-F1 margin: +5.9 points (the run's own)" in page
    )
    assert ">The training script<" in page and ">What came out<" in page
    assert (
        ">The data<" not in page and ">Your turn: the container contract<" not in page
    )  # left out, as the agenda says
    types = slides.slide_types(nb, chosen[0][1], core_only=True)
    # reveal.js's layout: a section per slide, holding a section for it and one per sub-slide
    assert page.count("<section") == 2 * types.count("slide") + types.count("subslide") and types.count("slide") > 2


def test_slides_of_a_whole_lab_keep_its_deep_dives_and_refuse_an_unknown_agenda(capsys):
    from course.facilitator import slides

    nb = json.loads(registered("02").notebook.read_text(encoding="utf-8"))
    whole, core = slides.slide_types(nb), slides.slide_types(nb, core_only=True)
    assert "skip" not in whole and "skip" in core and whole.count("slide") > core.count("slide")
    with pytest.raises(SystemExit, match="say one of"):
        slides.plan("weekend", None)
