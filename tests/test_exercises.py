"""The exercises: the check framework, and every lab's "Your turn" cells wired so that an unanswered lab still runs
headless and the reference answers in labs/solutions/ fill in every exercise (their passing is proven by the
headless runs in test_notebooks.py)."""

from __future__ import annotations

import ast
import json

import pytest
from conftest import REPO

from course import exercises, lab, manifest

LABS = [one.notebook for one in manifest.LABS]  # every registered lab (tests/test_registries.py)


@pytest.fixture
def scratch_exercise(monkeypatch):
    monkeypatch.setattr(exercises, "_REGISTRY", dict(exercises.registry()))

    @exercises.exercise("99.1", "Half of it", minutes=2)
    def half(answer, whole):
        exercises.expect(isinstance(answer, int), f"give a whole number, not {type(answer).__name__}")
        exercises.expect(answer * 2 == whole, f"{answer} × 2 is {answer * 2}, not {whole}")
        return "half of the whole, as asked."

    return half


def test_an_unanswered_exercise_waits_and_never_raises(scratch_exercise, capsys):
    assert exercises.check("99.1", answer=..., whole=8) == "unanswered"
    assert "set answer in the cell above" in capsys.readouterr().out


def test_a_wrong_answer_says_what_is_wrong(scratch_exercise):
    assert exercises.evaluate("99.1", answer=3, whole=8) == ("wrong", "3 × 2 is 6, not 8")
    status, message = exercises.evaluate("99.1", answer="4", whole=8)
    assert status == "wrong" and "not str" in message


def test_an_answer_that_breaks_the_check_is_wrong_not_a_crash(scratch_exercise):
    status, message = exercises.evaluate("99.1", answer=None, whole=8)
    assert status == "wrong" and "NoneType" in message


def test_a_right_answer_says_why(scratch_exercise, capsys):
    assert exercises.check("99.1", answer=4, whole=8) == "right"
    assert "half of the whole" in capsys.readouterr().out


def test_a_lab_that_calls_a_check_wrongly_fails_loudly(scratch_exercise):
    with pytest.raises(exercises.ExerciseError, match="missing \\['whole'\\]"):
        exercises.evaluate("99.1", answer=4)
    with pytest.raises(exercises.ExerciseError, match="no exercise '98.1'"):
        exercises.evaluate("98.1", answer=4)


def _cells(notebook):
    return json.loads(notebook.read_text(encoding="utf-8"))["cells"]


def _check_calls(cells) -> dict[str, tuple[int, ast.Call]]:
    calls = {}
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code":
            continue
        for node in ast.walk(ast.parse("".join(cell["source"]))):
            if isinstance(node, ast.Call) and ast.unparse(node.func) == "exercises.check":
                calls[ast.literal_eval(node.args[0])] = (i, node)
    return calls


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_each_lab_has_one_to_three_exercises_each_with_its_check_and_answer(notebook):
    cells = _cells(notebook)
    answers = lab.exercise_cells({"cells": cells})
    assert 1 <= len(answers) <= 3, f"{notebook.name} has {len(answers)} exercises; a lab has 1-3"
    checks = _check_calls(cells)
    assert set(checks) == set(answers), "each exercise has one answer cell and one check cell"
    registered = exercises.registry()
    for id, cell in answers.items():
        assert id.startswith(notebook.name[:2] + "."), f"exercise {id} is numbered for another lab"
        body = ast.parse("".join(cell["source"]))
        placeholders = [n.targets[0].id for n in body.body if isinstance(n, ast.Assign)]
        assert placeholders and all(
            isinstance(n, ast.Assign) and isinstance(n.value, ast.Constant) and n.value.value is ... for n in body.body
        ), f"exercise {id}'s cell must only assign placeholders (name = ...)"
        index, call = checks[id]
        passed = {k.arg for k in call.keywords}
        assert set(placeholders) <= passed, f"the check of {id} must be given every answer: {placeholders}"
        assert passed == set(registered[id].parameters), f"the check of {id} takes {registered[id].parameters}"
        assert cells.index(cell) < index, f"the check of {id} comes after its answer cell"
        for j, other in enumerate(cells):  # nothing but the check reads an answer: an unanswered lab still runs
            if other["cell_type"] != "code" or j in (index, cells.index(cell)):
                continue
            read = {n.id for n in ast.walk(ast.parse("".join(other["source"]))) if isinstance(n, ast.Name)}
            assert not read & set(placeholders), f"cell {j} of {notebook.name} uses an answer of {id}"


@pytest.mark.parametrize("notebook", LABS, ids=lambda p: p.stem)
def test_reference_answers_fill_every_exercise_and_nothing_else(notebook):
    nb = lab.with_solutions(notebook)  # refuses a missing or extra answer
    for id, cell in lab.exercise_cells(nb).items():
        ast.parse("".join(cell["source"]))
        assert "= ..." not in "".join(cell["source"]).split("\n", 1)[1], f"the reference answer of {id} is empty"


def test_every_registered_exercise_is_in_a_lab():
    in_labs = set().union(*(lab.exercise_cells({"cells": _cells(nb)}) for nb in LABS))
    assert set(exercises.registry()) == in_labs


def test_solutions_live_apart_from_the_labs():
    assert sorted(p.stem for p in (REPO / "labs" / "solutions").glob("*.py")) == [nb.stem for nb in LABS]
