"""labs/src/requirements.txt in the images it is installed into: an image's own transformers stays, and an image
without one gets a transformers its torch can run.

The SDK's driver (sagemaker/core/utils/install_requirements.py) and the images' training toolkit both run
``pip install -r requirements.txt`` without ``--upgrade``: pip keeps an installed version that meets a line and
installs one only where none does. The first tests hold the lines to each image by that rule; the last asks pip itself,
offline, in a bare environment with a stand-in for an installed transformers.
"""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from conftest import REPO, SRC
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as normal
from packaging.version import Version

REQUIREMENTS = SRC / "requirements.txt"
# (image, its Python, its torch, the transformers it ships or None)
IMAGES = [
    ("pytorch-training:2.3.0-gpu-py311 (the SMDDP default)", "3.11", "2.3.0", None),
    ("pytorch-training:2.4.0-gpu-py311", "3.11", "2.4.0", None),
    ("pytorch-training:2.5.1-gpu-py311", "3.11", "2.5.1", None),
    ("smdistributed-modelparallel:2.5.1-gpu-py311-cu124 (SMP)", "3.11", "2.5.1", "4.44.2"),
    ("pytorch:2.13-cu133-amzn2023-sagemaker (the default)", "3.12", "2.13.0", None),
]
RELEASES = ["4.30.2", "4.44.2", "4.46.0", "4.57.6", "5.0.0", "5.23.0", "5.24.0"]  # some of transformers' releases
LOCK = json.loads((REPO / "tools" / "dlc-pytorch-2.13-lock.json").read_text())  # what the 2.13 DLC ships
CLOSURE = json.loads((REPO / "tools" / "job-requirements-closure.json").read_text())  # pip's resolution under it
# the image's Python on its platform: what a requirement's marker is evaluated against
IMAGE_PYTHON = {
    **default_environment(),
    "python_version": "3.12",
    "python_full_version": "3.12.0",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "extra": "",
}
OLDEST_THE_SCRIPTS_RUN_ON = "4.44.2"  # train_lm.py as is, train.py with attn_implementation='eager' (checked on CPU)


def _lines() -> list[Requirement]:
    return [
        Requirement(line) for line in REQUIREMENTS.read_text().splitlines() if line.strip() and not line.startswith("#")
    ]


def _applies(req: Requirement, python: str) -> bool:
    return req.marker is None or req.marker.evaluate(
        {**default_environment(), "python_version": python, "python_full_version": f"{python}.0"}
    )


def _pip(python: str, installed: str | None) -> tuple[str, str]:
    """What ``pip install -r`` (no --upgrade) ends with: ("kept" or "installed", version)."""
    (line,) = [r for r in _lines() if r.name == "transformers" and _applies(r, python)]
    if installed and line.specifier.contains(installed):
        return "kept", installed
    return "installed", str(max(Version(v) for v in RELEASES if line.specifier.contains(v)))


def test_never_torch_and_on_the_python_3_11_images_transformers_alone():
    assert "torch" not in {r.name for r in _lines()}  # torch stays the image's (its SMDDP/SMP are built on it)
    assert {r.name for r in _lines() if _applies(r, "3.11")} == {"transformers"}


def _pins() -> dict[str, str]:
    """The lines for the 2.13 DLC's Python: name -> the exact version each pins."""
    pins = {}
    for r in _lines():
        if _applies(r, "3.12"):
            (spec,) = r.specifier
            assert spec.operator == "==", f"{r}: the 2.13 DLC's lines pin exact versions"
            pins[r.name] = spec.version
    return pins


def unmet(pins: dict[str, str], image: dict[str, str], closure: list[dict]) -> list[str]:
    """What ``pip install -r`` of ``pins`` into an image shipping ``image`` would have to change or fetch unpinned:
    each pinned package's requirements (its metadata in ``closure``), for the image's Python, met by a pin or by
    the image's own version; and no pin replacing a package the image ships."""
    metadata = {one["name"]: one for one in closure}
    problems = [f"{n}=={v} replaces the image's {image[n]}" for n, v in pins.items() if n in image]
    for name, version in pins.items():
        one = metadata.get(name)
        if one is None or one["version"] != version:
            problems.append(f"{name}=={version} is not what tools/job_requirements.py resolved")
            continue
        for line in one["requires_dist"]:
            req = Requirement(line)
            if req.marker is not None and not req.marker.evaluate(IMAGE_PYTHON):
                continue
            have = pins.get(normal(req.name)) or image.get(normal(req.name))
            if have is None:
                problems.append(f"{name} needs {req}, which neither a pin nor the image provides")
            elif not req.specifier.contains(have, prereleases=True):
                problems.append(f"{name} needs {req}; the pins or the image give {have}")
    return problems


def test_the_2_13_dlc_s_pins_are_closed_under_the_image_s_own_versions():
    """Every package the job installs on the 2.13 DLC is pinned, and what each requires is a pin or what the image
    ships at the version it ships: pip adds exactly the pins and replaces nothing (checked offline, against the
    image's lock and pip's resolution recorded by tools/job_requirements.py)."""
    pins = _pins()
    assert pins["transformers"] == next(p["version"] for p in CLOSURE["packages"] if p["name"] == "transformers")
    assert set(pins) == {p["name"] for p in CLOSURE["packages"] if not p["in_image"]}
    assert unmet(pins, LOCK["packages"], CLOSURE["packages"]) == []
    assert LOCK["source"].endswith("docker/pytorch/2.13/cuda/uv.lock") and LOCK["python"] == "3.12"


def test_the_closure_check_finds_a_pin_that_would_replace_or_outgrow_the_image():
    pins, image = _pins(), dict(LOCK["packages"])
    newer = [dict(p) for p in CLOSURE["packages"]]
    for one in newer:  # a newer httpx2, as .venv resolves today, asks for an idna the image does not have
        if one["name"] == "httpx2":
            one["requires_dist"] = [*one["requires_dist"], "idna>=3.18"]
    assert any("needs idna>=3.18; the pins or the image give 3.11" in p for p in unmet(pins, image, newer))
    assert any("replaces the image's" in p for p in unmet({**pins, "numpy": "2.5.0"}, image, CLOSURE["packages"]))
    missing = {k: v for k, v in pins.items() if k != "httpcore2"}
    assert any("httpcore2" in p and "neither a pin nor the image" in p for p in unmet(missing, image, newer))


@pytest.mark.parametrize("image, python, torch, ships", IMAGES, ids=[i[0] for i in IMAGES])
def test_an_images_own_transformers_stays_and_a_missing_one_fits_its_torch(image, python, torch, ships):
    what, version = _pip(python, ships)
    if ships:
        assert (what, version) == ("kept", ships)  # the SMP image's tested 4.44.2 is not upgraded
    else:
        assert what == "installed"
        # transformers 5 needs torch >= 2.6; an image without it gets the last 4.x
        assert (Version(version).major >= 5) == (Version(torch) >= Version("2.6")), (image, version)


@pytest.mark.parametrize("python", ["3.11"])  # the 3.12 images get exact pins (above); none of them ships transformers
def test_every_version_the_scripts_run_on_is_kept(python):
    assert _pip(python, OLDEST_THE_SCRIPTS_RUN_ON) == ("kept", OLDEST_THE_SCRIPTS_RUN_ON)
    assert _pip(python, "4.57.6") == ("kept", "4.57.6")
    assert _pip(python, "4.30.2")[0] == "installed"  # older than the scripts run on: replaced


def _wheel(directory: Path, version: str) -> None:
    """An empty transformers wheel: enough for pip to resolve against, offline."""
    info = f"transformers-{version}.dist-info"
    with zipfile.ZipFile(directory / f"transformers-{version}-py3-none-any.whl", "w") as z:
        z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: transformers\nVersion: {version}\n")
        z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
        z.writestr(f"{info}/RECORD", "")


@pytest.mark.parametrize("installed, expected", [("4.44.2", None), (None, "4.57.6"), ("4.30.2", "4.57.6")])
@pytest.mark.slow
def test_pip_itself_keeps_an_installed_transformers_and_installs_a_missing_one(tmp_path, installed, expected):
    """pip (the one in this environment) against a bare Python 3.11 environment, as the SDK's driver runs it, with
    --dry-run and a local index of empty wheels: no network, nothing installed."""
    if sys.version_info[:2] != (3, 11):
        pytest.skip("the Python 3.11 images' line is checked with a Python 3.11 interpreter")
    env, index = tmp_path / "env", tmp_path / "index"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(env)], check=True)
    index.mkdir()
    for version in ("4.57.6", "5.0.0"):
        _wheel(index, version)
    if installed:  # what an image that ships transformers has in its site-packages
        site = next((env / "lib").glob("python3.*/site-packages"))
        info = site / f"transformers-{installed}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: transformers\nVersion: {installed}\n")
    report = tmp_path / "report.json"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "--python",
            str(env / "bin" / "python"),
            "install",
            "--dry-run",
            "--no-index",
            "--find-links",
            str(index),
            "--report",
            str(report),
            "--disable-pip-version-check",
            "-r",
            str(REQUIREMENTS),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    wanted = [(i["metadata"]["name"], i["metadata"]["version"]) for i in json.loads(report.read_text())["install"]]
    assert wanted == ([] if expected is None else [("transformers", expected)])
    if installed and expected is None:
        assert "Requirement already satisfied: transformers" in done.stdout
