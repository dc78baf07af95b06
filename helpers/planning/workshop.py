"""The workshop as a facilitator plans it: each lab's real target, its cost and quota, the agendas, the pre-launched
demo job, the 2026 map of what to use when, and the answers to the questions a room asks.

    python -m helpers.planning.workshop                       # print the blocks
    python -m helpers.planning.workshop --write docs/facilitator.md   # refresh the guide's generated blocks

Everything here is computed (prices and "the cheapest" from ``instances``, times from the labs' own ``**Time:**``
lines and ``helpers.lab_time``, support dates from ``helpers.aws.image_support``), so the guide cannot drift from the
labs: the test suite checks that the guide's generated blocks are what this writes.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import json
import math
import re
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from helpers import lab_time
from helpers.aws import image_support, images
from helpers.aws.account import ACCOUNT_WIDE, quota_name
from helpers.aws.launch import LOG_GROUP
from helpers.job import Job
from helpers.lab import LABS_DIR, discover
from helpers.planning import cost, instances

LIBRARIES = {"smddp": "SMDDP", "smp": "SMP v2"}  # instances' feature names, as the guide writes them


def _types(names) -> str:
    names = list(names)
    return ", ".join(names[:-1]) + f" and {names[-1]}" if len(names) > 1 else "".join(names)


@dataclass(frozen=True)
class RealTarget:
    lab: str  # "02"
    part: str  # what the job is
    instance_type: str
    count: int  # instances an attendee holds at once (lab 05: its three jobs, counted as if they ran together)
    minutes: int  # a planning figure: the job's expected training time at full size
    spot: bool = False
    launch: bool = True  # False: shown as a dry run unless the account has quota for it
    why: str = ""  # typed reasons only: a "cheapest" claim is computed (see why()), never typed here
    parameter: str = "real_target"  # the lab parameter that holds instance_type
    library: str = ""  # "smddp" or "smp": the library the job needs, which narrows "the same need"


TARGETS = (
    RealTarget("01", "single-GPU fine-tune", "ml.g6.xlarge", 1, 20, why="one L4, with bf16"),
    RealTarget("02", "DDP, 2 nodes", "ml.g6.12xlarge", 2, 20, why="4 L4s a node: DDP inside and across nodes"),
    RealTarget(
        "03",
        "SMDDP AllReduce",
        "ml.p4d.24xlarge",
        2,
        20,
        launch=False,
        why=f"SMDDP runs only on {_types(instances.supporting('smddp'))}: a dry run unless the account has the quota",
        library="smddp",
    ),
    RealTarget("04", "FSDP / ZeRO / TP (torchrun)", "ml.g6.12xlarge", 1, 15, why="4 GPUs run every strategy"),
    RealTarget(
        "04",
        "SMP v2",
        "ml.p4d.24xlarge",
        1,
        15,
        launch=False,
        why=f"SMP v2 runs only on {_types(instances.supporting('smp'))}",
        parameter="smp_target",
        library="smp",
    ),
    RealTarget("05", "File, FastFile, FSx: 3 jobs", "ml.g6.xlarge", 3, 10, why="the input path, not the GPU"),
    RealTarget("06", "managed spot with checkpoints", "ml.g6.xlarge", 1, 30, spot=True, why="lab 01's GPU, on spot"),
    RealTarget("07", "profiled job + CloudWatch", "ml.g6.xlarge", 1, 15, why="one GPU shows the GEMM-bound profile"),
)


def _money(usd: float) -> str:
    return f"${usd:,.2f}"


def _price(spec: instances.InstanceType) -> float:
    """On-demand $/h: the workshop plans with priced types only (``instances.cheapest`` picks among those)."""
    assert spec.price_per_hour is not None, f"{spec.name} has no price on file (helpers.planning.instances)"
    return spec.price_per_hour


def _gpus(spec: instances.InstanceType) -> str:
    return f"{spec.gpus} × {spec.gpu.model}" if spec.gpu else spec.accelerators or "CPU"


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
            "the cheapest (`instances.cheapest`)": f"{c.name} ({_gpus(c)})",
            "$/h": _money(_price(c)),
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
                "real target": f"{t.instance_type} ({_gpus(spec)}), {_money(_price(spec))}/h",
                "the cheapest with its need": f"{c.name} ({_gpus(c)}), {_money(_price(c))}/h: " + need(*same_need(t)),
                "planned job (cost table), on demand: real target / the cheapest": (
                    f"{_money(hours * _price(spec))} / {_money(hours * _price(c))}"
                ),
            }
        )
    return "\n\n".join([markdown(shapes), markdown(rows)])


# ---------------------------------------------------------------------------------------------- agendas
@dataclass(frozen=True)
class Block:
    what: str
    minutes: int
    source: str  # where the minutes come from


@cache
def _names() -> dict[str, str]:
    return {nb.name[:2]: nb.stem for nb in discover(LABS_DIR)}


def lab_minutes() -> dict[str, tuple[int, int]]:
    """Each lab's stated (core, full) minutes, by number."""
    return {nb.name[:2]: lab_time.stated(nb) for nb in discover(LABS_DIR)}


def _notebook(lab: str) -> Path:
    return LABS_DIR / f"{_names()[lab]}.ipynb"


@cache
def sections(lab: str) -> tuple[tuple[str, float], ...]:
    """A lab's core path cut at its ``##`` and ``###`` headings: (heading, minutes ``helpers.lab_time`` estimates
    for its prose, code and exercises); the cells before the first heading are "opening"."""
    notebook = _notebook(lab)
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cut: list[tuple[str, list[dict]]] = [("opening", [])]
    for cell in nb["cells"]:
        text = "".join(cell["source"]).lstrip()
        if cell["cell_type"] == "markdown":
            if text.startswith(lab_time.DEEP_DIVES):
                break
            if m := re.match(r"#{2,3} (.+)", text):
                cut.append((m.group(1).strip(), []))
        cut[-1][1].append(cell)
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        part = Path(tmp) / notebook.name
        for heading, cells in cut:
            part.write_text(json.dumps({**nb, "cells": cells}), encoding="utf-8")
            out.append((heading, lab_time.estimate(notebook, executed=part).core.minutes))
    return tuple(out)


def lab_block(lab: str, skip: tuple[str, ...] = ()) -> Block:
    """A lab's core path at its stated time; with ``skip`` (headings, or their start), the share of that time
    ``helpers.lab_time`` estimates for the sections kept, rounded up."""
    name, core = _names()[lab], lab_minutes()[lab][0]
    if not skip:
        return Block(f"`{name}`, core path", core, f"{name}'s stated core time")
    parts = sections(lab)
    for s in skip:
        if not any(h.startswith(s) for h, _ in parts[1:]):
            raise ValueError(f"{name} has no core section headed {s!r}: its sections are {[h for h, _ in parts]}")
    total = sum(m for _, m in parts)
    kept = sum(m for h, m in parts if not any(h.startswith(s) for s in skip))
    return Block(
        f"`{name}`, core path without: {'; '.join(skip)}",
        math.ceil(core * kept / total),
        f"its stated core {core} min × {kept:.1f}/{total:.1f}, the share `helpers.lab_time` estimates for the "
        f"sections kept; rounded up",
    )


def _set(what: str, minutes: int) -> Block:
    return Block(what, minutes, "set here (`helpers/planning/workshop.py`)")


def _session(length: int, blocks: list[Block], closing: str, at_least: int) -> tuple[int, list[Block]]:
    """``blocks`` and a closing block that takes the rest of ``length``: the session adds up by construction, and
    one that no longer fits (a lab grew) is refused here, so the guide cannot be written."""
    left = length - sum(b.minutes for b in blocks)
    if left < at_least:
        raise ValueError(
            f"the {length}-minute session's blocks take {length - left} min, leaving {left} for {closing!r} "
            f"(at least {at_least}): trim a lab further or drop a block"
        )
    return length, [*blocks, Block(closing, left, f"the rest of the {length} minutes (at least {at_least})")]


# kept: the contract, a run and its result (the pre-launched job shows SageMaker's side)
LAB_01_TRIM = ("The data", "The same job, on SageMaker", "Where the time went", "Your turn", "Clean up", "Next")
HOMEWORK = ("Your turn", "Clean up", "Next")  # the exercise is left for later
# lab 02 in the arc: the diff, one process against two and their step times; the rest is read at home
LAB_02_TRIM = (
    "Global batch and learning rate",
    "The same job, as SageMaker would get it",
    "Loss parity",
    "Where a step's time went",
    *HOMEWORK,
)
DEMO = (
    "the pre-launched job: lab 01 at full size on SageMaker, its log and billable seconds "
    "([below](#the-pre-launched-job))"
)
MAP = "the 2026 map of what to use when ([below](#the-2026-map-of-what-to-use-when))"
QUESTIONS = "questions ([answers](#questions-a-room-asks)); cleanup"
HOMEWORK_TOO = QUESTIONS + "; the exercises skipped are homework"


def _arc() -> list[Block]:
    return [
        _set("welcome: the arc; the labs open (spaces started before the session)", 3),
        lab_block("01", LAB_01_TRIM),
        _set(DEMO, 5),
        lab_block("02", LAB_02_TRIM),
        _set(MAP, 5),
    ]


def agendas() -> dict[str, tuple[int, list[Block]]]:
    """Three agendas: (the session's minutes, its blocks); the blocks add up to the minutes."""
    return {
        "90-minute session": _session(90, _arc(), HOMEWORK_TOO, at_least=5),
        "half day (4 h): the arc, then model parallelism and the spot drill": _session(
            240,
            [*_arc(), _set("break", 15), lab_block("04", HOMEWORK), lab_block("06", HOMEWORK)],
            HOMEWORK_TOO,
            at_least=10,
        ),
        "full day (8 h)": _session(
            480,
            [
                _set("welcome and set-up check", 10),
                lab_block("01"),
                _set(DEMO, 5),
                lab_block("02"),
                _set("break", 15),
                lab_block("04"),
                _set("lunch", 45),
                lab_block("06"),
                _set("break", 15),
                lab_block("07"),
                _set(MAP + "; lab 03's SMDDP request as its evidence", 10),
            ],
            QUESTIONS + "; lab 05 (input modes, the longest lab) is homework: its results are in `runs/labs/`",
            at_least=10,
        ),
    }


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
                    f"{_money(low)}–{_money(high)} spot ({_money(est.on_demand_usd)} on demand)"
                    if t.spot
                    else _money(est.on_demand_usd)
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


def quota_rows(attendees: int) -> list[dict]:
    """Each quota's value for ``attendees`` all running the same lab at once."""
    return [
        {
            "Service Quotas name (SageMaker)": name,
            "code": code or "–",
            "per attendee": f"{n} (lab {', '.join(labs)})",
            f"value for {attendees} attendees": n * attendees,
        }
        for name, code, n, labs, _, _ in quota_needs()
    ]


def quota_check_code() -> str:
    """The calls that check, the day before, that every quota allows the event (``attendees`` set by the reader)."""
    lines = ["import boto3", "from helpers.aws import account", "", "session = boto3.Session()", "attendees = 30"]
    for _, _, n, _, instance_type, spot in quota_needs():
        if instance_type:
            lines.append(
                f'account.check_quota(session, "{instance_type}", {n} * attendees{", spot=True" if spot else ""})'
            )
    return "\n".join(lines)


def markdown(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return "\n".join(lines)


def lab_time_markdown() -> str:
    rows = []
    for nb in discover(LABS_DIR):
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
    nb = json.loads(_notebook(lab).read_text(encoding="utf-8"))
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
    "demo = jobs.run_job(job, target, launch=True, wait=False, budget_usd=budget_usd)\n"
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
            f"Lab {DEMO_LAB}'s job at full size on its real target, {t.instance_type} ({_gpus(spec)}): at most "
            f"{_money(worst)} (its {cap_s / 3600:g} h MaxRuntime at {_money(_price(spec))}/h; lab "
            f"{DEMO_LAB}'s `budget_usd` is {_money(budget)}, {verdict}), about {_money(planned)} for the "
            f"{t.minutes} minutes it plans to train. Launch it an hour before the session.",
            "",
            f"**Before.** With the event account's credentials and `WORKSHOP_ATTENDEE=facilitator`, open "
            f'`{_names()[DEMO_LAB]}` with `target = "sagemaker"` and `smoke = False` in its parameters cell, run '
            f'the cells down to "{DEMO_RUN_IT}" (it shows the dry run: the request and its cost), then, in a new '
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


# ---------------------------------------------------------------------------------------------- the 2026 map
SDK_V2 = (
    "SDK v2 is in maintenance from 2026-07-06 and reaches end of support on 2027-07-06 (sagemaker-python-sdk "
    'master-v2 README, "Version Lifecycle")'
)
SMP_LIBRARY = "2.8.0"  # the last SMP v2 release, on PyTorch images.SMP_IMAGE (no newer one found on 2026-11-25)


def _version(v: str) -> tuple[int, ...]:
    return tuple(int(x) for x in v.split("."))


@cache
def support_facts() -> dict:
    """The dated facts the map and the answers cite, from the helpers' image tables."""
    table = image_support.load()
    dates = table["pytorch"]
    smddp_pt = max(images.SMDDP_IN_DLC, key=_version)
    labs_pt = images.minor(images.PYTORCH_DLC[0])
    smp_pt = images.SMP_IMAGE[0]
    return {
        "source": f"DLC support data of {table['snapshot_date']}, `helpers/aws/dlc_support.json`",
        "labs_image": images.PYTORCH_DLC[0],
        "labs_eop": dates[labs_pt]["eop"],
        "smddp_pytorch": smddp_pt,
        "smddp_version": images.SMDDP_IN_DLC[smddp_pt],
        "smddp_eop": dates[smddp_pt]["eop"],
        "smddp_types": _types(instances.supporting("smddp")),
        "smp_pytorch": smp_pt,
        "smp_eop": dates[images.minor(smp_pt)]["eop"],
        "efa_8_gpu": _types(
            n for n in instances.supporting("efa") if instances.lookup(n).gpus >= 8 and instances.lookup(n).bf16
        ),
    }


def map_markdown() -> str:
    f = support_facts()
    one = instances.cheapest(1, bf16=True)
    rows = [
        (
            "the model and a useful batch fit one GPU",
            f"one GPU with bf16 (Ampere or newer; the cheapest: {one.name}, {_money(_price(one))}/h)",
            "01",
            "",
        ),
        (
            "more throughput; the model still fits one GPU",
            "DDP under torchrun, NCCL; across nodes over EFA, which SageMaker turns on for NCCL on the 8-GPU "
            f"types {f['efa_8_gpu']}",
            "02",
            f"the labs' image: PyTorch {f['labs_image']} DLC, patched until {f['labs_eop']} ({f['source']})",
        ),
        (
            "SMDDP, in the case studies",
            f"NCCL instead. SMDDP's newest framework image is the PyTorch {f['smddp_pytorch']} DLC "
            f"(SMDDP {f['smddp_version']}); it runs on {f['smddp_types']} only",
            "03",
            f"frozen: that image is out of patch since {f['smddp_eop']} ({f['source']})",
        ),
        (
            "the model does not fit one GPU",
            f"FSDP2, and tensor parallel, under torchrun on a current image. SMP v2 stopped at {SMP_LIBRARY} on "
            f"PyTorch {f['smp_pytorch']}",
            "04",
            f"SMP v2 frozen: its PyTorch is out of patch since {f['smp_eop']} ({f['source']}); no SMP release "
            "after it as of 2026-11-25",
        ),
        (
            "large data in S3",
            "FastFile to stream it; FSx for Lustre when many jobs or instances read it, or read it at random; "
            "File for small data",
            "05",
            "",
        ),
        ("interruptible work, lower cost", "managed spot with periodic checkpoints", "06", ""),
        (
            "a cluster that lives for weeks",
            "SageMaker HyperPod: a persistent cluster (Slurm or Amazon EKS) that replaces faulty nodes and resumes "
            "from checkpoints, billed while it exists; training jobs for work that starts and ends",
            "–",
            "",
        ),
        ("the SDK", "SDK v3 (`ModelTrainer`), as the labs use it", "all", SDK_V2),
    ]
    return markdown([{"when": w, "use": u, "lab": lab, "status": s or "–"} for w, u, lab, s in rows])


def answers_markdown() -> str:
    f = support_facts()
    ddp = next(t for t in TARGETS if t.lab == "02")
    spec = instances.lookup(ddp.instance_type)
    network = f"{spec.network_gbps:g} Gb/s" + (" with EFA" if spec.efa else " without EFA")
    return "\n".join(
        [
            '- **"Why no speed-up?"** Read it off lab 02\'s "Step time and samples per second": its last line '
            "compares the measured speed-up (`vs 1 process`) with the ceiling the machine allows (on a CPU, "
            "processes or cores, whichever is fewer) and shows the load average; a headless run keeps both as "
            "`ddp_speedup` and `ddp_speedup_ceiling` in `runs/labs/02_ddp.figures.json`. A ceiling of 1 means the "
            "processes "
            "shared one core; below the ceiling, the machine was busy (the load average) or the short smoke-size "
            "step spent a larger share on its gradient all-reduce. "
            'On SageMaker, lab 02\'s planner (deep dive "How far does it scale?") predicts it per instance count: '
            f"lab 02's {ddp.count} × {ddp.instance_type} exchange gradients across nodes over {network}.",
            '- **"Why does it lose to TF-IDF?"** In smoke size it should: the network reads a slice of the titles '
            'once; TF-IDF fits on the same rows in seconds. Lab 01\'s "What came out" prints the margin in macro-F1 '
            "points (`macro_f1_margin_points` in `runs/labs/01_single_gpu.figures.json`). With `smoke = False` the "
            "network reads every title several times and wins on titles whose modifier misleads a bag of n-grams: "
            "the pre-launched job is that run (`done.metrics`).",
            f'- **"SMDDP or NCCL today?"** NCCL, under torchrun (lab 02). No framework image after PyTorch '
            f"{f['smddp_pytorch']} carries SMDDP (its last, {f['smddp_version']}), and that image is out of patch "
            f"since {f['smddp_eop']} ({f['source']}); SMDDP runs on {f['smddp_types']} only, not P5, and its "
            "AllReduce needs the image's mpirun launcher (lab 03). Moving off it is lab 03's diff backwards: drop the "
            '`smdistributed` import and use `backend="nccl"`.',
            f'- **"We have SDK v2 code."** {SDK_V2}: pinned to `sagemaker<3` it keeps working meanwhile. The README\'s '
            '"SDK v2 → v3" table maps each `Estimator` argument to `ModelTrainer`; the training script stays as it '
            "is (the container contract is the same). SMDDP jobs are the exception: no v3 launcher runs SMDDP "
            "AllReduce (lab 03 shows the way round).",
            '- **"HyperPod?"** For a cluster that outlives its jobs: HyperPod keeps instances (Slurm or Amazon EKS) '
            "between jobs, replaces faulty nodes and resumes from the last checkpoint, and bills while the cluster "
            "exists. The labs' training jobs start instances per job and bill its billable seconds. The torchrun "
            "script and its checkpoints carry over; the launch (`ModelTrainer`) does not.",
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
            "`python -m helpers.run_labs --solutions` (every lab with its reference answers; the executed notebooks "
            "in `runs/labs/` are the day's fallback) and `python -m helpers.run_labs --target sagemaker` (every "
            f"lab's request and cost, dry). Launch the [demo job](#the-pre-launched-job) once on {t.instance_type}: "
            "it proves the role, the bucket, the quota and the image pull.",
            "- **T-1: the environment.** Deploy the stack with the event's options (a Studio domain takes minutes), "
            "`python -m helpers.aws.account env --stack workshop`, set `WORKSHOP_BUDGET_USD`, open one attendee "
            "space and wait for `== set-up done` in `~/workshop-setup.log`. Then check the quotas now allow the "
            "event; each call raises `QuotaError` naming the quota and the value to request, for the type's quota "
            "and the account-wide one, and returns None where it cannot read them:",
            "",
            "  ```python",
            *("  " + line if line else "" for line in quota_check_code().splitlines()),
            "  ```",
            "",
            "- **The day, an hour before:** launch the [demo job](#the-pre-launched-job) and note its name; it has "
            "finished by the time the room needs it.",
        ]
    )


REPO = Path(__file__).resolve().parents[2]
ACCOUNT_GENERATOR = REPO / "infra" / "workshop_account.py"  # the event template's sizing (and its generated blocks)
TWIN_REPORT = REPO / "docs" / "studio-twin.json"  # `make studio-twin`'s measured figures, when someone commits them


@cache
def account_generator():
    """infra/workshop_account.py as a module (it is a script beside the template, not part of the helpers)."""
    spec = importlib.util.spec_from_file_location("workshop_account", ACCOUNT_GENERATOR)
    assert spec is not None and spec.loader is not None  # a .py file's spec, with its source loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def studio_sizing_markdown() -> str:
    """The spaces' default instance and storage (the template's defaults), with the figures they come from."""
    g = account_generator()
    chosen = g.jupyterlab_instance()
    rows = [
        {
            "JupyterLab instance": t.name,
            "vCPUs (physical cores)": f"{t.vcpus} ({t.cores})",
            "memory (GiB)": t.memory_gib,
            "for the labs": "**the default**" if t == chosen else "; ".join(g.shortfalls(t)) or "also enough",
        }
        for t in g.JUPYTERLAB_TYPES
    ]
    labs = [
        {"lab": lab, "peak memory (MB)": mb, "training processes at once": g.LAB_PROCESSES[lab]}
        for lab, mb in g.LAB_PEAK_MB.items()
    ]
    price = instances.lookup(chosen.name).price_per_hour if chosen.name in instances.CATALOGUE else None
    cost_line = (
        f" At {_money(price)} an hour (the helpers' us-east-1 price for the type, a training price: check Studio's "
        f"on SageMaker's pricing page), a space running an 8-hour day costs {_money(price * 8)}."
        if price
        else ""
    )
    return "\n".join(
        [
            "Each lab in smoke size on the tests' 2-core machine (`infra/workshop_account.py`, measured 2026-11-25):",
            "",
            markdown(labs),
            "",
            markdown(rows),
            "",
            f"`StudioInstanceType` defaults to {chosen.name}.{cost_line} `StudioStorageGb` defaults to "
            f"{g.space_storage_gb()} GB: {g.storage_arithmetic()}.",
        ]
    )


def _twin_figures(report: dict) -> dict:
    """The figures the guide shows from a studio-twin report; absent ones are None. Takes the flat form
    (``make_studio_s``, ``added_mb``, ``labs`` by number) or the twin's own (``make_studio`` runs, ``labs`` a list)."""
    first_run = (report.get("make_studio") or [{}])[0] if isinstance(report.get("make_studio"), list) else {}
    stand_ins = report.get("stand_ins")
    if isinstance(stand_ins, dict):
        stand_ins = "; ".join(f"{k}: {v}" for k, v in stand_ins.items())
    labs = report.get("labs") or {}
    if isinstance(labs, list):
        labs = {str(r.get("lab", "?"))[:2]: r for r in labs if isinstance(r, dict)}
    return {
        "image": report.get("image"),
        "stand_ins": stand_ins,
        "make_studio_s": report.get("make_studio_s", first_run.get("wall_seconds")),
        "added_mb": report.get("added_mb", first_run.get("total_mb")),
        "labs": {k: v for k, v in labs.items() if isinstance(v, dict)},
    }


def _figure(value, unit: str, digits: int = 0) -> str:
    return "not measured" if value is None else f"{value:,.{digits}f} {unit}"


def studio_twin_markdown(report_path: Path = TWIN_REPORT) -> str:
    """The measured Studio figures, from ``report_path`` when it exists; otherwise where they come from."""
    if not report_path.is_file():
        return (
            f"No measured figures yet. They come from `make studio-twin` (SageMaker Distribution's packages on this "
            f"machine, `make studio` in them, every lab on that Python): save its report as "
            f"`{report_path.relative_to(REPO) if report_path.is_relative_to(REPO) else report_path}`, then run "
            f"`python -m helpers.planning.workshop --write docs/facilitator.md`."
        )
    f = _twin_figures(json.loads(report_path.read_text(encoding="utf-8")))
    g = account_generator()
    lines = [
        f"Measured on the Studio twin of {f['image'] or 'an unnamed image'}"
        + (f" (stand-ins: {f['stand_ins']})" if f["stand_ins"] else "")
        + f": `make studio` took {_figure(f['make_studio_s'], 's', 1)} and added {_figure(f['added_mb'], 'MB', 1)}.",
    ]
    if f["added_mb"] is not None and (not g.STUDIO_INSTALL_MEASURED or g.STUDIO_INSTALL_MB != round(f["added_mb"])):
        lines[0] += (
            f" The storage default above assumes {g.STUDIO_INSTALL_MB} MB: set STUDIO_INSTALL_MB = "
            f"{round(f['added_mb'])} and STUDIO_INSTALL_MEASURED = True in infra/workshop_account.py, then run "
            f"`python infra/workshop_account.py --write`."
        )
    if f["labs"]:
        rows = [
            {
                "lab": lab,
                "time": _figure(v.get("seconds"), "s", 1),
                "peak memory": _figure(v.get("peak_mb"), "MB"),
            }
            for lab, v in sorted(f["labs"].items())
        ]
        lines += ["", markdown(rows)]
    return "\n".join(lines)


BLOCKS = {
    "agendas": agendas_markdown,
    "demo": demo_markdown,
    "map-2026": map_markdown,
    "checklist": checklist_markdown,
    "costs": lambda: markdown(cost_rows()),
    "cheapest": cheapest_markdown,
    "instances-per-lab": instances_per_lab_markdown,
    "quotas-10": lambda: markdown(quota_rows(10)),
    "quotas-30": lambda: markdown(quota_rows(30)),
    "answers": answers_markdown,
    "lab-time": lab_time_markdown,
    "studio-sizing": studio_sizing_markdown,
    "studio-twin": studio_twin_markdown,
}


def render(text: str) -> str:
    """``text`` with every ``<!-- generated:NAME -->`` block rewritten."""
    for name, make in BLOCKS.items():
        pattern = re.compile(rf"(<!-- generated:{name} -->\n)(?:.*?\n)?(<!-- /generated:{name} -->)", re.S)
        if not pattern.search(text):
            raise ValueError(f"the guide has no block <!-- generated:{name} --> ... <!-- /generated:{name} -->")
        text = pattern.sub(_between_markers(make()), text)
    return text


def _between_markers(body: str) -> Callable[[re.Match[str]], str]:
    """A replacement for a generated block: its two markers, ``body`` between them."""
    return lambda m: m.group(1) + body + "\n" + m.group(2)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m helpers.planning.workshop", description=__doc__.split("\n\n")[0])
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
