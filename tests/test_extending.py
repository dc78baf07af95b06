"""docs/extending.md's four recipes, each followed in a throwaway copy of the repository with one step left out: the
test the recipe names must catch it, and nothing else may fail.

- a lab registered, with its notebook, but with an empty manifest entry and in none of the per-lab tables;
- a rule written, and not put in its table; another put in its table, without a case in the tests;
- an instance type whose new GPU is not in ``GPUS``;
- an input mode registered without a stand-in on this machine.

The lab's recipe is also followed whole, for a lab 09 in a copy of the tracked files: it must touch exactly the files
the recipe names, and the per-lab checks (registries, notebook, exercises, stated time, prose figures, guide) pass.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow  # each test a pytest of its own in a copy (about 12 s each)

RECIPES = REPO / "docs" / "extending.md"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: the recipe's anchor {old!r} moved; update tests/test_extending.py"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def copy_of_the_repository(root: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for part in (
        "helpers",
        "sagemaker_standin",
        "catalog_generator",
        "course",
        "labs",
        "tests",
        "benchmarks",
        "data/catalog",
        "docs",
    ):
        shutil.copytree(REPO / part, root / part, ignore=ignore)
    for name in ("README.md", "pyproject.toml"):
        shutil.copy(REPO / name, root / name)
    return root


def follow_each_recipe_but_one_step(root: Path) -> None:
    # a new lab: registered, its notebook written, its entry in the manifest left empty
    edit(root / "course/manifest.py", "_LAB_08)", '_LAB_08, Lab("09_throwaway"))')
    shutil.copy(root / "labs/07_profiling.ipynb", root / "labs/09_throwaway.ipynb")
    # a new check rule: written, not put in COMMON; another put there, with no case in tests/test_checks.py
    rules = root / "helpers/checks/common_rules.py"
    edit(
        rules,
        "\n\n# the rules every job meets",
        "\n\ndef untabled_rule(job: Job, where: Where) -> Iterator[Finding]:\n    yield from ()\n"
        "\n\ndef untested_rule(job: Job, where: Where) -> Iterator[Finding]:\n    yield from ()\n"
        "\n\n# the rules every job meets",
    )
    edit(rules, "    channel_data,\n)", "    channel_data,\n    untested_rule,\n)")
    # a new instance type on a new GPU, the GPU's record left out of GPUS
    catalogue = root / "helpers/planning/instances.py"
    edit(catalogue, "GPUS = (", 'X300 = Gpu("X300", 288, "Next", True, 4500.0, *_NVLINK5)\nGPUS = (')
    edit(
        catalogue,
        "    # CPU types:",
        '    InstanceType("ml.x300.48xlarge", 192, 2048, 8, X300, 3200, None),\n    # CPU types:',
    )
    # a new input mode: registered, with no stand-in on this machine
    edit(
        root / "helpers/input_mode.py",
        '        InputMode("FSx",',
        '        InputMode("Pipe", S3, "Pipe", "#8172B2", "a stream per channel, read once in order"),\n'
        '        InputMode("FSx",',
    )


def failed_tests(root: Path) -> dict[str, str]:
    """test id -> its failure's text, from one pytest run of the registries' and the rules' tests in the copy."""
    env = {**os.environ, "PYTHONPATH": str(root), "PYTEST_ADDOPTS": ""}  # the copy's helpers, not this checkout's
    report = root / "report.xml"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "0", "-p", "no:cacheprovider", f"--junitxml={report}"]
        + ["tests/test_registries.py", "tests/test_checks.py::test_every_rule_is_in_the_table_and_tested"],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert report.is_file() and " passed" in done.stdout, done.stdout[-3000:] + done.stderr[-3000:]
    failed = {}
    for case in ElementTree.parse(report).iter("testcase"):
        for failure in [*case.iter("failure"), *case.iter("error")]:
            test = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            failed[test] = (failure.get("message") or "") + (failure.text or "")
    return failed


def test_each_recipe_s_missing_step_is_caught_where_the_recipe_says(tmp_path):
    root = copy_of_the_repository(tmp_path / "repo")
    follow_each_recipe_but_one_step(root)
    failed = failed_tests(root)
    caught = {
        "tests/test_registries.py::test_every_lab_is_in_every_per_lab_table[09_throwaway]": "09_throwaway",
        "tests/test_registries.py::test_every_rule_is_in_its_table": "untabled_rule",
        "tests/test_checks.py::test_every_rule_is_in_the_table_and_tested": "untested_rule",
        "tests/test_registries.py::test_every_gpu_model_has_one_set_of_figures": "X300",
        "tests/test_registries.py::test_every_gpu_type_is_planned_by_every_planner[ml.x300.48xlarge]": "X300",
        "tests/test_registries.py::test_every_input_mode_has_a_local_stand_in": "Pipe",
    }
    assert set(failed) == set(caught), f"caught elsewhere or not at all: {sorted(set(failed) ^ set(caught))}"
    for test, name in caught.items():
        assert name in failed[test], f"{test} fails without naming {name}: {failed[test]}"


def test_the_recipes_name_the_tests_that_catch_a_missing_step():
    text = RECIPES.read_text(encoding="utf-8")
    for name in (
        "test_every_lab_is_in_every_per_lab_table",
        "test_every_rule_is_in_its_table",
        "test_every_rule_is_in_the_table_and_tested",
        "test_every_gpu_model_has_one_set_of_figures",
        "test_every_gpu_type_is_planned_by_every_planner",
        "test_every_input_mode_has_a_local_stand_in",
    ):
        assert name in text
    for heading in (
        "## A new lab",
        "## A new check rule",
        "## A new instance type, or a new GPU",
        "## A new input mode",
    ):
        assert heading in text


# ---------------------------------------------------------------------------------------------- the lab recipe, whole
STEM = "09_throwaway"
RECIPE_FILES = {  # docs/extending.md's six files of "A new lab", for lab 09
    "course/manifest.py",
    f"labs/{STEM}.ipynb",
    "course/exercises/lab09.py",
    f"labs/solutions/{STEM}.py",
    "README.md",
    "docs/facilitator.md",
}
ENTRY = f'''
_LAB_09 = Lab(
    "{STEM}",
    claims={{"the run counted the labs": lambda f: f["labs"] == 9}},
    requests=lambda requests: None,
    targets=(RealTarget("09", "a throwaway job", "ml.g6.xlarge", 1, 5, why="one GPU is enough"),),
)
'''
FIRST_CELL = (
    "# Lab 09: a throwaway lab\n\n"
    "Set up once: `make studio` in a terminal ([README](../README.md)); a kernel without the helpers says "
    "`No module named 'helpers'`.\n\n"
    "**You will learn** that the recipe is enough.\n\n"
    "**Time:** core path 5 min, with the deep dives 5 min.\n\n"
    "**Cost:** nothing: it runs on this machine."
)
SETUP = (
    "try:  # labs/ready.py, beside the lab, says what to do if this kernel cannot see the helpers\n"
    "    import ready  # noqa: F401\n"
    "except ModuleNotFoundError:  # a kernel started elsewhere (papermill from the repository's root): the helpers "
    "themselves\n"
    "    import helpers  # noqa: F401 - missing? `make studio` in SageMaker Studio, `make` on a laptop (README)\n"
    "from course import exercises\n",
    "from helpers import jobs, report\n\n"
    "jobs.write_runs_under(runs_dir)\n"
    'report.says("The workshop has {labs} labs.", headline=True, labs=9)',
)


def tracked_copy(root: Path) -> Path:
    """The repository's tracked files (as they stand in this checkout) under ``root``."""
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    for name in filter(None, listed.split("\0")):
        if (REPO / name).is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(REPO / name, root / name)
    return root


def digests(root: Path) -> dict[str, str]:
    skip = ("__pycache__", ".pytest_cache")
    return {
        p.relative_to(root).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in root.rglob("*")
        if p.is_file() and not any(part in skip for part in p.parts)
    }


def run_in(root: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root), "PYTEST_ADDOPTS": ""}  # the copy's modules, not this checkout's
    return subprocess.run([sys.executable, *args], cwd=root, env=env, capture_output=True, text=True, timeout=600)


def cell(kind: str, source: str, **metadata) -> dict:
    extra = {"outputs": [], "execution_count": None} if kind == "code" else {}
    return {"cell_type": kind, "metadata": metadata, "source": source, **extra}


def notebook() -> dict:
    return {
        "nbformat": 4,
        "nbformat_minor": 5,
        "metadata": {
            "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
            "workshop": {"prose_figures": {"5 min": "the lab's stated core and full time: course.lab_time's estimate"}},
        },
        "cells": [
            {**cell("markdown", FIRST_CELL), "id": "intro"},
            {
                **cell(
                    "code",
                    'target = "local"\nsmoke = True\nruns_dir = "../runs/labs"\nreal_target = "ml.g6.xlarge"',
                    tags=["parameters"],
                ),
                "id": "parameters",
            },
            {**cell("code", SETUP), "id": "setup"},
            {**cell("markdown", "## Your turn"), "id": "turn"},
            {
                **cell("code", "# Your turn 09.1: how many labs are there now?\nlabs = ...", tags=["exercise"]),
                "id": "answer",
            },
            {**cell("code", 'exercises.check("09.1", labs=labs)'), "id": "check"},
            {**cell("markdown", "## Deep dives (optional)\n\nNothing more."), "id": "deep"},
        ],
    }


def follow_the_lab_recipe(root: Path) -> None:
    """docs/extending.md's "A new lab", step by step, for lab 09."""
    manifest = root / "course/manifest.py"  # 1. its entry, at the end of LABS
    edit(
        manifest,
        "\n\n# Every lab of the workshop, in order",
        "\n" + ENTRY + "\n\n# Every lab of the workshop, in order",
    )
    edit(manifest, "_LAB_08)", "_LAB_08, _LAB_09)")
    (root / f"labs/{STEM}.ipynb").write_text(json.dumps(notebook(), indent=1) + "\n", encoding="utf-8")  # 2.
    (root / "course/exercises/lab09.py").write_text(  # 3. its exercise's check
        '"""Lab 09\'s exercise: count the labs."""\n\nfrom __future__ import annotations\n\n'
        "from course.exercises import exercise, expect\n\n\n"
        '@exercise("09.1", "Count the labs", minutes=1)\ndef count_the_labs(labs):\n'
        '    """The learner counts the README\'s rows."""\n'
        '    expect(labs == 9, "count the rows of the README\'s table of labs.")\n'
        '    return "nine: one entry each in course/manifest.py."\n',
        encoding="utf-8",
    )
    (root / f"labs/solutions/{STEM}.py").write_text("# %% 09.1\nlabs = 9\n", encoding="utf-8")  # 4.
    row = "| `08_failures_at_scale` |"  # 5. its row in the README's table of labs
    readme = (root / "README.md").read_text(encoding="utf-8")
    last = next(line for line in readme.splitlines() if line.startswith(row))
    edit(root / "README.md", last + "\n", f"{last}\n| `{STEM}` | 5 / 5 | the recipe | none |\n")
    guide = run_in(root, "-m", "course.facilitator.workshop", "--write", "docs/facilitator.md")  # 6.
    assert guide.returncode == 0, guide.stdout + guide.stderr


@pytest.mark.long  # a copy of the tree, the per-lab checks and the lab itself run in it (about 25 s): make long-check
def test_the_lab_recipe_followed_whole_adds_a_lab_touching_only_the_files_it_names(tmp_path):
    root = tracked_copy(tmp_path / "repo")
    before = digests(root)
    follow_the_lab_recipe(root)
    template = run_in(root, "infra/workshop_account.py", "--write")  # a step the recipe takes only when needed
    assert template.returncode == 0, template.stdout + template.stderr
    after = digests(root)
    touched = {name for name in before.keys() | after.keys() if before.get(name) != after.get(name)}
    assert touched == RECIPE_FILES, (
        f"beyond the recipe: {touched - RECIPE_FILES}; not touched: {RECIPE_FILES - touched}"
    )
    per_lab = (
        "09_throwaway or registry_names or registered_labs_only or readme_states or every_registered_exercise "
        "or generated_blocks_are or guardrails_are_the_event"
    )
    files = ["registries", "notebooks", "any_folder", "lab_time", "exercises", "prose_figures", "facilitator"]
    done = run_in(
        root,
        "-m",
        "pytest",
        "-v",
        "-n",
        "0",
        "-p",
        "no:cacheprovider",
        "-m",
        "not slow and not labs",
        *[f"tests/test_{name}.py" for name in files],
        "tests/test_event_account_policies.py",
        "-k",
        per_lab,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    lab_09 = re.findall(rf"::(\w+)\[{STEM}\] PASSED", done.stdout)
    assert len(lab_09) >= 10, f"lab 09's own checks did not all run: {lab_09}"
    # and the lab runs, as `make` runs it: headless in a fresh kernel, its answer filled in, its claim held
    out = tmp_path / "runs"
    ran = run_in(root, "-m", "course.run_labs", "--labs", "09", "--solutions", "--streams", "1", "--out", str(out))
    assert ran.returncode == 0, ran.stdout[-4000:] + ran.stderr[-2000:]
    executed = json.loads((out / f"{STEM}.ipynb").read_text(encoding="utf-8"))
    said = "".join("".join(o.get("text", "")) for c in executed["cells"] for o in c.get("outputs", []))
    assert "nine: one entry each in course/manifest.py" in said, "lab 09's exercise check did not run in the kernel"
