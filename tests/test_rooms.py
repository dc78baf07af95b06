"""The three rooms keep their arrows one way: the container's code imports only what the training image has (plus
what its requirements.txt installs), and the notebook-side helpers never import the container's code."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

from conftest import SRC

REPO = SRC.parent.parent
IN_THE_IMAGE = {"torch", "smdistributed"}  # the framework images' own (SMDDP where the image ships it)


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def _required() -> set[str]:
    lines = (SRC / "requirements.txt").read_text().splitlines()
    return {
        line.split(";")[0].split("<")[0].split(">")[0].split("=")[0].strip()
        for line in lines
        if line.strip() and not line.startswith("#")
    }


def test_the_container_code_imports_only_the_image_the_stdlib_its_siblings_and_its_requirements():
    siblings = {p.stem for p in SRC.glob("*.py")}
    allowed = IN_THE_IMAGE | _required() | siblings | set(sys.stdlib_module_names)
    for path in sorted(SRC.glob("*.py")):
        assert _imports(path) <= allowed, f"{path.name} imports {sorted(_imports(path) - allowed)}"


def test_the_scripts_share_small_modules_not_each_other():
    """train_lm.py takes the options, the rank set-up and the container plumbing it shares with train.py from their
    own modules, not from train.py (and with it the fast path, profiling and checkpointing); the options module is
    standard library only (with container.py's), so the notebook side runs it without torch."""
    lm = _imports(SRC / "train_lm.py")
    assert {"container", "options", "ranks"} <= lm
    siblings = {p.stem for p in SRC.glob("*.py")}
    reached, todo = set(), ["train_lm"]  # train_lm.py and the modules it is split into (one per technique)
    while todo:
        name = todo.pop()
        reached.add(name)
        todo += sorted((_imports(SRC / f"{name}.py") & siblings) - reached)
    assert not reached & {"train", "fastpath", "profiling", "checkpointing"}, sorted(reached)
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    assert _imports(SRC / "options.py") <= stdlib | {"container"}
    assert _imports(SRC / "container.py") <= stdlib | {"torch"}  # torch.distributed inside leave() only


def test_requirements_give_every_image_a_transformers_its_torch_can_run():
    from packaging.requirements import Requirement
    from packaging.version import Version

    text = (SRC / "requirements.txt").read_text()
    lines = [Requirement(line) for line in text.splitlines() if line.startswith("transformers")]
    # the Python 3.11 images (SMDDP: torch 2.3, SMP: torch 2.5) cannot run transformers 5 (torch >= 2.6); the
    # Python 3.12+ ones get it. (tests/test_requirements.py: an image's own transformers is kept.)
    for python, five in (("3.11", False), ("3.13", True)):
        (line,) = [r for r in lines if r.marker.evaluate({"python_version": python})]
        allowed = [v for v in ("4.44.2", "4.57.6", "5.0.0", "5.24.0") if line.specifier.contains(v)]
        assert allowed and all((Version(v).major >= 5) is five for v in allowed), (python, allowed)


def test_helpers_never_import_the_container_code():
    """The notebook side (the helpers, the stand-in beside them, the generator, the course) never imports the
    training code: it runs the scripts, as SageMaker does, or reads them as text."""
    container = {p.stem for p in SRC.glob("*.py")}
    packages = ("helpers", "sagemaker_standin", "catalog_generator", "course")
    helpers = sorted(p for package in packages for p in (REPO / package).rglob("*.py"))
    assert len(helpers) > 90 and any(p.parent.name == "local" for p in helpers)  # every folder, not the top only
    for path in helpers:
        assert not _imports(path) & container, f"{path.relative_to(REPO)} imports {sorted(_imports(path) & container)}"
