"""The training job's requirements.txt, pinned for the PyTorch 2.13 DLC (the labs' default training image).

The job's `pip install -r requirements.txt` must add what the script needs and replace nothing the image ships. This
script asks pip to resolve the job's transformers for the image's Python (3.12, manylinux x86_64, wheels only) under
the image's own lock as constraints (aws/deep-learning-containers, docker/pytorch/2.13/cuda/uv.lock), records the
lock and the resolution in tools/, and writes the packages the image lacks, each at its exact version, into
labs/src/requirements.txt. tests/test_requirements.py then checks, offline, that the pins are closed under their own
requirements with the image's versions.

    python tools/job_requirements.py --dlc-commit <commit> --dlc-date <date> \\
        --dlc-lock <a clone of aws/deep-learning-containers>/docker/pytorch/2.13/cuda/uv.lock

Run it by hand (it reads the package index) when the image or transformers moves.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib
from packaging.utils import canonicalize_name as normal  # PEP 503's name, as pip compares them

REPO = Path(__file__).resolve().parent.parent
LOCK = REPO / "tools" / "dlc-pytorch-2.13-lock.json"
CLOSURE = REPO / "tools" / "job-requirements-closure.json"
REQUIREMENTS = REPO / "labs" / "src" / "requirements.txt"
WANTED = "transformers>=4.44,<6"
PINNED = 'python_version >= "3.12"'  # the 2.13 DLC's Python; the frozen 3.11 images keep their ranged line
BEGIN, END = "# pinned for the PyTorch 2.13 DLC (tools/job_requirements.py):", "# end of the pins"


def read_lock(path: Path) -> dict[str, str]:
    return {normal(p["name"]): p["version"] for p in tomllib.loads(path.read_text())["package"]}


def resolve(lock: dict[str, str]) -> list[dict]:
    """pip's resolution of WANTED for the image, constrained to the image's versions: name, version, requirements."""
    with tempfile.TemporaryDirectory() as tmp:
        constraints = Path(tmp) / "constraints.txt"
        constraints.write_text("".join(f"{n}=={v}\n" for n, v in sorted(lock.items()) if "+" not in v))
        report = Path(tmp) / "report.json"
        subprocess.run(
            [sys.executable, "-m", "pip", "--disable-pip-version-check", "install", "--dry-run", "--quiet"]
            + ["--report", str(report), "--target", str(Path(tmp) / "target"), "--only-binary=:all:"]
            + ["--python-version", "3.12", "--implementation", "cp"]
            + ["--platform", "manylinux_2_28_x86_64", "--platform", "manylinux2014_x86_64"]
            + ["-c", str(constraints), WANTED],
            check=True,
        )
        installs = json.loads(report.read_text())["install"]
    return [
        {
            "name": normal(i["metadata"]["name"]),
            "version": i["metadata"]["version"],
            "requires_dist": i["metadata"].get("requires_dist", []),
        }
        for i in installs
    ]


def write_requirements(pins: list[dict]) -> None:
    text = REQUIREMENTS.read_text()
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END + "\n")
    block = [BEGIN] + [f"{p['name']}=={p['version']}; {PINNED}" for p in pins] + [END]
    REQUIREMENTS.write_text(head + "\n".join(block) + "\n" + tail)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dlc-lock", type=Path, required=True)
    p.add_argument("--dlc-commit", required=True)
    p.add_argument("--dlc-date", required=True)
    a = p.parse_args(argv)
    lock = read_lock(a.dlc_lock)
    LOCK.write_text(
        json.dumps(
            {
                "source": "aws/deep-learning-containers docker/pytorch/2.13/cuda/uv.lock",
                "commit": a.dlc_commit,
                "date": a.dlc_date,
                "python": "3.12",
                "packages": dict(sorted(lock.items())),
            },
            indent=1,
        )
        + "\n"
    )
    closure = resolve(lock)
    for one in closure:
        one["in_image"] = one["name"] in lock
    CLOSURE.write_text(json.dumps({"wanted": WANTED, "packages": closure}, indent=1) + "\n")
    write_requirements([one for one in closure if not one["in_image"]])
    print(f"{sum(not one['in_image'] for one in closure)} pins written to {REQUIREMENTS.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
