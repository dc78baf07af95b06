"""Small display helpers for the labs: result tables, key figures for the headless summary, sentences formatted from
those figures (:func:`says`), code excerpts.

Everything renders as HTML in Jupyter and as plain text in a terminal or a headless run's log.
"""

from __future__ import annotations

import html
import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from helpers.job_spec import SOURCE_DIR
from helpers.results import PairedRatio

FIGURES_ENV = "WORKSHOP_FIGURES_FILE"  # set by the headless lab runner: where a lab's key figures go


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        if value != value:  # NaN
            return "n/a"
        return f"{value:.3f}" if abs(value) < 1000 else f"{value:,.0f}"
    return "" if value is None else str(value)


class Table:
    """Rows of dicts shown as an HTML table in a notebook and as aligned text elsewhere."""

    def __init__(self, rows: Iterable[dict], columns: list[str] | None = None, title: str = ""):
        self.rows = list(rows)
        self.columns = columns or list(dict.fromkeys(k for r in self.rows for k in r))
        self.title = title

    def _cells(self) -> list[list[str]]:
        return [[_fmt(r.get(c)) for c in self.columns] for r in self.rows]

    def _repr_html_(self) -> str:
        head = "".join(f"<th>{html.escape(c)}</th>" for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{html.escape(v)}</td>" for v in row) + "</tr>" for row in self._cells())
        caption = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{caption}<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def __repr__(self) -> str:
        cells = self._cells()
        widths = [max(len(c), *(len(row[i]) for row in cells)) if cells else len(c) for i, c in enumerate(self.columns)]
        line = lambda vals: "  ".join(v.ljust(w) for v, w in zip(vals, widths))
        out = [self.title] if self.title else []
        out += [line(self.columns), line(["-" * w for w in widths])] + [line(r) for r in cells]
        return "\n".join(out)


class Unrounded(float):
    """A figure :func:`record` keeps at full precision (see :func:`unrounded`)."""


def unrounded(value: float) -> Unrounded:
    """Mark a figure to be recorded as it is, not rounded to 4 decimals: for a figure a claim compares with 0 or
    with a bound below 1e-4 (a gap of 4.77e-07 would otherwise be recorded as 0.0)."""
    return Unrounded(value)


def _kept(value: Any) -> Any:
    if isinstance(value, Unrounded):
        return float(value)
    return round(value, 4) if isinstance(value, float) else value


def record(**figures: Any) -> Table:
    """Key figures of a lab: shown as a table, and kept for the headless run's summary (floats rounded to 4
    decimals, except those marked with :func:`unrounded`)."""
    path = os.environ.get(FIGURES_ENV)
    if path and figures:
        p = Path(path)
        kept = json.loads(p.read_text()) if p.is_file() else {}
        kept.update({k: _kept(v) for k, v in figures.items()})
        p.write_text(json.dumps(kept, indent=1))
    return Table([{"figure": k, "value": v} for k, v in figures.items()], title="Key figures")


class Says:
    """A sentence the run wrote about its own figures: Markdown in Jupyter, plain text elsewhere."""

    def __init__(self, text: str):
        self.text = text

    def _repr_markdown_(self) -> str:
        return self.text

    def __repr__(self) -> str:
        return self.text


RESULT = "result"  # the figure that holds a lab's headline sentence: the line the headless runner prints for it


def says(template: str, *, headline: bool = False, **figures: Any) -> Says:
    """A claim about this run's figures, formatted from them and recorded with them, so no figure a run produces is
    typed into a lab's prose: ``report.says("{speedup:.2f}x as fast on {procs} processes", speedup=s, procs=2)``.

    The figures are recorded as :func:`record` does (the headless summary and the tests see the very values the
    sentence shows). ``headline=True`` marks the lab's result: the headless runner prints that sentence for the lab
    (``make``'s summary) instead of its first figures."""
    said = Says(template.format(**figures))
    record(**figures, **({RESULT: said.text} if headline else {}))
    return said


def cannot_show(lesson: str, template: str, **figures: Any) -> Says:
    """A lesson this machine cannot show, said as such: which lesson, why, and the figure it would be (``lesson`` and
    ``template`` formatted from ``figures`` as :func:`says` does). Recorded as ``not_shown``: the lab runner lists
    the lesson as not shown here instead of checking it."""
    lesson = lesson.format(**figures)
    record(not_shown=lesson)
    return says(f"Not shown here: {lesson}. {template}", **figures)


def paired(name: str, ratio: PairedRatio, what: str, shown: str, headline: bool = False) -> Says:
    """The sentence for an A/B run in turn (:func:`helpers.local.monitor.run_in_turn`): every pair's ratio, their
    range, which pair ``shown`` figures belong to, and whether the pairs agree; recorded as ``<name>_pairs``,
    ``<name>_low``, ``<name>_high``, ``<name>_first``, ``<name>_middle`` and ``pairs``."""
    verdict = (
        "Every pair agrees on which is faster."
        if ratio.settled
        else "The pairs disagree on which is faster: the machine's other work moved more than the change did. Run "
        "them again (or raise trials) when the machine is quieter."
    )
    record(**{f"{name}_middle": ratio.middle})
    return says(
        f"Run in turn ({{pairs}} pairs, the order swapped each time), {what} gave {{{name}_pairs}}: from "
        f"{{{name}_low:.2f}}x to {{{name}_high:.2f}}x. {shown} the first pair, {{{name}_first:.2f}}x. {verdict}",
        pairs=len(ratio.each),
        **{
            f"{name}_pairs": str(ratio),
            f"{name}_low": ratio.low,
            f"{name}_high": ratio.high,
            f"{name}_first": ratio.each[0],
        },
        headline=headline,
    )


class Code:
    """Source shown with syntax highlighting in Jupyter, plain elsewhere."""

    def __init__(self, text: str, title: str = ""):
        self.text, self.title = text, title

    def _repr_html_(self) -> str:
        title = f"<b>{html.escape(self.title)}</b>" if self.title else ""
        return f"{title}<pre style='font-size:85%;line-height:1.3'>{html.escape(self.text)}</pre>"

    def __repr__(self) -> str:
        return f"# {self.title}\n{self.text}" if self.title else self.text


def excerpt(file: str, start: str, end: str | None = None, context: int = 0) -> Code:
    """Lines of a training-code file from the first line matching ``start`` up to (not including) ``end``; with
    ``context``, that many lines after the first instead; with neither, the block the first line opens (a ``def`` or
    ``class`` through its last line, wherever it sits in its file).

    Labs show the training script's key lines through this, so what a learner reads is what runs.
    """
    path = Path(file) if Path(file).is_absolute() else SOURCE_DIR / file
    lines = path.read_text(encoding="utf-8").splitlines()
    first = next((i for i, l in enumerate(lines) if re.search(start, l)), None)
    if first is None:
        raise ValueError(f"{path.name}: no line matches {start!r}; the excerpt markers drifted from the code")
    last = next((i for i in range(first + 1, len(lines)) if end and re.search(end, lines[i])), None)
    if end and last is None:
        raise ValueError(f"{path.name}: no line after {start!r} matches {end!r}")
    if last is None:
        last = min(len(lines), first + 1 + context) if context else _block_end(lines, first)
    while last > first + 1 and not lines[last - 1].strip():
        last -= 1  # no blank lines at the end (nor in the title's line numbers)
    return Code("\n".join(lines[first:last]), title=f"{path.name}, lines {first + 1}-{last}")


def _block_end(lines: list[str], first: int) -> int:
    """The index after the block ``lines[first]`` opens: the next line as little indented that does not close a
    bracket (a long signature's ``) -> X:``) or continue the statement."""
    indent = len(lines[first]) - len(lines[first].lstrip())
    for i in range(first + 1, len(lines)):
        text = lines[i].strip()
        if text and len(lines[i]) - len(lines[i].lstrip()) <= indent and not text.startswith((")", "]", "}")):
            return i
    return len(lines)


def here_and_on_sagemaker(job, result, dry) -> Table:
    """The container contract at work, as a table: each channel's folder and the model folder in this machine's
    run (the local runner's ``/opt/ml`` for the job) beside the same paths in the SageMaker container, where each
    channel is filled from, and whether the request (``dry``: :func:`helpers.jobs.on_sagemaker`) carries the job's
    hyperparameters unchanged."""
    here = Path(result.run_dir) / "algo-1"
    instance = dry.request["ResourceConfig"]["InstanceType"]
    s3 = {c["ChannelName"]: c["DataSource"]["S3DataSource"]["S3Uri"] for c in dry.request["InputDataConfig"]}
    rows: list[tuple[str, object, str]] = []
    for name, source in job.channels.items():
        rows.append((f"SM_CHANNEL_{name.upper()}", here / "input/data" / name, f"/opt/ml/input/data/{name}"))
        rows.append(("  filled from", source, s3.get(name, "")))
    rows.append(("SM_MODEL_DIR", here / "model", "/opt/ml/model, uploaded as model.tar.gz"))
    sent = dry.request.get("HyperParameters", {})  # SageMaker's strings
    same = all(sent.get(k) in (str(v), str(v).lower()) for k, v in job.hyperparameters.items())
    rows.append(("hyperparameters", "the job's", "the same" if same else "different"))
    table = [{"": key, "here": str(local), instance: remote} for key, local, remote in rows]
    return Table(table, title="One job, here and on SageMaker")
