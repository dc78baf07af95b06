"""How long a lab takes in a room, estimated the same way for every lab, next to the time the lab states.

    python -m course.lab_time                        # from the committed notebooks
    python -m course.lab_time --executed runs/labs   # with a headless run's printed output and run times

Prose at 120 words a minute, code and output lines at 6, a minute per figure, plus the run time and the exercises'
minutes; the core path ends at ``## Deep dives (optional)``.
"""

from __future__ import annotations

import argparse
import html
import json
import re
import sys
from dataclasses import dataclass, fields
from pathlib import Path

from course import exercises
from course.lab import EXERCISE_LINE, numbered_notebooks

WORDS_PER_MINUTE = 120  # technical prose, read with care
LINES_PER_MINUTE = 6  # code and printed output: read, not skimmed
DISPLAY_MINUTES = 1.0  # a plot, a widget or a rich view without a text form
DEEP_DIVES = "## Deep dives (optional)"  # the markdown cell that starts a lab's optional part
STATED = re.compile(r"\*\*Time:\*\* core path (\d+) min, with the deep dives (\d+) min\.")
RICH = ("image/png", "image/svg+xml", "application/vnd.jupyter.widget-view+json")


@dataclass
class Part:
    words: int = 0
    code_lines: int = 0
    output_lines: int = 0
    displays: int = 0
    run_s: float = 0.0
    exercise_min: float = 0.0

    @property
    def minutes(self) -> float:
        return (
            self.words / WORDS_PER_MINUTE
            + (self.code_lines + self.output_lines) / LINES_PER_MINUTE
            + self.displays * DISPLAY_MINUTES
            + self.run_s / 60
            + self.exercise_min
        )

    def __add__(self, other: Part) -> Part:
        return Part(**{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(Part)})


@dataclass
class LabTime:
    lab: str
    stated: tuple[int, int] | None  # (core, full) minutes, as the lab says
    core: Part
    optional: Part

    @property
    def full(self) -> Part:
        return self.core + self.optional


def stated(notebook: Path) -> tuple[int, int]:
    """(core, full) minutes from the lab's ``**Time:** core path N min, with the deep dives M min.`` line."""
    nb = json.loads(Path(notebook).read_text(encoding="utf-8"))
    m = STATED.search("".join(nb["cells"][0]["source"]))
    if not m:
        raise ValueError(f"{Path(notebook).name}: its first cell does not say '**Time:** core path N min, ...'")
    return int(m.group(1)), int(m.group(2))


def _words(text: str) -> int:
    text = re.sub(r"<!--.*?-->", " ", text, flags=re.S)
    return len(re.findall(r"[\w$€£%.,:;/+#-]*\w[\w$€£%.,:;/+#'-]*", text))


def _html_lines(markup: str) -> int:
    """Lines a reader sees in rendered HTML: a collapsed ``<details>`` is its summary line, a table row is a line."""
    markup = re.sub(r"<details>.*?</details>", "\n(collapsed)\n", markup, flags=re.S | re.I)
    markup = re.sub(r"<(tr|br|p|li|div|h\d|pre|caption)\b[^>]*>", "\n", markup, flags=re.I)
    text = html.unescape(re.sub(r"<[^>]+>", "", markup))
    return sum(1 for line in text.splitlines() if line.strip())


def _output_lines(outputs: list[dict]) -> tuple[int, int]:
    """(text lines, rich displays) of one cell's outputs."""
    lines = displays = 0
    for out in outputs:
        if out["output_type"] == "stream":
            lines += len("".join(out["text"]).rstrip("\n").splitlines())
        elif out["output_type"] == "error":
            lines += len(out.get("traceback", []))
        else:
            data = out.get("data", {})
            if any(kind in data for kind in RICH):
                displays += 1
            elif "text/html" in data:  # what Jupyter shows: a table's rows, a collapsed request's one line
                lines += _html_lines("".join(data["text/html"]))
            elif "text/plain" in data:  # a value's text form
                lines += len("".join(data["text/plain"]).splitlines())
            elif data:
                displays += 1
    return lines, displays


def _exercise_minutes(cell: dict) -> float:
    m = EXERCISE_LINE.match("".join(cell["source"]).split("\n", 1)[0])
    return exercises.lookup(m.group(1)).minutes if m else 0.0


def estimate(notebook: Path, executed: Path | None = None) -> LabTime:
    """The estimate for a lab; ``executed`` (a headless run's copy) adds its printed output and run times."""
    nb = json.loads(Path(executed or notebook).read_text(encoding="utf-8"))
    core, optional = Part(), Part()
    part = core
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        tags = cell.get("metadata", {}).get("tags", [])
        if "injected-parameters" in tags:  # papermill's copy of the parameters: nobody reads it
            continue
        if cell["cell_type"] == "markdown":
            if text.lstrip().startswith(DEEP_DIVES):
                part = optional
            part.words += _words(text)
        elif cell["cell_type"] == "code":
            part.code_lines += sum(1 for line in text.splitlines() if line.strip())
            lines, displays = _output_lines(cell.get("outputs", []))
            part.output_lines += lines
            part.displays += displays
            part.run_s += float(cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)
            if "exercise" in tags:
                part.exercise_min += _exercise_minutes(cell)
    try:
        said = stated(notebook)
    except ValueError:
        said = None
    return LabTime(Path(notebook).stem, said, core, optional)


def within(stated_min: int, estimate_min: float) -> bool:
    """A stated time is honest when it is within 3 minutes or 15% of the estimate."""
    return abs(stated_min - estimate_min) <= max(3.0, 0.15 * estimate_min)


def table(times: list[LabTime]) -> str:
    """The arithmetic, as a Markdown table."""
    head = (
        "| lab | part | words | code lines | output lines | displays | run (s) | exercises (min) | estimate (min) "
        "| stated (min) |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    rows = []
    for t in times:
        for name, part, said in (
            ("core", t.core, t.stated and t.stated[0]),
            ("full", t.full, t.stated and t.stated[1]),
        ):
            rows.append(
                f"| {t.lab} | {name} | {part.words} | {part.code_lines} | {part.output_lines} | {part.displays} "
                f"| {part.run_s:.0f} | {part.exercise_min:g} | {part.minutes:.0f} | {said or '–'} |"
            )
    return "\n".join([head, *rows])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m course.lab_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("--executed", type=Path, help="a headless run's folder (runs/labs): adds output and run time")
    ap.add_argument("--labs", nargs="*", help="lab numbers or names (default: all)")
    a = ap.parse_args(argv)
    times = []
    for nb in numbered_notebooks(only=a.labs):
        executed = a.executed / nb.name if a.executed else None
        if executed is not None and not executed.is_file():
            ap.error(f"{executed} is missing: run `python -m course.run_labs --out {a.executed}` first")
        times.append(estimate(nb, executed))
    print(table(times))
    off = [t.lab for t in times if t.stated and a.executed and not within(t.stated[0], t.core.minutes)]
    if off:
        print(f"stated core time off the estimate: {', '.join(off)}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
