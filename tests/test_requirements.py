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
from conftest import SRC
from packaging.markers import default_environment
from packaging.requirements import Requirement
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
RELEASES = ["4.30.2", "4.44.2", "4.46.0", "4.57.6", "5.0.0", "5.23.0"]  # some of transformers' releases on PyPI
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


def test_only_transformers_is_installed_never_torch():
    assert {r.name for r in _lines()} == {"transformers"}  # torch stays the image's (its SMDDP/SMP are built on it)


@pytest.mark.parametrize("image, python, torch, ships", IMAGES, ids=[i[0] for i in IMAGES])
def test_an_images_own_transformers_stays_and_a_missing_one_fits_its_torch(image, python, torch, ships):
    what, version = _pip(python, ships)
    if ships:
        assert (what, version) == ("kept", ships)  # the SMP image's tested 4.44.2 is not upgraded
    else:
        assert what == "installed"
        # transformers 5 needs torch >= 2.6; an image without it gets the last 4.x
        assert (Version(version).major >= 5) == (Version(torch) >= Version("2.6")), (image, version)


@pytest.mark.parametrize("python", ["3.11", "3.13"])
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
