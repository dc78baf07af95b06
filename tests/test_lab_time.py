"""Each lab's stated time is the same estimate for every lab; the README's table says the same times."""

from __future__ import annotations

import re

import nbformat
import pytest
from conftest import REPO

from course import lab_time, manifest

LABS = [one.notebook for one in manifest.LABS]  # every registered lab (tests/test_registries.py)


def _lab(path, cells):
    nb = nbformat.v4.new_notebook()
    for kind, src, extra in cells:
        cell = nbformat.v4.new_markdown_cell(src) if kind == "md" else nbformat.v4.new_code_cell(src)
        cell.update(extra)
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def test_the_arithmetic(tmp_path):
    words = " ".join(["word"] * 240)  # 2 minutes
    nb = _lab(
        tmp_path / "09_x.ipynb",
        [
            ("md", "# Lab\n**Time:** core path 5 min, with the deep dives 10 min.", {}),
            ("md", words, {}),
            (
                "code",
                "a = 1\n\nb = 2\n",
                {
                    "outputs": [nbformat.v4.new_output("stream", name="stdout", text="1\n2\n3\n4\n")],
                    "metadata": {"papermill": {"duration": 30.0}},
                },
            ),
            ("code", "p = 1", {"metadata": {"tags": ["injected-parameters"]}}),
            ("md", "## Deep dives (optional)\nMore.", {}),
            ("code", "plot()", {"outputs": [nbformat.v4.new_output("display_data", data={"image/png": "AA=="})]}),
        ],
    )
    t = lab_time.estimate(nb)
    assert t.stated == (5, 10)
    assert (t.core.code_lines, t.core.output_lines, t.core.run_s) == (2, 4, 30.0)
    assert t.core.minutes == pytest.approx(2 + 12 / 120 + 6 / 6 + 0.5)  # the title's 12 words count too
    assert t.optional.displays == 1 and t.optional.code_lines == 1
    assert t.full.minutes == pytest.approx(t.core.minutes + t.optional.minutes)


def test_within():
    assert lab_time.within(20, 22.9) and not lab_time.within(20, 24)
    assert lab_time.within(60, 53) and not lab_time.within(60, 50)


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_each_lab_states_core_and_full_times(notebook):
    core, full = lab_time.stated(notebook)
    assert 0 < core <= full and core % 5 == 0 and full % 5 == 0
    estimate = lab_time.estimate(notebook)  # prose, code and exercises alone already take this long
    assert estimate.core.minutes <= core + max(3, 0.15 * core), f"{notebook.stem}: prose and code alone overrun"


def test_readme_states_each_lab_s_core_and_full_time():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    for notebook in LABS:
        core, full = lab_time.stated(notebook)
        row = next((line for line in readme.splitlines() if line.startswith(f"| `{notebook.stem}`")), "")
        assert re.search(rf"\|\s*{core} / {full}\s*\|", row), (
            f"README's row for {notebook.stem} must say {core} / {full}"
        )
