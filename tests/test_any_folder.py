"""Every lab's first lines, the helpers check, work whatever folder the kernel starts in: ``labs/`` (JupyterLab,
``jupyter nbconvert --execute``, papermill from ``labs/``, ``make``), the repository's root (``papermill
labs/03_smddp.ipynb out.ipynb`` from there: the kernel's folder is the caller's, and the notebook's own is not on
``sys.path``) or anywhere else. A kernel without the helpers is still told what to do. CI runs one lab the plain
way, papermill from the root (``.ci/run``).

Each case runs the lab's own first lines, read from the notebook, in a Python whose ``sys.path`` starts with its
working folder, as a kernel's does (``python -c``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from conftest import REPO

LABS = sorted((REPO / "labs").glob("[0-9][0-9]_*.ipynb"))
FIRST_LINES = (
    "try:  # labs/ready.py, beside the lab, says what to do if this kernel cannot see the helpers",
    "    import ready  # noqa: F401",
    "except ModuleNotFoundError:  # a kernel started elsewhere (papermill from the repository's root): the helpers "
    "themselves",
    "    import helpers  # noqa: F401 - missing? `make studio` in SageMaker Studio, `make` on a laptop (README)",
)
BARE = getattr(sys, "_base_executable", sys.executable)  # this machine's Python, without the .venv's packages


def check_lines(notebook: Path) -> str:
    """The helpers check as the lab writes it: its setup cell's lines from the ``try:`` to the fallback import."""
    for cell in nbformat.read(notebook, as_version=4).cells:
        lines = cell.source.splitlines()
        if cell.cell_type == "code" and FIRST_LINES[0] in lines:
            start = lines.index(FIRST_LINES[0])
            return "\n".join(lines[start : start + len(FIRST_LINES)])
    raise AssertionError(f"{notebook.name} has no helpers check")


def kernel(python: str, folder: Path, home: Path, code: str) -> subprocess.CompletedProcess:
    env = {"HOME": str(home), "PATH": os.environ["PATH"]}
    return subprocess.run([python, "-c", code], cwd=folder, env=env, capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_every_lab_checks_the_helpers_with_the_same_lines_before_it_imports_them(notebook):
    assert check_lines(notebook) == "\n".join(FIRST_LINES)
    setup = next(c.source for c in nbformat.read(notebook, as_version=4).cells if FIRST_LINES[0] in c.source)
    assert setup.index(FIRST_LINES[0]) < setup.index("from helpers import")


@pytest.mark.parametrize("where", ["labs", "root", "elsewhere"])
def test_the_check_passes_in_any_folder_where_the_helpers_are_installed(where, tmp_path):
    folder = {"labs": REPO / "labs", "root": REPO, "elsewhere": tmp_path}[where]
    done = kernel(sys.executable, folder, tmp_path, check_lines(LABS[0]) + "\nimport helpers.jobs")
    assert done.returncode == 0, done.stderr


def test_without_the_helpers_the_lab_says_what_to_do_and_the_fallback_does_not_hide_it(tmp_path):
    if kernel(BARE, tmp_path, tmp_path, "import helpers").returncode == 0:
        pytest.skip(f"{BARE} has the helpers itself")
    in_labs = kernel(BARE, REPO / "labs", tmp_path, check_lines(LABS[0]))
    assert in_labs.returncode != 0
    last = in_labs.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError:") and "run `make studio`" in last and "restart this kernel" in last
    assert "During handling" not in in_labs.stderr  # ready's message is the error, not one the fallback raised

    # from the root, the checkout's own folder holds the helpers: the check passes and the lab's imports go on
    assert kernel(BARE, REPO, tmp_path, check_lines(LABS[0])).returncode == 0

    # anywhere else, with nothing installed, the fallback's own import fails on the helpers by name
    elsewhere = kernel(BARE, tmp_path, tmp_path, check_lines(LABS[0]))
    assert elsewhere.returncode != 0 and "No module named 'helpers'" in elsewhere.stderr


def test_ci_runs_one_lab_the_plain_way_from_the_root():
    ci = (REPO / ".ci" / "run").read_text(encoding="utf-8")
    assert "papermill labs/03_smddp.ipynb" in ci
