"""What each lab's prose says its own run shows, held against the figures that run recorded.

``CLAIMS[lab stem]`` (each lab's ``claims`` in ``course.manifest``) maps a claim, in the prose's words, to a predicate
on the run's ``<lab>.figures.json`` (what ``report.record`` / ``report.says`` wrote). The lab runner checks every local
run against them and names each lesson not borne out; ``python -m course.lessons runs/labs`` checks a finished run's
folder again. Only claims that hold on any machine belong there: a ratio of two timings on a shared machine goes in a
sentence formatted from the run's own figures instead.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from course.manifest import LABS

CLAIMS = {lab.stem: lab.claims for lab in LABS}  # by stem, as the runs name their labs


def wrong(lab: str, figures: dict) -> list[str]:
    """The claims of ``lab`` its figures do not bear out (a figure the run did not record counts as not borne out)."""
    out = []
    for claim, holds in CLAIMS.get(lab, {}).items():
        try:
            ok = holds(figures)
        except (KeyError, TypeError, ZeroDivisionError) as err:
            ok, claim = False, f"{claim} (not recorded: {err!r})"
        if not ok:
            out.append(claim)
    return out


def main(argv: list[str]) -> int:
    """Check every lab of a headless run's summary.json against its claims."""
    summary = json.loads((Path(argv[0]) / "summary.json").read_text(encoding="utf-8"))
    failed = 0
    for run in summary["labs"]:
        if not CLAIMS.get(run["lab"]):
            continue
        bad = wrong(run["lab"], run.get("figures", {}))
        failed += bool(bad)
        print(f"{run['lab']}: " + ("every claim holds" if not bad else "WRONG: " + "; ".join(bad)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
