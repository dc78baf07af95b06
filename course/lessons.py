"""What each lab's prose says its own run shows, held against the figures that run recorded.

``CLAIMS[lab stem]`` (each lab's ``claims`` in ``course.manifest``) maps a claim, in the prose's words, to a predicate
on the run's ``<lab>.figures.json``, a :class:`course.lab.Margin` on a measured figure, or a tuple of them. The lab
runner checks every local run against them; ``python -m course.lessons runs/labs`` checks a finished run again. A
lab's ``budget_claims`` hold where it had the cores its lessons need (its ``lesson_cores`` figure); on fewer, the lab
says which lesson it cannot show there (``not_shown``), listed as not shown.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from course.lab import Lab
from course.manifest import LABS

CLAIMS = {lab.stem: lab.claims for lab in LABS}  # by stem, as the runs name their labs
BY_STEM = {lab.stem: lab for lab in LABS}


def holds(check, figures: dict) -> bool:
    """Whether one claim's check (a predicate, a Margin, or a tuple of them, all of which must hold) holds."""
    if isinstance(check, tuple):
        return all(holds(part, figures) for part in check)
    return bool(check(figures))


def _unborne(claims: dict, figures: dict) -> list[str]:
    out = []
    for claim, check in claims.items():
        try:
            ok = holds(check, figures)
        except (KeyError, TypeError, ZeroDivisionError, ValueError) as err:
            ok, claim = False, f"{claim} (not recorded: {err!r})"
        if not ok:
            out.append(claim)
    return out


def shown_here(lab: Lab, figures: dict) -> bool:
    """Whether the run had the cores its budget lessons need (its ``lesson_cores`` figure); a lab without budget
    lessons shows them all anywhere."""
    return not lab.budget_claims or float(figures.get("lesson_cores", 0)) >= lab.cores


def wrong(lab: str, figures: dict) -> list[str]:
    """The claims of ``lab`` its figures do not bear out (a figure the run did not record counts as not borne out);
    on too few cores, a lab that did not say which lesson it could not show."""
    out = _unborne(CLAIMS.get(lab, {}), figures)
    one = BY_STEM.get(lab)
    if one is None or not one.budget_claims:
        return out
    if shown_here(one, figures):
        return out + _unborne(one.budget_claims, figures)
    if not figures.get("not_shown"):
        out.append(
            f"on {figures.get('lesson_cores', '?')} of the {one.cores} cores its lessons need ({one.cores_why}), the "
            "lab says which lesson it cannot show there (report.cannot_show)"
        )
    return out


def not_shown(lab: str, figures: dict) -> list[str]:
    """The budget lessons this run could not show, each with why, as the lab said it (empty where it had the cores)."""
    one = BY_STEM.get(lab)
    if one is None or shown_here(one, figures):
        return []
    return [
        f"{claim} (needs {one.cores} cores: {one.cores_why}; had {figures.get('lesson_cores', '?')} free)"
        for claim in one.budget_claims
    ]


def main(argv: list[str]) -> int:
    """Check every lab of a headless run's summary.json against its claims."""
    summary = json.loads((Path(argv[0]) / "summary.json").read_text(encoding="utf-8"))
    failed = 0
    for run in summary["labs"]:
        if not CLAIMS.get(run["lab"]):
            continue
        bad = wrong(run["lab"], run.get("figures", {}))
        failed += bool(bad)
        skipped = not_shown(run["lab"], run.get("figures", {}))
        print(
            f"{run['lab']}: "
            + ("every claim holds" if not bad else "WRONG: " + "; ".join(bad))
            + "".join(f"; not shown here: {claim}" for claim in skipped)
        )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
