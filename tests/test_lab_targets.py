"""A lab's real target is the catalogue's answer for what its job needs, never a type typed in by habit: the cheapest
type with the GPUs, bf16 and library the job needs (``instances.cheapest``), checked here for each target whose
``need`` ``course.manifest`` states (labs 04 to 07)."""

from __future__ import annotations

import ast
import json

import pytest

from course import manifest
from helpers.planning import instances

# lab -> parameter -> what its job needs (each real target's ``need`` in course.manifest)
NEEDS: dict[str, dict[str, dict]] = {}
for one in manifest.LABS:
    for target in one.targets:
        if target.need:
            NEEDS.setdefault(one.stem, {})[target.parameter] = target.need


def _parameters(notebook) -> dict:
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    cell = next(c for c in nb["cells"] if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return {n.targets[0].id: ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)}


@pytest.mark.parametrize(
    "stem, parameter, need",
    [(stem, p, need) for stem, needs in NEEDS.items() for p, need in needs.items()],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_each_real_target_is_the_cheapest_type_for_its_job_s_need(stem, parameter, need):
    notebook = next(one.notebook for one in manifest.LABS if one.stem == stem)
    chosen = instances.lookup(_parameters(notebook)[parameter])
    assert chosen.gpus >= need["gpus"] and (chosen.bf16 or not need.get("bf16"))
    assert chosen.name == instances.cheapest(**need).name, (
        f"{stem}'s {parameter} is {chosen.name}; the catalogue's cheapest for its need is "
        f"{instances.cheapest(**need).name}"
    )


@pytest.mark.parametrize("stem", list(NEEDS))
def test_a_lab_prices_its_real_target_from_the_catalogue_and_types_no_price(stem):
    """The cost line is computed (the lab prints it from ``instances``); no dollar figure is typed into the prose."""
    notebook = next(one.notebook for one in manifest.LABS if one.stem == stem)
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    prose = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "markdown")
    code = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    assert "$" not in prose.replace("`$", "").replace("$`", "")
    assert "instances.lookup(real_target)" in code or "cost.estimate(real_target" in code
