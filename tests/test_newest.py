"""The newest-versions run (tools/newest/run.py): CI builds an environment of the newest releases of the workshop's
main dependencies and runs every lab on it with its lessons checked, and pyproject.toml's upper bounds admit every
release of its last passing run (docs/newest-versions.json, the report it wrote), so the ranges follow evidence."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import tomllib
from conftest import REPO
from packaging.requirements import Requirement

RECORD = REPO / "docs" / "newest-versions.json"


def _load():
    spec = importlib.util.spec_from_file_location("newest_run", REPO / "tools" / "newest" / "run.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


newest = _load()


def test_the_ranges_admit_every_release_the_last_newest_run_passed_on():
    record = json.loads(RECORD.read_text(encoding="utf-8"))
    assert record["passed"] and record["labs"] and all(r["status"] == "ok" and not r["wrong"] for r in record["labs"])
    deps = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]
    ranges = {newest.canonical(Requirement(d).name): Requirement(d).specifier for d in deps}
    for row in record["packages"]:
        release = row["installed"].split("+")[0]  # 2.14.1+cu130: the release, not the build
        assert ranges[newest.canonical(row["name"])].contains(release), (row["name"], release)
    assert {row["name"] for row in record["packages"]} == set(newest.NEWEST)


def test_make_newest_runs_the_newest_versions_run_weekly_in_the_workflow():
    """``make newest`` runs tools/newest/run.py; the GitHub workflow runs it every week (a job of its own, outside a
    submission's CI budget, which .ci/run names)."""
    import yaml

    done = subprocess.run(["make", "-n", "newest"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "tools/newest/run.py --venv" in done.stdout
    assert "make newest" in (REPO / ".ci" / "run").read_text(encoding="utf-8")
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "ci.yml").read_text(encoding="utf-8"))
    assert workflow[True]["schedule"], "no schedule: nothing would try the newest releases the week they appear"
    job = workflow["jobs"]["newest-versions"]
    assert "schedule" in job["if"] and any("make newest" in step.get("run", "") for step in job["steps"])
    assert "schedule" in workflow["jobs"]["labs-and-tests"]["if"]  # the submission's job is not rerun weekly


def test_the_table_names_each_release_beside_the_index_s_newest_and_every_lesson_not_held():
    report = {
        "python_version": "3.11.7",
        "packages": [
            {"name": "torch", "installed": "2.14.1+cu130", "index_newest": "2.15.0", "newest": False},
            {"name": "numpy", "installed": "2.4.6", "index_newest": "2.4.6", "newest": True},
        ],
        "environment_seconds": 60.0,
        "labs": [
            {"lab": "01_single_gpu", "status": "ok", "seconds": 90.0, "error": [], "wrong": []},
            {"lab": "07_profiling", "status": "ok", "seconds": 50.0, "error": [], "wrong": ["the fix wins"]},
        ],
        "labs_seconds": 140.0,
        "passed": False,
        "seconds": 200.0,
    }
    text = newest.table(report)
    assert "torch            2.14.1+cu130      (the index's newest: 2.15.0)" in text
    assert "numpy            2.4.6" in text and "numpy            2.4.6           (" not in text
    assert "LESSON NOT HELD: the fix wins" in text and text.endswith("FAILED in 200.0 s")
    assert newest._same("2.14.1+cu130", "2.14.1") and not newest._same("2.14.1", "2.15.0")
