"""The house's rules, checked on every import the helpers make (those inside functions too):

- no import cycle between the helpers' modules, nor between its rooms: the folders of ``helpers/`` and the modules
  beside them (no two import each other, directly or around a loop);
- ``helpers`` (the learner's) never imports ``course`` (the course machinery beside it);
- ``helpers.local`` (this machine) never imports ``helpers.aws`` (a real account), and the stand-in for SageMaker
  (``sagemaker_standin``) imports neither;
- an import inside a function is for an optional third-party package only: a helpers module that needs another
  imports it at the top, where a cycle would show at once;
- every error class the helpers and the course define derives from ``helpers.errors.WorkshopError`` (the stand-in's
  from its own ``StandInError``: it imports nothing of the helpers);
- no module in ``helpers/`` or ``labs/src/`` over 500 lines, and no function in ``helpers/`` over 80: split by concern.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO

from helpers.errors import WorkshopError

HELPERS = REPO / "helpers"
COURSE = REPO / "course"
# the packages beside the helpers: the stand-in for SageMaker and the catalogue's generator (each one room)
BESIDE = ("sagemaker_standin", "catalog_generator")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {
    module_name(p): p
    for p in sorted(
        [*HELPERS.rglob("*.py"), *COURSE.rglob("*.py")] + [p for b in BESIDE for p in (REPO / b).rglob("*.py")]
    )
}
OURS = ("helpers", "course", *BESIDE)


def imports(path: Path) -> list[tuple[str, int, bool]]:
    """(helpers module imported, line, inside a function?) for every import of a helpers module in ``path``."""
    found = []
    tree = ast.parse(path.read_text(), str(path))
    functions = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    nested = {id(n) for f in functions for n in ast.walk(f) if n is not f}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (node.level or node.module.startswith(OURS)):
            base = node.module if not node.level else module_name(path).rsplit(".", node.level)[0] + "." + node.module
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names]
        elif isinstance(node, ast.Import):
            targets = [a.name for a in node.names if a.name.startswith(OURS)]
        else:
            continue
        for target in targets:
            if target in MODULES and target not in ("helpers", "course"):  # a face of its own (the stand-in) counts
                found.append((target, node.lineno, id(node) in nested))
    return found


GRAPH = {name: sorted({t for t, _, _ in imports(path)}) for name, path in MODULES.items()}


def cycles(graph: dict[str, list[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one module (Tarjan)."""
    index, low, stack, on_stack, out, counter = {}, {}, [], set(), [], [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, []):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1 or v in graph.get(v, []):
                out.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_a_cycle():
    assert cycles({"a": ["b"], "b": ["c"], "c": ["a"], "d": ["a"]}) == [["a", "b", "c"]]
    assert cycles({"a": ["b"], "b": []}) == []


def test_the_helpers_have_no_import_cycle():
    assert len(GRAPH) > 25 and sum(map(len, GRAPH.values())) > 40  # the walk found the modules and their imports
    assert cycles(GRAPH) == []


def room(module: str) -> str:
    """A module's room: its folder of ``helpers/`` (``helpers.aws``), or the module itself beside the folders; a
    package beside the helpers is one room (``sagemaker_standin``)."""
    parts = module.split(".")
    return parts[0] if parts[0] in BESIDE else ".".join(parts[:2])


def rooms(graph: dict[str, list[str]]) -> dict[str, list[str]]:
    """The import graph between rooms: a module's arrows become its room's, arrows inside one room dropped."""
    found: dict[str, set[str]] = {}
    for module, targets in graph.items():
        if module in OURS:
            continue
        arrows = found.setdefault(room(module), set())
        arrows |= {room(t) for t in targets if room(t) != room(module)}
    return {r: sorted(ts) for r, ts in found.items()}


def test_rooms_are_folders_and_the_modules_beside_them():
    assert room("helpers.aws.launch") == "helpers.aws" and room("helpers.jobs") == "helpers.jobs"
    assert rooms({"helpers.a.x": ["helpers.a.y", "helpers.b"], "helpers.b": ["helpers.a.x"]}) == {
        "helpers.a": ["helpers.b"],
        "helpers.b": ["helpers.a"],
    }


def test_no_two_rooms_of_the_helpers_import_each_other_even_around_a_loop():
    graph = rooms(GRAPH)
    assert {"helpers.aws", "helpers.local", "helpers.checks", "helpers.planning", "course.facilitator"} <= set(graph)
    assert cycles(graph) == [], "folders that import each other: move the file that closes the loop to its floor"


def crossings(below: str, above: tuple[str, ...]) -> list[str]:
    return [f"{m} imports {t}" for m, ts in GRAPH.items() if m.startswith(below) for t in ts if t.startswith(above)]


def test_the_learner_s_helpers_never_import_the_course_machinery():
    assert any(m.startswith("course.") for m in GRAPH) and not crossings("helpers", ("course",))


def test_the_local_runner_never_imports_the_aws_side():
    assert not crossings("helpers.local", ("helpers.aws",))


def test_the_stand_in_imports_neither_the_runner_nor_the_aws_side():
    """The stand-in plays SageMaker's part; the learner's side (runner, request builder) calls it, never the reverse."""
    assert any(m.startswith("sagemaker_standin.") for m in GRAPH)
    assert not crossings("sagemaker_standin", ("helpers.local", "helpers.aws", "helpers.jobs", "helpers.checks"))


def test_the_helpers_reach_the_stand_in_through_its_face_only():
    """``import sagemaker_standin`` (its ``__all__``), never one of its modules: one seam between the two."""
    users = {
        m: [t for t in ts if t.startswith("sagemaker_standin")] for m, ts in GRAPH.items() if m.startswith("helpers")
    }
    assert any(users.values()), "the helpers no longer use the stand-in? then this test has nothing to hold"
    behind = {m: ts for m, ts in users.items() if any(t != "sagemaker_standin" for t in ts)}
    assert not behind, f"helpers modules that import the stand-in's modules, not its face: {behind}"


def test_the_catalogue_generator_writes_what_the_helpers_read_and_is_never_imported_by_them():
    assert "helpers.data" in rooms(GRAPH)["catalog_generator"]
    assert not crossings("helpers", ("catalog_generator",))


def test_helpers_import_each_other_at_the_top():
    deferred = [
        f"{module_name(p)}:{line} imports {t} inside a function"
        for p in MODULES.values()
        for t, line, inside in imports(p)
        if inside
    ]
    assert not deferred


def defined_errors() -> dict[str, type]:
    """Every exception class our packages define, by ``module.Class`` (each module imported; the stand-in's
    container init is a script run as a job's first process, with no classes of its own)."""
    found = {}
    for name in sorted(MODULES):
        if name == "sagemaker_standin.container_init" or name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for _, c in inspect.getmembers(module, inspect.isclass):
            if issubclass(c, BaseException) and c.__module__ == name:
                found[f"{name}.{c.__qualname__}"] = c
    return found


ERRORS = defined_errors()


def test_the_error_finder_finds_the_errors_the_house_defines():
    """The parametrized test below holds each of these: the finder must find them, or it would hold nothing."""
    assert {"helpers.local.runner.JobFailed", "helpers.data.catalog_files.CatalogError"} <= set(ERRORS)
    assert "sagemaker_standin.s3_inputs.InputModeError" in ERRORS and len(ERRORS) > 30


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_every_error_the_helpers_define_is_a_workshop_error(name):
    """A learner's notebook catches ``WorkshopError`` for anything the helpers refuse on purpose; the stand-in,
    which knows nothing of the helpers, has a base of its own (the runner passes its refusals on as a helpers')."""
    from sagemaker_standin import StandInError

    base = StandInError if name.startswith("sagemaker_standin.") else WorkshopError
    assert issubclass(ERRORS[name], base), f"{name} derives from {ERRORS[name].__mro__[1:]}, not {base.__name__}"


MODULE_LINES, FUNCTION_LINES = 500, 80
LONG_MODULES_ALLOWED: set[str] = set()  # none: a module that must grow past the limit is split first


def functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """Every function in ``tree``, methods and nested functions too, by qualified name (``OfflineAWS._answer``)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            name = f"{prefix}{node.name}"
            if not isinstance(node, ast.ClassDef):
                yield name, node
            yield from functions(node, f"{name}.")
        else:
            yield from functions(node, prefix)


def test_the_function_finder_names_methods_and_nested_functions():
    tree = ast.parse("def f():\n    def g():\n        pass\nclass C:\n    async def m(self):\n        pass\n")
    assert [(name, f.end_lineno - f.lineno + 1) for name, f in functions(tree)] == [("f", 3), ("f.g", 2), ("C.m", 2)]


def test_no_module_is_over_500_lines():
    learners = [p for name, p in MODULES.items() if not name.startswith("course")]
    paths = sorted([*learners, *(REPO / "labs" / "src").rglob("*.py")])
    assert len(paths) > 90  # the walk found every tree
    too_long = [
        f"{path.relative_to(REPO).as_posix()}: {lines} lines"
        for path in paths
        if (lines := len(path.read_text().splitlines())) > MODULE_LINES
        and path.relative_to(REPO).as_posix() not in LONG_MODULES_ALLOWED
    ]
    assert not too_long, f"over {MODULE_LINES} lines, to split by concern: {too_long}"


def test_no_function_in_the_helpers_is_over_80_lines():
    too_long = [
        f"{path.relative_to(REPO).as_posix()}:{f.lineno} {name}: {lines} lines"
        for path in MODULES.values()
        for name, f in functions(ast.parse(path.read_text(), str(path)))
        if (lines := (f.end_lineno or f.lineno) - f.lineno + 1) > FUNCTION_LINES
    ]
    assert not too_long, f"over {FUNCTION_LINES} lines, to break into smaller functions: {too_long}"


def floors(graph: dict[str, list[str]]) -> dict[str, int]:
    """Each room's floor: 1 for one that imports no other, else one above the highest it imports."""
    found: dict[str, int] = {}

    def floor(r: str) -> int:
        if r not in found:
            found[r] = 1 + max((floor(t) for t in graph.get(r, [])), default=0)
        return found[r]

    for r in graph:
        floor(r)
    return found


def test_extending_md_draws_the_house_as_it_stands():
    """docs/extending.md's table of floors is the one the imports make."""
    text = (REPO / "docs" / "extending.md").read_text(encoding="utf-8")
    drawn = {
        (name if name.startswith(("course", *BESIDE)) else "helpers." + name): int(row.split("|")[1].split()[0])
        for row in text.splitlines()
        if row.startswith("| ") and row.split("|")[1].strip()[:1].isdigit()
        for name in (n.strip("`/").replace("/", ".") for n in re.findall(r"`[a-z_./]+`", row.split("|")[2]))
    }
    assert drawn == floors(rooms(GRAPH))


def test_a_target_is_resolved_once_and_everything_below_takes_a_target():
    """No signature of the helpers takes ``Target | str``: a lab's ``target`` is resolved where the job enters
    (``helpers.jobs``; the drill's ``run_drill``), and the resolved Target carries its catalogue entry down."""
    loose = [
        f"{module_name(path)}:{node.lineno} {node.arg}"
        for path in MODULES.values()
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.arg)
        and node.annotation is not None
        and {"Target", "str"} <= set(re.findall(r"\w+", ast.unparse(node.annotation)))
    ]
    assert not loose, f"arguments that take a Target or a name: {loose}"


def test_no_helper_resolves_a_target_name_again():
    """The set-up cell resolves the lab's ``target``; below it, a function takes that Target (``targets.given``
    refuses a name, saying how to resolve it) and none calls ``resolve`` again."""
    calls = [
        f"{name}:{node.lineno}"
        for name, path in MODULES.items()
        if name.startswith("helpers.") and name != "helpers.targets"
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.Call) and ast.unparse(node.func) in ("resolve", "targets.resolve")
    ]
    assert not calls, f"a target resolved again below the notebook: {calls}"
    from helpers import jobs
    from helpers.errors import TargetError

    with pytest.raises(TargetError, match=r"t = targets.resolve\('local_cpu'\)"):
        jobs.run_job(jobs.Job("x"), "local_cpu")


def test_a_dry_run_looks_its_instance_type_up_once(monkeypatch):
    from helpers import jobs
    from helpers.job_spec import DATA_DIR, Job, catalog_channels
    from helpers.planning import instances

    looked_up = []
    lookup = instances.lookup
    monkeypatch.setattr(instances, "lookup", lambda name: looked_up.append(name) or lookup(name))
    from helpers.targets import resolve

    t = resolve("ml.g5.2xlarge")  # the set-up cell's one look-up
    dry = jobs.on_sagemaker(Job("lab01-single", {}, catalog_channels(DATA_DIR / "catalog")), t)
    assert dry.request["ResourceConfig"]["InstanceType"] == "ml.g5.2xlarge" and dry.estimate is not None
    assert looked_up == ["ml.g5.2xlarge"]


def test_only_the_entry_point_dispatches_by_kind_of_target(small_catalog):
    """``run_job`` sends a job to the local runner, the SDK's Docker local mode or SageMaker; below it, the
    SageMaker path refuses any other kind instead of dispatching again."""
    from helpers.aws.dry_run import dry_run
    from helpers.aws.preflight import LaunchOptions
    from helpers.errors import TargetError
    from helpers.job_spec import Job, catalog_channels
    from helpers.targets import resolve

    job = Job("lab-x", {}, catalog_channels(small_catalog))
    for name in ("local_container", "local_cpu"):
        with pytest.raises(TargetError, match="runs on this machine: use helpers.jobs.run_job"):
            dry_run(job, resolve(name), LaunchOptions.of())
