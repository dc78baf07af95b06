"""How far each measured lesson figure moves from run to run, per budget of cores, and whether each lab's bounds sit
outside that spread.

Every :class:`course.lab.Margin` of a lab's claims is a bound on a measured figure. ``course/margins.json`` records
that figure from real headless runs, under a budget label ("make, 2 cores", "1 core beside a busy one", "4 cores")::

    python -m course.margins add runs/labs --budget "make, 2 cores"     # a finished run's folder (summary.json)
    python -m course.margins show                                      # each bound beside its runs' min-max

:func:`too_close` names every bound nearer its runs than their own spread (tests/test_lesson_margins.py).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import re
import sys
import types
from pathlib import Path

from course import lessons
from course.lab import Lab, Margin, margins
from course.manifest import LABS

RECORD = Path(__file__).with_name("margins.json")
MIN_RUNS = 3  # runs of one budget before its spread says anything
# a figure that a clock or a monitor measured: its value moves from run to run (suffix _1/_ddp: lab 02's two runs)
TIMED = re.compile(r"(_ms|_s|_us|_per_s|_per_sec|_cores|_frac)(_1|_ddp)?$|speedup|slowdown|_vs_")


def measured(lab: Lab) -> dict[str, Margin]:
    """Every bound on a measured figure in the lab's claims, budget claims and exercise margins, by
    ``claim [figure]``."""
    return {**margins(lab.claims), **margins(lab.budget_claims), **margins(lab.exercise_margins)}


def load(path: Path = RECORD) -> dict:
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {"runs": [], "figures": {}}


def add(summary: dict, budget: str, note: str = "", path: Path = RECORD) -> int:
    """Record every measured figure of a run's labs (``summary``: its summary.json) under ``budget``; a budget
    claim's figures only where the lab had its cores. The number of figures recorded."""
    record, added = load(path), 0
    for run in summary["labs"]:
        lab = lessons.BY_STEM.get(run["lab"])
        if lab is None or run.get("status") != "ok":
            continue
        figures = run.get("figures", {})
        shown = lessons.shown_here(lab, figures)
        exercised = margins(lab.exercise_margins)  # recorded where the exercise was answered (--solutions)
        for bound in (margins(lab.claims) | (margins(lab.budget_claims) if shown else {}) | exercised).values():
            try:
                value = bound.value(figures)
            except (KeyError, TypeError, ZeroDivisionError, ValueError):
                continue  # not recorded in this run (a dry run, a lab that stopped): nothing to add
            by_budget = record["figures"].setdefault(lab.stem, {}).setdefault(bound.name, {})
            by_budget.setdefault(budget, []).append(round(value, 4))
            added += 1
    record["runs"].append({"date": dt.date.today().isoformat(), "budget": budget, "note": note})
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    return added


def too_close(record: dict, labs=LABS) -> list[str]:
    """Every bound that is not held by enough runs, or sits nearer the runs of some budget than their spread."""
    found = []
    for lab in labs:
        for claim, bound in measured(lab).items():
            runs = record["figures"].get(lab.stem, {}).get(bound.name, {})
            if not any(len(values) >= MIN_RUNS for values in runs.values()):
                found.append(f"{lab.stem}: {claim}: fewer than {MIN_RUNS} runs of any budget recorded")
            for budget, values in runs.items():
                if len(values) < 2:
                    continue
                spread = max(values) - min(values)
                room = [
                    min(values) - bound.at_least if bound.at_least is not None else None,
                    bound.at_most - max(values) if bound.at_most is not None else None,
                ]
                if any(r is not None and r <= spread for r in room):
                    found.append(
                        f"{lab.stem}: {claim}: {bound.bound}, and {budget}'s runs measured {min(values):g} to "
                        f"{max(values):g}: the bound is within their spread ({spread:g})"
                    )
    return found


def figures_read(check) -> set[str]:
    """The figure names a plain claim's predicate reads (the strings in its code, nested code included)."""
    names: set[str] = set()
    codes = [check.__code__] if hasattr(check, "__code__") else []
    while codes:
        code = codes.pop()
        for const in code.co_consts:
            if isinstance(const, str):
                names.add(const)
            elif isinstance(const, (tuple, frozenset)):  # the names a loop over a literal reads
                names.update(c for c in const if isinstance(c, str))
            elif isinstance(const, types.CodeType):
                codes.append(const)
    return names


def timed_plain_claims(labs=LABS) -> list[str]:
    """Plain claims (neither a Margin nor marked exact) that read a measured timing: they compare figures that move
    from run to run with no bound the spread is held against."""
    found = []
    for lab in labs:
        for claim, check in {**lab.claims, **lab.budget_claims}.items():
            for part in check if isinstance(check, tuple) else (check,):
                if isinstance(part, Margin) or getattr(part, "exact", False):
                    continue
                timed = sorted(name for name in figures_read(part) if TIMED.search(name))
                if timed:
                    found.append(f"{lab.stem}: {claim!r} reads {', '.join(timed)} without a Margin")
    return found


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.margins", description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="command", required=True)
    adding = sub.add_parser("add", help="record a finished run's measured figures")
    adding.add_argument("out", type=Path, help="the run's folder (its summary.json)")
    adding.add_argument("--budget", required=True, help='e.g. "make, 2 cores" or "1 core beside a busy one"')
    adding.add_argument("--note", default="", help="what else to know: the machine's load, the commit")
    sub.add_parser("show", help="each bound beside its runs' min-max, per budget")
    a = ap.parse_args(argv)
    if a.command == "add":
        summary = json.loads((a.out / "summary.json").read_text(encoding="utf-8"))
        note = a.note or f"load {os.getloadavg()[0]:.1f} when recorded"
        print(f"recorded {add(summary, a.budget, note)} figures under {a.budget!r} in {RECORD}")
        return 0
    record = load()
    for lab in LABS:
        for claim, bound in measured(lab).items():
            for budget, values in record["figures"].get(lab.stem, {}).get(bound.name, {}).items():
                spread = f"{min(values):g}-{max(values):g} n={len(values)}"
                print(f"{lab.stem} {bound.name} ({bound.bound}): {budget}: {spread}")
    problems = too_close(record)
    print("\n".join(problems) or "every bound sits outside its runs' spread")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
