"""The labs' "Your turn" exercises: each check tells the learner, kindly and specifically, what is right or wrong.

An exercise is a task, an answer cell (tagged ``exercise``, ``# Your turn 02.1: ...``) and a check cell calling
``exercises.check("02.1", ...)``; the checks live here, one module per lab, registered with ``@exercise``. An answer
still ``...`` is waited for, never refused, so an unanswered lab runs headless; ``--solutions`` fills in the
reference answers. A check run before its lab's set-up says which cells to run first.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import linecache
import math
import numbers
import pkgutil
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from helpers import report
from helpers.errors import WorkshopError

RIGHT, WRONG, UNANSWERED = "right", "wrong", "unanswered"


class NotYet(WorkshopError):
    """An answer that is not right yet; its message is what the learner reads (``check`` catches it)."""


class ExerciseError(WorkshopError):
    """A lab calls a check that does not exist or passes it the wrong names: a bug in the lab, not the answer."""


@dataclass(frozen=True)
class Exercise:
    id: str  # "02.1": lab 02, first exercise
    title: str
    minutes: int  # the time a learner needs, counted in the lab's stated time
    check: Callable[..., str | None]

    @property
    def parameters(self) -> list[str]:
        return list(inspect.signature(self.check).parameters)


_REGISTRY: dict[str, Exercise] = {}


def exercise(id: str, title: str, minutes: int) -> Callable:
    """Register a check: a function of the answers (and the lab's context) that returns a short explanation."""

    def register(check: Callable[..., str | None]) -> Callable[..., str | None]:
        if id in _REGISTRY and _REGISTRY[id].check.__qualname__ != check.__qualname__:
            raise ExerciseError(f"exercise {id} is registered twice")
        _REGISTRY[id] = Exercise(id, title, minutes, check)
        return check

    return register


def expect(condition: object, message: str) -> None:
    """Stop the check with ``message`` (what is wrong, and a hint) unless ``condition`` holds."""
    if not condition:
        raise NotYet(message)


def registry() -> dict[str, Exercise]:
    """Every lab's exercises, by id (the lab modules are imported on first use)."""
    for module in pkgutil.iter_modules(__path__):
        if module.name.startswith("lab"):
            importlib.import_module(f"{__name__}.{module.name}")
    return dict(sorted(_REGISTRY.items()))


def lookup(id: str) -> Exercise:
    found = registry()
    if id not in found:
        raise ExerciseError(f"no exercise {id!r}; the labs have {', '.join(found) or 'none'}")
    return found[id]


def _unanswered(value: object) -> bool:
    return value is ...


def _plain(value: object) -> object:
    """A number of any type as Python's own int or float, which is what the checks test for and print; anything
    else as it is."""
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):
        value = value.item()  # numpy's numbers and 0-d arrays, torch's 0-d tensors
    if isinstance(value, numbers.Real) and not isinstance(value, (bool, int, float)):
        return int(value) if isinstance(value, numbers.Integral) else float(value)  # e.g. a Fraction
    return value


def _not_a_number(name: str, value: object) -> str | None:
    """What to say about an answer that is NaN or infinite (every comparison with NaN is false: without this,
    the first test a check makes would explain the wrong mistake)."""
    if isinstance(value, float) and not math.isfinite(value):
        return (
            f"{name} is {value}, not a number: check for a division by zero (or 0 / 0, inf - inf) in how you "
            "computed it, and print the values that went into it."
        )
    return None


def evaluate(id: str, **values) -> tuple[str, str]:
    """(status, message) for these answers: status is "right", "wrong" or "unanswered"; never raises for an answer."""
    ex = lookup(id)
    wanted, given = set(ex.parameters), set(values)
    if wanted != given:
        missing, extra = sorted(wanted - given), sorted(given - wanted)
        raise ExerciseError(f"exercise {id} takes {', '.join(ex.parameters)}; missing {missing}, unexpected {extra}")
    waiting = [name for name, value in values.items() if _unanswered(value)]
    if waiting:
        return UNANSWERED, f"waiting for your answer: set {', '.join(waiting)} in the cell above, then run this one."
    values = {name: _plain(value) for name, value in values.items()}
    for name, value in values.items():
        if problem := _not_a_number(name, value):
            return WRONG, problem
    try:
        said = ex.check(**values)
    except NotYet as e:
        return WRONG, str(e)
    except Exception as e:  # the learner's code or value broke the check: say so, kindly, and go on
        return WRONG, f"your answer raised {type(e).__name__}: {e}. Check its type and shape against the task."
    return RIGHT, said or "that is it."


def check(id: str, **values) -> str:
    """Check a lab's exercise, print what the learner should read, record the outcome; returns the status."""
    ex = lookup(id)
    status, message = evaluate(id, **values)
    mark = {RIGHT: "✅ Right", WRONG: "❌ Not yet", UNANSWERED: "✏️  Your turn"}[status]
    print(f"{mark} — exercise {id} ({ex.title}): {message}")
    report.record(**{f"exercise {id}": status})
    return status


# ---------------------------------------------------------------------------------------------------- out of order
CHECK_CALL = re.compile(r"""exercises\.check\(\s*["'](\d\d\.\d+)["']""")


def run_first(error: NameError, tb) -> str | None:
    """What to say under a ``NameError`` raised in an exercise's check cell: which cells make the missing name, and
    to run the lab from the top down to the check first. None for any other cell."""
    found = None
    while tb is not None:  # the cell is a frame of the traceback: its source is in linecache, as IPython put it
        found = CHECK_CALL.search("".join(linecache.getlines(tb.tb_frame.f_code.co_filename))) or found
        tb = tb.tb_next
    name = getattr(error, "name", None)
    if found is None or not name:
        return None
    where = _made_in(found[1][:2], name)
    return (
        f"Exercise {found[1]}'s check reads {name}, which an earlier cell of the lab makes{where}: run the lab's "
        "cells from the top down to this one first (in JupyterLab: Run > Run All Above Selected Cell), then this "
        "one again."
    )


def _made_in(lab: str, name: str) -> str:
    """ ", the cell under the heading '...'" for the lab's first code cell that assigns or imports ``name``; "" where
    the notebook is not found (the kernel runs in the lab's folder; else the repository's labs/)."""
    here = [*Path.cwd().glob(f"{lab}_*.ipynb"), *(Path(__file__).parents[2] / "labs").glob(f"{lab}_*.ipynb")]
    if not here:
        return ""
    heading = ""
    for cell in json.loads(here[0].read_text(encoding="utf-8"))["cells"]:
        text = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            heading = next((line.lstrip("# ").strip() for line in text.splitlines() if line.startswith("#")), heading)
        elif name in _names_made(text):
            if EXERCISE_CELL.match(text):
                return f" (your answer cell, '{text.splitlines()[0].lstrip('# ')}')"
            return f" (the cell under the heading '{heading}')" if heading else ""
    return ""


EXERCISE_CELL = re.compile(r"^# Your turn \d\d\.\d+:")


def _names_made(source: str) -> set[str]:
    """The names a cell assigns, defines or imports (IPython's magics and shell lines left out)."""
    code = "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))
    try:
        tree = ast.parse(code)
    except SyntaxError:
        return set()
    made = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            made.add(node.id)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            made.add(node.name)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            made.update((a.asname or a.name).split(".")[0] for a in node.names)
    return made


def _with_run_first(shell, etype, value, tb, tb_offset=None) -> None:
    """Show a ``NameError`` as IPython would, and under it :func:`run_first`'s advice where it has any (IPython leaves
    the showing to a custom handler)."""
    structured = shell.InteractiveTB.structured_traceback(etype, value, tb, tb_offset=tb_offset)
    advice = run_first(value, tb)
    shell._showtraceback(etype, value, [*structured, advice] if advice else structured)


def _install() -> None:
    """In an IPython kernel with no handler of its own, explain a NameError in a check cell (this module is
    imported at the top of every check cell, so before the name it lacks is read)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is not None and not shell.custom_exceptions:
        shell.set_custom_exc((NameError,), _with_run_first)


_install()
