"""The facilitator's agendas: each lab's stated time cut at its headings (``course.lab_time``'s estimate per
section), set blocks (a welcome, the demo, a break), and sessions that add up by construction: a session whose
blocks no longer fit its length (a lab grew) is refused, so the guide cannot be written with it."""

from __future__ import annotations

import json
import math
import re
import tempfile
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from course import lab_time
from course.manifest import LABS, registered


@dataclass(frozen=True)
class Block:
    what: str
    minutes: int
    source: str  # where the minutes come from
    lab: str = ""  # a lab's block: its number, and the core sections it leaves out
    skip: tuple[str, ...] = ()
    shown: bool = False  # on slides from the room's executed copy (course.facilitator.slides), not run


def lab_minutes() -> dict[str, tuple[int, int]]:
    """Each lab's stated (core, full) minutes, by number."""
    return {lab.number: lab_time.stated(lab.notebook) for lab in LABS}


HEADING = re.compile(r"#{2,3} (.+)")  # a section of a lab: its ## and ### headings


def core_cells(lab: str) -> list[tuple[str, dict]]:
    """(the ``##`` or ``###`` heading it sits under, the cell) for each cell of a lab's core path; the cells before
    the first heading sit under "opening"."""
    nb = json.loads(registered(lab).notebook.read_text(encoding="utf-8"))
    heading, out = "opening", []
    for cell in nb["cells"]:
        text = "".join(cell["source"]).lstrip()
        if cell["cell_type"] == "markdown":
            if text.startswith(lab_time.DEEP_DIVES):
                break
            if m := HEADING.match(text):
                heading = m.group(1).strip()
        out.append((heading, cell))
    return out


@cache
def sections(lab: str) -> tuple[tuple[str, float], ...]:
    """A lab's core path cut at its ``##`` and ``###`` headings: (heading, minutes ``course.lab_time`` estimates
    for its prose, code and exercises); the cells before the first heading are "opening"."""
    notebook = registered(lab).notebook
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cut: list[tuple[str, list[dict]]] = []
    for heading, cell in core_cells(lab):
        if not cut or (cell["cell_type"] == "markdown" and HEADING.match("".join(cell["source"]).lstrip())):
            cut.append((heading, []))
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
    ``course.lab_time`` estimates for the sections kept, rounded up."""
    name, core = registered(lab).stem, lab_minutes()[lab][0]
    if not skip:
        return Block(f"`{name}`, core path", core, f"{name}'s stated core time", lab)
    parts = sections(lab)
    for s in skip:
        if not any(h.startswith(s) for h, _ in parts[1:]):
            raise ValueError(f"{name} has no core section headed {s!r}: its sections are {[h for h, _ in parts]}")
    total = sum(m for _, m in parts)
    kept = sum(m for h, m in parts if not any(h.startswith(s) for s in skip))
    return Block(
        f"`{name}`, core path without: {'; '.join(skip)}",
        math.ceil(core * kept / total),
        f"its stated core {core} min × {kept:.1f}/{total:.1f}, the share `course.lab_time` estimates for the "
        f"sections kept; rounded up",
        lab,
        skip,
    )


def lab_on_slides(lab: str, keep: tuple[str, ...]) -> Block:
    """A lab's sections ``keep`` read out from its slides (``make slides``: the room's executed copy, outputs and
    all) instead of run: the minutes ``course.lab_time`` estimates for reading them, rounded up."""
    name, parts = registered(lab).stem, sections(lab)
    for k in keep:
        if not any(h.startswith(k) for h, _ in parts[1:]):
            raise ValueError(f"{name} has no core section headed {k!r}: its sections are {[h for h, _ in parts]}")
    shown = [(h, m) for h, m in parts[1:] if any(h.startswith(k) for k in keep)]
    reading = sum(m for _, m in shown)
    return Block(
        f"`{name}` on slides: {'; '.join(keep)}",
        math.ceil(reading),
        f"`course.lab_time`'s reading estimate for the sections shown, {reading:.1f} min; rounded up",
        lab,
        tuple(h for h, _ in parts if (h, _) not in shown),
        shown=True,
    )


def _set(what: str, minutes: int) -> Block:
    return Block(what, minutes, "set here (`course/facilitator/workshop.py`)")


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


HOMEWORK = ("Your turn", "Clean up", "Next")  # the exercise is left for later
# lab 01 in the arc, on slides (its ``slides`` in course.manifest): the contract and the run's margin over the
# baseline, from the room's executed copy (the pre-launched job shows SageMaker's side); lab 02 (less its ``trim``) is
# the hands-on part, with every lesson it teaches: the diff, global batch and learning rate, loss parity, the speed-up
# and where a step's time went, and its exercise (02.1: a four-rank job that must train like one process), done in the
# room rather than re-run at home
BUFFER = "buffer: a lab that overruns, a space that restarts, a question that takes longer"
DEMO = (
    "the pre-launched job: lab 01 at full size on SageMaker, its log and billable seconds "
    "([below](#the-pre-launched-job))"
)
MAP = "the 2026 map of what to use when ([below](#the-2026-map-of-what-to-use-when))"
QUESTIONS = "questions ([answers](#questions-a-room-asks)); cleanup"
HOMEWORK_TOO = QUESTIONS + "; the exercises skipped are homework"
# 90 minutes hold the two labs and the demo; the map is read out in the questions, and is homework beside them
MAP_IN_QUESTIONS = MAP.replace("the 2026 map", "the 2026 map, in brief,") + "; " + HOMEWORK_TOO


def _arc() -> list[Block]:
    return [
        _set("welcome: the arc; the labs open (spaces started before the session)", 2),
        lab_on_slides("01", registered("01").slides),
        _set(DEMO, 4),  # its log and bill, shown: exercise 02.1 takes the minute it gives up
        lab_block("02", registered("02").trim),
    ]


def agendas() -> dict[str, tuple[int, list[Block]]]:
    """Three agendas: (the session's minutes, its blocks); the blocks add up to the minutes."""
    return {
        "90-minute session": _session(90, _arc(), MAP_IN_QUESTIONS, at_least=5),
        "half day (4 h): the arc, then model parallelism and the spot drill": _session(
            240,
            [*_arc(), _set(MAP, 5), _set("break", 15), lab_block("04", HOMEWORK), lab_block("06", HOMEWORK)],
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
                lab_block("08"),  # its core path is the hang and the straggler; the rest are deep dives, read at home
                _set(
                    MAP.replace("the 2026 map", "the 2026 map, with lab 03's SMDDP request as its evidence,")
                    + "; "
                    + QUESTIONS
                    + "; labs 05 (input modes) and 07 (profiling) are homework: their results are in `runs/labs/`",
                    15,
                ),
            ],
            BUFFER,  # what is left: a real buffer, not the questions' minutes
            at_least=30,
        ),
    }
