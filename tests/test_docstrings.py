"""Docstrings in ``helpers/`` and ``course/`` say what and why in a few lines: under 100 words each.

A longer one is usually a measurement log or an explanation that belongs in ``helpers/README.md`` or ``docs/``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from conftest import REPO

MAX_WORDS = 100  # the first word count refused
DOCUMENTED = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)


def long_docstrings(root: Path) -> Iterator[str]:
    """``file:line name (N words)`` for every module, class and function docstring of MAX_WORDS words or more."""
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            docstring = ast.get_docstring(node) if isinstance(node, DOCUMENTED) else None
            words = len(docstring.split()) if docstring else 0
            if words >= MAX_WORDS:
                name = getattr(node, "name", "<module>")
                yield f"{path.relative_to(root.parent)}:{getattr(node, 'lineno', 1)} {name} ({words} words)"


def test_the_finder_names_a_long_docstring(tmp_path):
    long = tmp_path / "long.py"
    long.write_text(f'"""short"""\n\n\ndef f():\n    """{" ".join(["word"] * MAX_WORDS)}"""\n')
    found = list(long_docstrings(tmp_path))
    assert len(found) == 1 and found[0].endswith(f"long.py:4 f ({MAX_WORDS} words)")


def test_every_docstring_in_helpers_and_course_is_under_100_words():
    found = [line for root in (REPO / "helpers", REPO / "course") for line in long_docstrings(root)]
    assert not found, "docstrings of 100+ words (say what and why; move the rest to a doc):\n" + "\n".join(found)
