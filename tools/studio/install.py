"""``make studio``: the labs on the Python that is first on PATH, SageMaker Studio's own image (SageMaker
Distribution 4.x) or an environment of yours that meets ``pyproject.toml``'s ranges, adding only what it lacks and
changing nothing it has.

    python3 tools/studio/install.py                  # what `make studio` runs
    python3 tools/studio/install.py --plan           # what it would add; installs nothing
    python3 tools/studio/install.py --report r.json  # also write what it did as JSON
    python3 tools/studio/install.py --self-check     # then check in place that the labs work (about a minute)

Refused before anything is installed, each with one message that says what to use instead: a Python older than 3.10, no
pip (or one older than 23), the SDK v2 of SageMaker Distribution 3.x, an installed package older than the workshop's
ranges (or outside them but for their upper bound), nowhere this user may write. Then pip, holding every installed
package at its version (constraints made from that Python's own ``pip freeze``), works out what is missing (``--dry-run
--report``): the packages of ``pyproject.toml`` that the Python lacks and what they need. A plan that would change an
installed package is refused. The missing wheels are downloaded first (a network or index failure changes nothing),
their unpacked size is checked against the free disk, then they are installed from the download with no network, and the
helpers package is linked to this checkout (``pip install --no-deps -e .``). Anything that fails after the first install
is undone. It prints what it added and how many MB; run again, it finds nothing to add in seconds.

Verified in place, not refused: an image newer than the tested line (SageMaker Distribution 5.x, or a 4.x minor past
the tested ones) or an installed package newer than a range's upper bound (a release the workshop has not run on
yet). make studio plans under the same rule (what is installed stays), names what is untested, and after installing
runs its self-check (``--self-check`` runs it anywhere, about a minute): the packages the labs import, imported;
lab 03 run headless on the local target: its short local training job (its lessons checked by the lab runner) and the
dry run of its SageMaker job (the requests built and validated offline). It says what passed, and exits non-zero if
anything did not.

Where: in SageMaker Studio into the user site, ``~/.local`` (``pip install --user``): a space keeps only its home
directory across a restart, so the image comes back as it was and the labs come back with it, nothing to reinstall.
Elsewhere into the environment itself (a venv or conda env you own), or into the user site where its site-packages is
read-only.

Standard library only (and pip): it runs before anything of the workshop is installed.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
import zipfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PROJECT = "sagemaker-distributed-workshop-helpers"
MIN_PYTHON = (3, 10)
MIN_PIP = (23, 0)  # --dry-run with --report
NEWER_IMAGE = "SageMaker Distribution 4.x or newer (4.5.0 ships SDK 3.12.0)"
STUDIO_METADATA = Path("/opt/ml/metadata/resource-metadata.json")  # as helpers.aws.settings reads it
STUDIO_APP_ENV = "SAGEMAKER_APP_TYPE_LOWERCASE"  # Studio sets it in every app (jupyterlab, codeeditor)
IMAGE_VERSION_ENV = "IMAGE_VERSION"  # SageMaker Distribution's images set it (4.5.0)
TESTED_MAJOR = 4  # the SageMaker Distribution line the workshop is tested on
# its minors whose packages are sourced and tested (the releases of sdk-combinations.json: 4.0 to 4.5)
SDK_TABLE = Path(__file__).resolve().parent / "sdk-combinations.json"
TESTED_MINORS = sorted(
    {".".join(r.split(".")[:2]) for r in json.loads(SDK_TABLE.read_text(encoding="utf-8"))["releases"]},
    key=lambda minor: tuple(int(x) for x in minor.split(".")),
)
SELF_CHECK_LAB = "03"  # its local job and its dry run take about half a minute each on 2 cores
# When AWS stops patching each tested minor line: aws/sagemaker-distribution's support_policy.md (main, aa8a7fb0,
# 2026-08-19; 4.5 is not in that table yet). Past it, make studio still works, and says so.
SUPPORTED_UNTIL = {
    "4.0": "2026-10-07",
    "4.1": "2026-10-29",
    "4.2": "2026-11-30",
    "4.3": "2027-01-10",
    "4.4": "2027-02-12",
}
# make studio adds small pieces only; torch is the image's (from PyPI it would be a CUDA build of several GB)
NEVER_ADDED = {"torch": "install the torch you want first (the README's `make` path shows how), then run make studio"}
# unpacked wheels plus their bytecode and pip's temporary copies, and room to spare
SPACE_FACTOR, SPACE_MARGIN = 1.5, 100 * 2**20
ASK_TIMEOUT_S, ASK_RETRIES = 4, 1  # the plan's tries of the index: a silent one is named within about 20 s
NETWORK_SIGNS = (
    "Max retries exceeded",
    "Failed to establish a new connection",
    "Temporary failure in name resolution",
    "Name or service not known",
    "Network is unreachable",
    "Connection refused",
    "ConnectTimeout",
    "Read timed out",
    "SSLError",
    "ProxyError",
    "HTTP error",
    "(from versions: none)",
)


class StudioError(Exception):
    """make studio refused or could not finish; the message says what to do. Nothing is left half-installed."""


@dataclass
class Target:
    """Where pip puts what make studio adds."""

    user: bool  # pip install --user (the user site) rather than into the environment itself
    path: str
    why: str


@dataclass
class Wanted:
    """A package the plan adds, and its size once downloaded."""

    name: str
    version: str
    url: str = ""
    download_bytes: int = 0
    unpacked_bytes: int = 0


@dataclass
class Outcome:
    """What a run did: the figures ``--report`` writes and the Studio twin reads."""

    python: str
    python_version: str
    image: str | None
    target: dict
    held: int  # installed packages held at their versions
    added: list[dict] = field(default_factory=list)  # name, version, mb
    total_mb: float = 0.0
    seconds: float = 0.0
    nothing_to_add: bool = False
    notes: list[str] = field(default_factory=list)
    untested: list[str] = field(default_factory=list)  # why the self-check runs: a newer image, newer packages
    self_check: dict = field(default_factory=dict)  # its steps, each passed or not, and how long it took


# ---- reading what is installed and what the workshop needs


def canonical(name: str) -> str:
    """A distribution's name as pip compares it (PEP 503): ``Sagemaker_Core`` -> ``sagemaker-core``."""
    return re.sub(r"[-_.]+", "-", name).lower()


def installed_versions() -> dict[str, str]:
    """``{name: version}`` of every distribution this Python sees, first on ``sys.path`` first (as imports do)."""
    from importlib import metadata

    found: dict[str, str] = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonical(name), dist.version)
    return found


def parse_freeze(text: str, versions: dict[str, str]) -> dict[str, str]:
    """``{name: version}`` from ``pip freeze`` output. A line pip writes as a direct reference carries no version:
    conda's ``name @ file:///...`` (a Studio image is full of them), ``-e`` editables. Those get the version the
    Python's own metadata (``versions``) knows, or are dropped."""
    found: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        comment = re.match(r"^#.*\((?P<name>[A-Za-z0-9][\w.-]*)==(?P<version>[^)\s]+)\)", line)
        pinned = re.match(r"^([A-Za-z0-9][\w.-]*)\s*(?:\[[^\]]*\])?\s*(===|==|@)\s*(\S.*)$", line)
        if comment:  # "# Editable install with no version control (name==1.0)", above its "-e /path"
            found[canonical(comment["name"])] = comment["version"]
        elif line.startswith(("-e ", "--editable")):
            egg = re.search(r"#egg=([A-Za-z0-9][\w.-]*)", line)
            if egg and canonical(egg[1]) in versions:
                found[canonical(egg[1])] = versions[canonical(egg[1])]
        elif pinned:
            name, op, rest = canonical(pinned[1]), pinned[2], pinned[3].split(";")[0].strip()
            if op != "@":
                found[name] = rest
            elif name in versions:
                found[name] = versions[name]
    return found


def constraints(installed: dict[str, str], skip: tuple[str, ...] = (PROJECT,)) -> str:
    """pip constraints holding each installed package at its version (the helpers themselves excepted: they are
    installed from this checkout). A version PEP 440 cannot express is left out rather than break pip."""
    lines = []
    for name, version in sorted(installed.items()):
        if name not in skip and _is_version(version):
            lines.append(f"{name}=={version}")
    return "\n".join(lines) + "\n"


def project_requirements(pyproject: Path = REPO / "pyproject.toml") -> list[str]:
    """The helpers' dependencies, as ``pyproject.toml`` declares them."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: pip carries a TOML reader
        from pip._vendor import tomli as tomllib
    return list(tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]["dependencies"])


def _packaging():
    """``packaging``'s Requirement and Version: the installed one, else the copy inside pip."""
    try:
        from packaging.requirements import Requirement
        from packaging.version import InvalidVersion, Version
    except ImportError:
        from pip._vendor.packaging.requirements import Requirement
        from pip._vendor.packaging.version import InvalidVersion, Version
    return Requirement, Version, InvalidVersion


def _is_version(text: str) -> bool:
    _, version, invalid = _packaging()
    try:
        version(text)
    except invalid:
        return False
    return True


def major(version: str) -> int:
    m = re.match(r"\s*(\d+)", version)
    return int(m[1]) if m else 0


# ---- refusals before anything is installed


def check_python(version_info: tuple[int, ...] = tuple(sys.version_info[:3])) -> None:
    if tuple(version_info[:2]) < MIN_PYTHON:
        have = ".".join(map(str, version_info[:3]))
        raise StudioError(
            f"Python {have} is older than the labs need ({'.'.join(map(str, MIN_PYTHON))} or newer). In SageMaker "
            f"Studio, choose {NEWER_IMAGE} as the space's image (its Python is 3.12); on a laptop, use the conda "
            f"environment (environment.yml) or `make`, which makes its own .venv."
        )


def check_pip(version: str | None) -> None:
    if version is None:
        raise StudioError(
            f"{sys.executable} has no pip, so it is not an environment make studio can add to. In SageMaker Studio "
            f"run it in a terminal of the JupyterLab space, whose python3 is the image's; elsewhere use an "
            f"environment with pip (python3 -m venv, conda), or `make`."
        )
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    if parts < MIN_PIP:
        raise StudioError(
            f"pip {version} is too old to plan an install without making it (pip 23 or newer has --dry-run "
            f"--report). In SageMaker Studio choose {NEWER_IMAGE}; elsewhere upgrade pip in your environment "
            f"(python3 -m pip install -U pip) and run make studio again."
        )


def check_sdk(installed: dict[str, str], image: str | None) -> None:
    """SDK v2 (SageMaker Distribution 3.x and older) is refused with the image to use instead."""
    have = installed.get("sagemaker")
    if have and major(have) < 3:
        where = f"This space's image, SageMaker Distribution {image}," if image else f"{sys.executable}"
        raise StudioError(
            f"{where} has the SageMaker Python SDK {have} (v2); the labs are built on SDK v3 (ModelTrainer), and "
            f"make studio never replaces a package the image has. Choose {NEWER_IMAGE} as the space's image "
            f"(JupyterLab space settings, Image), then run make studio again. On a laptop, `make` builds its own "
            f".venv with SDK v3."
        )


def untested_image(image: str | None) -> str:
    """A note for an image newer than the tested line (5.x, or a 4.x minor past the tested ones), else ''. Such an
    image is not refused: its packages are not sourced here, so make studio checks in place that the labs work."""
    found = re.match(r"(\d+)\.(\d+)", image or "")  # read without `packaging`, which a bare Python lacks
    if not found:
        return ""
    newest = tuple(int(x) for x in TESTED_MINORS[-1].split("."))
    if (int(found[1]), int(found[2])) <= newest:
        return ""
    return (
        f"SageMaker Distribution {image} is newer than the images the workshop is tested on ({TESTED_MINORS[0]} to "
        f"{TESTED_MINORS[-1]}; its package list is not known here). make studio adds what is missing under the same "
        f"rule (nothing the image has changes), then checks in place that the labs work (its self-check, about a "
        f"minute). If the self-check fails, choose SageMaker Distribution {TESTED_MINORS[-1]} for the space "
        f"(JupyterLab space settings, Image)."
    )


def support_note(image: str | None, today: str | None = None) -> str:
    """A line for an image whose minor line AWS no longer patches (or stops patching within 30 days), else ''."""
    found = re.match(r"(\d+\.\d+)\.", image or "")
    ends = SUPPORTED_UNTIL.get(found.group(1)) if found else None
    if not ends:
        return ""
    import datetime

    day = datetime.date.fromisoformat(today) if today else datetime.date.today()
    left = (datetime.date.fromisoformat(ends) - day).days
    if left > 30:
        return ""
    when = f"ended on {ends}" if left < 0 else f"ends on {ends}, in {left} day(s)"
    return (
        f"SageMaker Distribution {found.group(1)}'s support {when} (aws/sagemaker-distribution's support_policy.md): "
        f"the labs run on it, but it gets no more security patches; choose 4.4 or 4.5 for the space "
        f"(JupyterLab space settings, Image)."
    )


def out_of_range(requirements: list[str], installed: dict[str, str], newer: bool = False) -> list[tuple[str, str, str]]:
    """(name, requirement, installed version) for each installed package the workshop's ranges do not admit: those
    newer than a range's upper bound alone when ``newer`` (untested: checked in place), else all the others."""
    requirement, _, _ = _packaging()
    found = []
    for text in requirements:
        req = requirement(text)
        if req.marker is not None and not req.marker.evaluate():
            continue
        have = installed.get(canonical(req.name))
        if have and not req.specifier.contains(have, prereleases=True):
            missed = [s for s in req.specifier if not s.contains(have, prereleases=True)]
            if all(s.operator in ("<", "<=") for s in missed) == newer:
                found.append((canonical(req.name), text, have))
    return found


def newer_note(newer: list[tuple[str, str, str]]) -> str:
    """A note naming the installed packages newer than the tested ranges, else ''."""
    if not newer:
        return ""
    listed = "; ".join(f"{name} {have} (tested: {r})" for name, r, have in newer)
    return (
        f"newer than the releases the workshop is tested on: {listed}. make studio keeps them (it never changes a "
        f"package that is installed) and checks in place that the labs work on them (its self-check). If a lab "
        f"fails there, use an environment with the tested releases: in SageMaker Studio SageMaker Distribution "
        f"{TESTED_MINORS[-1]}, elsewhere `make` (its own .venv)."
    )


def relaxed(requirements: list[str], names: set[str]) -> list[str]:
    """The requirements, those of ``names`` without their versions: an installed package newer than the tested range
    is planned around as it is (the constraints hold it), not refused."""
    requirement, _, _ = _packaging()
    out = []
    for text in requirements:
        req = requirement(text)
        if canonical(req.name) in names:
            extras = f"[{','.join(sorted(req.extras))}]" if req.extras else ""
            text = f"{req.name}{extras}" + (f"; {req.marker}" if req.marker is not None else "")
        out.append(text)
    return out


def check_ranges(requirements: list[str], installed: dict[str, str], image: str | None) -> None:
    """An installed package older than the workshop's ranges is refused (the helpers cannot work with it and make
    studio never replaces it); one newer than a range's upper bound is not (:func:`newer_note`)."""
    misses = out_of_range(requirements, installed)
    if misses:
        listed = "; ".join(f"{name} is {have}, the labs need {r}" for name, r, have in misses)
        instead = (
            f"choose {NEWER_IMAGE} as the space's image"
            if image
            else "use an environment that meets pyproject.toml's ranges, or `make` (its own .venv)"
        )
        raise StudioError(
            f"this Python's packages are outside the workshop's ranges ({listed}): the helpers cannot work with "
            f"them, and make studio never changes a package that is installed. What to do: {instead}."
        )


def in_studio(environ: dict[str, str] = os.environ, metadata_file: Path = STUDIO_METADATA) -> bool:
    """SageMaker Studio: its resource metadata, or the app type it sets in every app's environment."""
    return metadata_file.is_file() or bool(environ.get(STUDIO_APP_ENV))


def choose_target(studio: bool, site_writable: bool, user_site_enabled: bool, site_dir: str, user_dir: str) -> Target:
    """Where pip puts what is added: the user site in Studio (the home directory is all a space keeps across a
    restart), else the environment itself, else the user site (read-only site-packages), else nowhere."""
    if studio:
        if not user_site_enabled:
            raise StudioError(
                "this is SageMaker Studio, but this Python's user site is off (a virtual environment, or "
                "PYTHONNOUSERSITE set), so nothing added would survive a restart: run make studio with the image's "
                "own python3 (deactivate the environment first)."
            )
        return Target(True, user_dir, "SageMaker Studio keeps only the home directory across a space restart")
    if site_writable:
        return Target(False, site_dir, "an environment you can write: what make studio adds goes into it")
    if user_site_enabled:
        return Target(True, user_dir, "this Python's site-packages is read-only")
    raise StudioError(
        f"{site_dir} is read-only and this Python has no user site, so there is nowhere to add the workshop's "
        f"packages. Make an environment that sees this Python's packages and run make studio in it: "
        f"python3 -m venv --system-site-packages ~/workshop-venv && . ~/workshop-venv/bin/activate && make studio"
    )


def this_target() -> Target:
    """:func:`choose_target` for the running Python."""
    site_dir, scripts = sysconfig.get_path("purelib"), sysconfig.get_path("scripts")
    writable = all(os.access(p, os.W_OK) for p in (site_dir, scripts) if os.path.exists(p))
    return choose_target(in_studio(), writable, bool(site.ENABLE_USER_SITE), site_dir, site.getusersitepackages())


# ---- pip


def pip(*args: str) -> subprocess.CompletedProcess:
    """pip of this Python, its output kept for the message if it fails. It runs away from this checkout: ``python -m``
    puts the current folder first on ``sys.path``, where the helpers' build metadata (``*.egg-info``) would pass for
    an installed distribution."""
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input", *args]
    return subprocess.run(command, capture_output=True, text=True, cwd=tempfile.gettempdir())


def pip_version() -> str | None:
    from importlib import metadata

    try:
        return metadata.version("pip")
    except metadata.PackageNotFoundError:
        return None


def failure(doing: str, done: subprocess.CompletedProcess, changed: bool = False) -> StudioError:
    """pip's failure as a message that says what to do."""
    output = (done.stdout or "") + (done.stderr or "")
    lines = [line.strip() for line in output.splitlines() if line.strip() and "is ignored: it is neither" not in line]
    errors = [line for line in lines if line.startswith("ERROR")] or lines[-3:]
    said = " / ".join(errors[:4])[:900]
    state = "What was added has been removed; " if changed else "Nothing was installed; "
    state += "this Python is as it was."
    if "No space left on device" in output or "Errno 28" in output:
        return StudioError(f"the disk filled up while {doing} ({said}). {state} Free some space and run it again.")
    if "ResolutionImpossible" in output or "conflicting dependencies" in output:
        return StudioError(
            f"pip finds no versions that fit both the workshop's ranges and this Python's packages while {doing} "
            f"({said}). {state} Choose {NEWER_IMAGE}, or an environment that meets pyproject.toml's ranges."
        )
    if any(sign in output for sign in NETWORK_SIGNS):
        return StudioError(
            f"pip could not get the packages from the package index ({index_urls()}) while {doing} ({said}). "
            f"{state} Check the network: a Studio space without internet access needs a route to PyPI or a mirror "
            f"(pip config set global.index-url <your mirror>), then run make studio again."
        )
    return StudioError(f"pip failed while {doing} ({said}). {state}")


def index_urls() -> str:
    """The indexes pip asks, as its settings give them (``pip config list``: the environment's PIP_INDEX_URL, the
    user's and the machine's files), where each is set; PyPI when none is."""
    done = pip("config", "list")
    found = re.findall(r"^(\S*?)\.((?:extra-)?index-url)='(.*)'$", done.stdout or "", re.M)
    said = [
        f"{url} ({'PIP_' + key.upper().replace('-', '_') if where == ':env:' else where + '.' + key})"
        for where, key, urls in found
        for url in urls.split()
    ]
    return ", ".join(said) or "https://pypi.org/simple, pip's default"


def plan(requirements: list[str], constraint_file: Path, target: Target) -> list[Wanted]:
    """What pip would install for ``requirements``, holding the constraints: ``pip install --dry-run --report``."""
    folder = constraint_file.parent
    report, wanted = folder / "plan.json", folder / "requirements.txt"
    wanted.write_text("\n".join(requirements) + "\n", encoding="utf-8")
    args = ["install", "--dry-run", "--quiet", "--report", str(report), "-c", str(constraint_file), "-r", str(wanted)]
    print("asking the package index what is missing (one that does not answer is named within 20 s) ...", flush=True)
    done = pip(*args, *(["--user"] if target.user else []), *short_asks())
    if done.returncode:
        raise failure("working out what is missing", done)
    items = json.loads(report.read_text(encoding="utf-8")).get("install", [])
    return [_wanted(i) for i in items]


def short_asks(environ: dict[str, str] = os.environ) -> list[str]:
    """pip's timeout and retries for the plan, the first request to the index, unless the user set their own: pip's
    own (15 s, 5 retries) leave a learner looking at nothing for about 100 s when the index drops packets."""
    timeout = [] if "PIP_TIMEOUT" in environ else ["--timeout", str(ASK_TIMEOUT_S)]
    return timeout + ([] if "PIP_RETRIES" in environ else ["--retries", str(ASK_RETRIES)])


def _wanted(item: dict) -> Wanted:
    meta = item["metadata"]
    return Wanted(canonical(meta["name"]), meta["version"], item.get("download_info", {}).get("url", ""))


def refuse_changes(wanted: list[Wanted], installed: dict[str, str]) -> None:
    """A plan may only add: a package this Python has, in any version, is never reinstalled or replaced."""
    changes = [f"{w.name} {installed[w.name]} -> {w.version}" for w in wanted if w.name in installed]
    if changes:
        raise StudioError(
            f"pip's plan would change packages this Python has ({', '.join(changes)}); make studio never does. "
            f"Nothing was installed. Choose {NEWER_IMAGE}, or an environment that meets pyproject.toml's ranges."
        )
    for w in wanted:
        if w.name in NEVER_ADDED:
            raise StudioError(f"{w.name} is not installed here: {NEVER_ADDED[w.name]}. Nothing was installed.")


def download(wanted: list[Wanted], folder: Path) -> None:
    """Fetch the planned files (``pip download``), filling in each one's size; nothing is installed yet."""
    if not wanted:
        return
    done = pip("download", "--no-deps", "--quiet", "-d", str(folder), *(f"{w.name}=={w.version}" for w in wanted))
    if done.returncode:
        raise failure("downloading", done)
    files = {_file_key(p.name): p for p in folder.iterdir() if p.is_file()}
    for w in wanted:
        path = files.get((w.name, w.version))
        if path is None:
            raise StudioError(f"pip download gave no file for {w.name} {w.version}. Nothing was installed.")
        w.download_bytes = path.stat().st_size
        w.unpacked_bytes = _unpacked(path)


def _file_key(filename: str) -> tuple[str, str]:
    """(name, version) of a wheel (``name-version-...whl``) or an sdist (``name-version.tar.gz``)."""
    if filename.endswith(".whl"):
        name, version = filename.split("-")[:2]
    else:
        name, _, version = re.sub(r"\.(tar\.gz|zip|tar\.bz2)$", "", filename).rpartition("-")
    return canonical(name), version


def _unpacked(path: Path) -> int:
    if path.suffix == ".whl":
        with zipfile.ZipFile(path) as z:
            return sum(i.file_size for i in z.infolist())
    return path.stat().st_size * 4  # an sdist: a rough guess at what it builds


def check_space(wanted: list[Wanted], target: Target) -> None:
    need = int(sum(w.unpacked_bytes for w in wanted) * SPACE_FACTOR) + SPACE_MARGIN
    where = Path(target.path)
    while not where.exists():  # the user site may not exist yet: its nearest existing folder holds the disk
        where = where.parent
    free = shutil.disk_usage(where).free
    if free < need:
        raise StudioError(
            f"{_mb(free)} MB free at {where}, and the packages to add need about {_mb(need)} MB: free some space "
            f"(in Studio, the space's storage is set by its administrator: 5 GB unless raised), then run make studio "
            f"again. Nothing was installed."
        )


def install(wanted: list[Wanted], folder: Path, target: Target) -> None:
    """The downloaded files, from the download alone (no index, no dependencies: the plan already has them)."""
    if not wanted:
        return
    specs = [f"{w.name}=={w.version}" for w in wanted]
    args = ["install", "--no-deps", "--no-index", "--find-links", str(folder), "--no-warn-script-location"]
    done = pip(*args, *(["--user"] if target.user else []), *specs)
    if done.returncode:
        raise failure("installing", done, changed=True)


def linked_elsewhere() -> str:
    """The other checkout the helpers are installed editable from, if they are ('' when none, or this one)."""
    from importlib import metadata

    try:
        direct = json.loads(metadata.distribution(PROJECT).read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return ""
    url = direct.get("url", "")
    if not direct.get("dir_info", {}).get("editable") or not url.startswith("file://") or url == REPO.as_uri():
        return ""
    return url.removeprefix("file://")


def project_linked() -> bool:
    """Whether the helpers are installed editable from this very checkout."""
    from importlib import metadata

    try:
        direct = json.loads(metadata.distribution(PROJECT).read_text("direct_url.json") or "{}")
    except (metadata.PackageNotFoundError, ValueError):
        return False
    return direct.get("url") == REPO.as_uri() and bool(direct.get("dir_info", {}).get("editable"))


def link_project(target: Target) -> None:
    """``pip install --no-deps -e .``: the helpers from this checkout, so a ``git pull`` needs no reinstall. Built
    with the Python's own setuptools where it is recent enough (no download), else in pip's isolated build."""
    args = ["install", "--no-deps", "--quiet", "--no-warn-script-location", *(["--user"] if target.user else [])]
    if _setuptools_builds_editables():
        args.append("--no-build-isolation")
    done = pip(*args, "-e", str(REPO))
    if done.returncode:
        raise failure("linking the helpers to this checkout", done, changed=True)


def _setuptools_builds_editables() -> bool:
    from importlib import metadata

    try:
        version = metadata.version("setuptools")
    except metadata.PackageNotFoundError:
        return False
    parts = tuple(int(p) for p in re.findall(r"\d+", version)[:2])
    return parts >= (70, 1)  # PEP 660 editables without the separate `wheel` package


def rollback(names: list[str], leftovers: set[Path] = frozenset(), relink: str = "") -> list[str]:
    """Remove what this run added (never anything that was there before): its packages, then any file of their
    wheels that an interrupted install wrote but never recorded (a half-written ``bin/weed``). A second Ctrl-C
    does not stop it halfway. Returns what it could not remove (empty when all is gone)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        if names:
            pip("uninstall", "--yes", *names)
        for path in sorted(leftovers):
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
        if relink:  # the helpers were linked to another checkout before this run: that link comes back
            pip("install", "--no-deps", "--quiet", "--no-warn-script-location", "-e", relink)
    finally:
        signal.signal(signal.SIGINT, previous)
    after = inventory()
    left = [n for n in names if n in after and not (relink and n == PROJECT)]  # relinked: the other clone's
    return left + [str(p) for p in sorted(leftovers) if p.is_file()]


def wheel_files(wheels: Path, target: Target) -> set[Path]:
    """Every file the downloaded wheels would write, where pip would write it for ``target``."""
    scheme = sysconfig.get_paths(f"{os.name}_user") if target.user else sysconfig.get_paths()
    found = set()
    for wheel in wheels.glob("*.whl"):
        with zipfile.ZipFile(wheel) as archive:
            for name in archive.namelist():
                top, _, rest = name.partition("/")
                if top.endswith(".data"):  # <name>.data/scripts/weed -> the scheme's scripts folder
                    kind, _, inner = rest.partition("/")
                    if kind in scheme and inner:
                        found.add(Path(scheme[kind]) / inner)
                elif not name.endswith("/"):
                    found.add(Path(target.path) / name)
    return found


@contextlib.contextmanager
def one_at_a_time(target: Target):
    """One make studio at a time per Python: two would plan against the same packages and undo each other's work.
    A second is refused, before it plans anything, with what to do."""
    key = hashlib.sha256(str(Path(target.path).resolve()).encode()).hexdigest()[:12]  # one lock per place it adds to
    with open(Path(tempfile.gettempdir()) / f"workshop-make-studio-{key}.lock", "w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StudioError(
                f"another make studio is adding to {target.path} (this Python) right now: wait for it to finish, "
                f"then run make studio again; it will find what the other one added."
            ) from None
        yield


# ---- after the install: nothing changed, and what was added


INVENTORY = r"""
import json, sys
from importlib import metadata
wanted = set(sys.argv[1:])
out = {}
for dist in metadata.distributions():
    name = dist.metadata["Name"]
    if not name:
        continue
    key = "-".join(name.replace("_", "-").replace(".", "-").lower().split("-"))
    if key in out:
        continue
    size = 0
    if key in wanted:
        for f in dist.files or []:
            try:
                size += dist.locate_file(f).stat().st_size
            except OSError:
                pass
    out[key] = {"version": dist.version, "bytes": size}
print(json.dumps(out))
"""


def inventory(sizes_of: list[str] = ()) -> dict[str, dict]:
    """What a fresh process of this Python sees now (the user site may be new since this one started): version of
    every distribution, and the installed bytes of those named."""
    command = [sys.executable, "-c", INVENTORY, *sizes_of]
    done = subprocess.run(command, capture_output=True, text=True, cwd=tempfile.gettempdir())  # as pip(): not here
    if done.returncode:
        raise StudioError(f"could not list this Python's packages after installing: {done.stderr.strip()[-400:]}")
    return json.loads(done.stdout)


def changed(before: dict[str, str], after: dict[str, dict]) -> list[str]:
    """Installed packages whose version is not what it was (or that are gone)."""
    return [
        f"{name} {version} -> {after.get(name, {}).get('version', 'gone')}"
        for name, version in sorted(before.items())
        if after.get(name, {}).get("version") != version
    ]


def others_changed(moved: list[str], names: list[str]) -> list[str]:
    """A note on installed packages that changed while this run installed: not its doing (it installs only its own
    ``names``, with --no-deps, and refuses a plan that would replace anything), so it neither undoes them nor its
    own install, and says who else may have. The image's start-up removes some packages at each start."""
    if not moved:
        return []
    return [
        f"while make studio ran, something else changed {', '.join(moved)}; make studio installed only "
        f"{', '.join(names)} and changed none of these (a space still starting removes some of its image's packages, "
        f"e.g. jupyter-ai; another terminal's pip would too). What make studio added stays installed."
    ]


CHECK = r"""
import json, helpers.jobs
from sagemaker_standin import objectstore
try:
    weed = str(objectstore.weed_binary())
except Exception as err:
    weed = f"not found: {err}"
print(json.dumps({"helpers": helpers.jobs.__file__, "weed": weed}))
"""


def check_helpers() -> list[str]:
    """The helpers import in a fresh process, away from this checkout's folder (so from the install, not the
    current directory); returns notes on what lab 05 will not find."""
    done = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True, cwd=tempfile.gettempdir())
    if done.returncode:
        raise StudioError(f"the helpers do not import after installing: {done.stderr.strip()[-600:]}")
    found = json.loads(done.stdout.strip().splitlines()[-1])
    if found["weed"].startswith("not found"):
        return [f"lab 05's object store will not start: SeaweedFS's `weed` is {found['weed']}"]
    return []


def _mb(n: float) -> float:
    return round(n / 2**20, 1)


# ---- the self-check: the labs work on this Python, checked in place


SELF_CHECK_OUT = REPO / "runs" / "self-check"  # the executed notebooks, kept until the next self-check
SELF_CHECK_WHAT = (
    f"the packages the labs import; lab {SELF_CHECK_LAB} headless: its short local job with its lessons checked, and "
    f"the dry run of its SageMaker job"
)
# (what, distribution whose version is shown, the import a lab makes)
SELF_CHECK_IMPORTS = (
    ("torch", "torch", "import torch"),
    ("transformers", "transformers", "import transformers"),
    ("tokenizers", "tokenizers", "import tokenizers"),
    ("numpy", "numpy", "import numpy"),
    ("sagemaker-train", "sagemaker-train", "from sagemaker.train import ModelTrainer"),
    ("sagemaker-core", "sagemaker-core", "from sagemaker.core.training.configs import Compute, SourceCode"),
    ("sagemaker", "sagemaker", "import sagemaker"),
    ("papermill", "papermill", "import papermill"),
    ("ipykernel", "ipykernel", "import ipykernel"),
    ("the helpers", PROJECT, "import helpers.jobs, helpers.targets"),
    ("the lab runner", PROJECT, "import course.run_labs"),
)
IMPORTS = r"""
import json, sys, time
from importlib import metadata
found = []
for what, dist, statement in json.loads(sys.argv[1]):
    start = time.perf_counter()
    try:
        exec(statement, {})
        version = metadata.version(dist)
        found.append({"what": what, "passed": True, "said": version, "seconds": round(time.perf_counter() - start, 1)})
    except Exception as err:
        found.append({"what": what, "passed": False, "said": f"{type(err).__name__}: {err}"[:300], "seconds": 0.0})
print(json.dumps(found))
"""


def run_self_check(python: str = sys.executable, say=print) -> dict:
    """Check in place that the labs work on ``python``: the imports, then lab SELF_CHECK_LAB headless on the local
    target (the lab runner checks its lessons) and as a dry run of its real job. Each step runs away from this
    checkout (so from what is installed) and says what it found; ``{"passed", "steps", "seconds"}``."""
    start = time.perf_counter()
    say(f"self-check ({SELF_CHECK_WHAT}):")
    wanted = json.dumps([list(i) for i in SELF_CHECK_IMPORTS])
    done = subprocess.run([python, "-c", IMPORTS, wanted], capture_output=True, text=True, cwd=tempfile.gettempdir())
    try:
        steps = json.loads(done.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        steps = [{"what": "imports", "passed": False, "said": done.stderr.strip()[-400:], "seconds": 0.0}]
    for step in steps:
        say(f"  {'ok    ' if step['passed'] else 'FAILED'} import {step['what']}: {step['said']}")
    if all(s["passed"] for s in steps):
        shutil.rmtree(SELF_CHECK_OUT, ignore_errors=True)
        step = lab_step(python, SELF_CHECK_OUT)
        say(f"  {'ok    ' if step['passed'] else 'FAILED'} {step['what']}: {step['said']}")
        steps.append(step)
    passed = all(s["passed"] for s in steps)
    seconds = round(time.perf_counter() - start, 1)
    if passed:
        say(f"self-check passed in {seconds} s: the labs work on this Python")
    else:
        failed = ", ".join(s["what"] for s in steps if not s["passed"])
        say(
            f"self-check FAILED in {seconds} s ({failed}): what make studio added stays, and nothing the image had "
            f"changed. Choose SageMaker Distribution {TESTED_MINORS[-1]} for the space (JupyterLab space settings, "
            f"Image), where every lab is tested, or use `make` on a laptop (its own .venv)."
        )
    return {"passed": passed, "steps": steps, "seconds": seconds}


def lab_step(python: str, out: Path) -> dict:
    """Lab SELF_CHECK_LAB through the lab runner (smoke size, the local target): its short local training job, its
    lessons checked against that run, and the dry runs of its SageMaker job on its real target, each request built
    and validated offline against the service's model (the lab does both)."""
    what = f"lab {SELF_CHECK_LAB} headless (local job and dry run)"
    command = [python, "-m", "course.run_labs", "--labs", SELF_CHECK_LAB, "--target", "local", "--out", str(out)]
    start = time.perf_counter()
    done = subprocess.run([*command, "--streams", "1"], capture_output=True, text=True, cwd=tempfile.gettempdir())
    seconds = round(time.perf_counter() - start, 1)
    summary = out / "summary.json"
    labs = json.loads(summary.read_text(encoding="utf-8"))["labs"] if summary.is_file() else []
    if not labs:
        said = (done.stderr or done.stdout).strip()[-400:] or f"the lab runner exited {done.returncode}"
        return {"what": what, "passed": False, "said": said, "seconds": seconds}
    lab = labs[0]
    wrong = lab.get("lessons_not_held", [])
    passed = lab["status"] == "ok" and not wrong and done.returncode == 0
    if passed:
        requests = len(lab.get("requests", []))
        said = f"{seconds} s; the local job trained, every lesson held, {requests} SageMaker request(s) dry-run"
    else:
        first = (lab.get("error") or "").splitlines()[:1] or wrong[:1] or [f"exit {done.returncode}"]
        said = f"{first[0][:300]} (the executed notebook: {out / Path(lab['notebook']).name})"
    return {"what": what, "passed": passed, "said": said, "seconds": seconds}


# ---- the run


def image_name() -> str | None:
    version = os.environ.get(IMAGE_VERSION_ENV)
    return version if version and in_studio() else None


def unsatisfied(requirements: list[str]) -> list[str]:
    """The requirements, down to their dependencies' dependencies, that what is installed does not meet, read from
    the installed distributions' own metadata (as pip checks them, without pip's start-up): empty when nothing is
    missing, so that a second run answers in a second. A requirement it cannot read counts as unmet (pip decides)."""
    from importlib import metadata

    requirement, _, _ = _packaging()
    dists = {}
    for dist in metadata.distributions():
        if dist.metadata["Name"]:
            dists.setdefault(canonical(dist.metadata["Name"]), dist)
    todo, seen, missing = [(text, "") for text in requirements], set(), []
    while todo:
        text, extra = todo.pop()
        try:
            req = requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": extra}):
                continue
        except Exception:  # noqa: BLE001 - unreadable metadata: let pip judge
            missing.append(text)
            continue
        dist = dists.get(canonical(req.name))
        if dist is None or not req.specifier.contains(dist.version, prereleases=True):
            missing.append(text)
            continue
        for wanted_extra in ("", *sorted(req.extras)):
            if (canonical(req.name), wanted_extra) not in seen:
                seen.add((canonical(req.name), wanted_extra))
                todo += [(r, wanted_extra) for r in dist.requires or []]
    return missing


def run(plan_only: bool = False, self_check: bool = False) -> Outcome:
    """make studio, from the first check to the last line it prints; then the self-check where the image or a package
    is newer than the tested ones (or ``self_check``)."""
    start = time.perf_counter()
    check_python()
    check_pip(pip_version())
    image, versions, requirements = image_name(), installed_versions(), project_requirements()
    if note := support_note(image):
        print(f"note: {note}")
    check_sdk(versions, image)
    check_ranges(requirements, versions, image)
    newer = out_of_range(requirements, versions, newer=True)
    untested = [n for n in (untested_image(image), newer_note(newer)) if n]
    for note in untested:
        print(f"untested: {note}")
    requirements = relaxed(requirements, {name for name, _, _ in newer})
    target = this_target()
    with one_at_a_time(target):
        outcome = _run_held(target, versions, requirements, image, start, plan_only)
    outcome.untested = untested
    if plan_only:
        if untested or self_check:
            print(f"then: the self-check ({SELF_CHECK_WHAT}), about a minute")
        return outcome
    if untested or self_check:
        outcome.self_check = run_self_check()
    return outcome


def _run_held(
    target: Target, versions: dict[str, str], requirements: list[str], image: str | None, start: float, plan_only: bool
) -> Outcome:
    held = sum(1 for name in versions if name != PROJECT)
    outcome = Outcome(sys.executable, sys.version.split()[0], image, asdict(target), held)
    _say_where(outcome, target, versions)
    if project_linked() and not unsatisfied(requirements):
        return _nothing_to_add(outcome, start)
    with tempfile.TemporaryDirectory(prefix="make-studio-") as tmp:
        folder = Path(tmp)
        installed = frozen_versions(versions)
        (folder / "constraints.txt").write_text(constraints(installed), encoding="utf-8")
        wanted = plan(requirements, folder / "constraints.txt", target)
        refuse_changes(wanted, installed)
        linked = project_linked()
        if not wanted and linked:
            return _nothing_to_add(outcome, start)
        (folder / "wheels").mkdir()
        download(wanted, folder / "wheels")
        _say_plan(wanted, linked)
        if plan_only:
            return outcome
        check_space(wanted, target)
        added = add(wanted, folder / "wheels", target, linked, installed, outcome)
    outcome.added = [{"name": n, "version": v, "mb": _mb(size)} for n, (v, size) in added.items()]
    outcome.total_mb = round(sum(a["mb"] for a in outcome.added), 1)
    outcome.seconds = round(time.perf_counter() - start, 1)
    _say_added(outcome)
    return outcome


def frozen_versions(versions: dict[str, str]) -> dict[str, str]:
    """Every installed package and its version, from this Python's own ``pip freeze``."""
    frozen = pip("freeze", "--all")
    if frozen.returncode:
        raise failure("listing what is installed", frozen)
    return parse_freeze(frozen.stdout, versions)


def add(
    wanted: list[Wanted], wheels: Path, target: Target, linked: bool, installed: dict[str, str], outcome: Outcome
) -> dict[str, tuple[str, int]]:
    """Install the plan and link the helpers; check that nothing installed before changed and that the helpers
    import. ``{name: (version, bytes)}`` of what was added. Any failure, or Ctrl-C, removes all of it again."""
    names = [w.name for w in wanted] + ([] if linked else [PROJECT])
    held = {n: v for n, v in installed.items() if n != PROJECT}
    planned = wheel_files(wheels, target)
    leftovers = {p for p in planned if not (p.exists() or p.is_symlink())}  # what only this run may write
    elsewhere = "" if linked else linked_elsewhere()  # another clone's link, which a failure here must give back
    try:
        install(wanted, wheels, target)
        if not linked:
            link_project(target)
        after = inventory(names)
        outcome.notes = others_changed(changed(held, after), names) + check_helpers()
    except BaseException as err:  # nothing stays half-installed, and the message says so only when it is true
        left = rollback(names, leftovers, relink=elsewhere)
        if left:
            raise StudioError(
                f"{'interrupted' if isinstance(err, KeyboardInterrupt) else err}; undoing it left {', '.join(left)}: "
                f"remove them by hand (pip uninstall {' '.join(n for n in names if n in left) or '...'}; rm the "
                f"files), then run make studio again."
            ) from err
        raise
    return {n: (after[n]["version"], after[n]["bytes"]) for n in names}


def _nothing_to_add(outcome: Outcome, start: float) -> Outcome:
    outcome.nothing_to_add = True
    outcome.seconds = round(time.perf_counter() - start, 1)
    print(f"nothing to add: the labs have all they need here, the helpers from this checkout ({outcome.seconds} s)")
    return outcome


def _say_where(outcome: Outcome, target: Target, installed: dict[str, str]) -> None:
    image = f" (SageMaker Distribution {outcome.image})" if outcome.image else ""
    sdk = installed.get("sagemaker")
    print(f"make studio: Python {outcome.python_version} at {outcome.python}{image}")
    sdk_note = f"; SDK sagemaker {sdk}" if sdk else ""
    print(f"  holds its {outcome.held} installed packages at their versions{sdk_note}")
    print(f"  adds into {'the user site ' if target.user else ''}{target.path} ({target.why})")


def _say_plan(wanted: list[Wanted], linked: bool) -> None:
    parts = [f"{w.name} {w.version}" for w in wanted] + ([] if linked else [f"{PROJECT} (editable, this checkout)"])
    down, unpacked = sum(w.download_bytes for w in wanted), sum(w.unpacked_bytes for w in wanted)
    print(f"  to add: {', '.join(parts)} ({_mb(down)} MB to download, {_mb(unpacked)} MB unpacked)")


def _say_added(outcome: Outcome) -> None:
    print("added (this run changed nothing this Python had):")
    for a in outcome.added:
        print(f"  {a['name']:<42} {a['version']:<14} {a['mb']:>7.1f} MB")
    print(f"  {'total':<42} {'':<14} {outcome.total_mb:>7.1f} MB in {outcome.seconds} s")
    for note in outcome.notes:
        print(f"note: {note}")
    # Python adds the user site to sys.path only if it existed when the interpreter started
    print(
        "next: restart the kernel of any notebook already open (Kernel > Restart Kernel): a kernel started before "
        'this install does not see the helpers. Then open labs/01_single_gpu.ipynb with the "Python 3 (ipykernel)" '
        "kernel, or run every lab headless with `make PY=python3`"
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="make studio", description=__doc__.split("\n\n")[0])
    ap.add_argument("--plan", action="store_true", help="say what would be added; install nothing")
    ap.add_argument("--report", type=Path, help="write what was done as JSON here")
    ap.add_argument(
        "--self-check",
        action="store_true",
        help="then check in place that the labs work (it runs by itself on an untested image), about a minute",
    )
    a = ap.parse_args(argv)
    try:
        outcome = run(plan_only=a.plan, self_check=a.self_check)
    except StudioError as err:
        print(f"make studio: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("make studio: interrupted; what it had added has been removed again.", file=sys.stderr)
        return 130
    if a.report:
        a.report.parent.mkdir(parents=True, exist_ok=True)
        a.report.write_text(json.dumps(asdict(outcome), indent=1) + "\n", encoding="utf-8")
    if outcome.self_check and not outcome.self_check["passed"]:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
