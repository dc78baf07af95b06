"""The labs on the other budgets learners have, each lesson checked against its run (``make labs-check``'s second
step, one test at a time on the whole machine, after the labs beside busy cores):

- ``make``'s: the labs whose lessons need more cores than a stream's share (lab 02: a core per rank) run alone on
  every core, as the runner schedules them, and show those lessons;
- a 4-vCPU Studio space's: every lab alone on 4 cores, where the machine has them (a Studio space, a GPU machine's
  pinned cores); elsewhere the test says it was not run.

The third budget, one core beside a busy one, is every lab's own labs test (tests/test_notebooks.py).
"""

from __future__ import annotations

import json
import os

import pytest

from course import lessons, manifest, run_labs

pytestmark = [pytest.mark.budgets, pytest.mark.slow]
WIDE = [one for one in manifest.LABS if one.cores > 1]
STUDIO_CORES = 4  # a Studio space's 4 vCPUs (ml.t3.xlarge, the workshop's default space)


def _runs(out) -> dict[str, dict]:
    return {r["lab"]: r for r in json.loads((out / "summary.json").read_text())["labs"]}


@pytest.mark.timeout(1200)  # two labs, one after the other
def test_make_runs_the_labs_needing_more_cores_alone_on_every_core_and_they_show_their_lessons(tmp_path, capsys):
    """make's budget on a 2-core machine, pinned so (a 4-core machine or a busy one would schedule otherwise)."""
    budget = max(one.cores for one in WIDE)
    cores = sorted(os.sched_getaffinity(0))[:budget]
    if len(cores) < budget:
        pytest.skip(f"{len(cores)} core(s) here: make's budget is {budget} cores or more")
    kept = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        code = run_labs.main(
            ["--labs", *(one.number for one in WIDE), "--solutions", "--streams", "2", "--out", str(tmp_path)]
        )
    finally:
        os.sched_setaffinity(0, kept)
    printed = capsys.readouterr().out
    runs = _runs(tmp_path)
    for one in WIDE:
        run = runs[one.stem]
        assert run["status"] == "ok", run["error"]
        assert run["cores"] == cores, f"{one.stem} ran alone on every core"
        assert lessons.shown_here(one, run["figures"]), f"{one.stem} had the cores its lessons need: {run['figures']}"
        assert run["lessons_not_held"] == [] and run["lessons_not_shown"] == []
        outcomes = {k: v for k, v in run["figures"].items() if k.startswith("exercise ")}
        assert set(outcomes.values()) <= {"right"}, outcomes
    assert code == 0 and f"alone on cores {','.join(map(str, cores))}" in printed


@pytest.mark.timeout(3600)  # every lab, one after the other
def test_a_studio_space_s_four_cores_show_every_lesson(tmp_path):
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < STUDIO_CORES:
        pytest.skip(
            f"{len(cores)} core(s) here: a Studio space's budget ({STUDIO_CORES}) needs a machine that has them"
        )
    kept = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores[:STUDIO_CORES])
    try:
        code = run_labs.main(["--solutions", "--streams", "1", "--out", str(tmp_path)])
    finally:
        os.sched_setaffinity(0, kept)
    for stem, run in _runs(tmp_path).items():
        assert run["status"] == "ok" and run["lessons_not_held"] == [] and run["lessons_not_shown"] == [], (stem, run)
        outcomes = {k: v for k, v in run["figures"].items() if k.startswith("exercise ")}
        assert set(outcomes.values()) <= {"right"}, (stem, outcomes)
    assert code == 0
