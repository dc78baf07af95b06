"""What a lab is (:class:`Lab`: its stem and what the course knows of it, registered in ``course.manifest``) and
what is read from a lab's notebook: the numbered notebooks in a folder (:func:`numbered_notebooks`), the parameters a
lab declares (its cell tagged ``parameters``), its exercises' answer cells and their reference answers in
``labs/solutions/``. Nothing here runs a lab.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from helpers.errors import WorkshopError
from helpers.job_spec import REPO


class LabError(WorkshopError, ValueError):
    """A lab (or the folder of labs) that is not shaped as the runner needs: the message says what to change."""


LABS_DIR = REPO / "labs"
SOLUTIONS_DIR = LABS_DIR / "solutions"
EXERCISE_LINE = re.compile(r"^# Your turn (\d\d\.\d+):")  # the first line of an exercise's answer cell
SOLUTION_LINE = re.compile(r"^# %% (\d\d\.\d+)\s*$", re.M)  # a section of labs/solutions/NN_name.py


Check = Callable[[dict], bool]  # a predicate on a run's figures
Claims = dict[str, Check | tuple[Check, ...]]  # a claim in the prose's words -> its check (a tuple: all must hold)


@dataclass(frozen=True)
class Margin:
    """A claim on measured figures, which move from run to run: the run's ``name`` figure (or ``of(figures)``, a
    figure derived from several) at least ``at_least`` or at most ``at_most``. The runs in ``course/margins.json``
    record how far each one moves at every budget; tests/test_lesson_margins.py fails a bound that sits closer to
    the runs than their own spread, and a plain claim that reads a timing."""

    name: str
    at_least: float | None = None
    at_most: float | None = None
    of: Callable[[dict], float] | None = field(default=None, compare=False)

    def value(self, figures: dict) -> float:
        return float(self.of(figures) if self.of else figures[self.name])

    def __call__(self, figures: dict) -> bool:
        v = self.value(figures)
        return (self.at_least is None or v >= self.at_least) and (self.at_most is None or v <= self.at_most)

    @property
    def bound(self) -> str:
        return " and ".join(
            f"{word} {limit:g}"
            for word, limit in (("at least", self.at_least), ("at most", self.at_most))
            if limit is not None
        )


def exact(check: Callable[[dict], bool]) -> Callable[[dict], bool]:
    """Mark a claim that reads measured figures only for bookkeeping that holds exactly in every run (parts adding up
    to their whole, the pair shown being the first), never to compare two measurements: a :class:`Margin` does that."""
    check.exact = True  # type: ignore[attr-defined]
    return check


def margins(claims: Mapping[str, Check | tuple[Check, ...]]) -> dict[str, Margin]:
    """The claims that are margins on measured figures, by claim."""
    found = {}
    for claim, check in claims.items():
        parts = check if isinstance(check, tuple) else (check,)
        found.update({f"{claim} [{m.name}]": m for m in parts if isinstance(m, Margin)})
    return found


@dataclass(frozen=True)
class RealTarget:
    """A lab's real target for an event: the type its ``parameter`` names, how many instances a job holds, for how
    long, and why that type; the facilitator guide's costs and quotas are computed from these."""

    lab: str  # "02"
    part: str  # what the job is
    instance_type: str
    count: int  # instances an attendee holds at once (lab 05: its three jobs, counted as if they ran together)
    minutes: int  # a planning figure: the job's expected training time at full size
    spot: bool = False
    launch: bool = True  # False: shown as a dry run unless the account has quota for it
    why: str = ""  # typed reasons only: a "cheapest" claim is computed (see why()), never typed here
    parameter: str = "real_target"  # the lab parameter that holds instance_type
    library: str = ""  # "smddp" or "smp": the library the job needs, which narrows "the same need"
    need: dict | None = None  # what the job needs, when its type is the catalogue's cheapest for it (gpus, bf16...)


@dataclass(frozen=True)
class Lab:
    """One lab: its notebook ``labs/<stem>.ipynb`` (which states its time), its reference answers
    ``labs/solutions/<stem>.py``, and its entry in ``course.manifest``: what its run shows (``claims``), what its real
    requests carry (``requests``), its real targets, its measured footprint and its sections in the short agendas."""

    stem: str  # "01_single_gpu"
    claims: Claims = field(default_factory=dict, compare=False)
    requests: Callable[[list[dict]], None] | None = field(default=None, compare=False)  # asserts on its dry run
    targets: tuple[RealTarget, ...] = field(default=(), compare=False)
    # the cores its lessons need (a core per rank...), and why: the lab runner gives it as many where the machine
    # has them; with fewer, the lab says which of its ``budget_claims`` it cannot show there (those are then not
    # checked). A lab whose lessons all hold on fewer (lab 07) has no budget claims: its cores only run it alone
    cores: int = field(default=1, compare=False)
    cores_why: str = field(default="", compare=False)
    budget_claims: Claims = field(default_factory=dict, compare=False)  # held where the lab had ``cores`` cores
    # what an exercise's check holds a measured figure to (the check records the figure when it measures): not a
    # lesson of the run, which is checked with the exercise unanswered, but a bound held against the runs' spread
    # all the same (course.margins), so a right answer is never graded wrong by noise
    exercise_margins: dict[str, Margin] = field(default_factory=dict, compare=False)
    peak_mb: int | None = field(default=None, compare=False)  # its smoke run's peak memory (course.manifest)
    processes: int | None = field(default=None, compare=False)  # training processes it runs at once
    slides: tuple[str, ...] = field(default=(), compare=False)  # sections shown on slides in a short session
    trim: tuple[str, ...] = field(default=(), compare=False)  # core sections a short session leaves out

    @property
    def number(self) -> str:
        return self.stem[:2]

    @property
    def notebook(self) -> Path:
        return LABS_DIR / f"{self.stem}.ipynb"

    @property
    def solutions(self) -> Path:
        return SOLUTIONS_DIR / f"{self.stem}.py"


def numbered_notebooks(labs_dir: Path = LABS_DIR, only: list[str] | None = None) -> list[Path]:
    """Numbered notebooks (``01_single_gpu.ipynb``...), in order; ``only`` filters by number or name."""
    found = sorted(p for p in labs_dir.glob("[0-9][0-9]_*.ipynb"))
    if only:
        found = [p for p in found if any(p.name.startswith(o) or p.stem == o for o in only)]
        if not found:
            raise LabError(
                f"no lab matches {only}; labs are: {', '.join(p.stem for p in numbered_notebooks(labs_dir))}"
            )
    if not found:
        raise LabError(f"no numbered notebooks (NN_name.ipynb) in {labs_dir}")
    return found


def parameters_source(notebook: Path) -> str:
    """The code of ``notebook``'s cell tagged ``parameters`` (papermill injects its values after it)."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if "parameters" in cell.get("metadata", {}).get("tags", []):
            return "".join(cell["source"])
    raise LabError(f"{notebook.name} has no cell tagged 'parameters'; papermill needs one to inject the target")


def declared_parameters(notebook: Path) -> set[str]:
    """Names assigned in the cell tagged ``parameters``: a lab only receives what it declares."""
    return {
        t.id
        for node in ast.parse(parameters_source(notebook)).body
        if isinstance(node, (ast.Assign, ast.AnnAssign))
        for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
        if isinstance(t, ast.Name)
    }


def exercise_cells(nb: dict) -> dict[str, dict]:
    """The answer cells of a notebook's exercises, by exercise id."""
    found = {}
    for cell in nb["cells"]:
        if cell["cell_type"] == "code" and "exercise" in cell.get("metadata", {}).get("tags", []):
            first = "".join(cell["source"]).split("\n", 1)[0]
            m = EXERCISE_LINE.match(first)
            if not m:
                raise LabError(f"an exercise cell must start with '# Your turn NN.N: ...', not {first!r}")
            found[m.group(1)] = cell
    return found


def read_solutions(path: Path) -> dict[str, str]:
    """The reference answers in ``labs/solutions/NN_name.py``, by exercise id (``# %% 02.1`` starts one)."""
    parts = SOLUTION_LINE.split(path.read_text(encoding="utf-8"))
    return {parts[i]: parts[i + 1].strip("\n") + "\n" for i in range(1, len(parts), 2)}


def with_solutions(notebook: Path, solutions_dir: Path = SOLUTIONS_DIR) -> dict:
    """The notebook with each exercise's answer cell filled in from its reference answer (first line kept)."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cells = exercise_cells(nb)
    path = solutions_dir / f"{notebook.stem}.py"
    answers = read_solutions(path) if path.is_file() else {}
    if set(cells) != set(answers):
        raise LabError(
            f"{notebook.name}: exercises {sorted(cells)} but reference answers {sorted(answers)} in {path}: "
            "every exercise needs exactly one answer"
        )
    for id, cell in cells.items():
        first = "".join(cell["source"]).split("\n", 1)[0]
        cell["source"] = f"{first}\n{answers[id]}"
    return nb
