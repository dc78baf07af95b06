"""A commit message's subject: at most 72 characters, in the imperative ("Stop the job before tagging it"), no
full stop; the figures and the reasons go in the body, after a blank line (docs/extending.md, "Commits").

pre-commit runs it on each commit once installed for the stage (``pre-commit install --hook-type commit-msg``);
``tests/test_house.py`` holds this round's history to it.
"""

from __future__ import annotations

import sys
from pathlib import Path

SUBJECT_MAX = 72
# a subject's first word, were it not imperative: "Moved", "Adds", "Fixing" ("Address", "Pass" end in s too: not here)
NOT_IMPERATIVE_ENDINGS = ("ed", "ing")


def problems(message: str) -> list[str]:
    """What is wrong with ``message`` as a commit message; [] if nothing."""
    lines = [line for line in message.splitlines() if not line.startswith("#")]
    subject = lines[0] if lines else ""
    found = []
    if not subject.strip():
        return ["the subject is empty"]
    if subject.startswith(("Merge ", "Revert ")):  # git's own subjects
        return []
    if len(subject) > SUBJECT_MAX:
        found.append(f"the subject is {len(subject)} characters: keep it to {SUBJECT_MAX}, the rest in the body")
    if subject.rstrip().endswith("."):
        found.append("the subject ends with a full stop")
    first = subject.split()[0]
    if not first[:1].isupper() or first.lower().endswith(NOT_IMPERATIVE_ENDINGS):
        found.append(f"the subject starts {first!r}: start with a capitalised verb in the imperative ('Add', 'Fix')")
    if len(lines) > 1 and lines[1].strip():
        found.append("the second line is not blank: a blank line separates the subject from the body")
    return found


def main(argv: list[str]) -> int:
    found = problems(Path(argv[0]).read_text(encoding="utf-8"))
    for p in found:
        print(f"commit message: {p}", file=sys.stderr)
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
