"""The workshop as a facilitator plans it: each lab's target, cost and quota, the agendas, the pre-launched demo job,
the 2026 map of what to use when, and the room's questions.

    python -m course.facilitator.workshop --write docs/facilitator.md   # refresh the guide's generated blocks

All computed (instances, the labs' ``**Time:**`` lines, ``course.lab_time``, ``helpers.aws.images``), so the
guide cannot drift: a test checks its blocks.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from pathlib import Path

from course import generated, lab_time
from course.event.studio_apps import app_quota_name
from course.facilitator.agenda import DEMO, agendas
from course.facilitator.lab_targets import LIBRARIES, TARGETS, gpus_of, hourly
from course.facilitator.map_2026 import answers_markdown, map_markdown
from course.facilitator.studio_sizing import (
    account_generator,
    studio_sizing_markdown,
    studio_twin_markdown,
)
from course.facilitator.tables import markdown, money
from course.lab import RealTarget
from course.manifest import LABS, registered
from helpers.aws.launch import LOG_GROUP
from helpers.aws.quotas import ACCOUNT_WIDE, quota_name
from helpers.job_spec import Job
from helpers.planning import cost, instances


# ---------------------------------------------------------------------------------------------- "the cheapest"
def need(gpus: int, bf16: bool, library: str = "") -> str:
    """``at least 4 GPUs, bf16``: the query ``instances.cheapest(gpus, bf16, library)`` answers, in words."""
    extras = (["bf16"] if bf16 else []) + ([LIBRARIES[library]] if library else [])
    return ", ".join([f"at least {gpus} GPU{'s' if gpus != 1 else ''}", *extras])


def same_need(t: RealTarget) -> tuple[int, bool, str]:
    """What a real target's job needs: its type's GPU count, bf16 if the type has it, and its library."""
    spec = instances.lookup(t.instance_type)
    return spec.gpus, spec.bf16, t.library


def cheapest_for(t: RealTarget) -> instances.InstanceType:
    gpus, bf16, library = same_need(t)
    return instances.cheapest(gpus, bf16=bf16, feature=library or None)


def why(t: RealTarget) -> str:
    """The typed reason, and "the cheapest with ..." only where ``instances.cheapest`` says so."""
    if cheapest_for(t).name != t.instance_type:
        return t.why
    return f"{t.why}; the cheapest with {need(*same_need(t))}"


def cheapest_markdown() -> str:
    """The cheapest types for the labs' two shapes, then each real target beside the cheapest with its need."""
    shapes = [
        {
            "need": need(gpus, True),
            "the cheapest (`instances.cheapest`)": f"{c.name} ({gpus_of(c)})",
            "$/h": money(hourly(c)),
        }
        for gpus in (1, 4)
        for c in [instances.cheapest(gpus, bf16=True)]
    ]
    rows = []
    for t in TARGETS:
        spec, c = instances.lookup(t.instance_type), cheapest_for(t)
        hours = t.minutes / 60 * t.count
        rows.append(
            {
                "lab": t.lab,
                "job": t.part,
                "real target": f"{t.instance_type} ({gpus_of(spec)}), {money(hourly(spec))}/h",
                "the cheapest with its need": f"{c.name} ({gpus_of(c)}), {money(hourly(c))}/h: " + need(*same_need(t)),
                "planned job (cost table), on demand: real target / the cheapest": (
                    f"{money(hours * hourly(spec))} / {money(hours * hourly(c))}"
                ),
            }
        )
    return "\n\n".join([markdown(shapes), markdown(rows)])


# ---------------------------------------------------------------------------------------------- agendas
def agendas_markdown() -> str:
    out = []
    for name, (length, blocks) in agendas().items():
        out.append(f"**{name}**: {sum(b.minutes for b in blocks)} of {length} minutes\n")
        out.append(markdown([{"minutes": b.minutes, "what": b.what, "minutes from": b.source} for b in blocks]))
        out.append("")
    return "\n".join(out).rstrip()


# ---------------------------------------------------------------------------------------------- costs and quotas
def cost_rows() -> list[dict]:
    rows = []
    for t in TARGETS:
        est = cost.estimate(t.instance_type, t.count, max_runtime_s=t.minutes * 60, spot=t.spot)
        spec = instances.lookup(t.instance_type)
        low, high = est.spot_range_usd if t.spot else (est.on_demand_usd, est.on_demand_usd)
        rows.append(
            {
                "lab": t.lab,
                "job": t.part,
                "instance": f"{t.count} × {t.instance_type} ({spec.gpus} GPU{'s' if spec.gpus != 1 else ''})",
                "minutes": t.minutes,
                "cost per attendee": (
                    f"{money(low)}–{money(high)} spot ({money(est.on_demand_usd)} on demand)"
                    if t.spot
                    else money(est.on_demand_usd)
                ),
                "default": "launch" if t.launch else "dry run",
                "why this instance": why(t),
            }
        )
    return rows


# Service Quotas' code for the account-wide on-demand quota (checked 2026-11-25); the spot one: find it by its name
ACCOUNT_WIDE_CODES = {False: "L-00C91CB5", True: ""}


def instances_per_lab() -> dict[str, dict[bool, int]]:
    """Instances one attendee holds at once in each lab that launches real jobs, on demand (False) and on spot."""
    out: dict[str, dict[bool, int]] = {}
    for t in TARGETS:
        if t.launch:
            held = out.setdefault(t.lab, {False: 0, True: 0})
            held[t.spot] += t.count
    return out


def instances_per_lab_markdown() -> str:
    held = instances_per_lab()
    rows = []
    for lab in sorted({t.lab for t in TARGETS}):
        dry = [f"{t.count} × {t.instance_type}" for t in TARGETS if t.lab == lab and not t.launch]
        rows.append(
            {
                "lab": lab,
                "on-demand instances per attendee": held.get(lab, {}).get(False, 0),
                "spot instances per attendee": held.get(lab, {}).get(True, 0),
                "more if its dry runs are launched": ", ".join(dry) or "–",
            }
        )
    return markdown(rows)


def _most(per_lab: dict[str, int]) -> tuple[int, list[str]]:
    top = max(per_lab.values())
    return top, [lab for lab, n in per_lab.items() if n == top]


def quota_needs() -> list[tuple[str, str, int, list[str], str | None, bool]]:
    """(quota name, code, instances per attendee, the labs that need that many, instance type or None for the
    account-wide quota, spot) for every quota an event must raise: every attendee runs the same lab at once."""
    out: list[tuple[str, str, int, list[str], str | None, bool]] = []
    for spot in (False, True):
        by_type: dict[str, dict[str, int]] = {}
        for t in TARGETS:
            if t.launch and t.spot == spot:
                lab = by_type.setdefault(t.instance_type, {})
                lab[t.lab] = lab.get(t.lab, 0) + t.count
        for instance_type, per_lab in by_type.items():
            out.append((quota_name(instance_type, spot), "", *_most(per_lab), instance_type, spot))
    for spot in (False, True):
        per_lab = {lab: held[spot] for lab, held in instances_per_lab().items() if held[spot]}
        if per_lab:
            out.append((ACCOUNT_WIDE[spot], ACCOUNT_WIDE_CODES[spot], *_most(per_lab), None, spot))
    return out


def space_type() -> str:
    """The attendees' JupyterLab type: the template's default (``StudioInstanceType``)."""
    return account_generator().jupyterlab_instance().name


def space_row(attendees: int) -> dict:
    """The Studio app quota: one JupyterLab app per attendee's space, whatever the agenda launches."""
    return {
        "Service Quotas name (SageMaker)": app_quota_name(space_type()),
        "code": "–",
        "per attendee": "1 (their space)",
        f"value for {attendees} attendees": attendees,
    }


def quota_rows(attendees: int) -> list[dict]:
    """Each quota's value for ``attendees`` all running the same lab at once, and their spaces."""
    return [
        {
            "Service Quotas name (SageMaker)": name,
            "code": code or "–",
            "per attendee": f"{n} (lab {', '.join(labs)})",
            f"value for {attendees} attendees": n * attendees,
        }
        for name, code, n, labs, _, _ in quota_needs()
    ] + [space_row(attendees)]


def agenda_labs() -> set[str]:
    """The labs some agenda runs (its blocks name them by notebook stem)."""
    blocks = [b.what for _, bs in agendas().values() for b in bs]
    return {lab.number for lab in LABS if any(w.startswith(f"`{lab.stem}`") for w in blocks)}


def attendee_launches(lab: str) -> bool:
    """Whether the lab, run as its parameters cell stands, launches a real job (no lab does: each is local, dry)."""
    p = lab_parameters(lab)
    return bool(p.get("launch")) and p.get("target") != "local"


def demo_jobs() -> int:
    """The pre-launched jobs the longest-running agenda shows (one demo block each)."""
    return max(sum(b.what == DEMO for b in blocks) for _, blocks in agendas().values())


def agenda_needs(attendees: int) -> list[tuple[str, str, int, str, str, bool]]:
    """(quota name, code, instances, what holds them, instance type, spot) for the agendas as written: the
    facilitator's demo job(s), and every attendee's job in the labs whose parameters launch one."""
    t = demo_target()
    held = [(t.instance_type, t.spot, t.count * demo_jobs(), f"the facilitator's demo job (lab {t.lab})")]
    for t in TARGETS:
        if t.lab in agenda_labs() and attendee_launches(t.lab):
            held.append((t.instance_type, t.spot, t.count * attendees, f"lab {t.lab}, every attendee"))
    out = [(quota_name(i, s), "", n, why, i, s) for i, s, n, why in held]
    for spot in (False, True):
        n = sum(h[2] for h in held if h[1] == spot)
        if n:
            out.append((ACCOUNT_WIDE[spot], ACCOUNT_WIDE_CODES[spot], n, "all of the above", "", spot))
    return out


def agenda_quota_rows(attendees: int) -> list[dict]:
    needs = [(name, code, why, n) for name, code, n, why, _, _ in agenda_needs(attendees)]
    space = (app_quota_name(space_type()), "", "1 per attendee: their space", attendees)
    return [
        {
            "Service Quotas name (SageMaker)": name,
            "code": code or "–",
            "what needs it": why,
            f"value for {attendees} attendees": n,
        }
        for name, code, why, n in [*needs, space]
    ]


def ceiling_usd_per_h(per_type: dict[str, int], cap: int) -> float:
    """The most the quotas let training jobs cost an hour on demand: the dearest types first, up to each type's
    quota, until the account-wide quota (``cap``) is reached."""
    total, left = 0.0, cap
    for name in sorted(per_type, key=lambda n: -hourly(instances.lookup(n))):
        n = min(per_type[name], left)
        total, left = total + n * hourly(instances.lookup(name)), left - n
    return total


def ceiling_sentence(needs: list[tuple[str, int, str | None, bool]], attendees: int) -> str:
    """The on-demand $/h ceiling of a table's quotas: (quota name, value, instance type or None, spot) each."""
    on_demand = {i: n for _, n, i, spot in needs if i and not spot}
    cap = next((n for name, n, i, spot in needs if not i and not spot), 0)
    jobs = ceiling_usd_per_h(on_demand, cap)
    spaces = attendees * hourly(instances.lookup(space_type()))
    spot = sum(n for _, n, i, s in needs if i and s)
    return (
        f"On-demand ceiling: {money(jobs)}/h of training instances (the dearest types first, up to each quota, until "
        f"the account-wide one) + {money(spaces)}/h for {attendees} spaces on {space_type()} (the helpers' "
        f"training price for the type) = {money(jobs + spaces)}/h"
        + (f"; spot adds at most {spot} instances, billed below on-demand." if spot else ".")
    )


def agenda_quotas_markdown(attendees: int) -> str:
    needs = [(name, n, i or None, s) for name, _, n, _, i, s in agenda_needs(attendees)]
    return markdown(agenda_quota_rows(attendees)) + "\n\n" + ceiling_sentence(needs, attendees)


def every_attendee_quotas_markdown(attendees: int) -> str:
    needs = [(name, n * attendees, i, s) for name, _, n, _, i, s in quota_needs()]
    return markdown(quota_rows(attendees)) + "\n\n" + ceiling_sentence(needs, attendees)


def quota_check_code() -> str:
    """The calls that check, the day before, that every quota allows the event (``attendees`` set by the reader)."""
    lines = [
        "import boto3",
        "from course.event import studio_apps",
        "from helpers.aws import account",
        "",
        "session = boto3.Session()",
        "attendees = 30",
    ]
    for _, _, n, _, instance_type, spot in quota_needs():
        if instance_type:
            lines.append(
                f'account.check_quota(session, "{instance_type}", {n} * attendees{", spot=True" if spot else ""})'
            )
    lines.append(f'studio_apps.check_app_quota(session, "{space_type()}", attendees)  # a JupyterLab app per space')
    return "\n".join(lines)


def lab_time_markdown() -> str:
    rows = []
    for nb in (lab.notebook for lab in LABS):
        t = lab_time.estimate(nb)
        assert t.stated is not None, f"{nb.stem} states no time"  # tests/test_lab_time.py holds every lab to one
        core, full = t.stated
        rows.append(
            {
                "lab": nb.stem,
                "words (core / all)": f"{t.core.words} / {t.full.words}",
                "code lines (core / all)": f"{t.core.code_lines} / {t.full.code_lines}",
                "exercises (min)": f"{t.core.exercise_min:g}",
                "prose + code + exercises (min, core)": round(t.core.minutes),
                "stated (min): core / all": f"{core} / {full}",
            }
        )
    return markdown(rows)


# ---------------------------------------------------------------------------------------------- the demo job
def lab_parameters(lab: str) -> dict:
    """The values in a lab's ``parameters`` cell."""
    nb = json.loads(registered(lab).notebook.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {_assigned_name(n): ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)}


def _assigned_name(assign: ast.Assign) -> str:
    target = assign.targets[0]
    assert isinstance(target, ast.Name), f"a parameters cell assigns names, not {ast.unparse(target)}"
    return target.id


DEMO_LAB = "01"
DEMO_RUN_IT = "Run it"  # the lab's section whose cell builds the job and dry-runs it
DEMO_LAUNCH = (
    "demo = jobs.run_job(job, t, launch=True, wait=False, budget_usd=budget_usd)\n"
    "print(demo.name, demo.console_url)  # keep the name for the room"
)
JOB_NAME = "<the job's name>"


def demo_target() -> RealTarget:
    return next(t for t in TARGETS if t.lab == DEMO_LAB and t.parameter == "real_target")


def demo_room_code() -> str:
    t = demo_target()
    return "\n".join(
        [
            "import boto3",
            "from helpers.aws.launch import LaunchedJob",
            "",
            "session = boto3.Session()",
            f'demo = LaunchedJob("{JOB_NAME}", session, session.region_name, "{t.instance_type}", {t.count})',
            "done = demo.wait()  # its status changes and its log from the first line, then the bill",
            "print(done.training_seconds, done.billable_seconds, done.phases, done.metrics)",
        ]
    )


def demo_markdown() -> str:
    t = demo_target()
    spec = instances.lookup(t.instance_type)
    cap_s = Job("demo").max_runtime_s  # lab 01's job sets no max_runtime_s: the default caps it
    worst = cost.estimate(t.instance_type, t.count, max_runtime_s=cap_s).on_demand_usd
    planned = cost.estimate(t.instance_type, t.count, max_runtime_s=t.minutes * 60).on_demand_usd
    budget = lab_parameters(DEMO_LAB)["budget_usd"]
    verdict = "within it" if worst <= budget else "above it: raise `budget_usd` in the parameters cell"
    return "\n".join(
        [
            f"Lab {DEMO_LAB}'s job at full size on its real target, {t.instance_type} ({gpus_of(spec)}): at most "
            f"{money(worst)} (its {cap_s / 3600:g} h MaxRuntime at {money(hourly(spec))}/h; lab "
            f"{DEMO_LAB}'s `budget_usd` is {money(budget)}, {verdict}), about {money(planned)} for the "
            f"{t.minutes} minutes it plans to train. Launch it an hour before the session.",
            "",
            f"**Before.** With the event account's credentials and `WORKSHOP_ATTENDEE=facilitator`, open "
            f'`{registered(DEMO_LAB).stem}` with `target = "sagemaker"` and `smoke = False` in its parameters cell, '
            f'run the cells down to "{DEMO_RUN_IT}" (it shows the dry run: the request and its cost), then, in a new '
            "cell:",
            "",
            "```python",
            DEMO_LAUNCH,
            "```",
            "",
            "**In the room**, in any kernel with the same credentials:",
            "",
            "```python",
            demo_room_code(),
            "```",
            "",
            "`training_seconds` and `billable_seconds` are DescribeTrainingJob's `TrainingTimeInSeconds` and "
            "`BillableTimeInSeconds` (the last line `wait()` prints prices them); `phases` holds the seconds in each "
            'status (Starting, Downloading, Training, Uploading), the start-up that lab 01\'s "Where the time went" '
            "talks about; `metrics` are the full-size run's final figures, to set beside the baseline lab 01 printed. "
            f"The log is in CloudWatch Logs, group `{LOG_GROUP}`, one stream per instance named after the job; "
            "`helpers.aws.cloudwatch.job_metrics(demo.name).heatmap()` draws the instance's CPU and GPU use as lab 07 "
            "does. Without the helpers: `aws sagemaker describe-training-job --training-job-name <name> --query "
            '"[TrainingJobStatus,TrainingTimeInSeconds,BillableTimeInSeconds]"`.',
        ]
    )


# ---------------------------------------------------------------------------------------------- the checklist
def checklist_markdown() -> str:
    g = account_generator()
    t = demo_target()
    return "\n".join(
        [
            "- **T-14: quotas.** Request the [values below](#service-quotas-to-request) for your head count, the "
            "account-wide ones too (Service Quotas console, Amazon SageMaker); GPU increases can take days.",
            f"- **T-7: a full pass in a fresh Studio space** of the type attendees will get (`StudioInstanceType`, "
            f"default {g.jupyterlab_instance().name}): clone, `make studio`, then "
            "`python -m course.run_labs --solutions` (every lab with its reference answers; the executed notebooks "
            "in `runs/labs/` are the day's fallback) and `python -m course.run_labs --target sagemaker` (every "
            f"lab's request and cost, dry). Launch the [demo job](#the-pre-launched-job) once on {t.instance_type}: "
            "it proves the role, the bucket, the quota and the image pull; keep its name (it is the demo's plan B). "
            'Then `make slides SLIDES_ARGS="--agenda 90"` (or `half`, `full`): the slides of that pass\'s own runs, '
            "cut as your agenda cuts the labs, in `runs/slides/`. Send attendees the "
            "[pre-work note](#the-note-to-send-attendees).",
            "- **T-1: the environment.** Deploy the stack with the event's options (a Studio domain takes minutes), "
            "`python -m course.event.stack env --stack workshop`, set `WORKSHOP_BUDGET_USD`, open one attendee "
            "space and wait for `== set-up done` in `~/workshop-setup.log`. Then check the quotas now allow the "
            "event; each call raises `QuotaError` naming the quota and the value to request (for a training type: its "
            "quota and the account-wide one; for the spaces: their JupyterLab apps), and returns None where it cannot "
            "read them:",
            "",
            "  ```python",
            *("  " + line if line else "" for line in quota_check_code().splitlines()),
            "  ```",
            "",
            "- **The day, an hour before:** launch the [demo job](#the-pre-launched-job) and note its name; it has "
            "finished by the time the room needs it. Start the room's spaces: "
            "`python -m course.spaces --domain $DOMAIN` says what it would do, `--start` does it (a private "
            "space `attendee-NN-labs` per attendee profile, on the domain's type and image; each takes a few minutes, "
            "then runs the set-up). Attendees open a running space instead of waiting for one; the domain stops it "
            "after 2 idle hours.",
        ]
    )


BLOCKS = {
    "agendas": agendas_markdown,
    "demo": demo_markdown,
    "map-2026": map_markdown,
    "checklist": checklist_markdown,
    "costs": lambda: markdown(cost_rows()),
    "cheapest": cheapest_markdown,
    "instances-per-lab": instances_per_lab_markdown,
    "quotas-agenda-10": lambda: agenda_quotas_markdown(10),
    "quotas-agenda-30": lambda: agenda_quotas_markdown(30),
    "quotas-10": lambda: every_attendee_quotas_markdown(10),
    "quotas-30": lambda: every_attendee_quotas_markdown(30),
    "answers": answers_markdown,
    "lab-time": lab_time_markdown,
    "studio-sizing": studio_sizing_markdown,
    "attendee-limits": lambda: account_generator().attendee_limits_markdown(),  # what one who tries can do
    "attendee-ceiling": lambda: account_generator().attendee_ceiling_sentence(),
    "studio-twin": studio_twin_markdown,
}


def render(text: str) -> str:
    """``text`` with every ``<!-- generated:NAME -->`` block rewritten."""
    return generated.rewrite(text, BLOCKS, generated.HTML, "the guide")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.facilitator.workshop", description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", type=Path, help="rewrite the generated blocks of this Markdown file in place")
    a = ap.parse_args(argv)
    if a.write:
        a.write.write_text(render(a.write.read_text(encoding="utf-8")), encoding="utf-8")
        print(f"wrote {a.write}")
        return 0
    for name, make in BLOCKS.items():
        print(f"## {name}\n\n{make()}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
