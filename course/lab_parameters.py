"""A lab's papermill parameters, checked before it does any work, against the kind of their defaults in the cell
tagged ``parameters`` (a default of None says its kind in an annotation: ``epochs: int | None = None``). A boolean
takes True or False only (``-p smoke true``), never "maybe" or 1; a whole number is one, at least 1 (0 where its
default is 0); a float default takes a finite number of at least 0; text takes text.

A lab's set-up cell calls ``lab_parameters.check("01", globals())``; the lab runner checks each ``-p`` alike.
"""

from __future__ import annotations

import ast
import math
from pathlib import Path

from course.lab import parameters_source
from helpers.errors import WorkshopError
from helpers.job_spec import REPO

# whole numbers that may be 0 though their default is not: lab 07's starved_workers (0: the trainer decodes between
# its own steps, as the lab's Next suggests)
MAY_BE_ZERO = {"starved_workers"}
KINDS = {"bool": bool, "int": int, "float": float, "str": str}
SAYS = {bool: "True or False", int: "a whole number", float: "a number", str: "text (in quotes)"}


class ParameterError(WorkshopError, ValueError):
    """A lab parameter of the wrong kind or out of range; the message names it and the values it takes."""


def declared(notebook: Path) -> dict[str, tuple[type | None, bool, object]]:
    """Each parameter of ``notebook``'s parameters cell: (its kind, whether None is allowed, its default); a kind of
    None where neither the default nor an annotation says one."""
    found = {}
    for node in ast.parse(parameters_source(notebook)).body:
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            target = node.targets[0] if isinstance(node, ast.Assign) else node.target
            default = ast.literal_eval(node.value)
            kinds = _annotated(node.annotation) if isinstance(node, ast.AnnAssign) else set()
            kind = next(iter(kinds - {None}), None) or (type(default) if default is not None else None)
            if isinstance(target, ast.Name):
                found[target.id] = (kind, default is None or None in kinds, default)
    return found


def _annotated(annotation: ast.expr) -> set:
    """``int | None`` as {int, None}."""
    if isinstance(annotation, ast.BinOp):
        return _annotated(annotation.left) | _annotated(annotation.right)
    if isinstance(annotation, ast.Constant) and annotation.value is None:
        return {None}
    return {KINDS[annotation.id]} if isinstance(annotation, ast.Name) and annotation.id in KINDS else set()


def problem(name: str, value: object, kind: type | None, none_ok: bool, default: object) -> str:
    """What is wrong with ``value`` for parameter ``name`` ("" if nothing): what was given and what it takes."""
    if kind is None or (value is None and none_ok):
        return ""
    takes = SAYS[kind] + (" or None" if none_ok else "")
    if kind is float:
        fits = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
        takes += ", at least 0"
    elif kind is int:
        low = 0 if default == 0 or name in MAY_BE_ZERO else 1
        fits = isinstance(value, int) and not isinstance(value, bool) and value >= low
        takes += f", at least {low}"
    else:
        fits = isinstance(value, kind)
    if fits:
        return ""
    return f"{name} = {value!r}: {name} takes {takes} (its default is {default!r})"


def problems(values: dict, notebook: Path) -> list[str]:
    """What is wrong with each of ``values`` that ``notebook`` declares as a parameter."""
    spec = declared(notebook)
    return [said for name, value in values.items() if name in spec and (said := problem(name, value, *spec[name]))]


def check(lab: str, values: dict) -> None:
    """In a lab's set-up cell: raise :class:`ParameterError` for any parameter of the wrong kind, before any work.
    ``lab`` is its number ("01"); ``values``, the kernel's ``globals()``."""
    notebook = next((REPO / "labs").glob(f"{lab}_*.ipynb"))
    wrong = problems(values, notebook)
    if wrong:
        raise ParameterError(
            "; ".join(wrong) + ". Set it in the parameters cell, or give it to papermill as -p NAME VALUE "
            "(-p smoke true, -p epochs 3); nothing has run yet."
        )
