"""No figure a run produces is typed into a lab's prose.

A lab states what its own run measured in a generated sentence under the result (``report.says``, formatted from the
recorded figures), or in a claim the headless test checks (``CLAIMS`` in test_notebooks.py). Every other figure in
its markdown is a constant with a source (AWS's documented 120 s grace, a case study's 15 days, the lab's stated
time), and the notebook declares it, with that source, in its metadata (``workshop.prose_figures``). A figure typed
into prose that is neither declared nor generated fails here. A code comment's figures are figures too: each is a
number the same cell's code holds (``64 * real.gpus  # 64 rows per GPU``), or a declared constant; a comment that
says what a run will measure (``# 187 steps``, computed elsewhere) fails.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize

import nbformat
import pytest

from course import manifest

# a figure: a number with a decimal point, a %, a x/× or a unit or counted noun after it, a $ before it, or a
# count of 100 or more (years aside)
_UNITS = (
    r"%|×|x\b|\s?(?:MB/s|GB/s|Gb/s|TFLOP/s|samples/s|ms|s|sec|seconds?|min|minutes?|h|hours?|days?|weeks?|GB|MB|KB"
    r"|kB|GiB|MiB|TB|TiB|points?|GPUs?|processes|ranks?|instances?|cores?|vCPUs?|steps?|epochs?|rows?|files?"
    r"|shards?|objects?|tokens?|parameters?|params|layers?|nodes?|connections?|requests?|titles?|categories"
    r"|classes|words?)\b"
)
_NUMBER = re.compile(r"(?<![\w.\-/])(?P<n>\$?\d(?:[\d,]*\d)?(?:\.\d+)?)(?P<unit>" + _UNITS + r")?")
_NOT_PROSE = [
    r"```.*?```",  # code blocks
    r"`[^`]*`",  # code spans: names, calls, commands
    r"\]\([^)]*\)",  # link targets
    r"<[^>]+>",  # HTML tags
    r"\bml\.[\w.-]+",  # instance types
    r"\b\d+\.\d+\.\d+\b",  # versions
    r"\b(?:19|20)\d\d-\d\d-\d\d\b",  # dates
    r"\b[Ll]abs? 0\d(?:\s*(?:,|and|-|–)\s*0\d)*\b",  # lab numbers
    r"\b\d\d\.\d\b",  # exercise ids (05.2)
]


def figures(markdown: str) -> list[str]:
    """The figures in a markdown cell's prose, as written (whitespace folded)."""
    for pattern in _NOT_PROSE:
        markdown = re.sub(pattern, " ", markdown, flags=re.S)
    found = []
    for m in _NUMBER.finditer(markdown):
        n, unit = m["n"], m["unit"]
        value = n.lstrip("$").replace(",", "")
        big = value.isdigit() and int(value) >= 100 and not 1900 <= int(value) <= 2100
        if unit or "." in value or n.startswith("$") or big:
            found.append(" ".join(m.group(0).split()))
    return found


def declared(notebook) -> dict[str, str]:
    return notebook.metadata.get("workshop", {}).get("prose_figures", {})


@pytest.mark.parametrize("path", [one.notebook for one in manifest.LABS], ids=lambda p: p.stem)
def test_every_figure_in_the_prose_is_a_declared_constant(path):
    notebook = nbformat.read(path, as_version=4)
    constants = declared(notebook)
    typed = sorted(
        {f for cell in notebook.cells if cell.cell_type == "markdown" for f in figures(cell.source)} - set(constants)
    )
    assert not typed, (
        f"{path.name}: figures typed into the prose: {typed}. A figure the run produces belongs in a generated "
        f"sentence (report.says) or a checked claim; a constant goes in the notebook's metadata "
        f"workshop.prose_figures with its source."
    )


def comments(source: str) -> list[str]:
    """A code cell's comments (IPython's magics and shell lines left out: they are not Python)."""
    python = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    return [t.string for t in tokenize.generate_tokens(io.StringIO(python).readline) if t.type == tokenize.COMMENT]


def numbers_in_code(source: str) -> set[float]:
    """Every number written in a code cell's code (its comments aside)."""
    python = "\n".join("" if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    return {
        float(node.value)
        for node in ast.walk(ast.parse(python))
        if isinstance(node, ast.Constant) and type(node.value) in (int, float)
    }


def value(figure: str) -> float:
    """``"$1,234.5 MB"`` -> 1234.5"""
    return float(_NUMBER.match(figure)["n"].lstrip("$").replace(",", ""))


def written(notebook) -> set[str]:
    """Every figure a notebook's prose and code comments state."""
    return {
        f
        for cell in notebook.cells
        for text in (
            [cell.source] if cell.cell_type == "markdown" else comments(cell.source) if cell.cell_type == "code" else []
        )
        for f in figures(text)
    }


@pytest.mark.parametrize("path", [one.notebook for one in manifest.LABS], ids=lambda p: p.stem)
def test_every_figure_in_a_code_comment_is_in_its_code_or_a_declared_constant(path):
    notebook = nbformat.read(path, as_version=4)
    constants = declared(notebook)
    unexplained = [
        (i, f)
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code"
        for f in (f for comment in comments(cell.source) for f in figures(comment))
        if f not in constants and value(f) not in numbers_in_code(cell.source)
    ]
    assert not unexplained, (
        f"{path.name}: figures in code comments that neither the cell's code holds nor the notebook declares "
        f"(cell, figure): {unexplained}. A figure a run produces is said by the run (report.says); a constant goes "
        f"in workshop.prose_figures with its source."
    )


def test_a_comment_s_figure_counts_only_when_the_cell_holds_it():
    source = "real_batch = 64 * gpus  # 64 rows per GPU\nsteps = n // b  # 187 steps\n%time x = 1  # 9 s"
    assert comments(source) == ["# 64 rows per GPU", "# 187 steps"]
    assert numbers_in_code(source) == {64.0}
    assert [value(f) for c in comments(source) for f in figures(c)] == [64.0, 187.0]


@pytest.mark.parametrize("path", [one.notebook for one in manifest.LABS], ids=lambda p: p.stem)
def test_every_declared_constant_is_in_the_prose_and_names_its_source(path):
    notebook = nbformat.read(path, as_version=4)
    written_here = written(notebook)
    for figure, source in declared(notebook).items():
        assert figure in written_here, f"{path.name}: {figure!r} is declared but in neither prose nor comments: drop it"
        assert len(source.split()) >= 3, f"{path.name}: {figure!r} needs its source, not {source!r}"


@pytest.mark.parametrize(
    "text, found",
    [
        ("accuracy ends about 9% and the two processes ran 1.06× as fast", ["9%", "1.06×"]),
        ("SageMaker waits 120 s; see `max_wait_s=3600` and ml.g5.2xlarge", ["120 s"]),
        ("in 2026, lab 02 used 2 processes on 12,000 titles for $0.25", ["2 processes", "12,000 titles", "$0.25"]),
        ("128, 256 and 85 MB/s", ["128", "256", "85 MB/s"]),
        ("torch 2.13.0 on 2026-11-25, exercise 05.2, step 3 of 64", []),
    ],
)
def test_the_figure_finder_finds_figures_and_nothing_else(text, found):
    assert figures(text) == found


def _unshown_sentences(source: str) -> list[int]:
    """Lines where a cell calls ``report.says`` as a statement that is not the cell's last: Jupyter shows only the
    last expression's value, so that sentence is recorded but never seen."""
    tree = ast.parse(source)
    last = tree.body[-1] if tree.body else None
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Call)
        and ast.unparse(node.value.func) == "report.says"
        and node is not last
    ]


@pytest.mark.parametrize("path", [one.notebook for one in manifest.LABS], ids=lambda p: p.stem)
def test_every_generated_sentence_is_shown(path):
    notebook = nbformat.read(path, as_version=4)
    unshown = {
        i: lines
        for i, cell in enumerate(notebook.cells)
        if cell.cell_type == "code" and (lines := _unshown_sentences(cell.source))
    }
    assert not unshown, f"{path.name}: report.says(...) that Jupyter never shows (cell: lines): {unshown}; display() it"


def test_a_sentence_inside_a_block_is_not_shown_and_the_last_one_is():
    assert _unshown_sentences("if x:\n    report.says('a')\nreport.says('b')") == [2]
    assert _unshown_sentences("display(report.says('a'))\nreport.says('b')") == []
