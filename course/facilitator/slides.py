"""Slides from the labs: nbconvert's reveal.js slides of each executed notebook (``runs/labs/``), a slide per ``##``
heading, so the room sees its labs' own figures; for an agenda, its labs as it cuts them.

    python -m course.facilitator.slides                 # every lab, whole
    python -m course.facilitator.slides --agenda 90     # the 90-minute session's labs

Each lab becomes ``runs/slides/<lab>.slides.html``; reveal.js comes from its CDN unless ``--reveal`` names a copy.
"""

from __future__ import annotations

import argparse
import copy
import json
from pathlib import Path

from course import lab_time
from course.facilitator import agenda
from course.manifest import LABS, registered

EXECUTED = Path("runs/labs")
OUT = Path("runs/slides")


def slide_types(nb: dict, skip: tuple[str, ...] = (), core_only: bool = False) -> list[str]:
    """Each cell's reveal.js slide type: "slide" at a title or ``##`` heading, "subslide" at a ``###``, "-" (the
    same slide) otherwise; "skip" for the cells under a heading in ``skip`` and, with ``core_only``, for the deep
    dives."""
    types, heading, deep = [], "", False
    for cell in nb["cells"]:
        text = "".join(cell["source"]).lstrip()
        kind = "-"
        if cell["cell_type"] == "markdown":
            deep = deep or text.startswith(lab_time.DEEP_DIVES)
            if found := agenda.HEADING.match(text):
                heading = found.group(1).strip()
                kind = "slide" if text.startswith("## ") else "subslide"
            elif text.startswith("# "):
                kind = "slide"
        skipped = (core_only and deep) or any(heading.startswith(s) for s in skip)
        types.append("skip" if skipped else kind)
    return types


def with_slides(nb: dict, skip: tuple[str, ...] = (), core_only: bool = False) -> dict:
    """A copy of the notebook with each cell's ``slideshow`` metadata set (:func:`slide_types`)."""
    out = copy.deepcopy(nb)
    for cell, kind in zip(out["cells"], slide_types(nb, skip, core_only)):
        cell.setdefault("metadata", {})["slideshow"] = {"slide_type": kind}
    return out


def source_notebook(lab: str, executed: Path) -> tuple[dict, bool]:
    """The lab's executed notebook from ``executed`` (``make``'s output) if there is one, else the committed one
    (no outputs); and whether it was the executed one."""
    one = registered(lab)
    ran = executed / one.notebook.name
    path = ran if ran.is_file() else one.notebook
    return json.loads(path.read_text(encoding="utf-8")), ran.is_file()


def render(nb: dict, reveal: str | None = None) -> str:
    """The notebook as one reveal.js HTML page (nbconvert's slides exporter)."""
    import nbformat
    from nbconvert import SlidesExporter

    exporter = SlidesExporter()
    if reveal:
        exporter.reveal_url_prefix = reveal
    body, _ = exporter.from_notebook_node(nbformat.reads(json.dumps(nb), as_version=4))  # sources joined
    return body


def plan(agenda_name: str | None, labs: list[str] | None) -> list[tuple[str, tuple[str, ...], bool]]:
    """(lab, sections left out, core path only) for each lab to make slides of: an agenda's lab blocks, or the
    labs asked for (all by default), whole."""
    if agenda_name is None:
        return [(one.number, (), False) for one in LABS if not labs or one.number in labs]
    names = [n for n in agenda.agendas() if n.startswith(agenda_name)]
    if len(names) != 1:
        raise SystemExit(f"--agenda {agenda_name!r}: say one of {[n.split(' ')[0] for n in agenda.agendas()]}")
    blocks = agenda.agendas()[names[0]][1]
    return [(b.lab, b.skip, True) for b in blocks if b.lab and (not labs or b.lab in labs)]


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--agenda", help="an agenda's first word: 90, half or full (default: every lab, whole)")
    p.add_argument("--labs", nargs="*", help="lab numbers, e.g. 01 02 (default: all, or the agenda's)")
    p.add_argument("--executed", type=Path, default=EXECUTED, help="the executed notebooks (make's runs/labs)")
    p.add_argument("--out", type=Path, default=OUT)
    p.add_argument("--reveal", help="where reveal.js is read from (default: nbconvert's CDN address)")
    a = p.parse_args(argv)
    chosen = plan(a.agenda, a.labs)
    a.out.mkdir(parents=True, exist_ok=True)
    for lab, skip, core_only in chosen:
        nb, ran = source_notebook(lab, a.executed)
        path = a.out / f"{registered(lab).stem}.slides.html"
        path.write_text(render(with_slides(nb, skip, core_only), a.reveal), encoding="utf-8")
        kept = slide_types(nb, skip, core_only)
        print(
            f"{path}: {kept.count('slide')} slides, {kept.count('subslide')} sub-slides"
            + (f"; left out: {'; '.join(skip)}" if skip else "")
            + ("" if ran else f" (no executed copy in {a.executed}: without outputs; run `make` first)")
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
