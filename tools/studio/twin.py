"""``make studio-twin``: SageMaker Studio's JupyterLab image as near as this machine makes it, ``make studio`` run in
it as a learner runs it, and every lab run on its Python.

    python tools/studio/twin.py --python python3.12       # what `make studio-twin` (CI's step) runs
    python tools/studio/twin.py --torch torch==2.13.0     # a newer torch than the image's on its other packages

The image: SageMaker Distribution 4.5.0's packages at their versions (``sagemaker-distribution-4.5.0.txt`` beside
this file, the ``python==`` line aside) and its pip, installed by uv into a Python of their own under ``ROOT/image``.
That Python is a copy of this machine's interpreter with an empty site-packages, not a virtual environment: as the
image's ``/opt/conda/bin/python``, it has a user site, which is where ``make studio`` puts what it adds in Studio.
Its torch is the image's 2.8.0 (PyPI's CUDA build, which runs on the CPU; the cpu image has conda's CPU build); the
interpreter is the one given (``make`` gives the first Python 3.12 that runs, for the image's 3.12.13). What differs
from the image is said wherever the results are shown.

Then, with ``ROOT/home`` as the home directory and the PATH and environment of a Studio terminal:

1. ``make studio`` twice: the first adds what is missing (what, how many MB, how long), the second must add nothing;
2. the image's packages checked against what they were: none may have changed version, none may have been added;
3. every lab headless in smoke size with the image's Python (the learner's kernel), each one's time: two at once,
   as ``make`` runs them, each on its own half of the cores, so every lab runs beside another that keeps the other
   core busy; and each lesson its prose states checked against that run (course/lessons.py), as ``make
   labs-check`` checks make's;
4. every lab's dry-run ``CreateTrainingJob`` requests compared, field for field, with those of make's ``.venv`` (the
   newest SDK): on the twin's SDK (3.12.0, SageMaker Distribution 4.5.0 and 4.4.1) and on the SDK packages of other 4.x
   releases laid over the twin's (:data:`COMPARED_SDKS`; ``--sdk all``: every distinct combination of the table),
   three passes at a time.

The report: ``runs/studio-twin/report.json`` and a table. Exit status 0 only when every check passed. The image is
built once and kept while its list, torch and Python are unchanged (``make``: in ``~/.cache``); the home directory
starts empty on every run (a new learner), and pip's cache lives in it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import dry_requests
import install
import variants

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
IMAGE_LIST = HERE / "sagemaker-distribution-4.5.0.txt"
IMAGE_TORCH = "torch==2.8.0"
IMAGE_PIP = "pip==26.2.1"  # aws/sagemaker-distribution build_artifacts/v4/v4.5/v4.5.0/cpu.env.out
IMAGE_VERSION = "4.5.0-twin"  # what the twin's IMAGE_VERSION says (the image sets IMAGE_VERSION=4.5.0)
# The SDK packages of every 4.x release (sdk-combinations.json, read from aws/sagemaker-distribution's cpu.env.out
# files). The requests are compared on the twin's own (4.5.0 and 4.4.1: core 2.20.0, past sagemaker-core
# 2.13.1-2.17.0, which build their SageMaker client from a botocore session of their own; helpers/aws/sdk_compat.py)
# and on these, laid over it: the oldest (core 2.7.1, before that range) and 4.0.9 (core 2.17.0, in it). `--sdk all`
# compares every distinct combination (by hand).
SDK_TABLE = HERE / "sdk-combinations.json"
COMPARED_SDKS = ("4.0.0", "4.0.9")
DRY_RUNS_AT_ONCE = 3  # one more than this machine's cores: a pass waits on its kernels part of the time
# variables of the shell that runs the twin that a Studio terminal does not have
NOT_IN_STUDIO = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONUSERBASE", "PYTHONNOUSERSITE", "CONDA_PREFIX")


class TwinError(Exception):
    """The twin could not be built or run; the message says why."""


def read_list(path: Path, torch: str) -> tuple[str, list[str]]:
    """(the image's Python version, its packages as pins) with ``torch`` in place of the image's torch."""
    python, pins = "", []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        if line.startswith("python=="):
            python = line.split("==", 1)[1]
        else:
            pins.append(torch if install.canonical(line.split("==")[0]) == "torch" else line)
    return python, pins


def run(command: list[str], env: dict | None = None, cwd: Path = REPO, echo: bool = False) -> tuple[int, str, float]:
    """(status, output, seconds) of a command; its output streams through when ``echo``."""
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    assert proc.stdout is not None
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if echo and "is ignored: it is neither" not in line:
            print(f"    {line}", end="", flush=True)
    return proc.wait(), "".join(lines), round(time.perf_counter() - start, 1)


def checked(
    command: list[str], what: str, env: dict | None = None, echo: bool = False, cwd: Path = REPO
) -> tuple[str, float]:
    status, output, seconds = run(command, env, cwd, echo)
    if status:
        raise TwinError(f"{what} failed ({' '.join(command[:6])}...):\n{output[-3000:]}")
    return output, seconds


# ---- the image


class Image:
    """The twin's image: a Python prefix of its own under ``root`` and the home directory a Studio space keeps."""

    def __init__(self, root: Path, base_python: Path):
        self.root, self.base = root, base_python
        self.prefix, self.home = root / "image", root / "home"
        self.python = self.prefix / "bin" / "python3"

    def env(self, local_bin: bool = True) -> dict[str, str]:
        """A Studio terminal's environment: the image's Python first on PATH, ``~/.local/bin`` last (4.4 and 4.5's
        PATH ends with it; ``local_bin=False``: 4.0 to 4.3's, without it), the home directory, and the variables Studio
        sets that make studio reads."""
        env = {k: v for k, v in os.environ.items() if k not in NOT_IN_STUDIO}
        path = [str(self.prefix / "bin"), os.environ.get("PATH", "")]
        path += [str(self.home / ".local" / "bin")] if local_bin else []
        if "PIP_CONFIG_FILE" not in env and (mine := _pip_user_config()):
            env["PIP_CONFIG_FILE"] = str(mine)  # the new home has none: keep this machine's (its index, its wheels)
        env.update(
            PATH=os.pathsep.join(path),
            HOME=str(self.home),
            SAGEMAKER_APP_TYPE_LOWERCASE="jupyterlab",
            IMAGE_VERSION=IMAGE_VERSION,
        )
        return env

    def stamp(self, pins: list[str]) -> str:
        key = json.dumps({"pins": pins, "pip": IMAGE_PIP, "python": str(self.base.resolve())}, sort_keys=True)
        return hashlib.sha256(key.encode()).hexdigest()[:16]

    def is_built(self, pins: list[str]) -> bool:
        """Whether the image there was built from these pins (and is kept)."""
        stamp_file = self.root / "image.stamp"
        return stamp_file.is_file() and stamp_file.read_text().strip() == self.stamp(pins) and self.python.exists()

    def build(self, pins: list[str]) -> dict:
        """Build the image unless the one there was built from the same pins; returns how it went, step by step."""
        if self.is_built(pins):
            return {"built": False, "seconds": 0.0}
        stamp_file = self.root / "image.stamp"
        shutil.rmtree(self.prefix, ignore_errors=True)
        stamp_file.unlink(missing_ok=True)
        start = time.perf_counter()
        self._python_of_its_own()
        print(f"  installing the image's {len(pins)} packages and what they need (uv) ...", flush=True)
        # uv fetches and unpacks the wheels side by side where pip goes one by one; the same wheels, the image's pip
        # among them for `make studio` to use
        _, install_seconds = checked(self._install(pins), "installing the image's packages", self.env(), echo=True)
        # compiled here on every core: conda leaves the image's modules compiled, so no lab's first job pays for it
        _, _, compile_seconds = run(self._compile_all(), self.env())  # a file that does not compile is skipped
        stamp_file.write_text(self.stamp(pins) + "\n")
        return {
            "built": True,
            "seconds": round(time.perf_counter() - start, 1),
            "install_seconds": install_seconds,
            "compile_seconds": compile_seconds,
        }

    def _install(self, pins: list[str]) -> list[str]:
        """uv's command that installs the pins and the image's pip into the image's Python, with its cache beside the
        image (unpacked wheels linked from there, so a rebuild downloads nothing); pip's find-links (a wheel on
        this machine's disk) are uv's too."""
        try:
            from uv import find_uv_bin
        except ImportError as err:
            raise TwinError(f"uv is not installed beside the twin ({err}): run `make setup`") from None
        links = [f"--find-links={d}" for d in os.environ.get("PIP_FIND_LINKS", "").split() if Path(d).is_dir()]
        return [
            find_uv_bin(),
            "pip",
            "install",
            "--no-config",
            "--quiet",
            f"--cache-dir={self.root / 'uv-cache'}",
            f"--python={self.python}",
            *links,
            IMAGE_PIP,
            *pins,
        ]

    def _compile_all(self) -> list[str]:
        """Bytecode for every module of the image, as its conda wrote it, so that no lab's first job pays for it."""
        site = self.prefix / "lib" / self.python.resolve().name / "site-packages"
        return [str(self.python), "-m", "compileall", "-q", "-j", "0", str(site)]

    def _python_of_its_own(self) -> None:
        """The base interpreter's binary copied (so that its prefix is here) beside links to its standard library,
        with an empty site-packages: a Python installation like the image's, not a virtual environment."""
        probe = "import sys; print(sys.base_prefix); print('python%d.%d' % sys.version_info[:2])"
        done = subprocess.run([str(self.base), "-c", probe], capture_output=True, text=True, check=True)
        base_prefix, version = Path(done.stdout.split()[0]), done.stdout.split()[1]
        stdlib, lib = base_prefix / "lib" / version, self.prefix / "lib" / version
        (self.prefix / "bin").mkdir(parents=True)
        lib.mkdir(parents=True)
        shutil.copy2(base_prefix / "bin" / version, self.prefix / "bin" / version)
        for alias in ("python3", "python"):
            (self.prefix / "bin" / alias).symlink_to(version)
        for entry in stdlib.iterdir():
            if entry.name not in ("site-packages", "test", "__pycache__"):
                (lib / entry.name).symlink_to(entry)
        (lib / "site-packages").mkdir()
        probe = "import sys, site; print(sys.prefix); print(site.ENABLE_USER_SITE)"
        out = subprocess.run([str(self.python), "-c", probe], capture_output=True, text=True, env=self.env())
        if out.returncode or out.stdout.split() != [str(self.prefix), "True"]:
            raise TwinError(
                f"{self.python} is not a Python of its own (prefix and user site: {out.stdout.split()}, "
                f"{out.stderr.strip()[-300:]}); the twin needs a base interpreter that is a full installation "
                f"(give one with --python)."
            )

    def python_version(self) -> str:
        done = subprocess.run([str(self.base), "-c", "import platform; print(platform.python_version())"],
                              capture_output=True, text=True, check=True)  # fmt: skip
        return done.stdout.strip()

    def packages(self) -> dict[str, str]:
        """The image's own packages, ``{name: version}``: its site-packages alone (``python -s``: no user site)."""
        command = [str(self.python), "-s", "-c", install.INVENTORY]
        # not from this checkout: `-c` puts the current folder on sys.path, and the helpers' *.egg-info is here
        out, _ = checked(command, "listing the image's packages", self.env(), cwd=self.root)
        return {name: v["version"] for name, v in json.loads(out.strip().splitlines()[-1]).items()}

    def new_home(self) -> None:
        """A learner's first day: nothing in ``~/.local``; pip's cache (``~/.cache``) is kept, inside the checkout."""
        shutil.rmtree(self.home / ".local", ignore_errors=True)
        self.home.mkdir(parents=True, exist_ok=True)


def _pip_user_config() -> Path | None:
    """The pip configuration of the user running the twin (``~/.config/pip/pip.conf``, or the older ``~/.pip``)."""
    home = Path(os.environ.get("HOME", str(Path.home())))
    found = [p for p in (home / ".config" / "pip" / "pip.conf", home / ".pip" / "pip.conf") if p.is_file()]
    return found[0] if found else None


# ---- the checks


def make_studio(image: Image, report: Path) -> dict:
    """``make studio`` in a Studio terminal of the twin; its own report, plus the wall time around it."""
    report.unlink(missing_ok=True)
    command = ["make", "--no-print-directory", "studio", f"STUDIO_ARGS=--report {report}"]
    status, output, seconds = run(command, image.env(), echo=True)
    if status or not report.is_file():
        raise TwinError(f"make studio failed in the twin (status {status}):\n{output[-3000:]}")
    return {**json.loads(report.read_text()), "wall_seconds": seconds}


def sdk_combinations() -> dict[tuple[tuple[str, str], ...], list[str]]:
    """Each distinct set of SDK packages the 4.x releases ship, with the releases that ship it."""
    releases = json.loads(SDK_TABLE.read_text(encoding="utf-8"))["releases"]
    found: dict[tuple[tuple[str, str], ...], list[str]] = {}
    for release, versions in releases.items():
        found.setdefault(tuple(sorted(versions.items())), []).append(release)
    return found


def sdk_for(release: str) -> dict[str, str]:
    releases = json.loads(SDK_TABLE.read_text(encoding="utf-8"))["releases"]
    if release not in releases:
        raise TwinError(f"no SageMaker Distribution {release} in {SDK_TABLE.name}: one of {', '.join(releases)}")
    return releases[release]


def sdk_overlay(image: Image, folder: Path, versions: dict[str, str]) -> Path:
    """An SDK installed apart (``pip --target``), to be laid over the twin's with PYTHONPATH: the same image, the
    SDK packages of another release."""
    stamp = folder / ".installed"
    wanted = " ".join(f"{k}=={v}" for k, v in sorted(versions.items()))
    if not (stamp.is_file() and stamp.read_text() == wanted):
        shutil.rmtree(folder, ignore_errors=True)
        pip = [str(image.python), "-m", "pip", "--disable-pip-version-check", "install", "--quiet", "--no-deps"]
        pip.append("--root-user-action=ignore")
        checked([*pip, "--target", str(folder), *wanted.split()], f"installing {wanted} apart", image.env())
        stamp.write_text(wanted)
    return folder


def sdk_name(versions: dict[str, str], releases: list[str]) -> str:
    return (
        f"sdk {versions['sagemaker']}, core {versions['sagemaker-core']}, train {versions['sagemaker-train']} "
        f"({', '.join(releases)})"
    )


def dry_runs(python: str, out: Path, env: dict) -> dict:
    """Every lab dry-run under ``python`` (offline); the requests land in ``out``. Its time, and the labs that
    failed (their requests cannot be compared)."""
    shutil.rmtree(out, ignore_errors=True)
    env = {**env, "WORKSHOP_ATTENDEE": "twin"}  # the same prefix on every side: job names and keys start with it
    _, output, seconds = run(dry_requests.run_labs_command(python, out), env)
    summary = out / "summary.json"
    labs = json.loads(summary.read_text())["labs"] if summary.is_file() else []
    failed = [f"{r['lab']}: {r['error']}" for r in labs if r["status"] != "ok"]
    if not labs:
        failed = [f"the lab runner did not run: {output[-600:]}"]
    return {"python": python, "seconds": seconds, "failed": failed}


def labs(
    image: Image, out: Path, only: tuple[str, ...] = (), env: dict | None = None, prefix: list[str] | None = None
) -> list[dict]:
    """Every lab (or ``only`` these) headless in smoke size, local target, on the image's Python; each one's status,
    time and cores. The lab runner runs two at a time, each on its own half of the cores (``course.run_labs``), so
    every lab runs beside another that keeps the rest of the machine busy, and the whole takes about half as long."""
    shutil.rmtree(out, ignore_errors=True)
    chosen = ["--labs", *only] if only else []
    command = [*(prefix or []), str(image.python), "-m", "course.run_labs", "--out", str(out), *chosen]
    run(command, env or image.env(), echo=True)
    return summarised(out / "summary.json")


def summarised(summary: Path) -> list[dict]:
    """Each lab of a lab runner's summary: its status, time, cores, and the lessons its run did not bear out."""
    if not summary.is_file():
        raise TwinError(f"the lab runner wrote no summary: {summary}")
    return [
        {
            "lab": r["lab"],
            "status": r["status"],
            "seconds": r["seconds"],
            "error": r["error"],
            "cores": r["cores"],
            "wrong_claims": r.get("lessons_not_held", []),  # the runner checked them (course/lessons.py)
        }
        for r in json.loads(summary.read_text())["labs"]
    ]


# ---- the run


def twin(
    root: Path,
    out: Path,
    torch: str,
    base_python: Path,
    main_python: str,
    sdks: list[str],
    variants: bool = False,
    only_variants: bool = False,
) -> dict:
    python, pins = read_list(IMAGE_LIST, torch)
    image = Image(root, base_python)
    report: dict = {
        "image": f"SageMaker Distribution 4.5.0 ({IMAGE_LIST.name}, {len(pins)} packages pinned)",
        "stand_ins": stand_ins(image.python_version(), python, torch),
    }
    print(f"studio twin: {report['image']}; stand-ins: {report['stand_ins']}", flush=True)
    main_requests = None
    if not only_variants and not image.is_built(pins):
        # make's .venv dry-runs beside the build, which keeps one core (pip) of two; done before any lab is timed
        with ThreadPoolExecutor(max_workers=1) as pool:
            beside = pool.submit(dry_runs, main_python, out / "requests-main", {**os.environ})
            report["image_build"] = image.build(pins)
            main_requests = beside.result()
    else:
        report["image_build"] = image.build(pins)
    image.new_home()
    before = image.packages()
    report["image_packages"] = len(before)
    runs = [make_studio(image, out / f"make-studio-{i}.json") for i in (1, 2)]
    report["make_studio"] = runs
    after = image.packages()
    report["image_changed"] = install.changed(before, {k: {"version": v} for k, v in after.items()})
    report["image_added"] = sorted(set(after) - set(before))
    report["labs"] = [] if only_variants else labs(image, out / "labs")
    if variants or only_variants:
        report["variants"] = run_variants(image, root, out)
    report["requests"] = {} if only_variants else compare_requests(image, root, out, main_python, sdks, main_requests)
    report["passed"] = verdict(report)
    return report


def run_variants(image: Image, root: Path, out: Path) -> dict:
    """What a started space does that the release's list does not show (tools/studio/variants.py), every lab run
    on each."""
    found: dict = {"without_local_bin": labs(image, out / "labs-4.0-path", env=image.env(local_bin=False))}
    problem = variants.namespace_problem()
    if problem:
        found["skipped"] = f"small_shm, startup_removal and lifecycle: {problem}"
        return found
    small = labs(image, out / "labs-small-shm", prefix=variants.small_shm_prefix())
    said = sorted({line for nb in (out / "labs-small-shm").glob("*.ipynb") for line in variants.shm_lines(nb)})
    found["small_shm"] = {"labs": small, "said": said}
    image.new_home()  # a learner's first start, while the image still removes its start-up packages
    command = ["make", "--no-print-directory", "studio"]
    site_packages = Path(install_site(image))
    found["startup_removal"] = variants.startup_removal(command, image.env(), site_packages, REPO)
    found["startup_removal"]["labs"] = labs(image, out / "labs-started-space")
    found["lifecycle"] = variants.lifecycle(image.prefix, root, REPO, REPO / "infra" / "workshop-account.yaml")
    summary = Path(found["lifecycle"].pop("summary"))
    found["lifecycle"]["labs"] = summarised(summary) if summary.is_file() else []
    return found


def install_site(image: Image) -> str:
    """The image's own site-packages (where conda put its packages)."""
    probe = "import sysconfig; print(sysconfig.get_path('purelib'))"
    out, _ = checked([str(image.python), "-c", probe], "finding the image's site-packages", image.env())
    return out.strip().splitlines()[-1]


def compare_requests(
    image: Image, root: Path, out: Path, main_python: str, sdks: list[str], main: dict | None = None
) -> dict:
    """Every lab's requests from make's environment (``main``: its pass, when it ran beside the build), the twin's
    SDK and each release's SDK in ``sdks`` laid over the twin, compared field for field with make's."""
    sides = {"sdk 3.12.0, core 2.20.0, train 1.14.0 (the twin's own, 4.5.0 and 4.4.1)": image.env()}
    by_release = {r: combo for combo, releases in sdk_combinations().items() for r in releases}
    for release in sdks:
        versions = sdk_for(release)
        folder = root / f"sdk-{release}"
        releases = sdk_combinations()[by_release[release]]
        sides[sdk_name(versions, releases)] = {
            **image.env(),
            "PYTHONPATH": str(sdk_overlay(image, folder, versions)),
        }
    # three passes at a time, each one notebook kernel after another: three keep two cores busier than two do
    # (docs/studio.md); every pass still writes a folder of its own
    with ThreadPoolExecutor(max_workers=DRY_RUNS_AT_ONCE) as pool:
        first = None if main else pool.submit(dry_runs, main_python, out / "requests-main", {**os.environ})
        passes = [
            pool.submit(dry_runs, str(image.python), out / f"requests-{i}", env) for i, env in enumerate(sides.values())
        ]
        main = main or first.result()
        found = {"main": {**main, "sdk": install.installed_versions().get("sagemaker")}}
        for i, (name, ran) in enumerate(zip(sides, [p.result() for p in passes])):
            compared = dry_requests.compare(out / "requests-main", out / f"requests-{i}")
            if main["failed"] or ran["failed"]:
                compared["equal"] = False  # a lab that failed on either side built requests that cannot be compared
            found[name] = {**ran, **compared}
    return found


def stand_ins(here: str, image_python: str, torch: str) -> dict[str, str]:
    """What stands in for what the image has, said wherever the twin's results are shown."""
    image_torch = IMAGE_TORCH.split("==")[1]
    return {
        "python": f"{here}, the image's own" if here == image_python else f"{here} here for the image's {image_python}",
        "torch": f"{image_torch}, the image's own"
        if torch == IMAGE_TORCH
        else f"{torch.split('==')[-1]} here for the image's {image_torch}",
    }


def verdict(report: dict) -> bool:
    first, second = report["make_studio"]
    return (
        not report["image_changed"]
        and not report["image_added"]
        and bool(first["added"])
        and second["nothing_to_add"]
        and all(lab["status"] == "ok" and not lab.get("wrong_claims") for lab in report["labs"])
        and all(r["equal"] for k, r in report["requests"].items() if k != "main")
        and variants_passed(report.get("variants", {}))
    )


def variants_passed(found: dict) -> bool:
    """Every variant that ran did what a started space must, every lab passing on each and teaching its lessons
    (but with a 64 KB /dev/shm, where lab 07's loader workers cannot run: the jobs must say so instead); none ran:
    nothing to hold."""
    if not found:
        return True

    def taught(runs: list[dict], excused: tuple[str, ...] = ()) -> bool:
        return bool(runs) and all(
            r["status"] == "ok" and (r["lab"] in excused or not r.get("wrong_claims")) for r in runs
        )

    path_ok = taught(found["without_local_bin"])
    if "skipped" in found:
        return path_ok
    small, gone, lcc = found["small_shm"], found["startup_removal"], found["lifecycle"]
    return (
        path_ok
        and taught(small["labs"], excused=("07_profiling",))
        and bool(small["said"])  # the jobs said what they did about the small /dev/shm
        and gone["status"] == 0
        and gone["removed_mid_run"]  # the removal landed between make studio's stock-taking and its check
        and gone["named"] == sorted(variants.REMOVED_AT_START)
        and taught(gone["labs"])
        and lcc["setup_done"]
        and lcc["kernel_ok"]
        and taught(lcc["labs"])
    )


def table(report: dict) -> str:
    first, second = report["make_studio"]
    stand = report["stand_ins"]
    lines = [
        f"Studio twin of {report['image']}",
        f"  stand-ins: Python {stand['python']}; torch {stand['torch']}",
        f"  image: {report['image_packages']} packages"
        + (f", built in {report['image_build']['seconds']} s" if report["image_build"]["built"] else " (kept)"),
        f"  make studio, first run: {first['total_mb']} MB added in {first['wall_seconds']} s"
        f" into {first['target']['path']}",
    ]
    lines += [f"    {a['name']:<42} {a['version']:<14} {a['mb']:>7.1f} MB" for a in first["added"]]
    again = "nothing to add" if second["nothing_to_add"] else f"ADDED {second['added']}"
    lines += [
        f"  make studio, second run: {again} in {second['wall_seconds']} s",
        f"  image packages changed: {len(report['image_changed'])} {report['image_changed'] or ''}",
        f"  image packages added: {len(report['image_added'])} {report['image_added'] or ''}",
        "  labs on the image's Python (smoke size, local target; two at a time, each on its own cores):",
    ]
    for r in report["labs"]:
        on = f"core {','.join(map(str, r.get('cores', [])))}" if r.get("cores") else ""
        lines.append(f"    {r['lab']:<22} {r['status']:<7} {r['seconds']:>6.1f} s  {on:<8} {_first(r['error'])}")
        lines += [f"      WRONG: {claim}" for claim in r.get("wrong_claims", [])]
    lines += variants.report_lines(report.get("variants"))
    if report["requests"]:
        main = report["requests"]["main"]
        lines.append(f"  dry-run requests (target {dry_requests.TARGET}) against make's .venv (SDK {main['sdk']}):")
        lines += [f"    .venv: FAILED {f}" for f in main["failed"]]
    for name, r in report["requests"].items():
        if name != "main":
            verdict_text = "equal" if r["equal"] else f"NOT EQUAL ({len(r['differences'])} differences)"
            lines.append(f"    {name:<22} {verdict_text}: {r['requests']} requests from {r['labs']} labs")
            lines += [f"      FAILED {f}" for f in r["failed"]]
            lines += [f"      {d}" for d in r["differences"][:20]]
    lines.append(f"  {'PASSED' if report['passed'] else 'FAILED'}")
    return "\n".join(lines)


def _first(error: str) -> str:
    """An error's first line, which names the cell and the exception (the report keeps all of it)."""
    return (error.splitlines() or [""])[0][:200]


def parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="make studio-twin", description=__doc__.split("\n\n")[0])
    ap.add_argument("--root", type=Path, default=REPO / ".studio-twin", help="where the image and home live")
    ap.add_argument("--out", type=Path, default=REPO / "runs" / "studio-twin", help="the report and the lab runs")
    ap.add_argument("--torch", default=IMAGE_TORCH, help="the torch pin (default: the image's own)")
    ap.add_argument("--python", type=Path, default=Path(sys._base_executable), help="the interpreter to copy")
    ap.add_argument("--main-python", default=sys.executable, help="the environment to compare requests with")
    ap.add_argument(
        "--sdk",
        nargs="*",
        default=list(COMPARED_SDKS),
        help="the 4.x releases whose SDK the requests are also compared on ('all': one of each distinct combination)",
    )
    ap.add_argument("--variants", action="store_true", help="also run the variants (variants.py; by hand)")
    ap.add_argument("--only-variants", action="store_true", help="the image, make studio, then the variants only")
    return ap


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    sdks = [releases[-1] for releases in sdk_combinations().values()] if a.sdk == ["all"] else a.sdk
    a.out.mkdir(parents=True, exist_ok=True)
    try:
        report = twin(
            a.root.resolve(), a.out.resolve(), a.torch, a.python, a.main_python, sdks, a.variants, a.only_variants
        )
    except TwinError as err:
        print(f"studio twin: {err}", file=sys.stderr)
        return 1
    (a.out / "report.json").write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(table(report))
    print(f"report: {a.out / 'report.json'}")
    return 0 if report["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())
