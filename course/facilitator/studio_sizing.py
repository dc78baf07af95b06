"""SageMaker Studio for an event: the spaces' default instance and storage (from the event template's generator,
``infra/workshop_account.py``) and the figures the Studio twin measured (``docs/studio-twin.json``)."""

from __future__ import annotations

import importlib.util
import json
import sys
from functools import cache
from pathlib import Path

from course.facilitator.tables import markdown, money
from helpers.job_spec import REPO
from helpers.planning import instances

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
        f" At {money(price)} an hour (the helpers' us-east-1 price for the type, a training price: check Studio's "
        f"on SageMaker's pricing page), a space running an 8-hour day costs {money(price * 8)}."
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
            f"`python -m course.facilitator.workshop --write docs/facilitator.md`."
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
