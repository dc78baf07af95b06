"""The workshop as a facilitator plans it: each lab's cheapest real target, its cost and quota, and the agendas.

    python -m helpers.planning.workshop                       # print the tables
    python -m helpers.planning.workshop --write docs/facilitator.md   # refresh the guide's generated blocks

Everything here is computed (prices from ``instances``, times from the labs' own ``**Time:**`` lines), so the guide
cannot drift from the labs: the test suite checks that the guide's generated blocks are what this writes.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from helpers import lab_time
from helpers.aws.account import quota_name
from helpers.lab import LABS_DIR, discover
from helpers.planning import cost, instances


@dataclass(frozen=True)
class RealTarget:
    lab: str  # "02"
    part: str  # what the job is
    instance_type: str
    count: int
    minutes: int  # a planning figure: the job's expected training time at full size
    spot: bool = False
    launch: bool = True  # False: shown as a dry run unless the account has quota for it
    why: str = ""
    parameter: str = "real_target"  # the lab parameter that holds instance_type


TARGETS = (
    RealTarget("01", "single-GPU fine-tune", "ml.g5.xlarge", 1, 20, why="one A10G: bf16, the cheapest current GPU"),
    RealTarget("02", "DDP, 2 nodes", "ml.g5.12xlarge", 2, 20, why="4 A10Gs a node: DDP inside and across nodes"),
    RealTarget(
        "03",
        "SMDDP AllReduce",
        "ml.p4d.24xlarge",
        2,
        20,
        launch=False,
        why="SMDDP runs only on p4d, p4de and p3dn: a dry run unless the account has P4 quota",
    ),
    RealTarget("04", "FSDP / ZeRO / TP (torchrun)", "ml.g5.12xlarge", 1, 15, why="4 GPUs run every strategy"),
    RealTarget(
        "04",
        "SMP v2",
        "ml.p4d.24xlarge",
        1,
        15,
        launch=False,
        why="SMP v2 runs only on p4d, p4de and p5",
        parameter="smp_target",
    ),
    RealTarget("05", "File, FastFile, FSx: 3 jobs", "ml.g5.xlarge", 3, 10, why="the input path, not the GPU"),
    RealTarget("06", "managed spot with checkpoints", "ml.g5.xlarge", 1, 30, spot=True, why="spot on the cheapest GPU"),
    RealTarget("07", "profiled job + CloudWatch", "ml.g5.xlarge", 1, 15, why="one GPU shows the GEMM-bound profile"),
)


@dataclass(frozen=True)
class Slot:
    what: str
    minutes: int


def lab_minutes() -> dict[str, tuple[int, int]]:
    """Each lab's stated (core, full) minutes, by number."""
    return {nb.name[:2]: lab_time.stated(nb) for nb in discover(LABS_DIR)}


def _core(lab: str) -> Slot:
    names = {nb.name[:2]: nb.stem for nb in discover(LABS_DIR)}
    return Slot(f"`{names[lab]}`, core path (local)", lab_minutes()[lab][0])


def agendas() -> dict[str, tuple[int, list[Slot]]]:
    """Three agendas: (the slot's teaching minutes, its parts). Lab times are the labs' own."""
    return {
        "90-minute session": (
            90,
            [
                Slot("Welcome; open the labs (README: `make`, or Studio); the case studies", 10),
                _core("02"),
                Slot("Facilitator demo: lab 06's drill table and lab 03's request, from a finished `make` run", 15),
                Slot("Wrap-up: what to run at home, cleanup", 10),
            ],
        ),
        "half day (3 h 30 min)": (
            210,
            [
                Slot("Welcome and set-up check", 10),
                _core("01"),
                _core("02"),
                Slot("Break", 15),
                _core("06"),
                Slot("Wrap-up; cleanup (each lab's last cell, `helpers.aws.account.cleanup()`)", 10),
            ],
        ),
        "full day (8 h)": (
            480,
            [
                Slot("Welcome and set-up check", 10),
                _core("01"),
                _core("02"),
                Slot("Break", 15),
                _core("04"),
                Slot("Lunch", 60),
                _core("05"),
                _core("06"),
                Slot("Break", 15),
                _core("07"),
                Slot("Lab 03 (SMDDP) as a facilitator demo of its dry run; wrap-up and cleanup", 20),
            ],
        ),
    }


def _money(usd: float) -> str:
    return f"${usd:,.2f}"


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
                "why this instance": t.why,
            }
        )
    return rows


def quota_rows(attendees: int) -> list[dict]:
    """Instances each quota must allow if every attendee runs the same lab at once."""
    need: dict[str, int] = {}
    for t in TARGETS:
        if t.launch:
            name = quota_name(t.instance_type, t.spot)
            need[name] = max(need.get(name, 0), t.count * attendees)
    return [{"Service Quotas name (SageMaker)": k, f"value for {attendees} attendees": v} for k, v in need.items()]


def markdown(rows: list[dict]) -> str:
    head = list(rows[0])
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(r[h]) for h in head) + " |" for r in rows]
    return "\n".join(lines)


def agendas_markdown() -> str:
    out = []
    for name, (slot, parts) in agendas().items():
        used = sum(p.minutes for p in parts)
        out.append(f"**{name}**: {used} of {slot} minutes\n")
        out.append(markdown([{"minutes": p.minutes, "what": p.what} for p in parts]))
        out.append("")
    return "\n".join(out).rstrip()


def lab_time_markdown() -> str:
    rows = []
    for nb in discover(LABS_DIR):
        t = lab_time.estimate(nb)
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


REPO = Path(__file__).resolve().parents[2]
ACCOUNT_GENERATOR = REPO / "infra" / "workshop_account.py"  # the event template's sizing (and its generated blocks)
TWIN_REPORT = REPO / "docs" / "studio-twin.json"  # `make studio-twin`'s measured figures, when someone commits them


@cache
def account_generator():
    """infra/workshop_account.py as a module (it is a script beside the template, not part of the helpers)."""
    spec = importlib.util.spec_from_file_location("workshop_account", ACCOUNT_GENERATOR)
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
    "costs": lambda: markdown(cost_rows()),
    "quotas-10": lambda: markdown(quota_rows(10)),
    "quotas-30": lambda: markdown(quota_rows(30)),
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
        body = make()
        text = pattern.sub(lambda m, body=body: m.group(1) + body + "\n" + m.group(2), text)
    return text


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
