"""The labs' "Your turn" exercises: each check tells the learner, kindly and specifically, what is right or wrong.

A lab's exercise is three cells: the task in prose, an answer cell (tagged ``exercise``, first line
``# Your turn 02.1: ...``) that assigns placeholders ``name = ...``, and a check cell that only calls
``exercises.check("02.1", name=name, ...)``. The checks themselves live here, one module per lab (``lab02.py``),
registered with ``@exercise``; inside one, ``expect(condition, message)`` stops with the message when the answer is
not right yet. While any answer is still ``...`` the check says what it waits for and never raises, so a headless
run of an unanswered lab passes; ``python -m course.run_labs --solutions`` fills in the reference answers from
``labs/solutions/`` instead, and every check must then say "right".
"""

from __future__ import annotations

import importlib
import inspect
import math
import numbers
import pkgutil
from collections.abc import Callable
from dataclasses import dataclass

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
