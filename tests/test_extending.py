"""docs/extending.md's four recipes, each followed in a throwaway copy of the repository with one step left out: the
test the recipe names must catch it, and nothing else may fail.

- a lab registered, with its notebook, but with an empty manifest entry and in none of the per-lab tables;
- a rule written, and not put in its table; another put in its table, without a case in the tests;
- an instance type whose new GPU is not in ``GPUS``;
- an input mode registered without a stand-in on this machine.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest
from conftest import REPO

pytestmark = pytest.mark.slow  # a pytest of its own in the copy (about 15 s)

RECIPES = REPO / "docs" / "extending.md"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{path}: the recipe's anchor {old!r} moved; update tests/test_extending.py"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def copy_of_the_repository(root: Path) -> Path:
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".ipynb_checkpoints")
    for part in ("helpers", "course", "labs", "tests", "benchmarks", "data/catalog", "docs"):
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
